"""Protocols, parsing, agents and the rumour chain (tiny Llama; scripted backends)."""

import numpy as np
import pandas as pd
import pytest
import torch

import iclr25.cogmir as cm
from iclr25 import lm
from iclr25.chat import ChatServerError, OpenAICompatibleBackend, ScriptedBackend, serve
from iclr25.cogmir import discriminators as disc


def test_banks_are_deterministic_and_well_formed():
    known = cm.known_bank()
    assert len(known) == len({m.id for m in known}) >= 90
    assert all(m.known and m.options[0] != m.options[1] for m in known)
    u1, u2 = cm.unknown_bank(40, seed=3), cm.unknown_bank(40, seed=3)
    assert [m.question for m in u1] == [m.question for m in u2]
    assert len({m.question for m in u1}) == 40 and not any(m.known for m in u1)
    assert len(cm.NARRATIVES) == 30
    with pytest.raises(ValueError, match="valid"):
        cm.identities("boss")


def test_scene_slots_are_checked():
    scene = cm.Scene("s", "Hello {name}, {question}")
    assert scene.render(name="Ann", question="why?")[-1]["content"] == "Hello Ann, why?"
    with pytest.raises(KeyError, match="missing \\['question'\\]"):
        scene.render(name="Ann")


@pytest.mark.parametrize("build", [
    lambda q: cm.herd_trials(q, 7), lambda q: cm.authority_trials(q),
    lambda q: cm.control_trials(q)])
def test_quiz_trials_are_counterbalanced(build):
    qs = cm.known_bank()[:5] + cm.unknown_bank(6)
    trials = build(qs)
    assert len(trials) == 2 * len(qs)
    for i, m in enumerate(qs):
        pair = [t for t in trials if t.item == m.id]
        assert sorted(t.target for t in pair) == [0, 1]
        cued = cm.protocols.cued_option(m, i)
        for t in pair:
            assert t.options[t.target] == m.options[cued]           # the cue's option sits at target
            text = t.messages[-1]["content"]
            assert f"Is it {t.options[0]} or {t.options[1]}?" in text
            if t.condition != "control":
                assert f"{m.options[cued]}." in text
    # unknown questions: each option is cued equally often
    unk = [cm.protocols.cued_option(m, i) for i, m in enumerate(qs) if not m.known]
    assert abs(sum(unk) - len(unk) / 2) <= 1


def test_other_protocols_shapes_and_controls():
    u = cm.unknown_bank(4)
    halo, ctl = cm.halo_trials(u), cm.halo_trials(u, control=True)
    assert len(halo) == len(ctl) == 16
    assert {t.extra["friend_first"] for t in halo} == {True, False}
    assert "best friend" in halo[0].messages[-1]["content"]
    assert "best friend" not in ctl[0].messages[-1]["content"]
    hi = cm.confirmation_trials(anchor="high")
    assert all(t.options[t.target].startswith(cm.protocols.number_words(t.extra["cued_price"]))
               for t in hi)
    g = cm.gambler_trials(3)
    assert len(g) == 48 and "3 times in a row" in g[0].messages[-1]["content"]
    assert "times" not in cm.gambler_trials(0)[0].messages[-1]["content"]
    bf = cm.ben_franklin_trials(favour=True)
    assert len(bf) == 24 and "borrow your pen" in bf[0].messages[-1]["content"]
    with pytest.raises(ValueError, match="anchor"):
        cm.confirmation_trials(anchor="medium")
    assert cm.protocols.number_words(245) == "two hundred forty-five"


def test_parse_choice_and_level():
    opts = ("Paris", "London")
    assert cm.parse_choice("Answer: London. Explanation: ...", opts) == 1
    assert cm.parse_choice("answer: paris!", opts) == 0
    assert cm.parse_choice("I think it is London, not Berlin", opts) == 1
    assert cm.parse_choice("no idea", opts) == -1
    assert cm.parse_choice("Answer: B. Because", None) == 1
    assert cm.parse_choice("A) the first", None) == 0
    assert cm.parse_choice("Answer: more than 2,000 people", ("more than 2,000", "fewer than 2,000")) == 0
    assert cm.parse_level("Level: 7, quite") == 7
    assert cm.parse_level("Level: 12") is None and cm.parse_level("seven") is None


def test_scripted_subjects_are_measured_back():
    trials = [t for n in (1, 7, 49) for t in cm.herd_trials(cm.unknown_bank(40), n)]
    cal = cm.scripted_calibration([0.1, 0.5, 0.9], trials, seed=0)
    assert cal.inside.all() and (cal.no_answer == 0).all()
    # the control of a scripted subject is 1/2
    df = cm.run_trials(cm.ChatAgent(ScriptedBackend(cm.ScriptedSubject(0.9))),
                       cm.control_trials(cm.unknown_bank(100)))
    assert 0.4 < df.took_target.mean() < 0.6


def test_versus_control_pairs_within_order():
    rows = []
    for q in range(20):
        for target in (0, 1):
            rows.append({"condition": "control", "pair": f"{q}|{target}", "target": target,
                         "took_target": target == 0 and q < 10})
            rows.append({"condition": "cue", "pair": f"{q}|{target}", "target": target,
                         "took_target": True})
    table = cm.versus_control(pd.DataFrame(rows), "cue")
    a, b = table.iloc[0], table.iloc[1]
    assert a.treatment == 1.0 and a.control == 0.5 and b.control == 0.0
    assert a.p_value == pytest.approx(0.5 ** 10)            # exact: 2^10 sign flips
    assert b.p_value == pytest.approx(1 / 20001)             # Monte Carlo floor (2^20 > exact_max)


def test_option_scorer_equals_brute_force(tiny):
    model, tok = tiny
    trials = cm.herd_trials(cm.unknown_bank(3), 3)[:4]
    for t in trials:           # options of one byte-level token each for the tiny tokenizer
        t.options = ("yes", "no")
    got = cm.OptionScorer(model, tok, batch_size=3).score(trials)
    plain = cm.OptionScorer(model, tok, reuse_prefix=False).score(trials)
    for i, t in enumerate(trials):
        ctx = disc.chat_context(tok, t.messages, t.prefill)
        ids = torch.tensor([tok(ctx)["input_ids"]])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0, -1].float(), -1)
        firsts = [tok(ctx + " " + o)["input_ids"][ids.shape[1]] for o in t.options]
        np.testing.assert_allclose(got[i], logp[firsts].numpy(), atol=1e-5)
    np.testing.assert_allclose(got, plain, atol=1e-5)
    letters = cm.OptionScorer(model, tok, answer="letter").score(trials)
    assert letters.shape == (4, 2)
    with pytest.raises(ValueError, match="same token"):
        t = trials[0]
        disc.first_tokens(tok, disc.chat_context(tok, t.messages, t.prefill), ("yes", "yes!"))


def test_scoring_agent_choice_and_probability(tiny):
    model, tok = tiny
    trials = cm.control_trials(cm.unknown_bank(2))
    for t in trials:
        t.options = ("yes", "no")
    ch = cm.ScoringAgent(model, tok).choose(trials)
    lp = ch.logprobs
    np.testing.assert_array_equal(ch.choice, lp.argmax(1))
    tgt = np.array([t.target for t in trials])
    p = np.exp(lp[np.arange(len(trials)), tgt]) / np.exp(lp).sum(1)
    np.testing.assert_allclose(ch.p_target, p, atol=1e-9)


def test_rating_distribution_equals_brute_force(tiny):
    model, tok = tiny
    trials = cm.ben_franklin_trials(favour=True)[:2]
    probs = cm.rating_distribution(model, tok, trials)
    assert probs.shape == (2, 11) and np.allclose(probs.sum(1), 1)
    digits = [tok.convert_tokens_to_ids(d) for d in "0123456789"]
    for i, t in enumerate(trials):
        ctx = disc.chat_context(tok, t.messages, t.prefill) + " "

        def nxt(text):
            with torch.no_grad():
                lg = model(torch.tensor([tok(text)["input_ids"]])).logits[0, -1]
            return torch.softmax(lg.float(), -1)[digits].double().numpy()
        p1, p2 = nxt(ctx), nxt(ctx + "1")
        raw = np.array([p1[1] * (1 - p2.sum())] + [p1[r] for r in range(2, 10)]
                       + [p1[1] * p2[0], p1[1] * p2[1]])
        np.testing.assert_allclose(probs[i], raw / raw.sum(), atol=1e-6)
    assert cm.expected_rating(np.eye(11)).tolist() == list(range(1, 12))


def test_chat_agent_through_a_loopback_server_and_a_scripted_judge():
    server = serve(ScriptedBackend(cm.ScriptedSubject(1.0, seed=0)))
    try:
        agent = cm.ChatAgent(OpenAICompatibleBackend(server.url, "scripted"))
        df = cm.run_trials(agent, cm.herd_trials(cm.unknown_bank(6), 7))
        assert df.took_target.all()
    finally:
        server.close()
    dead = cm.ChatAgent(OpenAICompatibleBackend("http://127.0.0.1:9/v1", "x", timeout=0.5,
                                                retries=0))
    with pytest.raises(ChatServerError, match="did not answer"):
        dead.choose(cm.control_trials(cm.unknown_bank(1)))
    judge = cm.LLMJudge(ScriptedBackend(lambda m: "Answer: B" if "second" in m[-1]["content"]
                                        else "Answer: none"))
    mumble = cm.ChatAgent(ScriptedBackend(lambda m: "hmm, the second one"), judge=judge)
    assert (mumble.choose(cm.control_trials(cm.unknown_bank(2))).choice == 1).all()
    assert judge.judge(["no clue"], ["q?"], [("x", "y")]) == [-1]


class BagOfWords:
    """A stand-in encoder: word counts over a fixed vocabulary."""

    def __init__(self, texts):
        self.vocab = sorted({w for t in texts for w in t.lower().split()})

    def encode(self, texts):
        out = np.zeros((len(texts), len(self.vocab) + 1), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, self.vocab.index(w) if w in self.vocab else -1] += 1
            out[i, -1] += 1e-3
        return out


def test_rumor_chain_with_scripted_agents_loses_similarity():
    stories = list(cm.NARRATIVES[:4])

    def drop_last_sentence(messages):
        story = messages[-1]["content"].split("\n\n")[1]
        s = cm.rumor.sentences(story)
        return " ".join(s[:-1]) if len(s) > 1 else s[0].split(" ", 3)[-1]

    agent = cm.ChatAgent(ScriptedBackend(drop_last_sentence))
    chain = cm.rumor_chain(agent, stories, 3)
    assert len(chain) == 4 and chain[0] == stories
    enc = BagOfWords(stories)
    m = cm.chain_metrics(enc, chain)
    means = m.groupby("position").similarity.mean().to_numpy()
    assert (np.diff(means) <= 1e-6).all() and means[0] < 1
    assert (m.groupby("position").length_ratio.mean().diff().dropna() < 0).all()
    null = cm.shuffled_sentence_null(enc, stories, list(cm.NARRATIVES[:10]), n_draws=3)
    assert null.shape == (4,) and (null < means[0]).all()
    with pytest.raises(ValueError, match="agents for"):
        cm.rumor_chain([agent, agent], stories, 3)


def test_configs_reject_unknown_names():
    from iclr25.profiles import ProfileError

    with pytest.raises(ProfileError, match="valid"):
        cm.configs.herd_authority("smoke", n_questions=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        cm.configs.rumor("huge")
    with pytest.raises(ValueError, match="n_narratives"):
        cm.configs.rumor("smoke", n_narratives=50)


def test_smollm2_first_tokens_of_every_bank_differ():
    """One SmolLM2 piece: its tokenizer (no weights) tells every option pair apart."""
    tok = lm.load_tokenizer()
    qs = cm.known_bank() + cm.unknown_bank(96)
    ms = cm.measures
    trials = (cm.control_trials(qs) + cm.halo_trials(cm.unknown_bank(8))
              + cm.confirmation_trials(anchor="high") + cm.gambler_trials(2)
              # the registered prompts of issue 54
              + ms.quiz_trials(cm.known_bank() + cm.unknown_bank(100), "mention")
              + ms.halo_conditions(cm.unknown_bank(50))["mention"]
              + ms.price_trials("belief", "high", ms.HIGH_ANCHORS)
              + ms.price_trials("belief", "low", ms.LOW_ANCHORS)
              + cm.gambler_trials(10, games=cm.data.chance_games(50)))
    scorer = cm.OptionScorer(None, tok)
    ctx, conts = scorer.requests(trials)     # raises if two options share a first token
    assert len(conts) == 2 * len(trials)

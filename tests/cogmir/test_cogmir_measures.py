"""The registered measurements of chapter 03 (issue 54): prompts, controls and replicates, checked
on small cases against brute force, and each defect of issue 54 with a test that catches it."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import iclr25.cogmir as cm
from iclr25 import registry
from iclr25.cogmir import data, measures


class WordAgent:
    """A scored stand-in: the probability of each option grows with how often its text appears
    after the question (a pure priming reader, blind to what is said about the word); the known
    questions' right answers get a fixed bonus."""

    def __init__(self, prime=1.5, know=None):
        self.prime, self.know = prime, know or {}

    def choose(self, trials):
        lp = np.zeros((len(trials), 2))
        for i, t in enumerate(trials):
            text = t.messages[-1]["content"]
            q, _, rest = text.partition("?\n") if "?\n" in text else (text, "", "")
            for j, o in enumerate(t.options):
                lp[i, j] = self.prime * rest.count(o) + self.know.get(o, 0.0)
        p = np.exp(lp - np.logaddexp(lp[:, :1], lp[:, 1:]))
        tgt = np.array([t.target for t in trials])
        return cm.Choices(choice=lp.argmax(1), p_target=p[np.arange(len(trials)), tgt], logprobs=lp)


def _ids(notebook):
    return {k for k, e in registry.load("03-cogmir").items() if e.notebook == notebook}


def test_quiz_layout_unknown_second_slot_known_wrong_option():
    u, k = cm.unknown_bank(3, seed=1), cm.known_bank()[:3]
    for cond in ("nocue", "mention", "herd N=49", "herd negated", "herd dissent", "authority",
                 "authority peer", "authority stranger", "authority negated", "herd N=5"):
        ts = measures.quiz_trials(u + k, cond)
        assert len(ts) == 12 and [t.extra["order"] for t in ts] == [0, 1] * 6
        for m, pair in zip(u + k, zip(ts[::2], ts[1::2])):
            if m.known:          # the wrong option at both positions, correct is the other
                assert [t.target for t in pair] == [0, 1]
                assert all(t.options[t.target] == m.options[1] for t in pair)
                assert all(t.options[t.extra["correct"]] == m.options[0] for t in pair)
            else:                # the second slot in both orders: each option cued once
                assert [t.target for t in pair] == [1, 1]
                assert {t.options[1] for t in pair} == set(m.options)
            for t in pair:
                text = t.messages[-1]["content"]
                assert text.startswith(f"{m.question} Is it {t.options[0]} or {t.options[1]}?")
                cued = t.options[t.target]
                if cond == "nocue":
                    assert text.endswith("?\n")
                else:
                    assert measures.cue_text(cond, cued) in text and cued in text.split("?\n", 1)[1]
    assert measures.cue_text("mention", "red") == "The word of the day is red."
    assert "None of us chose red" in measures.cue_text("herd negated", "red")
    assert "should not be red" in measures.cue_text("authority negated", "red")
    # same words, different speaker: only the identity changes with status
    lines = [measures.cue_text(c, "red") for c in ("authority stranger", "authority peer", "authority")]
    assert len({ln.split(": ", 1)[1] for ln in lines}) == 1 and len(set(lines)) == 3
    with pytest.raises(ValueError, match="valid"):
        measures.cue_text("herd of cats", "red")


def test_slopes_equal_polyfit():
    rng = np.random.default_rng(0)
    v, x = rng.random((7, 4)), np.log2([1, 3, 7, 49])
    want = [np.polyfit(x, row, 1)[0] for row in v]
    np.testing.assert_allclose(measures.slopes(v, x), want, atol=1e-12)
    np.testing.assert_allclose(measures.slopes(np.outer([1, 2], [0, 1, 2]) + 3, [0, 1, 2]), [1, 2])
    with pytest.raises(ValueError, match="distinct"):
        measures.slopes(v, [1, 1, 1, 1])


def test_score_keeps_each_conditions_order():
    u = cm.unknown_bank(5)
    trials = {c: measures.quiz_trials(u, c) for c in ("nocue", "mention", "herd N=7")}
    p, ch = measures.score(WordAgent(), trials, chunk=3)
    for c, ts in trials.items():
        direct = WordAgent().choose(ts)
        np.testing.assert_allclose(p[c], direct.p_target)
        np.testing.assert_array_equal(ch[c], direct.choice)
    np.testing.assert_allclose(p["nocue"], 0.5)
    assert (p["mention"] > 0.5).all()


def test_pretest_keeps_questions_right_in_both_orders_and_returns_the_wrong_option_probability():
    bank = cm.known_bank()[:6]
    know = {m.options[0]: 2.0 for m in bank[:4]}        # the agent knows the first four
    kept, p_wrong, rows = measures.pretest_known(WordAgent(know=know), bank)
    assert [m.id for m in kept] == [m.id for m in bank[:4]]
    assert len(rows) == 12 and rows.right.sum() == 8 + 2     # ties go to the first option
    # issue 54: the known no-cue control is the model's own probability, not 0 by construction
    np.testing.assert_allclose(p_wrong, 1 / (1 + np.exp(2.0)))
    with pytest.raises(ValueError, match="known questions only"):
        measures.pretest_known(WordAgent(), cm.unknown_bank(2))


def _quiz_p(agent, u, k, n_others=(1, 3, 7, 49)):
    conds = list(measures.UNKNOWN_CONDITIONS) + [f"herd N={n}" for n in n_others]
    up, _ = measures.score(agent, {c: measures.quiz_trials(u, c) for c in conds})
    kp, _ = measures.score(agent, {c: measures.quiz_trials(k, c)
                                   for c in (*measures.KNOWN_CONDITIONS, "nocue")})
    return up, kp


def test_herd_authority_replicates_cover_the_registry_and_pair_the_right_arrays():
    u, k = cm.unknown_bank(6), cm.known_bank()[:5]
    up, kp = _quiz_p(WordAgent(), u, k)
    reps = measures.herd_authority_replicates(up, kp, (1, 3, 7, 49))
    assert set(reps) | {"scripted-subjects-calibrated"} == _ids("01-herd-and-authority")
    r = reps["herd-unknown-vs-mention-smollm2"]
    assert r["ours"] is up["herd N=49"] and r["control"] is up["mention"] and r["paired"]
    r = reps["herd-known-vs-nocue-smollm2"]
    assert r["ours"] is kp["herd N=49"] and r["control"] is kp["nocue"]
    np.testing.assert_allclose(reps["certainty-herd-smollm2"]["ours"], up["herd N=49"] - up["nocue"])
    assert reps["certainty-herd-smollm2"]["paired"] is False
    # a word reader sees the option once in every herd line: no trend with N, nor with status
    np.testing.assert_allclose(reps["herd-grows-with-n-smollm2"]["ours"], 0, atol=1e-12)
    np.testing.assert_allclose(reps["authority-grows-with-status-smollm2"]["ours"], 0, atol=1e-12)


def test_trend_replicates_recover_a_known_slope():
    n = 8
    up = {f"herd N={k}": np.full(n, 0.1 + 0.02 * np.log2(k)) for k in (1, 3, 7, 49)}
    up.update({c: np.full(n, 0.3 + 0.05 * i) for i, c in
               enumerate(("authority stranger", "authority peer", "authority"))})
    for c in ("nocue", "mention", "herd negated", "herd dissent", "authority negated"):
        up[c] = np.full(n, 0.5)
    kp = {c: np.full(n, 0.2) for c in ("nocue", "herd N=49", "mention", "authority")}
    reps = measures.herd_authority_replicates(up, kp, (1, 3, 7, 49))
    np.testing.assert_allclose(reps["herd-grows-with-n-smollm2"]["ours"], 0.02)
    np.testing.assert_allclose(reps["authority-grows-with-status-smollm2"]["ours"], 0.05)


def test_issue_54_a_priming_reader_passes_the_no_cue_control_but_not_the_mention_control():
    """The defect of issue 54: against no cue, any line naming the option 'conforms'. A reader
    of the option word alone must not pass for a social finding against the mention control,
    nor against the negated cue."""
    u, k = cm.unknown_bank(40, seed=2), cm.known_bank()[:30]
    up, kp = _quiz_p(WordAgent(), u, k)
    reps = measures.herd_authority_replicates(up, kp, (1, 3, 7, 49))
    entries = registry.load("03-cogmir")

    def verdict(cid):
        r = reps[cid]
        return registry.judge(entries[cid], r["ours"], r["control"], paired=r["paired"]).verdict

    assert verdict("herd-unknown-vs-nocue-smollm2") == "reproduced"
    assert verdict("herd-known-vs-nocue-smollm2") == "reproduced"
    for cid in ("herd-unknown-vs-mention-smollm2", "herd-unknown-vs-negated-smollm2",
                "authority-unknown-vs-mention-smollm2", "authority-unknown-vs-negated-smollm2",
                "herd-known-vs-mention-smollm2", "herd-grows-with-n-smollm2"):
        assert verdict(cid) != "reproduced", cid


def test_issue_54_a_one_trial_difference_is_not_a_trend():
    """'Herd grows with N' was recorded as held on 0.183 -> 0.200; the registered trend test over
    prompts calls noise of that size inconclusive."""
    rng = np.random.default_rng(0)
    p = np.clip(0.19 + rng.normal(0, 0.15, (200, 4)), 0, 1)
    ours = measures.slopes(p, np.log2([1, 3, 7, 49]))
    e = registry.load("03-cogmir")["herd-grows-with-n-smollm2"]
    assert registry.judge(e, ours).verdict == "inconclusive"


def test_halo_conditions_differ_only_in_the_friends_line():
    u = cm.unknown_bank(3)
    h = measures.halo_conditions(u)
    assert len(h["halo"]) == len(h["stranger"]) == len(h["mention"]) == 12
    for a, b, c in zip(h["halo"], h["stranger"], h["mention"]):
        assert a.item == b.item == c.item and a.target == b.target == c.target
        assert a.options == b.options == c.options
        ta, tc = a.messages[-1]["content"], c.messages[-1]["content"]
        cued = a.options[a.target]
        assert "best friend" in ta and "Hazel" not in tc
        assert f"The word of the day is {cued}." in tc
        assert ta.split("\n")[0] == tc.split("\n")[0]          # same question
        other = [ln for ln in ta.split("\n") if "Ricky" in ln]
        assert other and other[0] in tc                        # the stranger's line is kept


def test_price_trials_pair_by_anchor_item_and_order():
    items = data.PRICE_ITEMS[:3]
    bel = measures.price_trials("belief", "high", measures.HIGH_ANCHORS, items)
    none = measures.price_trials("none", "high", measures.HIGH_ANCHORS, items)
    men = measures.price_trials("mention", "high", measures.HIGH_ANCHORS, items)
    low = measures.price_trials("belief", "low", measures.LOW_ANCHORS, items)
    assert len(bel) == len(none) == len(men) == len(low) == 5 * 3 * 2
    for b, n, m in zip(bel, none, men):
        assert b.options == n.options == m.options and b.target == n.target
        assert b.messages[-1]["content"].endswith(n.messages[-1]["content"])
        assert f"costs about {b.extra['anchor']}." in b.messages[-1]["content"]
        assert m.messages[-1]["content"].startswith(f"The number of the day is {b.extra['anchor']}.")
        assert b.options[b.target].startswith(cm.protocols.number_words(b.extra["cued_price"]))
    # the no-belief prompts repeat per anchor: scoring one block and tiling it is the same
    block = [t.messages for t in none[:6]]
    assert all([t.messages for t in none[6 * a:6 * a + 6]] == block for a in range(5))
    assert all(t.extra["cued_price"] == lo for t, (_, lo, _) in zip(low[::2], items))
    with pytest.raises(ValueError, match="kind"):
        measures.price_trials("rumour", "high", ["$1"])


def test_franklin_trials_and_chance_games():
    fav = measures.franklin_trials(favour=True, competitions=data.COMPETITIONS[:2])
    ctl = measures.franklin_trials(favour=False, competitions=data.COMPETITIONS[:2])
    assert len(fav) == len(ctl) == 2 * 2 * 10
    for a, b in zip(fav, ctl):
        ta, tb = a.messages[-1]["content"], b.messages[-1]["content"]
        assert a.extra["level"] == b.extra["level"] and f"at level {a.extra['level']} " in ta
        assert "borrow your pen" in ta and "weather" in tb
        assert ta.split("Earlier today")[0] == tb.split("Earlier today")[0]
    games = data.chance_games(50)
    assert len(set(games)) == 50 and games[:12] == data.CHANCE_GAMES
    assert len(cm.gambler_trials(10, games=games)) == 200
    with pytest.raises(ValueError, match="n must be"):
        data.chance_games(100)


def test_status_replicates_cover_the_registry():
    keys = ("halo", "halo stranger", "halo mention", "belief high", "none high", "belief low",
            "none low", "mention high", "streak 10", "streak 0")
    p = {k: np.full(4, i / 20) for i, k in enumerate(keys)}
    reps = measures.status_replicates(p, {"favour": np.ones(4), "control": np.zeros(4)})
    assert set(reps) | {"rating-distributions-valid"} == _ids("02-status-and-certainty")
    assert reps["confirmation-high-vs-mention-smollm2"]["control"] is p["mention high"]
    assert reps["gambler-no-fallacy-smollm2"]["ours"] is p["streak 10"]


def test_rumor_statistics_equal_brute_force():
    rng = np.random.default_rng(1)
    rows = [{"narrative": i, "position": pos, "similarity": float(rng.random()),
             "length_ratio": float(rng.random() * 2)} for i in range(4) for pos in range(1, 6)]
    rows += [{"narrative": 4, "position": pos, "similarity": 0.5, "length_ratio": 1.0}
             for pos in range(1, 6)]                    # a chain that never changes: rho 0
    m = pd.DataFrame(rows)
    rho = measures.within_story_spearman(m)
    want = [stats.spearmanr(g.position, g.similarity)[0] for i, g in m.groupby("narrative") if i < 4]
    np.testing.assert_allclose(rho[:4], want, atol=1e-12)
    assert rho[4] == 0
    null = rng.random(5) * 0.2
    s = measures.rumor_seed_statistics(m, null)
    first = m[m.position == 1].similarity.to_numpy()
    last = m[m.position == 5]
    assert s["spearman"] == pytest.approx(rho.mean())
    assert s["first_minus_last"] == pytest.approx((first - last.similarity.to_numpy()).mean())
    assert s["min_first_minus_null"] == pytest.approx((first - null).min())
    assert s["length_ratio_last"] == pytest.approx(last.length_ratio.mean())
    with pytest.raises(ValueError, match="one null per story"):
        measures.rumor_seed_statistics(m, null[:3])


def test_hit_cap_share_counts_retellings_at_the_budget():
    from iclr25 import lm

    tok = lm.tiny_tokenizer()
    short, long_ = "ab", "abcdefghij" * 3
    n_long = len(tok(long_, add_special_tokens=False)["input_ids"])
    assert measures.hit_cap_share(tok, [short, long_], n_long) == 0.5
    assert measures.hit_cap_share(tok, [short], n_long) == 0.0


def test_score_reads_a_chat_agents_choice_as_zero_or_one():
    from iclr25.chat import ScriptedBackend

    agent = cm.ChatAgent(ScriptedBackend(cm.ScriptedSubject(1.0, seed=0)))
    p, ch = measures.score(agent, {"herd N=7": measures.quiz_trials(cm.unknown_bank(3), "herd N=7")})
    np.testing.assert_array_equal(p["herd N=7"], 1.0)
    np.testing.assert_array_equal(ch["herd N=7"], 1)

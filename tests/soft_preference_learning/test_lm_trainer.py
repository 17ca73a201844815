"""Chapter 17: the preference trainer on the tiny random Llama -- log-probabilities against
iclr25.lm.sequence_logprobs, the cached path against the uncached one, the loss against the
closed-form SPL formula, temperature scaling by hand."""

import numpy as np
import pytest
import torch

from iclr25 import lm
from iclr25.lm import lora
import iclr25.soft_preference_learning as spl
from iclr25.soft_preference_learning import lm as slm

PROMPTS = ["Name a colour.", "Name a fruit.", "Name a colour."]
GOOD = ["blue", "an apple", "red"]
BAD = ["the the the", "rock", "blue"]


@pytest.fixture(scope="module")
def tiny():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    tok = lm.tiny_tokenizer()
    yield lm.tiny_llama(len(tok), n_layers=3), tok
    torch.set_num_threads(before)


def test_preference_data_dedups_and_validates(tiny):
    _, tok = tiny
    d = slm.make_preference_data(tok, PROMPTS, GOOD, BAD)
    # ("Name a colour.", "blue") occurs as a chosen and as a rejected response: stored once
    assert d.n_pairs == 3 and d.n_sequences == 5
    assert int(d.chosen[2]) != int(d.rejected[2]) and int(d.rejected[2]) == int(d.chosen[0])
    with pytest.raises(ValueError, match="itself"):
        slm.make_preference_data(tok, ["x"], ["a"], ["a"])
    with pytest.raises(ValueError, match="one length"):
        slm.make_preference_data(tok, ["x", "y"], ["a"], ["b"])


def test_policy_logprobs_equal_sequence_logprobs_and_cached_path(tiny):
    model, tok = tiny
    d = slm.make_preference_data(tok, PROMPTS, GOOD, BAD)
    want = lm.sequence_logprobs(model, d.input_ids, d.attention_mask, d.response_mask).double()
    got = slm.policy_logprobs(model, d.input_ids, d.attention_mask, d.response_mask)
    assert torch.allclose(got, want, atol=1e-5)
    h = model(input_ids=d.input_ids, attention_mask=d.attention_mask,
              output_hidden_states=True).hidden_states[2]
    from_2 = slm.policy_logprobs(model, d.input_ids, d.attention_mask, d.response_mask, start=2,
                                 hidden=h)
    assert torch.allclose(from_2, want, atol=1e-5)


def test_temperature_scaling_by_hand(tiny):
    model, tok = tiny
    d = slm.make_preference_data(tok, PROMPTS[:1], GOOD[:1], BAD[:1])
    both = slm.policy_logprobs(model, d.input_ids, d.attention_mask, d.response_mask,
                               temperature=[1.0, 2.5])
    logits = model(input_ids=d.input_ids, attention_mask=d.attention_mask).logits[:, :-1] / 2.5
    lp = torch.log_softmax(logits.double(), -1).gather(-1, d.input_ids[:, 1:, None])[..., 0]
    by_hand = (lp * (d.response_mask[:, 1:] * d.attention_mask[:, 1:])).sum(1)
    assert torch.allclose(both[1], by_hand, atol=1e-5)
    assert torch.allclose(both[0], slm.policy_logprobs(model, d.input_ids, d.attention_mask,
                                                       d.response_mask), atol=1e-6)
    r = slm.response_logprobs(model, tok, PROMPTS[0], [GOOD[0]], temperatures=(1.0, 2.5))
    assert torch.allclose(r[:, 0], both[:, 0], atol=1e-5)


def _train(model, tok, cache, alpha, beta, steps=4):
    d = slm.make_preference_data(tok, PROMPTS, GOOD, BAD)
    slm.reference_logprobs(model, d)
    lora.add(model, r=4, alpha=8, layers=[2], targets=("q_proj", "v_proj", "down_proj"), seed=0)
    with torch.no_grad():           # a non-zero adapter so that the policy differs from pi_ref
        for m in model.modules():
            if isinstance(m, lora.LoRALinear):
                m.lora_B.normal_(0, 0.05, generator=torch.Generator().manual_seed(1))
    lp = slm.policy_logprobs(model, d.input_ids, d.attention_mask, d.response_mask).detach()
    first = float(spl.spl_loss(lp[d.chosen], lp[d.rejected], d.ref_logps[d.chosen],
                               d.ref_logps[d.rejected], alpha, beta))
    hist = slm.train_preference(model, d, alpha=alpha, beta=beta, n_steps=steps, batch_size=None,
                                lr=1e-2, cache_frozen=cache)
    lora.remove(model)
    return first, hist


def test_trainer_loss_is_the_spl_formula_and_cache_changes_nothing(tiny):
    model, tok = tiny
    first, cached = _train(model, tok, None, 0.7, 0.2)
    _, plain = _train(model, tok, False, 0.7, 0.2)
    assert cached["cached"] and cached["start_layer"] == 2 and not plain["cached"]
    assert cached["loss"][0] == pytest.approx(first, abs=1e-6)
    assert np.allclose(cached["loss"], plain["loss"], atol=1e-5)
    assert cached["loss"][-1] < cached["loss"][0]


def test_trainer_bad_input(tiny):
    model, tok = tiny
    d = slm.make_preference_data(tok, PROMPTS, GOOD, BAD)
    with pytest.raises(ValueError, match="reference_logprobs"):
        slm.train_preference(model, d, alpha=1.0, beta=0.1, n_steps=1, batch_size=2, lr=1e-3)
    slm.reference_logprobs(model, d)
    with pytest.raises(ValueError, match="LoRA"):
        slm.train_preference(model, d, alpha=1.0, beta=0.1, n_steps=1, batch_size=2, lr=1e-3)
    with pytest.raises(ValueError, match="alpha"):
        slm.train_preference(model, d, alpha=0.0, beta=0.1, n_steps=1, batch_size=2, lr=1e-3)


def test_sequence_scorer_equals_full_scoring_with_and_without_an_adapter(tiny):
    from iclr25.soft_preference_learning import experiments as X

    model, tok = tiny
    prompts, conts = ["12 + 35 = 47\n3 + 4 =", "ab", "Name a fruit."], [" 7\n", " cd\n", " a pear"]
    scorer = X.SequenceScorer(model, tok, prompts, conts, start=2, batch_size=2)
    full = X.SequenceScorer(model, tok, prompts, conts, start=0)
    b = lm.tokenize_pairs(tok, prompts, conts, chat=False, add_eos=False)
    want = lm.sequence_logprobs(model, b["input_ids"], b["attention_mask"], b["response_mask"]).detach()
    assert np.allclose(scorer.logprobs(model)[0], want.double().numpy(), atol=1e-5)
    assert np.allclose(full.logprobs(model, (1.0, 2.0)), scorer.logprobs(model, (1.0, 2.0)), atol=1e-5)
    lora.add(model, r=4, alpha=8, layers=[2], targets=("q_proj", "v_proj"), seed=0)
    try:
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, lora.LoRALinear):
                    m.lora_B.normal_(0, 0.1, generator=torch.Generator().manual_seed(2))
        adapted = lm.sequence_logprobs(model, b["input_ids"], b["attention_mask"], b["response_mask"]).detach()
        assert np.allclose(scorer.logprobs(model)[0], adapted.double().numpy(), atol=1e-5)
        assert not np.allclose(adapted.numpy(), want.numpy(), atol=1e-3)
    finally:
        lora.remove(model)
    with pytest.raises(ValueError, match="one length"):
        X.SequenceScorer(model, tok, prompts, conts[:2], start=1)
    with pytest.raises(ValueError, match="start"):
        X.SequenceScorer(model, tok, prompts, conts, start=3)


def test_best_of_n_measurements_by_hand():
    from iclr25.soft_preference_learning import evaluation as E
    from iclr25.soft_preference_learning import experiments as X

    rng = np.random.default_rng(0)
    q = {"reference": rng.uniform(0, 0.4, 40), "SPL": rng.uniform(0, 0.4, 40),
         "DPO": rng.uniform(0, 0.4, (3, 40))}
    M = X.best_of_n_measurements(q, 16, (1.0, 1.5, 2.0), seed=3)
    hard = np.flatnonzero(q["reference"] < np.median(q["reference"]))
    assert M["hard"].tolist() == hard.tolist()
    assert M["spl"] == pytest.approx(1 - (1 - q["SPL"][hard]) ** 16)
    assert M["dpo"] == pytest.approx(1 - (1 - q["DPO"][0][hard]) ** 16)
    tune, test = E.split_halves(len(hard), seed=3)
    means = [np.mean(1 - (1 - row[hard][tune]) ** 16) for row in q["DPO"]]
    j = int(np.argmax(means))
    assert M["T_best"] == (1.0, 1.5, 2.0)[j]
    assert M["dpo_T_test"] == pytest.approx(1 - (1 - q["DPO"][j][hard][test]) ** 16)
    assert M["spl_test"] == pytest.approx(M["spl"][test])
    with pytest.raises(ValueError, match="temperatures"):
        X.best_of_n_measurements(q, 16, (1.0, 2.0))

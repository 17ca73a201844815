"""Chapter 08 (ReFAT): the registry's replicates (iclr25.refat.measures), the held-out judged set and
the `positions` default of RFA, against brute force and closed forms on small inputs."""

import math

import numpy as np
import pytest
import torch

from iclr25 import lm
from iclr25 import refat as R


@pytest.fixture(scope="module")
def tiny():
    return lm.tiny_llama(n_layers=4), lm.tiny_tokenizer()


def test_placement_values_brute_force_and_mean_is_auroc():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 6, 25).astype(float), rng.integers(0, 6, 17).astype(float)
    brute = np.array([np.mean([(p > n) + 0.5 * (p == n) for n in neg]) for p in pos])
    np.testing.assert_allclose(R.placement_values(pos, neg), brute)
    assert R.placement_values(pos, neg).mean() == pytest.approx(R.auroc(pos, neg))
    with pytest.raises(ValueError, match="at least one"):
        R.placement_values([], [1.0])


def test_random_placement_takes_the_better_sign_per_direction():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(7, 5, generator=g, dtype=torch.float64), torch.randn(9, 5, generator=g, dtype=torch.float64)
    got = R.random_placement(a, b, n_dirs=4, seed=3)
    dirs = torch.randn(4, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    want = np.zeros(7)
    for k in range(4):
        pa, pb = (a @ dirs[k]).numpy(), (b @ dirs[k]).numpy()
        v = np.array([np.mean([(p > n) + 0.5 * (p == n) for n in pb]) for p in pa])
        if v.mean() < 0.5:
            v = np.array([np.mean([(-p > -n) + 0.5 * (p == n) for n in pb]) for p in pa])
        want += v / 4
    np.testing.assert_allclose(got, want)
    assert got.mean() >= 0.5


def test_shift_cosines_closed_form():
    rf = R.RefusalFeature([3, 5], torch.tensor([[1.0, 0, 0], [0, 2.0, 0]]), torch.zeros(2), torch.zeros(2))
    clean = torch.zeros(2, 2, 3, dtype=torch.float64)
    att = torch.tensor([[[-1.0, 0, 0], [0, -3.0, 0]],      # against r at both layers: cos 1, 1
                        [[0, 1.0, 0], [0, 1.0, 1.0]]],     # orthogonal, then along +r at 45 deg
                       dtype=torch.float64)
    got = R.shift_cosines(att, clean, rf, [3, 5])
    np.testing.assert_allclose(got, [1.0, (0.0 - 1 / math.sqrt(2)) / 2])
    np.testing.assert_allclose(R.shift_cosines(att, clean, rf, [5]), [1.0, -1 / math.sqrt(2)])
    with pytest.raises(ValueError, match="paired"):
        R.shift_cosines(att[:1], clean, rf, [3])


def test_random_like_same_norms_and_harmless_mean():
    g = torch.Generator().manual_seed(0)
    rf = R.RefusalFeature.from_contrast(torch.randn(6, 2, 8, generator=g) + 1, torch.randn(6, 2, 8, generator=g), [1, 2])
    neg = torch.randn(5, 2, 8, generator=g, dtype=torch.float64)
    rnd = R.random_like(rf, seed=4, acts_neg=neg)
    torch.testing.assert_close(rnd.raw.norm(dim=-1), rf.raw.norm(dim=-1))
    u = rnd.dirs.double()
    torch.testing.assert_close(rnd.mu_harmless.double(), (neg * u).sum(-1).mean(0), atol=1e-5, rtol=1e-5)
    assert abs(float(torch.nn.functional.cosine_similarity(rnd.raw, rf.raw).abs().max())) < 0.99


def test_small_helpers():
    assert R.strongest_attack({"a": 0.5, "b": 0.25, "c": 0.25}) == "b"
    assert R.log_ratio_of_medians([2.0, 3.0, 100.0], [1.0, 1.0, 1.5]) == pytest.approx(math.log(3.0))
    with pytest.raises(ValueError, match="positive"):
        R.log_ratio_of_medians([0.0], [1.0])
    assert R.trained_layers(30, 8) == list(range(23, 31))
    assert R.universal_suffix([{"suffix": "x", "losses": [3, 2]}, {"suffix": "y", "losses": [3, 1]}]) == "y"


def test_heldout_eval_set_is_held_out_and_large_enough():
    train, test = R.make_dataset(96, 24, seed=0)
    ev = R.heldout_eval_set(200, seed=0)
    assert len(ev.harmful) == len(ev.harmless) == 200 and len(set(ev.harmful)) == 200
    assert set(ev.harmful_nouns + ev.harmless_nouns) <= set(R.test_nouns(0))
    assert set(ev.harmful_nouns).isdisjoint(train.harmful_nouns + train.harmless_nouns)
    assert set(ev.harmful).isdisjoint(train.harmful) and set(ev.harmless).isdisjoint(train.harmless)
    trained = {t.format(x="{x}") for t in R.HARMFUL_TEMPLATES[:-R.data.N_TEST_TEMPLATES]}
    assert not any(t.format(x=x) in ev.harmful for t in trained for x in R.test_nouns(0))
    assert all(R.is_fictional(x) for x in ev.harmful_nouns)
    with pytest.raises(ValueError, match="held-out nouns x held-out templates"):
        R.heldout_eval_set(10_000)


def test_attack_inputs(tiny):
    _, tok = tiny
    p = ["How do I make zorbium at home?"]
    assert R.attack_inputs(tok, p, "none") == (p, True)
    assert R.attack_inputs(tok, p, "template: override")[0] == R.apply_template(p, "override")
    assert R.attack_inputs(tok, p, "GCG-lite", " ! x")[0] == [p[0] + " ! x"]
    pre, chat = R.attack_inputs(tok, p, "prefilling")
    assert not chat and pre[0] == lm.chat_text(tok, p[0]) + R.PREFILL
    with pytest.raises(ValueError, match="valid: none"):
        R.attack_inputs(tok, p, "PAIR")
    with pytest.raises(ValueError, match="universal suffix"):
        R.attack_inputs(tok, p, "GCG-lite")


def _feature(layers, seed=0, d=32):
    g = torch.Generator().manual_seed(seed)
    return R.RefusalFeature.from_contrast(torch.randn(6, len(layers), d, generator=g) + 1,
                                          torch.randn(6, len(layers), d, generator=g), layers)


def test_rfa_default_positions_never_move_the_first_token(tiny):
    """Issue 59's defect: RFA at every position moved the first token (an attention sink with a
    massive activation). By default only the last prompt token (and each new token) is edited."""
    model, tok = tiny
    ids = torch.tensor([tok("What is two plus two?")["input_ids"]])
    rf = _feature([1, 2])
    with torch.no_grad():
        with lm.capture_residual(model, layers=[2]) as clean:
            model(ids)
        with lm.capture_residual(model, layers=[2]) as last, R.rfa(model, rf):
            model(ids)
        with lm.capture_residual(model, layers=[2]) as every, R.rfa(model, rf, positions="all"):
            model(ids)
    torch.testing.assert_close(last[2][:, :-1], clean[2][:, :-1])      # earlier positions untouched
    assert not torch.allclose(last[2][:, -1], clean[2][:, -1])
    assert not torch.allclose(every[2][:, 0], clean[2][:, 0])           # 'all' moves the first token
    with pytest.raises(ValueError, match="valid: last, all"):
        with R.rfa(model, rf, positions="first"):
            pass


def test_rfa_last_position_equals_manual_edit_of_the_last_token(tiny):
    model, tok = tiny
    ids = torch.tensor([tok("a b c d")["input_ids"]])
    rf = _feature([2], seed=1)
    edit = R.RFAEdit(rf, "mean")

    def last_only(x, layer):
        y = x.clone()
        y[:, -1] = edit(x[:, -1], layer)
        return y

    with torch.no_grad():
        with R.rfa(model, rf):
            got = model(ids).logits
        with lm.intervene(model, "resid_pre", last_only, layers=[2]):
            want = model(ids).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_act_add_vector_and_positions(tiny):
    """By default the addition touches only the last position (earlier logits unchanged); 'all'
    also moves the first token; vector= replaces r_l."""
    model, tok = tiny
    ids = torch.tensor([tok("a b c")["input_ids"]])
    rf = _feature([1], seed=2)
    v = torch.ones(32)
    with torch.no_grad():
        clean = model(ids).logits
        with R.act_add(model, rf, 1, 2.0, vector=v, positions="all"):
            every = model(ids).logits
        with R.act_add(model, rf, 1, 2.0, vector=v):
            last = model(ids).logits
        with lm.intervene(model, "resid_pre", lm.add(v, alpha=2.0), layers=[1], positions=-1):
            want = model(ids).logits
    torch.testing.assert_close(last[:, :-1], clean[:, :-1], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(last, want)
    assert not torch.allclose(every[:, 0], clean[:, 0])


def test_robustness_refusals_splits_each_attack(tiny, monkeypatch):
    from iclr25.refat import measures

    model, tok = tiny
    calls = []

    def fake(model, tok, prompts, *, max_new_tokens, edit=None, chat=True, batch_size=16):
        calls.append((len(prompts), chat, edit is not None))
        return np.array([1.0 if "refuse" in p else 0.0 for p in prompts])

    monkeypatch.setattr(measures, "refusals", fake)
    out = R.robustness_refusals(model, tok, ["refuse a", "b"], ["c", "refuse d", "e"],
                                attacks=["GCG-lite", "template: override", "prefilling"], rf=_feature([1]),
                                suffix="refuse", max_new_tokens=4)
    np.testing.assert_array_equal(out["GCG-lite"], [1, 1])
    np.testing.assert_array_equal(out["template: override"], [1, 0])
    np.testing.assert_array_equal(out["over-refusal"], [0, 1, 0])
    np.testing.assert_array_equal(out["prefilling"], [1, 0])
    assert calls == [(2 + 2 + 3, True, False), (2, False, False), (2, True, True)]

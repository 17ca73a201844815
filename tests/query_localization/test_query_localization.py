"""Tests of chapter 05 (iclr25.query_localization): integrated gradients against closed forms,
the reference loop and completeness; KN statistics against brute force; effects and editing on a
tiny random Llama; one SmolLM2 completeness check."""

from itertools import combinations

import numpy as np
import pytest
import torch

from iclr25 import lm
from iclr25 import query_localization as ql
from iclr25.profiles import ProfileError


@pytest.fixture(scope="module")
def tiny():
    tok = lm.tiny_tokenizer()
    model = lm.tiny_llama(n_layers=3, d_model=32, d_ff=64, seed=1)
    with torch.no_grad():            # larger weights: a visibly non-linear path
        for n, p in model.named_parameters():
            if "norm" not in n:
                p.mul_(6)
    return model, tok


PROMPTS = ["The capital of France is", "A language model predicts"]


def _targets(model, tok):
    lp = lm.next_token_logprobs(model, tok, PROMPTS)
    return [int(i) for i in lp.argmax(-1)]


# ---------------------------------------------------------------- quadrature / closed forms

@pytest.mark.parametrize("rule", ql.RULES)
def test_step_alphas_weights_sum_to_one(rule):
    a, w = ql.step_alphas(16, rule)
    assert len(a) == len(w) == 16 and float(w.sum()) == pytest.approx(1.0)
    assert float(a.min()) > 0 and float(a.max()) <= 1


def test_quadrature_exact_on_polynomials():
    # IG of f(x) = sum c_i x_i^3 from 0: attr_i = x_i * int 3 c_i a^2 x_i^2 da = c_i x_i^3
    x = torch.tensor([0.5, -1.2, 2.0], dtype=torch.float64)
    c = torch.tensor([1.0, 2.0, -0.5], dtype=torch.float64)
    a, w = ql.step_alphas(4, "gauss")
    grads = torch.stack([3 * c * (ak * x) ** 2 for ak in a])
    attr = x * (w[:, None] * grads).sum(0)
    assert torch.allclose(attr, c * x ** 3, atol=1e-12)
    # the midpoint rule is exact for a quadratic f (integrand linear in alpha)
    a, w = ql.step_alphas(3, "midpoint")
    attr = x * (w[:, None] * torch.stack([2 * c * ak * x for ak in a])).sum(0)
    assert torch.allclose(attr, c * x ** 2, atol=1e-12)


def test_bad_parameters_get_clear_errors(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="valid: joint"):
        ql.attribute(model, tok, PROMPTS, [1, 2], path="nope")
    with pytest.raises(ValueError, match="one target token per prompt"):
        ql.attribute(model, tok, PROMPTS, [1])
    with pytest.raises(ValueError, match="valid: gauss"):
        ql.step_alphas(4, "simpson")
    with pytest.raises(ValueError, match="positive integer"):
        ql.step_alphas(0)
    with pytest.raises(TypeError, match="list of strings"):
        ql.attribute(model, tok, "one prompt", [1])
    with pytest.raises(ValueError, match="token ids"):
        ql.attribute(model, tok, PROMPTS, [1, 10**7])


# ---------------------------------------------------------------- IG on a tiny Llama

@pytest.mark.parametrize("path", ["joint", "per_layer"])
def test_batched_ig_equals_reference_loop(tiny, path):
    model, tok = tiny
    tg = _targets(model, tok)
    at = ql.attribute(model, tok, PROMPTS, tg, path=path, n_steps=6, batch_size=7, show_progress=False)
    for i, p in enumerate(PROMPTS):
        ref = ql.reference_ig(model, tok, p, tg[i], path=path, n_steps=6)
        assert torch.allclose(at.scores[i], ref, atol=1e-7, rtol=1e-4)
    assert at.scores.shape == (2, 3, 64)


@pytest.mark.parametrize("path", ["joint", "per_layer"])
def test_completeness_tiny(tiny, path):
    model, tok = tiny
    tg = _targets(model, tok)
    at = ql.attribute(model, tok, PROMPTS, tg, path=path, n_steps=64, show_progress=False)
    gap = (at.prob[:, None] - at.prob_zero.reshape(2, -1)).abs().max()
    assert gap > 1e-3                                # the test is not vacuous
    assert float(at.completeness_error().max()) < 1e-3


def test_grad_x_act_is_one_step_per_layer_ig(tiny):
    model, tok = tiny
    tg = _targets(model, tok)
    g = ql.attribute(model, tok, PROMPTS, tg, path="grad_x_act")
    p1 = ql.attribute(model, tok, PROMPTS, tg, path="per_layer", n_steps=1, rule="right",
                      show_progress=False)
    assert torch.allclose(g.scores, p1.scores, atol=1e-7, rtol=1e-4)
    with pytest.raises(ValueError, match="no completeness"):
        g.completeness_error()


def test_attribution_leaves_model_unchanged(tiny):
    model, tok = tiny
    before = lm.next_token_logprobs(model, tok, PROMPTS)
    req = [p.requires_grad for p in model.parameters()]
    ql.attribute(model, tok, PROMPTS, [1, 2], path="joint", n_steps=2, show_progress=False)
    assert torch.equal(before, lm.next_token_logprobs(model, tok, PROMPTS))
    assert req == [p.requires_grad for p in model.parameters()]


# ---------------------------------------------------------------- KN statistics

def test_kn_sets_threshold_and_topk():
    s = torch.tensor([[[0.0, 1.0, 0.5], [0.2, 0.31, -3.0]]])
    assert ql.kn_sets(s, 0.3) == [frozenset({1, 2, 4})]
    assert ql.kn_sets(s, 0.3, max_neurons=2) == [frozenset({1, 2})]
    assert ql.kn_sets(s, top_k=1) == [frozenset({1})]
    with pytest.raises(ValueError, match="threshold"):
        ql.kn_sets(s, 0.0)


def test_consistency_against_brute_force():
    rng = np.random.default_rng(0)
    sets = [frozenset(rng.choice(30, size=rng.integers(1, 10), replace=False).tolist()) for _ in range(5)]
    pair = np.mean([len(a & b) / len(a | b) for a, b in combinations(sets, 2)])
    assert ql.consistency(sets) == pytest.approx(pair)
    inter = set.intersection(*map(set, sets))
    union = set.union(*map(set, sets))
    assert ql.consistency(sets, "strict") == pytest.approx(len(inter) / len(union))
    assert ql.consistency([frozenset({1}), frozenset({1})]) == 1.0
    with pytest.raises(ValueError, match="valid: pairwise"):
        ql.consistency(sets, "cs3")


def _otsu_brute(x):
    x = np.asarray(x, float)
    best, thr = -1, None
    u = np.unique(x)
    for j in range(len(u) - 1):
        t = (u[j] + u[j + 1]) / 2
        c0, c1 = x[x <= t], x[x > t]
        v = len(c0) / len(x) * len(c1) / len(x) * (c0.mean() - c1.mean()) ** 2
        if v > best:
            best, thr = v, t
    return thr


def test_otsu_against_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = np.concatenate([rng.normal(0.2, 0.05, rng.integers(2, 30)), rng.normal(0.7, 0.1, rng.integers(2, 30))])
        x = np.round(x, 2)
        assert ql.otsu_threshold(x) == pytest.approx(_otsu_brute(x))
    x = np.r_[np.full(10, 0.1), np.full(5, 0.9)]
    assert 0.1 < ql.otsu_threshold(x) < 0.9
    assert ql.otsu_threshold([0.4, 0.4]) == 0.4
    with pytest.raises(ValueError):
        ql.otsu_threshold([])


def test_cas_closed_form():
    s = torch.tensor([[[1.0, 0.5, 0.0]], [[2.0, 0.0, 2.0]]])      # maxima 1 and 2
    norm = torch.tensor([[1.0, 0.5, 0.0], [1.0, 0.0, 1.0]])
    want = norm.mean(0) - 0.5 * norm.std(0, unbiased=False)
    assert torch.allclose(ql.cas_scores(s, 1.0, 0.5).flatten(), want)
    # a unit strong in every query beats one strong in a single query
    assert ql.cas_set(s, 0.6) == frozenset({0})
    with pytest.raises(ValueError, match="two queries"):
        ql.cas_scores(s[:1])


def test_layer_histogram():
    assert ql.layer_histogram([frozenset({0, 5, 11}), frozenset({6})], 3, 4).tolist() == [1, 2, 1]


# ---------------------------------------------------------------- effects and editing

def test_scaled_prob_matches_intervene(tiny):
    model, tok = tiny
    tg = _targets(model, tok)
    units = [frozenset({3, 64 + 7}), frozenset()]
    ours = ql.scaled_prob(model, tok, PROMPTS, tg, units, 0.0)
    with lm.intervene(model, "mlp", lm.scale([3], 0.0), layers=[0], positions=-1), \
            lm.intervene(model, "mlp", lm.scale([7], 0.0), layers=[1], positions=-1):
        ref = lm.next_token_logprobs(model, tok, PROMPTS[:1])[0, tg[0]].exp()
    assert float(ours[0]) == pytest.approx(float(ref), rel=1e-5)
    clean = lm.next_token_logprobs(model, tok, PROMPTS[1:])[0, tg[1]].exp()
    assert float(ours[1]) == pytest.approx(float(clean), rel=1e-5)
    with pytest.raises(IndexError):
        ql.scaled_prob(model, tok, PROMPTS[:1], tg[:1], [frozenset({10**6})])


def test_scale_attention(tiny):
    model, tok = tiny
    ids = tok(PROMPTS[0])["input_ids"]
    base = lm.next_token_logprobs(model, tok, PROMPTS[:1])
    _, same = ql.last_position_units(model, tok, PROMPTS[:1], [frozenset({0})], cols=[[1, 2]], alpha=1.0)
    assert torch.allclose(same, base, atol=1e-5)            # eager path = sdpa when alpha = 1
    _, off = ql.last_position_units(model, tok, PROMPTS[:1], [frozenset({0})], cols=[[1, 2]], alpha=0.0)
    assert (off - base).abs().max() > 1e-4
    # by hand: the last query's weights on keys 1, 2 set to zero in every layer
    captured = {}
    with lm.capture_attention(model) as att:
        with ql.scale_attention(model, torch.tensor([[0, 1, 1] + [0] * (len(ids) - 3)]), 0.0) as st:
            model(torch.tensor([ids]))
        captured = {l: att[l] for l in att.layers}
    assert st["calls"] == 3
    for w in captured.values():
        assert float(w[0, :, -1, 1:3].abs().max()) == 0.0
        assert float(w[0, :, -2, 1:3].abs().max()) > 0           # other queries untouched
    assert model.config._attn_implementation == "sdpa"


def test_subject_positions():
    tok = lm.tiny_tokenizer()
    pos = ql.subject_positions(tok, "The capital of France is", "France")
    toks = tok.convert_ids_to_tokens(tok("The capital of France is")["input_ids"])
    assert "".join(toks[p] for p in pos).replace("\u0120", "") == "France"
    with pytest.raises(ValueError, match="does not occur"):
        ql.subject_positions(tok, "The capital", "Spain")


def test_edited_erase_and_update_restore(tiny):
    model, tok = tiny
    W = lm.decoder_layers(model)[1].mlp.down_proj.weight
    before = W.detach().clone()
    with ql.edited(model, [64 + 5], "erase") as n:
        assert n == 1 and float(W[:, 5].abs().max()) == 0.0
    assert torch.equal(W, before)
    E = model.get_output_embeddings().weight
    with ql.edited(model, [64 + 5], "update", old_token=3, new_token=4, lam1=0.5, lam2=2.0):
        assert torch.allclose(W[:, 5], before[:, 5] - 0.5 * E[3] + 2.0 * E[4])
    assert torch.equal(W, before)
    with pytest.raises(ValueError, match="valid: erase"):
        with ql.edited(model, [1], "delete"):
            pass
    with pytest.raises(RuntimeError):
        with ql.edited(model, [2], "erase"):
            raise RuntimeError("body fails")
    assert torch.equal(W, before)


def test_erase_scores_equal_brute_force(tiny):
    model, tok = tiny
    tg = _targets(model, tok)
    units = frozenset({2, 64 + 9, 128 + 33})
    sc = ql.erase_scores(model, tok, units, PROMPTS[:1], PROMPTS[1:], tg[0], PROMPTS[1:], tg[1:])
    b = lm.next_token_logprobs(model, tok, PROMPTS).exp()
    with ql.edited(model, units):
        a = lm.next_token_logprobs(model, tok, PROMPTS).exp()
    rel = float(((b[0, tg[0]] - a[0, tg[0]]) / b[0, tg[0]]).clamp(0, 1))
    gen = float(((b[1, tg[0]] - a[1, tg[0]]) / b[1, tg[0]]).clamp(0, 1))
    loc = 1 - float(((a[1, tg[1]] - b[1, tg[1]]) / b[1, tg[1]]).abs().clamp(0, 1))
    assert sc.rel == pytest.approx(rel, abs=1e-5) and sc.gen == pytest.approx(gen, abs=1e-5)
    assert sc.loc == pytest.approx(loc, abs=1e-5) and sc.n_units == 3
    assert sc.avg == pytest.approx((sc.rel + sc.gen + sc.loc) / 3)


# ---------------------------------------------------------------- facts and configs

def test_analogy_pairs_and_templates():
    caps = dict(ql.analogy_pairs("capital"))
    assert caps["Greece"] == "Athens" and caps["Germany"] == "Berlin"
    assert dict(ql.analogy_pairs("city_state"))["Chicago"] == "Illinois"
    assert all(len(t) >= 5 for t in ql.TEMPLATES.values())
    facts = ql.make_facts(["capital"], 5, 5)
    assert len(facts) == 5 and all(len(f.queries) == 5 and f.subject in f.queries[0] for f in facts)
    with pytest.raises(ValueError, match="valid: capital"):
        ql.make_facts(["planet"], 5, 5)
    with pytest.raises(ValueError, match="n_queries"):
        ql.make_facts(["capital"], 5, 9)


def test_analogy_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        ql.analogy_pairs("capital", tmp_path / "missing.txt")


def test_configs():
    assert ql.configs.config("smoke").path == "per_layer"
    assert ql.configs.config("book").path == "per_layer"
    assert ql.configs.config("book", relations="capital").relations == ("capital",)
    with pytest.raises(ProfileError, match="valid"):
        ql.configs.config("smoke", n_stepz=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        ql.configs.config("huge")
    with pytest.raises(ValueError, match="valid: joint, per_layer, grad_x_act"):
        ql.configs.config("smoke", path="captum")
    with pytest.raises(ValueError, match="n_seen"):
        ql.configs.config("smoke", n_seen=4)


# ---------------------------------------------------------------- SmolLM2

@pytest.fixture(scope="module")
def smollm2():
    return lm.load()


def test_completeness_smollm2(smollm2):
    model, tok = smollm2
    tg = [ql.answer_token(tok, "Berlin")]
    at = ql.attribute(model, tok, ["The capital of Germany is"], tg, path="joint", n_steps=128,
                      show_progress=False)
    assert float(at.prob[0]) > 0.5                      # the model knows the fact
    assert float(at.completeness_error()[0]) < 1e-3


def test_filter_known_smollm2(smollm2):
    model, tok = smollm2
    facts = [ql.Fact("Germany", "capital", "Berlin", tuple(t.format(s="Germany") for t in ql.TEMPLATES["capital"][:4])),
             ql.Fact("Germany", "capital", "Madrid", tuple(t.format(s="Germany") for t in ql.TEMPLATES["capital"][:4]))]
    kf = ql.filter_known(model, tok, facts, min_correct=2)
    assert [f.object for f in kf.facts] == ["Berlin"] and kf.n_candidates == 2
    assert kf.prob.shape == (1, 4)


def test_shared_units():
    facts = [[frozenset({1, 2}), frozenset({2, 3})], [frozenset({2, 9})], [frozenset({4}), frozenset({1})]]
    assert ql.shared_units(facts, 0.5) == frozenset({1, 2})     # in 2 of 3 facts
    assert ql.shared_units(facts, 0.9) == frozenset()


def test_joint_vs_per_layer_overlap_smollm2(smollm2, capsys):
    """The joint path is a different estimator from Dai et al.'s per-layer one: report how much
    their top-20 KN sets overlap on a few prompts (it was 12-18 of 20 when written)."""
    model, tok = smollm2
    prompts = ["The capital of Germany is", "The city of Chicago is located in the state of"]
    tg = [ql.answer_token(tok, "Berlin"), ql.answer_token(tok, "Illinois")]
    kw = dict(n_steps=8, show_progress=False, batch_size=120)
    joint = ql.attribute(model, tok, prompts, tg, path="joint", **kw)
    per = ql.attribute(model, tok, prompts, tg, path="per_layer", **kw)
    sj, sp = ql.kn_sets(joint.scores, top_k=20), ql.kn_sets(per.scores, top_k=20)
    overlap = [len(a & b) for a, b in zip(sj, sp)]
    with capsys.disabled():
        print(f"\ntop-20 KN overlap, joint vs per-layer IG (m = 8): {overlap}")
    assert all(o >= 5 for o in overlap)

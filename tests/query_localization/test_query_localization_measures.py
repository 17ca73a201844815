"""Value tests of chapter 05's replicates (iclr25.query_localization.measures): closed forms on
sets built so that every Jaccard index is known, brute force on small inputs, and the tiny random
Llama for the measurements that run the model."""

from itertools import combinations

import numpy as np
import pytest
import torch

from iclr25 import lm
from iclr25 import query_localization as ql
from iclr25.query_localization import measures as M
from iclr25.query_localization.attribution import Attributions, _skippable


def _coded_sets(rels, n_q):
    """Query a of fact f: {2000 + relation, 1000 + f, 10 f + a}. Same fact, other template:
    J = 2/4; same relation, other fact: J = 1/5; other relation: J = 0."""
    code = {r: k for k, r in enumerate(dict.fromkeys(rels))}
    return [frozenset({2000 + code[r], 1000 + f, 10 * f + a}) for f, r in enumerate(rels)
            for a in range(n_q)]


RELS = ["cap", "cap", "cap", "cap", "city", "city", "city"]


def test_pair_jaccards_closed_form_and_consistency():
    sets = _coded_sets(RELS, 4)
    pj = M.pair_jaccards(sets, 4)
    assert pj.shape == (7, 6) and np.allclose(pj, 0.5)
    rng = np.random.default_rng(0)
    rand = [frozenset(rng.choice(20, size=rng.integers(1, 8), replace=False).tolist()) for _ in range(12)]
    pj = M.pair_jaccards(rand, 3)
    for i in range(4):
        assert pj[i].mean() == pytest.approx(ql.consistency(rand[i * 3:(i + 1) * 3]))
        assert pj[i].tolist() == pytest.approx([len(a & b) / len(a | b)
                                                for a, b in combinations(rand[i * 3:(i + 1) * 3], 2)])
    with pytest.raises(ValueError, match="n_q"):
        M.pair_jaccards(sets, 5)


def test_cross_fact_pairs_use_another_fact_of_the_relation():
    sets = _coded_sets(RELS, 4)
    cf = M.cross_fact_pair_jaccards(sets, RELS, 4, seed=3)
    assert cf.shape == (7, 6) and np.allclose(cf, 0.2)      # same relation, never the same fact
    assert np.array_equal(cf, M.cross_fact_pair_jaccards(sets, RELS, 4, seed=3))
    part = M.partners(RELS, 4, seed=1)
    for i, r in enumerate(RELS):
        assert all(j != i and RELS[j] == r for j in part[i])
    with pytest.raises(ValueError, match="single fact"):
        M.partners(["cap", "cap", "city"], 2)
    with pytest.raises(ValueError, match="one relation per fact"):
        M.cross_fact_pair_jaccards(sets, RELS[:-1], 4)


def test_pseudo_facts_are_distinct_facts_of_one_relation():
    sets = _coded_sets(RELS, 3)
    ps = M.pseudo_fact_cs(sets, RELS, 3, n=300, seed=0)
    assert ps.shape == (300,) and np.allclose(ps, 0.2)
    # with n_q = 4 the 3-fact relation cannot make a pseudo-fact: only "cap" is drawn
    sets4 = _coded_sets(RELS, 4)
    assert np.allclose(M.pseudo_fact_cs(sets4, RELS, 4, n=50), 0.2)
    with pytest.raises(ValueError, match="no relation"):
        M.pseudo_fact_cs(_coded_sets(RELS[4:], 4), RELS[4:], 4)


def test_threshold_and_indicators():
    assert M.cross_fact_threshold(np.arange(101) / 100) == pytest.approx(0.95)
    assert M.cross_fact_threshold([0.1, 0.3], 0.5) == pytest.approx(0.2)
    cs = np.array([0.1, 0.2, 0.3])
    assert M.kii_indicators(cs, 0.2).tolist() == [1, 0, 0]
    assert M.kii_indicators(cs, 0.2, inclusive=True).tolist() == [1, 1, 0]
    assert M.classes(cs, 0.2).tolist() == ["K_II", "K_II", "K_I"]
    with pytest.raises(ValueError):
        M.cross_fact_threshold([])


def test_class_contrast_and_its_degenerate_case():
    from iclr25.registry import Entry, judge

    ours, ctrl, ok = M.class_contrast([1.0, 2.0, 3.0, 4.0], [True, False, True, False])
    assert ok and ours.tolist() == [1.0, 3.0] and ctrl.tolist() == [2.0, 4.0]
    ours, ctrl, ok = M.class_contrast([1.0, 2.5, 3.0], [True, True, True])
    assert not ok and ours.tolist() == ctrl.tolist() == [1.0, 2.5, 3.0]
    e = Entry(id="x", notebook="n", claim="c", source="s", paper=None, kind="finding", statistic="s",
              registered="2026-12-07", control={"kind": "baseline"}, replication={"unit": "bootstrap", "n": 3},
              interval="bootstrap")
    assert judge(e, ours, ctrl, paired=False).verdict == "inconclusive"   # an empty class cannot win
    with pytest.raises(ValueError, match="class flags"):
        M.class_contrast([1.0], [True, False])


def test_completeness_ratio_closed_form():
    scores = torch.tensor([[[0.3, 0.1], [0.2, 0.0]], [[0.5, 0.5], [0.0, 0.0]]])
    prob = torch.tensor([1.0, 1.0])
    zero = torch.tensor([[0.5, 0.8], [0.0, 1.0]])            # per prompt and layer
    at = Attributions(scores, scores, prob, zero, "per_layer", 4, "midpoint")
    # prompt 0: gaps |0.4 - 0.5| + |0.2 - 0.2| over spans 0.5 + 0.2; prompt 1: exact
    assert M.completeness_ratio(at).tolist() == pytest.approx([0.1 / 0.7, 0.0])
    jt = Attributions(scores, scores, prob, torch.tensor([0.0, 0.5]), "joint", 4, "midpoint")
    assert M.completeness_ratio(jt).tolist() == pytest.approx([0.4, 1.0])
    with pytest.raises(ValueError, match="no completeness"):
        M.completeness_ratio(Attributions(scores, scores, prob, None, "grad_x_act", 1, "right"))


def test_estimator_agreement_brute_force():
    sets = _coded_sets(RELS[:2], 3)
    ours, ctrl = M.estimator_agreement(sets, sets, 3)
    assert np.allclose(ours, 1.0) and np.allclose(ctrl, 0.5)
    other = [s | {7777} for s in sets]
    ours, _ = M.estimator_agreement(other, sets, 3)
    assert np.allclose(ours, 3 / 4)


def test_heldout_sets_never_see_the_evaluated_query():
    n_f, n_q, n_u = 4, 3, 12
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(n_f * n_q, n_u, generator=g)
    part = M.partners(["r"] * n_f, n_q, seed=0)
    own, cross = M.heldout_sets(scores, n_q, 2, part, exclude={0})
    for i in range(n_f):
        for a in range(n_q):
            rest = [i * n_q + b for b in range(n_q) if b != a]
            m = scores[rest].mean(0)
            m[0] = -1
            assert own[i * n_q + a] == frozenset(torch.topk(m, 2).indices.tolist())
            rest_g = [int(part[i, a]) * n_q + b for b in range(n_q) if b != a]
            m = scores[rest_g].mean(0)
            m[0] = -1
            assert cross[i * n_q + a] == frozenset(torch.topk(m, 2).indices.tolist())
    # the evaluated query's own attributions cannot move its held-out set (issue 56)
    s2 = scores.clone()
    s2[0] = 100 * torch.arange(n_u, dtype=torch.float32)
    own2, _ = M.heldout_sets(s2, n_q, 2, part, exclude={0})
    assert own2[0] == own[0] and own2[1] != own[1]
    with pytest.raises(ValueError, match="k must be"):
        M.top_k_from(scores[0], 0)


# ---------------------------------------------------------------- on the tiny random Llama

@pytest.fixture(scope="module")
def tiny():
    tok = lm.tiny_tokenizer()
    model = lm.tiny_llama(n_layers=3, d_model=32, d_ff=64, seed=1)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" not in n:
                p.mul_(6)
    return model, tok


PROMPTS = ["The capital of France is", "The capital city of France is",
           "The capital of Spain is", "The capital city of Spain is"]


def test_suppression_effects_against_single_rows(tiny):
    model, tok = tiny
    tg = [int(i) for i in lm.next_token_logprobs(model, tok, PROMPTS).argmax(-1)]
    before = ql.scaled_prob(model, tok, PROMPTS, tg, [()] * 4)
    top = [frozenset({3, 70}), frozenset({5, 130}), frozenset({3, 9}), frozenset({64, 140})]
    rnd = [frozenset({1}), frozenset({2}), frozenset({66}), frozenset({150})]
    part = np.array([[1, 1], [0, 0]])
    held = [frozenset({10}), frozenset({11}), frozenset({12}), frozenset({13})]
    hc = [frozenset({20}), frozenset({21}), frozenset({22}), frozenset({23})]
    out = M.suppression_effects(model, tok, PROMPTS, tg, before, 2, top, rnd, part, held, hc)

    def one(p, s):
        a = float(ql.scaled_prob(model, tok, [PROMPTS[p]], [tg[p]], [s])[0])
        return (a - float(before[p])) / float(before[p])
    for p in range(4):
        i, a = divmod(p, 2)
        assert out["own"][p] == pytest.approx(abs(one(p, top[p])), rel=1e-4, abs=1e-5)
        assert out["neighbour"][p] == pytest.approx(abs(one(p, top[i * 2 + 1 - a])), rel=1e-4, abs=1e-5)
        assert out["cross_fact"][p] == pytest.approx(abs(one(p, top[int(part[i, a]) * 2 + a])), rel=1e-4, abs=1e-5)
        assert out["random"][p] == pytest.approx(abs(one(p, rnd[p])), rel=1e-4, abs=1e-5)
        assert out["heldout"][p] == pytest.approx(abs(one(p, held[p])), rel=1e-4, abs=1e-5)
        assert out["signed_heldout_cross"][p] == pytest.approx(one(p, hc[p]), rel=1e-4, abs=1e-5)
    with pytest.raises(ValueError, match="valid: own"):
        M.suppression_effects(model, tok, PROMPTS, tg, before, 2, top, rnd, part, held, hc, kinds=["mine"])


def test_synapse_columns_and_no_op_scaling(tiny):
    model, tok = tiny
    subj, ctrl, fill = M.synapse_columns(tok, PROMPTS[:2], ["France", "France"], seed=0)
    for q, s, c, f in zip(PROMPTS[:2], subj, ctrl, fill):
        n = len(tok(q)["input_ids"])
        assert s == ql.subject_positions(tok, q, "France")
        assert len(c) == len(s) and not set(c) & set(s) and 0 not in c and n - 1 not in c
        toks = tok.convert_ids_to_tokens(tok(q)["input_ids"])
        assert all(toks[p].replace("\u0120", "").lower() in M.FILLER_WORDS for p in f)
    tg = [int(i) for i in lm.next_token_logprobs(model, tok, PROMPTS[:2]).argmax(-1)]
    units = [frozenset({3, 70}), frozenset({5, 130})]
    same = M.synapse_effects(model, tok, PROMPTS[:2], tg, units, {"subject": subj}, alpha=1.0)
    assert np.allclose(same["subject"]["kn_change"], 0, atol=1e-5)
    assert np.allclose(same["subject"]["dprob"], 0, atol=1e-5)
    off = M.synapse_effects(model, tok, PROMPTS[:2], tg, units, {"subject": subj, "none": [[], []]}, alpha=0.0)
    assert (off["subject"]["kn_change"] > 1e-4).all() and np.isnan(off["none"]["dprob"]).all()


def test_edit_scores_equal_erase_scores(tiny):
    model, tok = tiny
    facts = [ql.Fact(s, "capital", "x", tuple(t.format(s=s) for t in ql.TEMPLATES["capital"][:3]))
             for s in ("France", "Spain", "Italy")]
    tg = [1, 2, 3]
    pick = {"a": lambda i: frozenset({i, 64 + i}), "b": lambda i: frozenset({130})}
    ed = M.edit_scores(model, tok, facts, tg, 2, 5, pick, show_progress=False)
    assert len(ed) == 6
    r = ql.erase_scores(model, tok, pick["a"](1), facts[1].queries[:1], facts[1].queries[2:], 2,
                        [facts[2].queries[0], facts[0].queries[0]], [3, 1])
    row = ed[(ed.fact == 1) & (ed.method == "a")].iloc[0]
    assert row.Rel == pytest.approx(r.rel) and row.Gen == pytest.approx(r.gen)
    assert row.Loc == pytest.approx(r.loc) and row.Avg == pytest.approx(r.avg)
    with pytest.raises(ValueError, match="n_seen"):
        M.edit_scores(model, tok, facts, tg, 3, 5, pick)


def test_per_layer_fast_path_is_the_one_tested(tiny):
    """The batched per-layer IG starts each batch at its lowest layer (:func:`_rows_from`); the
    reference-loop test covers it only where the model qualifies."""
    model, _ = tiny
    assert _skippable(model)


def test_book_uses_dai_et_al_per_layer_estimator():
    """Issue 56: the book's KN sets come from the paper's (Dai et al.'s) per-layer estimator."""
    assert ql.configs.config("book").path == "per_layer"
    assert ql.configs.config("book").n_steps == 20
    with pytest.raises(ValueError, match="cross_q"):
        ql.configs.config("smoke", cross_q=1.5)


def test_by_fact_averages_each_facts_entries_and_keeps_arrays_paired():
    from iclr25.query_localization import measures as M

    a = np.array([1.0, 3.0, np.nan, 4.0, 10.0, 20.0])     # 3 facts x 2 prompts
    b = np.array([0.0, 2.0, 5.0, np.nan, 1.0, 3.0])
    fa, fb = M.by_fact(2, a, b)
    # fact 1 has no prompt where both are finite: left out of both; the others by hand
    np.testing.assert_allclose(fa, [2.0, 15.0])
    np.testing.assert_allclose(fb, [1.0, 2.0])
    (only,) = M.by_fact(3, np.arange(6.0))
    np.testing.assert_allclose(only, [1.0, 4.0])
    # a pairs array (facts, pairs) gives its row means
    pj = np.random.default_rng(0).random((4, 10))
    np.testing.assert_allclose(M.by_fact(10, pj)[0], pj.mean(1))
    with pytest.raises(ValueError, match="not facts x 4"):
        M.by_fact(4, np.arange(6.0))
    with pytest.raises(ValueError, match="positive integer"):
        M.by_fact(0, a)

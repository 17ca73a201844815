"""Chapter 12: the registered statistics per gene split and their controls, against brute force,
and the independent draws that every finding uses."""

import itertools

import numpy as np
import pytest
from scipy import stats

from iclr25 import tinygpt
from iclr25 import phylolm as pl
from iclr25.phylolm import replicates as rp
from iclr25.phylolm import sampling, study


def test_gene_splits_disjoint_cover_and_seeded():
    parts = rp.gene_splits(16, 3, seed=0)
    assert sorted(len(p) for p in parts) == [5, 5, 6]
    assert sorted(np.concatenate(parts).tolist()) == list(range(16))
    assert all(np.array_equal(a, b) for a, b in zip(parts, rp.gene_splits(16, 3, seed=0)))
    assert not all(np.array_equal(a, b) for a, b in zip(parts, rp.gene_splits(16, 3, seed=1)))
    with pytest.raises(ValueError, match="k <= n_genes"):
        rp.gene_splits(2, 3)


def block_matrix():
    S = np.array([[1, .8, .1, .2, .0],
                  [.8, 1, .3, .1, .1],
                  [.1, .3, 1, .6, .2],
                  [.2, .1, .6, 1, .1],
                  [.0, .1, .2, .1, 1.]])
    return S, ["a", "a", "b", "b", "c"]


def test_block_contrast_by_hand_and_permuted_control_by_enumeration():
    S, fam = block_matrix()
    # a: within .8, between mean(.1,.2,0,.3,.1,.1) = .8/6; b: within .6, between mean(.1,.3,.2,.2,.1,.1)
    want = min(.8 - .8 / 6, .6 - 1.0 / 6)
    assert rp.block_contrast(S, fam) == pytest.approx(want)
    exact = np.mean([rp.block_contrast(S, [fam[k] for k in p])
                     for p in itertools.permutations(range(5))])
    assert rp.permuted_block_contrast(S, fam, n_perm=3000, seed=0) == pytest.approx(exact, abs=0.01)
    assert rp.permuted_block_contrast(S, fam, n_perm=50, seed=0) < rp.block_contrast(S, fam)
    with pytest.raises(ValueError, match="at least two models"):
        rp.block_contrast(S, ["a", "b", "c", "d", "e"])
    with pytest.raises(ValueError, match="M family labels"):
        rp.block_contrast(S, fam[:4])


def test_stability_is_pearson_of_off_diagonal_and_control_by_enumeration():
    rng = np.random.default_rng(0)
    A = rng.random((5, 5))
    A = (A + A.T) / 2
    B = A + 0.1 * rng.random((5, 5))
    B = (B + B.T) / 2
    iu = np.triu_indices(5, 1)
    assert rp.stability(A, B) == pytest.approx(stats.pearsonr(A[iu], B[iu])[0])
    exact = np.mean([rp.stability(A, B[np.ix_(p, p)]) for p in itertools.permutations(range(5))])
    assert rp.permuted_stability(A, B, n_perm=3000) == pytest.approx(exact, abs=0.02)
    assert rp.stability(A, np.ones((5, 5))) == 0.0
    ours, ctrl = rp.pairwise_stability([A, B, A], n_perm=20)
    assert len(ours) == len(ctrl) == 3 and ours[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same M"):
        rp.stability(A, B[:4, :4])


def test_oracle_errors_average_to_the_gn_study():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(6) * 0.5, size=(2, 16))
    pool = {f"m{i}": [[f"a{k}" for k in rng.choice(6, 32, p=w[i % 2, g])] for g in range(16)]
            for i in range(4)}
    for G, N in ((2, 2), (2, 32), (4, 8)):
        per = rp.oracle_errors(pool, G, N, n_stacks=8 // G)
        row = study.gn_study(pool, [G], [N], n_stacks=8 // G)[0]
        assert len(per) == 8 // G and np.mean(per) == pytest.approx(row["oracle_error"])
    assert np.mean(rp.oracle_errors(pool, 4, 32, 2)) < np.mean(rp.oracle_errors(pool, 2, 2, 2))
    with pytest.raises(ValueError, match="first half has 8"):
        rp.oracle_errors(pool, 4, 2, n_stacks=3)


KNOWN = "((a:1,b:2):1.5,(c:0.7,(d:1,e:0.4):0.3):0.5,f:2);"


def test_nj_nrf_and_random_trees():
    true = pl.parse_newick(KNOWN)
    names = sorted(true.leaves())
    D = pl.patristic_distances(true, names)
    assert rp.nj_nrf(D, names, true) == 0.0
    rand = rp.random_tree_nrf(names, true, n=50, seed=0)
    brute = []
    rng = np.random.default_rng(0)
    for _ in range(50):
        r = np.triu(rng.random((6, 6)), 1)
        brute.append(pl.robinson_foulds(pl.neighbor_joining(r + r.T, names), true,
                                        normalized=True, mode="compatible"))
    assert rand == pytest.approx(np.mean(brute)) and rand > 0.3


def test_edit_gap_by_hand():
    names = ["a/root", "a/reseed", "a/int8", "a/prune", "a/continue", "b/root", "b/int8"]
    fam = ["a", "a", "a", "a", "a", "b", "b"]
    edits = ["root", "reseed", "int8", "prune", "continue", "root", "int8"]
    parents = [None, None, "a/root", "a/root", "a/root", None, "b/root"]
    D = np.full((7, 7), 5.0)
    np.fill_diagonal(D, 0)
    for (i, j, v) in ((0, 1, 2.0), (0, 2, 0.1), (0, 3, 0.3), (0, 4, 0.05), (5, 6, 9.0)):
        D[i, j] = D[j, i] = v
    assert rp.edit_gap(D, names, fam, edits, parents) == (0.3, 2.0)   # b has no seed-sibling
    with pytest.raises(ValueError, match="seed-sibling"):
        rp.edit_gap(D, names, fam, ["root"] * 7, parents)


def test_tasks_above_chance_is_a_binomial_test():
    n = 20
    y = np.array([[0.25, 0.35, 0.20], [0.30, 0.40, 0.25], [0.20, 0.45, 0.30]])
    keep = rp.tasks_above_chance(y, n)
    for k in range(3):
        hits = int(round(y[:, k].sum() * n))
        p = stats.binomtest(hits, 3 * n, 0.25, alternative="greater").pvalue
        assert keep[k] == (p < 0.05)
    assert keep.tolist() == [False, True, False]


def test_nearest_neighbour_against_brute_force_with_ties():
    D = np.array([[0, 1, 2, 1.], [1, 0, 3, 4], [2, 3, 0, 5], [1, 4, 5, 0]])
    y = np.array([[0.1, 1], [0.2, 2], [0.3, 3], [0.4, 4]])
    pred = rp.nearest_neighbour_predictions(D, y)
    np.testing.assert_allclose(pred[0], (y[1] + y[3]) / 2)       # a tie at distance 1
    np.testing.assert_allclose(pred[1:], y[[0, 0, 0]])
    with pytest.raises(ValueError, match="distance matrix"):
        rp.nearest_neighbour_predictions(D[:3], y)


@pytest.fixture
def one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)      # tiny full-batch fits: threads only add overhead
    yield
    torch.set_num_threads(n)


def test_prediction_replicate_beats_the_mean_when_scores_follow_distance(one_thread):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    fam = [f"f{k % 4}" for k in range(12)]
    names = [f"m{k}" for k in range(12)]
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    y = 1 / (1 + np.exp(-2 * X[:, :1]))
    out = rp.prediction_replicate(D, y, fam, names, n_ica=4, epochs=300)
    assert out["lomo_mse"] < out["lomo_mean_mse"] and out["lofo_pearson"] > 0.3
    assert out["lomo_1nn_mse"] == pytest.approx(
        ((rp.nearest_neighbour_predictions(D, y) - y) ** 2).mean())


def test_draws_are_independent_across_models_by_default():
    """Issue 63: every model used the same random numbers, so two identical models gave
    identical alleles by design. By default each model now draws its own."""
    assert pl.zoo_config("smoke").coupled is False
    assert study.model_seed(0, "a/root") != study.model_seed(0, "a/int8")
    assert study.model_seed(0, "a/root", coupled=True) == study.model_seed(0, "a/int8", coupled=True)
    model = tinygpt.TinyGPT(tinygpt.TinyGPTConfig(vocab_size=256, d_model=16, n_layers=1, n_heads=2,
                                                  d_ff=32, max_len=32))
    genes = ["The cat sat on the", "Paris is the capital"]
    draw = lambda name, coupled: sampling.sample_alleles(  # noqa: E731
        model, genes, N=16, temperature=1.0, seed=study.model_seed(0, name, coupled))
    assert draw("x", True) == draw("y", True)          # the labelled variant: identical copies
    assert draw("x", False) != draw("y", False)        # the paper's estimator: fresh draws


def test_batched_folds_equal_the_fold_by_fold_loop(one_thread):
    """The fast path (every fold trained in one batched loop) against the reference
    (one PhyloRegressor per fold), for unequal families (padding) and one model per fold."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(11, 2))
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    y = 1 / (1 + np.exp(-2 * X))
    for groups in (["a"] * 5 + ["b"] * 3 + ["c"] * 2 + ["d"], [f"m{k}" for k in range(11)]):
        fast = rp.leave_groups_out(D, y, groups, n_ica=5, epochs=150, seed=3)
        ref = pl.leave_one_family_out(D, y, groups, n_ica=5, epochs=150, seed=3)
        np.testing.assert_allclose(fast.pred, ref.pred, atol=1e-5)
        np.testing.assert_allclose(fast.mean, ref.mean, atol=0)
    with pytest.raises(ValueError, match="two groups"):
        rp.leave_groups_out(D, y, ["x"] * 11)
    with pytest.raises(ValueError, match="M groups"):
        rp.leave_groups_out(D, y, ["x", "y"])

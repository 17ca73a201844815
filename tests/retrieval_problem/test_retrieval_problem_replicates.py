"""Value tests of the registry replicates and controls of chapter 11
(``iclr25.retrieval_problem.replicates``) against loops and hand-computed cases."""

import numpy as np
import pytest

import iclr25.retrieval_problem as rp


def _model(task, seed=0, binding=False):
    model = rp.make_model(task, 1, d_model=16, n_heads=2, init_std=0.2, seed=seed)
    if binding:
        rp.add_binding_readout(model, seed=0)
    return model


def test_correct_by_depth_means_are_the_accuracies():
    task = rp.RetrievalTask(n_symbols=12, n_chains=3, max_depth=3)
    model = _model(task)
    c = rp.correct_by_depth(model, task, n=40, seed=5)
    acc = rp.accuracy_by_depth(model, task, n=40, seed=5)
    assert sorted(c) == [1, 2, 3]
    for d in c:
        assert c[d].shape == (40,) and set(np.unique(c[d])) <= {0.0, 1.0}
        assert c[d].mean() == pytest.approx(acc[d])
    # against a loop over the examples of one depth
    batch = task.sample(40, 5 + 2, depth=2)
    loop = [float(rp.predict(model, batch.X[i:i + 1])[0] == batch.y[i]) for i in range(40)]
    np.testing.assert_array_equal(c[2], loop)


def test_binding_correct_per_context_against_a_loop():
    task = rp.RetrievalTask(n_symbols=12, n_chains=3, max_depth=2, order="composable")
    model = _model(task, binding=True)
    per = rp.binding_correct_per_context(model, task, n=30, seed=3)
    batch = task.sample(30, 3, depth="mixed")
    lt, rt = rp.binding_targets(task, batch.X)
    pl, pr = rp.binding_predictions(model, batch.X)
    want = []
    for i in range(30):
        hits = bound = 0
        for t, p in ((lt[i], pl[i]), (rt[i], pr[i])):
            for j in range(len(t)):
                if t[j] < task.n_symbols:
                    bound += 1
                    hits += int(p[j] == t[j])
        if bound:
            want.append(hits / bound)
    np.testing.assert_allclose(per, want)
    # pooled over contexts with equal weights per bound neighbour it is binding_accuracy's pool
    acc = rp.binding_accuracy(model, task, n=30, seed=3)
    nl, nr = int((lt < task.n_symbols).sum()), int((rt < task.n_symbols).sum())
    pooled = (acc["left bound"] * nl + acc["right bound"] * nr) / (nl + nr)
    total_hits = sum(w * b for w, b in zip(want, [int((lt[i] < 12).sum() + (rt[i] < 12).sum())
                                                  for i in range(30) if (lt[i] < 12).any() or (rt[i] < 12).any()]))
    assert total_hits / (nl + nr) == pytest.approx(pooled)


def test_emergence_gap():
    assert rp.emergence_gap(100, 150) == 50
    assert rp.emergence_gap(150, 100) == -50
    assert rp.emergence_gap(-1, 100) == 0 and rp.emergence_gap(100, -1) == 0
    assert rp.emergence_gap(40, 40) == 0


def test_control_heads():
    hop = [(0, 0), (1, 1)]
    others = [(0, 1), (1, 0)]
    assert rp.control_heads(2, 2, hop, 1, seed=0)[0] in others
    assert sorted(rp.control_heads(2, 2, hop, 2)) == others
    assert sorted(rp.control_heads(2, 2, hop, 5)) == others            # all if fewer
    assert rp.control_heads(2, 2, hop + others, 1) == []                # every head a hop head
    assert rp.control_heads(3, 2, hop, 2, seed=7) == rp.control_heads(3, 2, hop, 2, seed=7)
    for s in range(20):
        got = rp.control_heads(3, 2, hop, 2, seed=s)
        assert len(got) == len(set(got)) == 2 and not set(got) & set(hop)
    # the empty control ablates nothing: the clean model
    task = rp.RetrievalTask(n_symbols=12, n_chains=3, max_depth=1)
    model = _model(task)
    X = task.sample(8, 0).X
    with rp.ablate_heads(model, []):
        np.testing.assert_array_equal(rp.predict(model, X), rp.predict(model, X))


def test_mc_counts():
    assert rp.mc_counts(5, 8, 50) == {1: 50, 2: 8, 3: 8, 4: 8, 5: 50}
    assert rp.mc_counts(1, 8, 50) == {1: 50}
    assert rp.mc_counts(3, 4) == {1: 4, 2: 4, 3: 4}
    with pytest.raises(ValueError, match="positive"):
        rp.mc_counts(0, 4)
    with pytest.raises(ValueError, match="positive"):
        rp.lm_config("smoke", n_end=0)
    book = rp.lm_config("book")
    counts = rp.mc_counts(book.max_depth, book.n_per_depth, book.n_end)
    # the registry's 200 questions at D = 1 and at the largest D (50 per family x 4)
    assert counts[1] * len(book.families) == 200 and counts[book.max_depth] * len(book.families) == 200


def test_composed_and_hop_patch_stats():
    assert rp.composed_stats({"binding heads": 0.8, "reading heads": 0.6,
                              "other layer-0 heads": 0.05, "other layer-1 heads": 0.02}) == (0.6, 0.05)
    assert rp.composed_stats({"reading heads": 0.9}) == (0.0, 0.0)       # no binding head found
    row = {"hop 1 heads moved": 0.7, "hop 2 heads moved": 0.9, "all other heads moved": 0.01}
    assert rp.hop_patch_stats(row, 2) == (0.7, 0.01)
    assert rp.hop_patch_stats(row, 1) == (0.7, 0.01)


def test_configs_cover_the_registry():
    smoke = rp.depth_config("smoke")
    assert {1, 2, 3} <= set(smoke.layers) and smoke.max_depth >= 4      # every judged arm runs
    paper = rp.depth_config("paper")
    assert paper.max_depth >= 14 and 3 in paper.layers                   # D = 14 for t = 3
    assert paper.n_symbols >= paper.n_chains * (paper.max_depth + 1)
    assert rp.emergence_config("book").n_composed_seeds >= 3
    with pytest.raises(ValueError, match="n_composed_seeds"):
        rp.emergence_config("smoke", n_composed_seeds=0)


def test_seed_accuracies_equal_training_each_seed_by_hand():
    task = rp.RetrievalTask(n_symbols=12, n_chains=2, max_depth=2, order="composable")
    kw = dict(d_model=16, n_heads=2, init_std=0.2, batch_size=16, lr=1e-2)
    acc, results = rp.seed_accuracies(task, 2, n_layers=1, n_steps=5, binding=True, eval_n=32,
                                      seed=3, **kw)
    assert acc.shape == (2, 2) and len(results) == 2
    for s in range(2):
        model = rp.make_model(task, 1, d_model=16, n_heads=2, init_std=0.2, seed=3 + 100 * s)
        rp.train_retrieval(model, task, n_steps=5, ic="mixed", binding=True, batch_size=16,
                           lr=1e-2, seed=3 + s)
        want = rp.accuracy_by_depth(model, task, n=32, seed=3 + 9_000)
        np.testing.assert_allclose(acc[s], [want[1], want[2]])


def test_composed_config():
    book = rp.composed_config("book")
    assert book.n_seeds >= 3 and book.n_layers == 2 and book.max_depth == 5    # D = 5: bound + 1
    assert rp.max_depth(book.n_layers) == book.max_depth - 1
    assert book.n_symbols >= book.n_chains * (book.max_depth + 1)
    assert book.curriculum_steps == 0 and rp.composed_config("paper").curriculum_steps == 24_000
    with pytest.raises(ValueError, match="max_depth"):
        rp.composed_config("smoke", max_depth=4)
    with pytest.raises(ValueError, match="n_symbols"):
        rp.composed_config("smoke", n_symbols=10)
    with pytest.raises(ValueError, match="positive"):
        rp.composed_config("smoke", n_seeds=0)

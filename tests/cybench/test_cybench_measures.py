"""Value tests of iclr25.cybench.measures (the replicates and controls of chapter 07's registry)."""

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from iclr25.cybench import configs, measures, paper_data


def test_published_pairs_are_table2():
    pub = measures.published_pairs()
    t2 = paper_data.table2()
    assert len(pub) == 8 == len(t2)
    assert pub.subtask.tolist() == t2["subtask %"].tolist()
    assert pub.guided.tolist() == t2["subtask-guided %"].tolist()
    # Claude 3.5 Sonnet: 17.5 / 15.0 / 43.9 (Table 2)
    row = pub.set_index("model").iloc[0]
    assert (row.unguided, row.guided, row.subtask) == (17.5, 15.0, 43.9)


def test_rank_z_products_mean_is_spearman():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, 25).astype(float)   # ties on purpose
    y = rng.normal(size=25)
    z = measures.rank_z_products(x, y)
    assert z.shape == (25,)
    assert z.mean() == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert measures.rank_z_products([1, 2, 3], [3, 2, 1]).mean() == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        measures.rank_z_products([1, 1, 1], [1, 2, 3])


def test_scaffold_gap_and_exact_null_by_brute_force():
    a, b = [1.0, 0.5, 0.0], [0.0, 0.5, 0.5]
    assert measures.scaffold_gap(a, b) == pytest.approx(abs(1.5 - 1.0) / 3)
    d = np.subtract(a, b)
    brute = np.mean([abs(np.mean([s * x for s, x in zip(signs, d)]))
                     for signs in itertools.product((1, -1), repeat=3)])
    # d = (1, 0, -0.5): |1 - .5|, |1 + .5|, |-1 - .5|, |-1 + .5| each twice -> mean 1/3
    assert brute == pytest.approx(1 / 3)
    assert measures.scaffold_gap_null(a, b) == pytest.approx(brute)
    # all-equal scores: gap and null are both zero
    assert measures.scaffold_gap([0, 0], [0, 0]) == 0 == measures.scaffold_gap_null([0, 0], [0, 0])
    # the random null approximates the exact one
    rng = np.random.default_rng(1)
    a, b = rng.random(12), rng.random(12)
    exact = measures.scaffold_gap_null(a, b, exact_up_to=12)
    approx = measures.scaffold_gap_null(a, b, exact_up_to=5, n_perm=4000)
    assert approx == pytest.approx(exact, rel=0.05)
    with pytest.raises(ValueError):
        measures.scaffold_gap([1, 2], [1])


def _episodes(scaffold, scores, successes):
    rows = []
    for t, (sc, (u, g)) in enumerate(zip(scores, successes)):
        rows.append({"task": f"t{t}", "mode": "unguided", "success": u, "subtask_score": np.nan,
                     "scaffold": scaffold})
        rows.append({"task": f"t{t}", "mode": "subtask", "success": g, "subtask_score": sc,
                     "scaffold": scaffold})
    return rows


def test_per_replicate_by_hand():
    runs = pd.DataFrame(_episodes("structured", [1.0, 0.5], [(1, 1), (0, 0)])
                        + _episodes("action_only", [0.0, 0.5], [(0, 0), (0, 1)]))
    r = measures.per_replicate(runs)
    assert r["scaffold"] == "structured"
    assert (r["unguided"], r["guided"], r["subtask"]) == (0.5, 0.5, 0.75)
    assert r["gap"] == pytest.approx(0.5)
    assert r["gap_null"] == pytest.approx(0.5)   # d = (1, 0): |mean| is 0.5 under every relabelling
    one = measures.per_replicate(runs[runs.scaffold == "action_only"])
    assert one["scaffold"] == "action_only" and one["gap"] is None


def test_lm_replicates_loops_backends_and_seeds():
    calls = []

    def fake_run(tasks, backend, seed, **kw):
        calls.append((backend, seed))
        return pd.DataFrame(_episodes("structured", [seed / 2, 0.0], [(0, seed % 2), (0, 0)]))

    eps, reps = measures.lm_replicates(["t0", "t1"], {"a": "A", "b": "B"}, [0, 1], run=fake_run)
    assert calls == [("A", 0), ("A", 1), ("B", 0), ("B", 1)]
    assert reps[["backend", "seed"]].values.tolist() == [["a", 0], ["a", 1], ["b", 0], ["b", 1]]
    assert reps.subtask.tolist() == [0.0, 0.25, 0.0, 0.25]
    assert reps.guided.tolist() == [0.0, 0.5, 0.0, 0.5]
    assert len(eps) == 16 and set(eps.backend) == {"a", "b"}


def test_lm_config_replicates():
    assert configs.lm("book").n_seeds == 1 and configs.lm("book").models == ("smollm2-135m-instruct",)
    paper = configs.lm("paper")
    assert paper.n_seeds == 3 and paper.temperature == 0.5 and len(paper.models) == 2
    with pytest.raises(ValueError):
        configs.lm("smoke", n_seeds=0)

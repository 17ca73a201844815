"""Chapter 12: the zoo's genealogy, tasks, the studies and leave-one-family-out prediction."""

import numpy as np
import pytest
import torch

from iclr25 import profiles, tinygpt
from iclr25 import phylolm as pl
from iclr25.phylolm import study, zoo


def test_genealogy_newick():
    members = [zoo.ZooModel("a/root", "a", "root", None), zoo.ZooModel("a/reseed", "a", "reseed", None),
               zoo.ZooModel("a/int8", "a", "int8", "a/root"), zoo.ZooModel("a/prune", "a", "prune", "a/root"),
               zoo.ZooModel("b/root", "b", "root", None), zoo.ZooModel("b/int8", "b", "int8", "b/root"),
               zoo.ZooModel("g/root", "g", "root", None)]
    nw = zoo.genealogy(members)
    assert nw == "(((a/root,a/int8,a/prune),a/reseed),(b/root,b/int8),g/root);"
    tree = pl.parse_newick(nw)
    assert frozenset({"a/root", "a/int8", "a/prune"}) in pl.splits(tree) or \
        frozenset({"a/reseed", "b/root", "b/int8", "g/root"}) in pl.splits(tree)


def test_tasks_and_scores():
    tasks = zoo.make_tasks(5, seed=0)
    assert set(tasks) == set(zoo.TASKS)
    for items in tasks.values():
        assert len(items) == 5
        for prompt, opts, ans in items:
            assert len(opts) == 4 and 0 <= ans < 4 and len(set(opts)) == 4
            assert len((prompt + max(opts, key=len)).encode()) <= 64
    p, opts, ans = tasks["addition"][0]
    a, b = p.split("\n")[1].rstrip("=").split("+")
    assert opts[ans] == str(int(a) + int(b))
    torch.manual_seed(0)
    m = tinygpt.TinyGPT(tinygpt.TinyGPTConfig(vocab_size=256, d_model=16, n_layers=1, n_heads=2,
                                              d_ff=32, max_len=64))
    scores = zoo.score_tasks(zoo.ZooModel("m", "f", "root", None, m), tasks)
    assert all(0 <= v <= 1 for v in scores.values())


def test_family_text_and_edits_errors():
    fam = zoo.FAMILIES[0]
    x = zoo.family_text(fam, n_chars=2000, seed=0)
    assert x.shape == (2000,) and int(x.max()) < 256
    y = zoo.family_text(fam, n_chars=2000, part=1, seed=0)
    assert not torch.equal(x, y)
    with pytest.raises(ValueError, match="valid: reseed"):
        zoo.train_tiny_family(fam, ("fp4",), n_steps=1, batch_size=1, lr=1e-3, seed=0)


def test_family_contrast_and_offsets():
    S = np.array([[1, .9, .2], [.9, 1, .3], [.2, .3, 1.]])
    c = study.family_contrast(S, ["a", "a", "b"])
    assert c == {"a": (pytest.approx(0.9), pytest.approx(0.25))}


def test_gn_study_error_falls_on_synthetic_pool():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(6) * 0.5, size=(2, 16))
    pool = {f"m{i}": [[f"a{k}" for k in rng.choice(6, 32, p=w[i % 2, g])] for g in range(16)]
            for i in range(4)}
    rows = study.gn_study(pool, [2, 8], [2, 32])
    err = {(r["G"], r["N"]): r["oracle_error"] for r in rows}
    assert err[(8, 32)] < err[(2, 2)]
    with pytest.raises(ValueError, match="exceeds half"):
        study.gn_study(pool, [16], [2])


def test_lofo_beats_mean_when_scores_follow_distance():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 2))
    fam = [f"f{k % 6}" for k in range(24)]
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    y = 1 / (1 + np.exp(-2 * X[:, 0]))
    res = pl.leave_one_family_out(D, y, fam, n_ica=4, epochs=1000)
    mse, base = res.mse()
    assert mse < base and res.pearson()[0] > 0.5
    with pytest.raises(ValueError, match="two families"):
        pl.leave_one_family_out(D, y, ["x"] * 24)


def test_config_errors():
    assert pl.zoo_config("smoke").G == 16
    with pytest.raises(profiles.ProfileError, match="valid"):
        pl.zoo_config("smoke", genes=3)
    with pytest.raises(ValueError, match="G <= G_pool"):
        pl.zoo_config("smoke", G=100)

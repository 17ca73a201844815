"""Chapter 10: per-head capture, batched ridge against per-head numpy / scikit-learn, CV
Spearman, ensembles, controls, steering, the slant scorer and the data loaders."""

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import spearmanr

from iclr25 import lm
from iclr25.ideology_probes import capture, configs, data, probe, slant, steering


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    model = lm.tiny_llama(n_layers=3, d_model=32, n_heads=4).eval()
    return model, lm.tiny_tokenizer()


# ---------------------------------------------------------------------------------------------
# ridge

def _problem(n=40, G=6, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, G, d))
    y = X[:, 0] @ rng.normal(size=d) + 0.3 * rng.normal(size=n) + 0.5
    return X, y


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 1.0, 10.0])
def test_batched_ridge_equals_sklearn_per_head(fit_intercept, alpha):
    from sklearn.linear_model import Ridge

    X, y = _problem()
    coef, icpt = probe.ridge_fit(X, y, alpha, fit_intercept=fit_intercept)
    ref_c, ref_i = probe.ridge_fit(X, y, alpha, fit_intercept=fit_intercept, method="loop")
    for g in range(X.shape[1]):
        sk = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="cholesky").fit(X[:, g], y)
        np.testing.assert_allclose(coef[g], sk.coef_, atol=1e-8)
        np.testing.assert_allclose(icpt[g], sk.intercept_ if fit_intercept else 0.0, atol=1e-8)
    np.testing.assert_allclose(coef, ref_c, atol=1e-10)
    np.testing.assert_allclose(icpt, ref_i, atol=1e-10)


def test_ridge_closed_form_and_prediction():
    X, y = _problem(n=10, G=2, d=3)
    coef, icpt = probe.ridge_fit(X, y, 2.0)
    Xg = X[:, 1]
    w = np.linalg.inv(Xg.T @ Xg + 2.0 * np.eye(3)) @ Xg.T @ y     # (X^T X + a I)^-1 X^T y
    np.testing.assert_allclose(coef[1], w, atol=1e-10)
    np.testing.assert_allclose(probe.ridge_predict(X, coef, icpt)[:, 1], Xg @ w, atol=1e-10)


def test_ridge_bad_input():
    X, y = _problem()
    with pytest.raises(ValueError, match="valid: batched, loop"):
        probe.ridge_fit(X, y, method="fast")
    with pytest.raises(ValueError, match="n_heads, head_dim"):
        probe.ridge_fit(X[:, 0], y)
    with pytest.raises(ValueError, match="length n"):
        probe.ridge_fit(X, y[:-1])
    with pytest.raises(ValueError, match="alpha"):
        probe.ridge_fit(X, y, alpha=-1)


# ---------------------------------------------------------------------------------------------
# cross-validation, Spearman, probe, ensembles

def test_spearman_columns_matches_scipy():
    rng = np.random.default_rng(1)
    P = rng.normal(size=(30, 4))
    P[:, 2] = np.round(P[:, 2])          # ties
    y = rng.normal(size=30)
    for g in range(4):
        assert probe.spearman_columns(P, y)[g] == pytest.approx(spearmanr(P[:, g], y)[0], abs=1e-12)
    assert probe.spearman_columns(np.ones((5, 1)), np.arange(5.0))[0] == 0.0


def test_fold_indices_kfold_and_groups():
    from sklearn.model_selection import KFold

    folds = probe.fold_indices(10, 2, 42)
    ref = list(KFold(2, shuffle=True, random_state=42).split(np.arange(10)))
    for (a, b), (c, d) in zip(folds, ref):
        assert np.array_equal(a, c) and np.array_equal(b, d)
    groups = np.repeat(np.arange(6), 3)
    for tr, te in probe.fold_indices(18, 3, 0, groups):
        assert not set(groups[tr]) & set(groups[te])
    with pytest.raises(ValueError, match="folds"):
        probe.fold_indices(10, 1)
    with pytest.raises(ValueError, match="groups"):
        probe.fold_indices(4, 3, groups=np.array([0, 0, 1, 1]))


def test_cv_head_scores_brute_force():
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(2)
    acts = rng.normal(size=(24, 2, 3, 4))
    y = acts[:, 1, 2] @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.1 * rng.normal(size=24)
    cv = probe.cv_head_scores(acts, y, alpha=1.0, folds=2, seed=42)
    splits = probe.fold_indices(24, 2, 42)
    for l in range(2):
        for h in range(3):
            rs = [spearmanr(Ridge(alpha=1.0, fit_intercept=False).fit(acts[tr, l, h], y[tr])
                            .predict(acts[te, l, h]), y[te])[0] for tr, te in splits]
            assert cv.rho[l, h] == pytest.approx(np.mean(rs), abs=1e-9)
    assert cv.top(1) == [(1, 2)] and cv.rho[1, 2] > 0.9
    assert cv.oof.shape == (24, 2, 3)


def test_head_probe_ensemble_and_errors():
    rng = np.random.default_rng(3)
    acts = rng.normal(size=(40, 2, 2, 3))
    y = acts[:, 0, 1, 0] + acts[:, 1, 0, 1]
    p = probe.HeadProbe(alpha=0.1).fit(acts, y)
    assert set(p.top(2)) == {(0, 1), (1, 0)}
    P = p.predict(acts)
    np.testing.assert_allclose(p.ensemble_predict(acts, 2), (P[:, 0, 1] + P[:, 1, 0]) / 2)
    assert p.score(acts, y, 2) > 0.9
    with pytest.raises(ValueError, match="k must be"):
        p.top(5)
    with pytest.raises(ValueError, match="fitted on"):
        p.predict(acts[:, :1])
    with pytest.raises(RuntimeError, match="not fitted"):
        probe.HeadProbe().predict(acts)
    rho, oof = probe.ensemble_cv(acts, y, 2, alpha=0.1)
    assert rho > 0.8 and oof.shape == (40,)
    rho_bad, _ = probe.ensemble_cv(acts, y, 2, alpha=0.1, heads=[(0, 0), (1, 1)])
    assert rho_bad < 0.5


def test_permutation_control_is_low_and_lexical_baseline():
    rng = np.random.default_rng(4)
    acts = rng.normal(size=(200, 2, 2, 3))
    y = acts[:, 0, 0, 0]
    assert np.max(probe.permutation_control(acts, y, n_perm=2)) < 0.3
    texts = [("left " if v < 0 else "right ") + "words" for v in y]
    rho, oof = probe.lexical_cv(y, texts=texts)
    assert rho > 0.7 and oof.shape == (200,)
    rho_f, _ = probe.lexical_cv(y, features=acts[:, 0, 0])
    assert rho_f > 0.95
    with pytest.raises(ValueError, match="exactly one"):
        probe.lexical_cv(y)


# ---------------------------------------------------------------------------------------------
# capture and steering on a tiny Llama

def test_head_outputs_batched_equals_loop_and_manual(tiny):
    model, tok = tiny
    texts = ["hello there", "a much longer prompt with more words in it", "x"]
    A = capture.head_outputs(model, tok, texts, batch_size=3)
    B = capture.head_outputs(model, tok, texts, method="loop")
    assert A.shape == (3, 3, 4, 8)
    np.testing.assert_allclose(A, B, atol=1e-5)
    ids = torch.tensor([capture.encode(tok, texts[1:2])[0]])
    with lm.capture_heads(model) as rec:
        model(ids)
    np.testing.assert_allclose(A[1, 2], rec[2][0, -1].numpy(), atol=1e-5)
    per_tok = capture.head_outputs_per_token(model, tok, texts[1:2], [(2, 1), (0, 3)])[0]
    np.testing.assert_allclose(per_tok[:, 0], rec[2][0, :, 1].numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="valid: batched, loop"):
        capture.head_outputs(model, tok, texts, method="fast")


def test_cached_head_outputs_reuses(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR25_RUNS_DIR", str(tmp_path))
    model, tok = tiny
    a = capture.cached_head_outputs(model, tok, ["one two", "three"], tag="t")
    assert len(list((tmp_path / "10-ideology-probes").glob("t-*.npy"))) == 1
    np.testing.assert_array_equal(a, capture.cached_head_outputs(model, tok, ["one two", "three"], tag="t"))


def test_cached_head_outputs_never_shares_between_models(tiny, tmp_path, monkeypatch):
    """Issue 61: the cache was keyed by a model_name argument, so another model called without
    it got the first model's activations. It is keyed by the weights now."""
    monkeypatch.setenv("ICLR25_RUNS_DIR", str(tmp_path))
    model, tok = tiny
    other = lm.tiny_llama(n_layers=3, d_model=32, n_heads=4, seed=1).eval()
    same = lm.tiny_llama(n_layers=3, d_model=32, n_heads=4, seed=0).eval()
    assert capture.model_fingerprint(other) != capture.model_fingerprint(model)
    assert capture.model_fingerprint(same) == capture.model_fingerprint(model)   # same weights
    texts = ["one two", "three"]
    a = capture.cached_head_outputs(model, tok, texts, tag="m")
    b = capture.cached_head_outputs(other, tok, texts, tag="m")
    np.testing.assert_allclose(b, capture.head_outputs(other, tok, texts), atol=1e-6)
    assert not np.allclose(a, b)
    assert len(list((tmp_path / "10-ideology-probes").glob("m-*.npy"))) == 2
    # an in-place change of the weights is a new model too
    fp = capture.model_fingerprint(other)
    with torch.no_grad():
        next(other.parameters()).add_(1.0)
    assert capture.model_fingerprint(other) != fp


def test_steering_adds_direction_at_last_position(tiny):
    model, tok = tiny
    rng = np.random.default_rng(5)
    acts = rng.normal(size=(20, 3, 4, 8))
    coef = rng.normal(size=(3, 4, 8))
    D = steering.steering_directions(coef, acts, [(1, 2)])
    assert set(D) == {1} and torch.count_nonzero(D[1][[0, 1, 3]]) == 0
    u = coef[1, 2] * acts[:, 1, 2].std(0)
    u /= np.linalg.norm(u)
    np.testing.assert_allclose(D[1][2].numpy(), (acts[:, 1, 2] @ u).std() * u, rtol=1e-5)
    ids = torch.tensor([capture.encode(tok, ["steer me please"])[0]])
    with lm.capture_heads(model, layers=[1]) as clean:
        model(ids)
    base = clean[1].clone()
    with steering.steer_heads(model, D, 3.0), lm.capture_heads(model, layers=[1]) as rec:
        model(ids)
    # the capture hook (installed second) sees the edited input of o_proj
    diff = rec[1] - base
    np.testing.assert_allclose(diff[0, -1, 2].numpy(), 3.0 * D[1][2].numpy(), atol=1e-5)
    assert float(diff[0, :-1].abs().max()) == 0.0
    df = steering.generate_steered(model, tok, ["hi", "bye"], D, [-1.0, 0.0], max_new_tokens=3)
    assert list(df.columns) == ["alpha", "prompt", "text"] and len(df) == 4
    # one batch with a row-wise alpha equals one call per alpha (greedy)
    prompts = ["hi", "a longer prompt here", "bye now"]
    big = steering.steering_directions(coef * 50, acts, [(0, 1), (2, 3)])
    one = steering.generate_steered(model, tok, prompts, big, [-20.0, 0.0, 20.0], max_new_tokens=5)
    sep = steering.generate_steered(model, tok, prompts, big, [-20.0, 0.0, 20.0], max_new_tokens=5,
                                    batch_size=1)
    assert list(one["text"]) == list(sep["text"])
    assert one[one.alpha == 20.0]["text"].tolist() != one[one.alpha == 0.0]["text"].tolist()
    grid = steering.steering_grid(model, tok, prompts, {"a": big}, [0.0, 20.0], max_new_tokens=5)
    assert list(grid.columns) == ["config", "alpha", "prompt", "text"] and len(grid) == 6
    with pytest.raises(ValueError, match="out of range"):
        steering.steering_directions(coef, acts, [(5, 0)])


def test_head_selection_helpers():
    rho = np.arange(12.0).reshape(4, 3)
    assert steering.heads_in_layers(rho, [0, 1], 2) == [(1, 2), (1, 1)]
    r = steering.random_heads(4, 3, 5, seed=0, exclude=[(3, 2)])
    assert len(set(r)) == 5 and (3, 2) not in r


# ---------------------------------------------------------------------------------------------
# slant scorer

class _BagEncoder:
    """A stand-in encoder: counts of a few words (the scorer's logic, not MiniLM)."""

    words = ("right", "choose", "protect", "border", "law", "equality", "climate", "trust")

    def encode(self, texts):
        return np.array([[t.lower().count(w) for w in self.words] for t in texts], dtype=float)


def test_slant_scorer_fit_predict_validate():
    tab = data.labelled_statements()
    assert set(tab["y"]) == {-1.0, 1.0} and tab["topic"].nunique() == 9
    sc = slant.SlantScorer(_BagEncoder()).fit(tab["text"], tab["y"])
    assert sc.predict(tab["text"]).shape == (len(tab),)
    v = sc.validate(tab)
    assert 0 <= v["auc"] <= 1 and len(v["per_group_auc"]) == 9
    sct = slant.SlantScorer(_BagEncoder()).fit(tab["text"], tab["y"], tab["topic"])
    E = _BagEncoder().encode(list(tab["text"]))
    mean0 = E[(tab["topic"] == "abortion").to_numpy()].mean(0)
    np.testing.assert_allclose(sct.topic_means_["abortion"], mean0)
    one = tab[tab["topic"] == "abortion"].iloc[:1]
    np.testing.assert_allclose(sct.predict(one["text"], one["topic"]),
                               sct.model_.predict(E[one.index] - mean0))
    with pytest.raises(ValueError, match="pass topics"):
        sct.predict(["x"])
    with pytest.raises(ValueError, match="unknown topic"):
        sct.predict(["x"], ["taxes"])
    assert slant.auc([0.1, 0.9, 0.5], [0, 1, 1]) == 1.0
    with pytest.raises(RuntimeError, match="not fitted"):
        slant.SlantScorer(_BagEncoder()).predict(["x"])


# ---------------------------------------------------------------------------------------------
# data

def test_personas_outlets_and_real_labels(tiny):
    _, tok = tiny
    P = data.make_personas(tok, 30, seed=1)
    assert len(P) == 30 and P.y.min() >= -1 and P.y.max() <= 1
    assert spearmanr(P.meta["cue_mean"], P.y)[0] > 0.5
    for word in ("liberal", "conservative", "Democrat", "Republican"):
        assert not any(word.lower() in b.lower() for b in P.meta["bio"])
    O = data.make_outlets(tok, 20)
    assert all("reported that" in t for t in O.texts)
    S = data.state_prompts(tok, years=(2008, 2012))
    assert 95 <= len(S) <= 102 and "Total" not in set(S.meta["state"])
    assert len(set(S.groups)) == S.meta["state"].nunique()
    np.testing.assert_allclose(S.y, 100 - S.meta["demVote"])
    sen = data.senator_prompts(tok)
    assert len(sen) == 100 and sen.y.sum() == sen.meta["rep"].sum()
    assert sen.meta["party"].value_counts().to_dict() == {"D": 50, "R": 49, "I": 1}
    assert ((sen.meta["party"] == "R") == (sen.y == 1)).all()
    assert not any("(R" in t or "(D" in t for t in sen.texts)
    sub = data.senator_prompts(tok, 10, seed=1)
    assert len(sub) == 10 and sub.y.sum() == 5
    whole = data.senator_prompts(tok, 10, seed=1, whole_states=True)
    assert len(whole) == 10 and (whole.meta["state"].value_counts() == 2).all()
    with pytest.raises(ValueError, match="valid"):
        data.state_prompts(tok, years=(2013,))
    with pytest.raises(ValueError, match="n_cues"):
        data.make_personas(tok, 10, n_cues=99)
    with pytest.raises(ValueError, match="valid"):
        data.steering_prompts(tok, ["taxes"])


def test_paper_data_loaders_on_generated_files(tiny, tmp_path):
    _, tok = tiny
    vv = tmp_path / "HS116_members.csv"
    pd.DataFrame({"bioname": ["SMITH, Jane A.", "DOE, John", "ROE, Ann"],
                  "nominate_dim1": [-0.4, 0.6, None], "chamber": ["House", "Senate", "House"]}
                 ).to_csv(vv, index=False)
    m = data.load_voteview(vv)
    assert list(m["name"]) == ["Jane A. Smith", "John Doe"] and list(m["y"]) == [-0.4, 0.6]
    assert len(data.load_voteview(vv, chamber="House")) == 1
    pr = data.lawmaker_prompts(tok, m)
    assert pr.texts[0].endswith("In 2019, Jane A. Smith said that")
    af = tmp_path / "adfontesmedia.csv"
    pd.DataFrame({"source": ["Outlet A", "Outlet B"], "bias_mean": [-10.0, 12.5]}).to_csv(af, index=False)
    o = data.load_media_slant(af)
    assert list(o["y"]) == [-10.0, 12.5]
    assert data.outlet_prompts(tok, o).texts[1].endswith("Outlet B reported that")
    with pytest.raises(FileNotFoundError, match="nominate_dim1"):
        data.load_voteview(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"x": [1]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match="lacks the column"):
        data.load_voteview(bad)
    with pytest.raises(ValueError, match="unknown chamber"):
        data.load_voteview(vv, chamber="Lords")


def test_configs_profiles_and_errors():
    assert configs.probing("smoke").n_personas < configs.probing("book").n_personas
    assert configs.steering("book", A=4).A == 4.0
    from iclr25.profiles import ProfileError

    with pytest.raises(ProfileError, match="valid"):
        configs.probing("smoke", n_people=3)
    with pytest.raises(ValueError, match="must be > 0"):
        configs.steering("smoke", A=-1.0)
    with pytest.raises(ValueError, match="n_topics"):
        configs.steering("smoke", n_topics=10)


def test_book_sizes_are_the_registered_replication():
    """The book profile runs what book/claims/10-ideology-probes.yaml registers: 10 split seeds,
    >= 200 outlets, monitored personas and steering items."""
    assert configs.probing("book").n_splits == 10
    t = configs.transfer("book")
    assert t.n_outlets >= 200 and t.n_monitor >= 200 and t.n_senators == 100
    s = configs.steering("book")
    assert s.n_topics * s.n_samples >= 200

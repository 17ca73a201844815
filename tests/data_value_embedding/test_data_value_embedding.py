"""Chapter 02: recorder vs torch.func, recursion vs explicit product, fast vs reference path,
DVEmb vs exact retraining, baselines vs their formulas, and clear errors."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

import iclr25.data_value_embedding as dv
from iclr25.profiles import ProfileError


def _run(n_train=48, hidden=6, batch_size=8, n_epochs=2, lr=0.2, proj_dim=None, n_test=4):
    Xtr, ytr, Xte, yte = dv.load_digits_split(n_train, n_test, seed=1)
    sched = dv.make_schedule(n_train, batch_size, n_epochs, seed=2)
    model = dv.MLP(64, hidden, seed=3)
    m0 = copy.deepcopy(model)
    rec = dv.GradRecorder(model, proj_dim=proj_dim, seed=4)
    hist = dv.train_mlp(model, Xtr, ytr, sched, lr, recorder=rec, X_test=Xte, y_test=yte)
    return dict(Xtr=Xtr, ytr=ytr, Xte=Xte, yte=yte, sched=sched, model=model, m0=m0, rec=rec,
                hist=hist, lr=lr)


@pytest.fixture(scope="module")
def run():
    return _run()


def _random_records(T=6, B=3, p=5, eta=0.05, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rec = dv.Records()
    for t in range(T):
        rec.append(torch.randn(B, p, generator=gen, dtype=torch.float64), eta * (1 + 0.1 * t),
                   torch.arange(B) + B * (t % 2), epoch=t // 3)
    return rec


def test_recorded_grads_equal_per_sample_grads():
    torch.manual_seed(0)
    model = dv.MLP(64, 5, seed=0)
    Xtr, ytr, _, _ = dv.load_digits_split(10, 1)
    rec = dv.GradRecorder(model)
    with rec.step(torch.arange(10), lr=0.1):
        F.cross_entropy(model(Xtr), ytr).backward()
    ref = dv.per_sample_grads(model, Xtr, ytr)
    torch.testing.assert_close(rec.records.grads[0], ref, rtol=1e-10, atol=1e-12)
    assert rec.records.lrs[0] == pytest.approx(0.01)          # lr / B for a mean loss
    # their sum over the batch times eta is the optimiser's step
    model.zero_grad()
    F.cross_entropy(model(Xtr), ytr).backward()
    full = torch.cat([torch.cat([m.weight.grad, m.bias.grad[:, None]], 1).reshape(-1)
                      for m in (model.fc1, model.fc2)])
    torch.testing.assert_close(ref.mean(0), full)


def test_sum_reduction_and_sequence_inputs():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2, dtype=torch.float64)
    x = torch.randn(4, 5, 3, dtype=torch.float64)                   # (batch, positions, features)
    rec = dv.GradRecorder(torch.nn.Sequential(lin), loss_reduction="sum")
    with rec.step(range(4), lr=0.5):
        (lin(x) ** 2).sum().backward()
    g = rec.records.grads[0]
    for i in range(4):
        lin.zero_grad()
        (lin(x[i]) ** 2).sum().backward()
        ref = torch.cat([lin.weight.grad, lin.bias.grad[:, None]], 1).reshape(-1)
        torch.testing.assert_close(g[i], ref)
    assert rec.records.lrs[0] == 0.5


def test_projection_is_kronecker_of_factor_projections():
    torch.manual_seed(0)
    model = dv.MLP(64, 5, seed=0)
    Xtr, ytr, _, _ = dv.load_digits_split(6, 1)
    rec = dv.GradRecorder(model, proj_dim=16, seed=7)
    with rec.step(torch.arange(6), lr=0.1):
        F.cross_entropy(model(Xtr), ytr).backward()
    full = dv.per_sample_grads(model, Xtr, ytr)
    parts, start = [], 0
    for L in rec._layers:
        n = L.d_out * L.d_in
        G = full[:, start:start + n].reshape(-1, L.d_out, L.d_in)
        Pa = L.P_a if L.P_a is not None else torch.eye(L.d_in, dtype=G.dtype)
        Pb = L.P_b if L.P_b is not None else torch.eye(L.d_out, dtype=G.dtype)
        parts.append((Pb.T @ G @ Pa).reshape(6, -1))
        start += n
    torch.testing.assert_close(rec.records.grads[0], torch.cat(parts, 1))
    assert rec.dim == rec.records.dim == sum(L.dim for L in rec._layers)


def test_recursion_matches_explicit_product():
    rec = _random_records()
    brute = dv.explicit_product_dvemb(rec)
    for method in dv.METHODS:
        emb = dv.compute_dvemb(rec, method=method)
        torch.testing.assert_close(emb.rows, brute, rtol=1e-10, atol=1e-12)


def test_last_iteration_embedding_is_eta_g():
    rec = _random_records()
    emb = dv.compute_dvemb(rec)
    last = emb.row_step == rec.n_steps - 1
    assert torch.equal(emb.rows[last], rec.lrs[-1] * rec.grads[-1])


@pytest.mark.parametrize("block_rows", [1, 3, 4, 7, 100])
def test_blocked_agrees_with_reference(run, block_rows):
    records = run["rec"].records
    ref = dv.compute_dvemb(records, method="reference")
    fast = dv.compute_dvemb(records, method="blocked", block_rows=block_rows)
    torch.testing.assert_close(fast.rows, ref.rows, rtol=1e-9, atol=1e-12)
    rec = _random_records(T=9, B=2, p=4)
    torch.testing.assert_close(dv.compute_dvemb(rec, method="blocked", block_rows=block_rows).rows,
                               dv.explicit_product_dvemb(rec), rtol=1e-10, atol=1e-12)


def test_per_layer_is_block_diagonal_recursion(run):
    records = run["rec"].records
    emb = dv.compute_dvemb(records, per_layer=True)
    for sl in records.layer_slices.values():
        torch.testing.assert_close(emb.rows[:, sl], dv.explicit_product_dvemb(records.columns(sl)))


def test_epoch_and_total_aggregation():
    rec = _random_records()
    emb = dv.compute_dvemb(rec)
    torch.testing.assert_close(emb.by_epoch(0) + emb.by_epoch(1), emb.total)
    manual = torch.zeros_like(emb.total)
    for r, i in zip(emb.rows, emb.row_index):
        manual[i] += r
    torch.testing.assert_close(manual, emb.total)


def test_checkpointing_equals_truncated_run():
    rec = _random_records(T=8)
    cps = dv.influence_checkpointing(rec, 4)
    assert sorted(cps) == [2, 4, 6, 8]
    torch.testing.assert_close(cps[4].rows, dv.explicit_product_dvemb(rec.truncate(4)))


def test_dvemb_tracks_exact_tsloo():
    r = _run(lr=1e-3)      # small steps: the first-order estimate (Eq. 1) is nearly exact
    gte = dv.per_sample_grads(r["model"], r["Xte"], r["yte"])
    emb = dv.compute_dvemb(r["rec"].records)
    pts = torch.arange(r["sched"].n_train)
    for removal, E in (("all", emb.total), ("last", emb.by_epoch(max(r["sched"].epochs)))):
        gt = dv.tsloo_exact(r["m0"], r["Xtr"], r["ytr"], r["sched"], r["lr"], pts, r["Xte"],
                            r["yte"], removal=removal, chunk=17, show_progress=False)
        est = dv.influence(E, gte)
        rho = np.mean([spearmanr(est[:, j], gt[:, j]).statistic for j in range(gt.shape[1])])
        assert rho > 0.99, (removal, rho)
        assert float((est - gt).norm() / gt.norm()) < 0.02, float((est - gt).norm() / gt.norm())


def test_exact_tsloo_batched_matches_single_retraining(run):
    r = run
    p = 5
    gt = dv.tsloo_exact(r["m0"], r["Xtr"], r["ytr"], r["sched"], r["lr"], [p], r["Xte"], r["yte"],
                        removal="last", show_progress=False)
    last = max(r["sched"].epochs)

    def retrain(drop):
        m = copy.deepcopy(r["m0"])
        for t, idx in enumerate(r["sched"].batches):
            keep = idx if (drop is None or r["sched"].epochs[t] != last) else idx[idx != drop]
            m.zero_grad()
            (F.cross_entropy(m(r["Xtr"][keep]), r["ytr"][keep], reduction="sum") / len(idx)).backward()
            with torch.no_grad():
                for prm in m.parameters():
                    prm -= r["lr"] * prm.grad
        with torch.no_grad():
            return F.cross_entropy(m(r["Xte"]), r["yte"], reduction="none")

    torch.testing.assert_close(gt[0], retrain(p) - retrain(None), rtol=1e-7, atol=1e-12)


def test_baselines_match_formulas(run):
    r = run
    G = dv.per_sample_grads(r["model"], r["Xtr"], r["ytr"])
    g = dv.per_sample_grads(r["model"], r["Xte"], r["yte"])
    H = dv.hessian(r["model"], r["Xtr"], r["ytr"])
    # Hessian of the summed loss: its product with a vector is the derivative of the gradient
    v = torch.randn(H.shape[0], dtype=H.dtype)
    eps = 1e-6
    m = copy.deepcopy(r["model"])

    def total_grad(model):
        return dv.per_sample_grads(model, r["Xtr"], r["ytr"]).sum(0)

    def shift(model, step):
        with torch.no_grad():
            start = 0
            for lin in (model.fc1, model.fc2):
                n = lin.weight.numel() + lin.bias.numel()
                block = step[start:start + n].reshape(lin.out_features, lin.in_features + 1)
                lin.weight += block[:, :-1]
                lin.bias += block[:, -1]
                start += n

    shift(m, eps * v); gp = total_grad(m)
    shift(m, -2 * eps * v); gm = total_grad(m)
    torch.testing.assert_close(H @ v, (gp - gm) / (2 * eps), rtol=1e-4, atol=1e-6)
    lam = 0.5
    IF = dv.influence_function(G, g, H, lam)
    torch.testing.assert_close(IF, G @ torch.linalg.inv(H + lam * torch.eye(len(H), dtype=H.dtype)) @ g.T)
    sweep = dv.influence_function_sweep(G, g, H, [lam, 2.0])
    torch.testing.assert_close(sweep[lam], IF)
    torch.testing.assert_close(sweep[2.0][:, 0], dv.influence_function(G, g[0], H, 2.0))
    torch.testing.assert_close(dv.grad_dot(G, g), G @ g.T)
    rec = r["rec"].records
    tr = dv.tracin(rec, r["hist"]["test_grads"])
    manual = torch.zeros_like(tr)
    for t in range(rec.n_steps):
        for row, i in enumerate(rec.indices[t]):
            manual[i] += rec.lrs[t] * rec.grads[t][row] @ r["hist"]["test_grads"][t].T
    torch.testing.assert_close(tr, manual)


def test_deterministic():
    a, b = _run(n_train=24, n_epochs=1), _run(n_train=24, n_epochs=1)
    assert all(torch.equal(x, y) for x, y in zip(a["rec"].records.grads, b["rec"].records.grads))


def test_tinygpt_recording_runs():
    from iclr25.tinygpt import TinyGPT, TinyGPTConfig

    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(vocab_size=32, d_model=8, n_layers=1, n_heads=2, d_ff=16, max_len=8))
    rec = dv.GradRecorder(model, proj_dim=4)
    stream = torch.randint(0, 32, (200,))
    hist = dv.train_tinygpt_sgd(model, stream, stream, n_steps=5, batch_size=2, seq_len=6, lr=0.1,
                                warmup=2, n_val=3, checkpoints=[2, 5], recorder=rec)
    assert rec.records.n_steps == 5 and rec.records.grads[0].shape == (2, rec.dim)
    assert set(hist["val_grads"]) == {2, 5} and hist["val_grads"][5].shape == (3, rec.dim)
    emb = dv.compute_dvemb(rec.records)
    assert emb.total.shape == (10, rec.dim)


def test_clear_errors():
    model = dv.MLP(64, 4)
    with pytest.raises(ValueError, match="perfect square"):
        dv.GradRecorder(model, proj_dim=10)
    with pytest.raises(ValueError, match="valid: mean, sum"):
        dv.GradRecorder(model, loss_reduction="avg")
    with pytest.raises(ValueError, match="Linear layers"):
        dv.GradRecorder(model, layers=["fc9"])
    with pytest.raises(ValueError, match="no steps recorded"):
        dv.compute_dvemb(dv.Records())
    with pytest.raises(ValueError, match="valid: auto, blocked, reference"):
        dv.compute_dvemb(_random_records(), method="fast")
    with pytest.raises(ValueError, match="test_grads must be"):
        dv.influence(torch.zeros(3, 5), torch.zeros(4))
    with pytest.raises(ValueError, match="valid: last, all"):
        dv.tsloo_exact(model, None, None, dv.make_schedule(4, 2, 1), 0.1, [0], None, None,
                       removal="first")
    with pytest.raises(ValueError, match="digits has 1797"):
        dv.load_digits_split(1800, 10)
    with pytest.raises(ProfileError, match="valid"):
        dv.fig3("smoke", n_epoch=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        dv.regimes("huge")
    with pytest.raises(FloatingPointError, match="learning rate"):
        rec = dv.Records()
        g = torch.full((2, 3), 1e3, dtype=torch.float64)
        for t in range(40):
            rec.append(g, 1e3, [0, 1])
        dv.compute_dvemb(rec, method="reference")


def test_mnist_idx_loader_on_generated_files(tmp_path):
    import gzip

    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    labels = np.array([7, 0, 9], dtype=np.uint8)
    ip, lp = tmp_path / "imgs-idx3-ubyte.gz", tmp_path / "labels-idx1-ubyte"
    with gzip.open(ip, "wb") as fh:
        fh.write((0x803).to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in (3, 28, 28))
                 + imgs.tobytes())
    lp.write_bytes((0x801).to_bytes(4, "big") + (3).to_bytes(4, "big") + labels.tobytes())
    X, y = dv.load_mnist_idx(ip, lp)
    assert X.shape == (3, 784) and y.tolist() == [7, 0, 9]
    np.testing.assert_allclose(X[1].numpy(), imgs[1].reshape(-1) / 255.0)
    with pytest.raises(ValueError, match="magic"):
        dv.load_mnist_idx(lp, lp)
    with pytest.raises(FileNotFoundError, match="IDX"):
        dv.load_mnist_idx(tmp_path / "missing", lp)

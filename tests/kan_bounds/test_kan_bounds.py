"""Chapter 15: bases against closed forms and brute force, the model against pykan, the measures'
structure, training and the errors bad input gets."""

import math

import numpy as np
import pytest
import torch

import iclr25.kan_bounds as kb
from iclr25.profiles import ProfileError


def _cubic_closed_form(s):
    """Cardinal cubic B-spline on [0, 4) (knots 0..4), by its four polynomial pieces."""
    s = np.asarray(s, dtype=float)
    out = np.zeros_like(s)
    a = (0 <= s) & (s < 1); out[a] = s[a] ** 3 / 6
    b = (1 <= s) & (s < 2); t = s[b] - 1; out[b] = (-3 * t ** 3 + 3 * t ** 2 + 3 * t + 1) / 6
    c = (2 <= s) & (s < 3); t = s[c] - 2; out[c] = (3 * t ** 3 - 6 * t ** 2 + 4) / 6
    d = (3 <= s) & (s < 4); t = s[d] - 3; out[d] = (1 - t) ** 3 / 6
    return out


@pytest.mark.parametrize("backend", kb.BACKENDS)
def test_cubic_basis_matches_closed_form(backend):
    G, k, lo, hi = 5, 3, -1.0, 1.0
    h = (hi - lo) / G
    x = torch.linspace(-2.5, 2.5, 401, dtype=torch.float64)[:, None]
    B = kb.bspline_basis(x, G, k, (lo, hi), backend=backend)[:, 0].numpy()
    u = (x[:, 0].numpy() - (lo - k * h)) / h
    want = np.stack([_cubic_closed_form(u - j) for j in range(G + k)], 1)
    np.testing.assert_allclose(B, want, atol=1e-12)


@pytest.mark.parametrize("backend", ["fast", "torch"])
@pytest.mark.parametrize("k", [0, 1, 2, 3, 4])
def test_fast_and_reference_agree_values_and_gradients(k, backend):
    x = (torch.randn(64, 3, dtype=torch.float64) * 1.3)
    fast = kb.bspline_basis(x, 6, k, (-1.5, 1.0), backend=backend)
    ref = kb.bspline_basis(x, 6, k, (-1.5, 1.0), backend="reference")
    assert fast.shape == (64, 3, 6 + k)
    torch.testing.assert_close(fast, ref, atol=1e-12, rtol=0)
    if k == 0:          # piecewise constant: no gradient to compare
        return
    g = torch.randn_like(fast)
    xf = x.clone().requires_grad_(True); xr = x.clone().requires_grad_(True)
    (gf,) = torch.autograd.grad((kb.bspline_basis(xf, 6, k, (-1.5, 1.0), backend=backend) * g).sum(), xf)
    (gr,) = torch.autograd.grad((kb.bspline_basis(xr, 6, k, (-1.5, 1.0), backend="reference") * g).sum(), xr)
    torch.testing.assert_close(gf, gr, atol=1e-10, rtol=0)


def test_fast_basis_gradcheck():
    x = (torch.rand(20, 2, dtype=torch.float64) * 2.6 - 1.3).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: kb.bspline_uniform(z, 4, 3), (x,))
    assert torch.autograd.gradcheck(lambda z: kb.kan_basis(z, 4, 3, backend="fast"), (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_kernel_matches_reference_with_silu(dtype):
    assert kb.HAVE_NUMBA
    x = torch.randn(257, 7, dtype=dtype) * 2
    a = kb.kan_basis(x, 5, 3, backend="fast")
    b = kb.kan_basis(x, 5, 3, backend="reference")
    assert a.shape == (257, 7, 9) and a.dtype == dtype
    torch.testing.assert_close(a, b, atol=1e-6 if dtype == torch.float32 else 1e-12, rtol=0)


def test_partition_of_unity_inside_grid():
    x = torch.rand(100, 2, dtype=torch.float64) * 2 - 1
    B = kb.bspline_basis(x, 5, 3)
    torch.testing.assert_close(B.sum(-1), torch.ones(100, 2, dtype=torch.float64))


def test_max_slope_closed_forms():
    assert kb.bspline_max_slope(1) == pytest.approx(1.0)
    assert kb.bspline_max_slope(3, 0.5) == pytest.approx(2 / 3 / 0.5, rel=1e-6)
    x = torch.linspace(-6, 6, 200001, dtype=torch.float64)
    slope = torch.sigmoid(x) * (1 + x * (1 - torch.sigmoid(x)))
    assert kb.SILU_MAX_SLOPE == pytest.approx(float(slope.max()), abs=1e-6)


def test_layer_is_coefficient_matrix_times_basis():
    torch.manual_seed(1)
    model = kb.KAN([3, 4, 2], grid_size=4, dtype=torch.float64)
    x = torch.rand(30, 3, dtype=torch.float64) * 2 - 1
    Cs, Bs = model.coef_matrices(), model.basis(x)
    z = x
    for C, B, layer in zip(Cs, Bs, model.layers):
        assert C.shape == (layer.out_dim, layer.in_dim * layer.n_basis)
        z = B @ C.T
    torch.testing.assert_close(z, model(x))
    # brute force: y_j = sum_i phi_{j,i}(x_i), edge by edge
    L = model.layers[0]
    y = torch.zeros(30, 4, dtype=torch.float64)
    for j in range(4):
        for i in range(3):
            xi = x[:, i:i + 1]
            b = torch.cat([torch.nn.functional.silu(xi), kb.bspline_reference(xi, kb.extended_grid(4, 3, dtype=torch.float64), 3)[:, 0]], 1)
            y[:, j] += b @ L.coef[j, i]
    torch.testing.assert_close(y, L(x))


def test_backends_agree_on_model_gradients():
    torch.manual_seed(2)
    m = kb.KAN([4, 5, 3, 1], dtype=torch.float64)
    x = torch.rand(50, 4, dtype=torch.float64) * 3 - 1.5
    grads = {}
    for be in kb.BACKENDS:
        m.zero_grad(); m.set_backend(be)
        (m(x) ** 2).sum().backward()
        grads[be] = [p.grad.clone() for p in m.parameters()]
    for be in ("fast", "torch"):
        for a, b in zip(grads[be], grads["reference"]):
            torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_matches_pykan_on_identical_coefficients():
    kan = pytest.importorskip("kan")
    pk = kan.KAN(width=[4, 6, 3, 1], grid=5, k=3, auto_save=False, seed=0, noise_scale=0.5).speed()
    with torch.no_grad():                     # non-trivial node/subnode affines are folded too
        pk.node_scale[0].mul_(1.5); pk.node_bias[0].add_(0.1); pk.subnode_bias[1].add_(-0.2)
    ours = kb.KAN.from_pykan(pk)
    x = torch.rand(500, 4) * 2.4 - 1.2
    with torch.no_grad():
        assert float((pk(x) - ours(x)).abs().max()) < 1e-5


def test_spline_lipschitz_bounds_numerical_slope():
    torch.manual_seed(3)
    layer = kb.KANLayer(2, 3, grid_size=5, init_scale=1.0, dtype=torch.float64)
    xs = torch.linspace(-4, 4, 20001, dtype=torch.float64)
    X = xs[:, None].expand(-1, 2).contiguous()
    phi = torch.einsum("bik,jik->bji", layer.basis(X), layer.coef.detach())
    slope = (phi[1:] - phi[:-1]).abs().amax(0) / (xs[1] - xs[0])    # (out, in)
    lip = kb.spline_lipschitz(layer)
    assert torch.all(slope <= lip.T.T + 1e-9)
    assert torch.all(slope >= 0.3 * lip)                             # not absurdly loose


def test_network_lipschitz_bounds_finite_differences():
    torch.manual_seed(4)
    m = kb.KAN([3, 5, 2], dtype=torch.float64)
    x = torch.rand(200, 3, dtype=torch.float64) * 2 - 1
    d = torch.randn(200, 3, dtype=torch.float64) * 1e-3
    with torch.no_grad():
        ratio = (m(x + d) - m(x)).abs().amax(1) / d.abs().amax(1)
    assert float(ratio.max()) <= kb.network_lipschitz(m)


def test_measures_are_one_homogeneous_in_each_layer():
    torch.manual_seed(5)
    m = kb.KAN([4, 6, 5, 1])
    X = torch.rand(100, 4) * 2 - 1
    base = kb.measures(m, X)
    with torch.no_grad():
        m.layers[1].coef.mul_(3.0)
    scaled = kb.measures(m, X)
    for name in ("l1", "bartlett"):
        assert scaled[name] == pytest.approx(3.0 * base[name], rel=1e-5)


def test_zero_nodes_change_only_the_log_factor():
    torch.manual_seed(6)
    m = kb.KAN([4, 6, 5, 1])
    X = torch.rand(100, 4) * 2 - 1
    wide = kb.add_zero_nodes(m, 2, 40)
    assert wide.widths == [4, 6, 45, 1]
    with torch.no_grad():
        torch.testing.assert_close(wide(X), m(X))
    ratio = kb.l1_measure(wide, X) / kb.l1_measure(m, X)
    assert ratio == pytest.approx(kb.log_factor(wide) / kb.log_factor(m), rel=1e-5)
    assert kb.bartlett_measure(wide, X) / kb.bartlett_measure(m, X) == pytest.approx(
        kb.log_factor(wide) / kb.log_factor(m), rel=1e-4)


def test_l1_measure_closed_form_one_layer():
    layer_model = kb.KAN([1, 1], grid_size=2, k=1, base=False, dtype=torch.float64)
    with torch.no_grad():
        layer_model.layers[0].coef.copy_(torch.tensor([[[1.0, -2.0, 0.5]]], dtype=torch.float64))
    X = torch.tensor([[0.5], [-2.0], [1.0], [0.0]], dtype=torch.float64)
    # B_X = 2, n = 4, Lip(b) = 1/h = 1, ||C||_1 = 3.5, log(max n K) = log(3)
    assert kb.l1_measure(layer_model, X) == pytest.approx(2 / 2 * 3.5 * math.sqrt(math.log(3)))
    assert kb.l1_measure(layer_model, X, a=1) == pytest.approx(3.5 * math.log(3))


def test_rkhs_layer_norms_and_lipschitz():
    torch.manual_seed(7)
    m = kb.LowRankRKHSKAN([2, 3, 1], rank=2, lengthscale=0.7, dtype=torch.float64)
    L = m.layers[0]
    # ||g_s||_H^2 = beta^T K beta, brute force over the centres
    K = torch.tensor([[math.exp(-(a - b) ** 2 / (2 * 0.7 ** 2)) for b in L.centers.tolist()]
                      for a in L.centers.tolist()], dtype=torch.float64)
    want = torch.sqrt(torch.einsum("sm,mn,sn->s", L.beta.detach(), K, L.beta.detach()))
    torch.testing.assert_close(L.rkhs_norms().detach(), want)
    xs = torch.linspace(-4, 4, 8001, dtype=torch.float64)[:, None]
    g = L.basis(xs.expand(-1, 2).contiguous()).detach()[:, 0]        # (n, r)
    slope = float(((g[1:] - g[:-1]).abs() / (xs[1, 0] - xs[0, 0])).max())
    assert slope <= kb.basis_lipschitz(L) + 1e-9
    X = torch.rand(50, 2, dtype=torch.float64)
    r1 = kb.rkhs_measure(m, X)
    with torch.no_grad():
        m.layers[1].coef.mul_(2)
    assert kb.rkhs_measure(m, X) == pytest.approx(2 * r1)


def test_dropout_modes_keep_expectation_and_eval_is_deterministic():
    torch.manual_seed(8)
    m = kb.KAN([3, 4, 1], dropout=0.1, dtype=torch.float64)
    x = torch.rand(10, 3, dtype=torch.float64)
    m.eval()
    with torch.no_grad():
        clean = m(x)
        torch.testing.assert_close(m(x), clean)
    m.train()
    L = m.layers[0]
    with torch.no_grad():
        for mode in kb.DROPOUT_MODES:
            L.dropout_mode = mode
            mean = torch.stack([L(x) for _ in range(4000)]).mean(0)
            m.eval(); want = L(x); m.train()
            torch.testing.assert_close(mean, want, atol=0.05, rtol=0.05)


def test_regression_data_and_random_targets():
    d = kb.regression("f1", 200, 100, seed=1)
    assert d.X_train.shape == (200, 4) and d.y_test.shape == (100, 1)
    assert abs(float(d.y_train.mean())) < 1e-5 and float(d.y_train.std()) == pytest.approx(1, rel=0.01)
    X = d.X_test.double().numpy()
    r = kb.regression("f1", 200, 100, random_frac=1.0, seed=1)
    torch.testing.assert_close(r.X_train, d.X_train)
    assert sorted(r.y_train[:, 0].tolist()) == pytest.approx(sorted(d.y_train[:, 0].tolist()))
    assert abs(np.corrcoef(r.y_train[:, 0], d.y_train[:, 0])[0, 1]) < 0.3
    assert np.isfinite(kb.f2(X)).all()


def test_digits_split():
    d = kb.digits(300, random_frac=0.5, seed=0)
    assert d.X_train.shape == (300, 64) and d.X_test.shape == (1497, 64) and d.n_classes == 10
    assert float(d.X_train.min()) >= -1 and float(d.X_train.max()) <= 1


def test_training_lowers_loss_and_logs():
    cfg = kb.sweep("smoke", n_steps=80)          # the sweep counts SGD steps: 80 = 20 epochs of 4 batches
    model, h = kb.fit_regression(cfg, target="f2", hidden=4, n_train=200, seed=0)
    assert h.train_loss[-1] < 0.8 * h.train_loss[0]
    assert h.unit == "steps" and h.epoch[-1] == 80 and len(h.epoch) == 10
    assert {"l1", "bartlett", "bound", "main_term", "main_term_spectral", "complexity"} <= set(h.measures)
    np.testing.assert_allclose(h.gap, np.array(h.test_loss) - np.array(h.train_loss))
    # noisy test targets: test MSE = excess risk (MSE against f) + noise variance, up to sampling
    d = kb.regression("f2", 200, cfg.n_test, noise=cfg.noise, seed=0)
    assert d.noise_var == pytest.approx(cfg.noise ** 2)
    assert abs(h.test_loss[-1] - h.excess[-1] - d.noise_var) < 0.1
    _, h2 = kb.fit_regression(cfg, target="f2", hidden=4, n_train=200, seed=0)
    assert h2.train_loss == h.train_loss                      # deterministic


def test_minibatch_sgd_is_plain_sgd():
    """One epoch of batch_size = n is one full-batch SGD step: compare with a hand-made step."""
    d = kb.regression("f1", 64, 10, seed=0)
    torch.manual_seed(0)
    a = kb.KAN([4, 2, 1], dtype=torch.float32)
    b = kb.KAN([4, 2, 1]); b.load_state_dict(a.state_dict())
    kb.train(a, d, n_steps=1, lr=0.1, optimizer="sgd", batch_size=64, log_bounds=False)
    loss = ((b(d.X_train) - d.y_train) ** 2).mean()
    grads = torch.autograd.grad(loss, list(b.parameters()))
    with torch.no_grad():
        for p, g in zip(b.parameters(), grads):
            p -= 0.1 * g
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q)


def test_classification_training_runs():
    d = kb.digits(200, seed=0)
    m = kb.LowRankRKHSKAN([64, 6, 10], rank=2)
    h = kb.train(m, d, n_steps=30, lr=1e-2, log_every=10)
    assert len(h.train_acc) == 3 and "rkhs" in h.measures and h.train_loss[-1] < h.train_loss[0]


@pytest.mark.parametrize("bad, match", [
    (lambda: kb.bspline_basis(torch.zeros(3, 2), backend="triton"), "valid: fast, torch, reference"),
    (lambda: kb.bspline_basis(torch.zeros(3), 5, 3), "2-D"),
    (lambda: kb.KANLayer(2, 2, grid_range=(1, -1)), "hi > lo"),
    (lambda: kb.KANLayer(2, 2, grid_size=0), "positive integer"),
    (lambda: kb.KAN([4]), "at least 2"),
    (lambda: kb.KAN([4, 2], dropout=1.0), r"\[0, 1\)"),
    (lambda: kb.KAN([4, 2], dropout_mode="weight"), "valid: edge, node"),
    (lambda: kb.KAN([4, 2])(torch.zeros(3, 5)), r"\(batch, 4\)"),
    (lambda: kb.regression("f3"), "valid: f1, f2"),
    (lambda: kb.regression("f1", random_frac=1.5), r"\[0, 1\]"),
    (lambda: kb.digits(5000), "1796"),
    (lambda: kb.l1_measure(kb.KAN([2, 1]), torch.zeros(3, 2), a=2), "0.5 or 1"),
    (lambda: kb.add_zero_nodes(kb.KAN([2, 3, 1]), 0, 2), "hidden layer"),
    (lambda: kb.train(kb.KAN([3, 1]), kb.regression("f1", 10, 5), n_steps=1), "4 features"),
    (lambda: kb.train(kb.KAN([4, 1]), kb.regression("f1", 10, 5), n_steps=1, optimizer="lbfgs"), "valid: adam, sgd"),
    (lambda: kb.train(kb.KAN([4, 1]), kb.regression("f1", 10, 5), n_steps=1, batch_size=0), "batch_size"),
    (lambda: kb.train(kb.KAN([4, 1]), kb.regression("f1", 10, 5), n_steps=1, momentum=1.0), "momentum"),
    (lambda: kb.fit_regression(kb.sweep("smoke"), target="f1"), "hidden"),
    (lambda: kb.LowRankRKHSKAN([2, 2, 1], rank=[1]), "one rank per layer"),
])
def test_bad_input_gets_clear_errors(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()


def test_configs_reject_unknown_names():
    with pytest.raises(ProfileError, match="valid"):
        kb.sweep("smoke", n_epochs=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        kb.digits_run("huge")
    assert kb.sweep("paper").paper_widths == (4, 50, 100, 50, 1) and 50 in kb.sweep("paper").hidden
    assert kb.sweep("book").paper_widths == (4, 50, 100, 50, 1) and kb.sweep("book").paper_n == 10_000


def _write_idx(path, arr, gz=False):
    import gzip
    import struct
    arr = np.asarray(arr, dtype=np.uint8)
    head = bytes([0, 0, 8, arr.ndim]) + struct.pack(">" + "I" * arr.ndim, *arr.shape)
    (gzip.open if gz else open)(path, "wb").write(head + arr.tobytes())


def test_mnist_loader_on_tiny_generated_files(tmp_path):
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(12, 28, 28))
    labels = rng.integers(0, 10, size=12)
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", imgs, gz=True)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", labels)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", imgs[:5])
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", labels[:5], gz=True)
    d = kb.mnist(tmp_path, n_train=10, n_test=5)
    assert d.X_train.shape == (10, 784) and d.X_test.shape == (5, 784)
    np.testing.assert_allclose(d.X_train[3].numpy(), imgs[3].ravel() / 127.5 - 1, atol=1e-6)
    assert d.y_train.tolist() == labels[:10].tolist() and d.task == "classification"
    with pytest.raises(ValueError, match="n_train must be in 1..12"):
        kb.mnist(tmp_path, n_train=50, n_test=5)


def test_mnist_loader_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        kb.mnist(tmp_path)
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="magic"):
        kb.read_idx(tmp_path / "bad")


def test_a_users_first_mistakes_get_clear_messages():
    """1-D regression targets, float64 inputs, labels out of range: errors that say what is
    expected; inputs outside the spline grid: a warning with the fraction and the scaler."""
    import warnings as _w

    from iclr25.kan_bounds.data import Dataset

    model = kb.KAN([2, 3, 1])
    X = torch.rand(20, 2) * 2 - 1
    y = X.sum(1, keepdim=True)
    ok = Dataset(X, y, X, y, "regression")
    with _w.catch_warnings():
        _w.simplefilter("error")
        kb.check_data(model, ok)                       # inside the grid: silent
    with pytest.raises(ValueError, match=r"expects \(20, 1\) \(use y\[:, None\]\)"):
        kb.train(model, Dataset(X, y[:, 0], X, y[:, 0], "regression"), n_steps=1)
    with pytest.raises(TypeError, match="float64 but the model's parameters are torch.float32"):
        kb.train(model, Dataset(X.double(), y.double(), X.double(), y.double(), "regression"), n_steps=1)
    with pytest.raises(TypeError, match="convert the input"):
        model(X.double())
    far = X.clone()
    far[:5, 0] = 3.0                                   # 5 of 40 entries outside [-1, 1]
    with pytest.warns(UserWarning, match=r"12\.5% of the training inputs lie outside the spline "
                                         r"grid \[-1, 1\].*MinMaxScaler"):
        kb.check_data(model, Dataset(far, y, X, y, "regression"))
    clf = kb.KAN([2, 3, 3])
    labels = torch.tensor([0, 1, 2, 3] * 5)
    with pytest.raises(ValueError, match=r"labels outside 0\.\.2"):
        kb.check_data(clf, Dataset(X, labels, X, labels, "classification"))


def test_prediction_outside_the_grid_warns_as_training_does():
    """After training (eval mode), inputs outside the spline grid warn with their share; inside
    it, and during train()'s own evaluations, nothing does."""
    import warnings as _w

    data = kb.regression("f1", 64, 32, seed=0)
    model = kb.KAN([4, 3, 1])
    with _w.catch_warnings():
        _w.simplefilter("error")
        kb.train(model, data, n_steps=2, log_bounds=False)   # inside the grid: silent, eval mode after
        model(data.X_test)
    assert not model.training
    far = data.X_test.clone()
    far[:8, 0] = 2.5                                       # 8 of 128 entries
    with pytest.warns(kb.OutOfGridWarning, match=r"6\.2% of the inputs to the model lie outside "
                                                 r"the spline grid \[-1, 1\].*MinMaxScaler") as rec:
        model(far)
    assert rec[0].filename == __file__                     # points at the caller's line
    assert kb.outside_grid_share(far, (-1, 1)) == pytest.approx(8 / 128)
    model.train()
    with _w.catch_warnings():
        _w.simplefilter("error")
        model(far)                                         # training-mode forward: check_data's job
    # check_data warns about the test split too
    with pytest.warns(kb.OutOfGridWarning, match="of the test inputs lie outside"):
        kb.check_data(model, kb.Dataset(data.X_train, data.y_train, far, data.y_test, "regression"))


def test_numpy_inputs_are_converted_or_refused_with_the_right_message():
    import warnings as _w

    from iclr25.kan_bounds.data import Dataset

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(30, 2))
    y = X.sum(1, keepdims=True)
    model = kb.KAN([2, 3, 1])
    # float32 numpy arrays become float32 tensors and train
    d32 = Dataset(X.astype(np.float32), y.astype(np.float32), X.astype(np.float32),
                  y.astype(np.float32), "regression")
    assert isinstance(d32.X_train, torch.Tensor) and d32.X_train.dtype == torch.float32
    with _w.catch_warnings():
        _w.simplefilter("error")
        kb.train(model, d32, n_steps=1, log_bounds=False)
    # float64 arrays stay float64: the error names torch dtypes on both sides and the fix
    d64 = Dataset(X, y, X, y, "regression")
    with pytest.raises(TypeError, match=r"X_train is torch\.float64 but the model's parameters are "
                                        r"torch\.float32: use X\.to\(torch\.float32\)"):
        kb.train(model, d64, n_steps=1)
    # a numpy array given to the model itself, or set on a Dataset afterwards, is refused clearly
    with pytest.raises(TypeError, match=r"the input is a numpy\.ndarray, not a torch\.Tensor: "
                                        r"convert it with torch\.as_tensor\(X, dtype=torch\.float32\)"):
        model(X.astype(np.float32))
    d32.X_test = X
    with pytest.raises(TypeError, match=r"X_test is a numpy\.ndarray, not a torch\.Tensor"):
        kb.check_data(model, d32)
    labels = Dataset(X.astype(np.float32), np.arange(30) % 3, X.astype(np.float32), np.arange(30) % 3,
                     "classification")
    assert labels.y_train.dtype == torch.int64
    kb.check_data(kb.KAN([2, 3, 3]), labels)
    with pytest.raises(TypeError, match="y_train: cannot make a tensor of a list"):
        Dataset(X, [["a"], ["b"]], X, y, "regression")

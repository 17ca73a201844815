"""Data for chapter 15: two 4-D regression targets of our choice and sklearn's bundled digits.

The paper's simulated functions could not be read, so ``f1`` and ``f2`` are **ours** (labelled so in
the notebooks); MNIST and CIFAR-10 are not available offline, so the 8x8 digits bundled with
scikit-learn stand in for MNIST. Label noise and random targets follow Zhang et al.'s "rethinking
generalisation" protocol: a fraction of the training targets is replaced by a random permutation
(regression) or by uniform random classes (classification).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["TARGETS", "Dataset", "regression", "digits", "mnist", "read_idx", "f1", "f2"]


def f1(X: np.ndarray) -> np.ndarray:
    """Ours: :math:`\\exp(\\sin(\\pi x_1) + x_2^2) + x_3 x_4` (after pykan's classic example)."""
    return np.exp(np.sin(np.pi * X[:, 0]) + X[:, 1] ** 2) + X[:, 2] * X[:, 3]


def f2(X: np.ndarray) -> np.ndarray:
    """Ours, smoother: :math:`\\tanh(x_1 + x_2) + \\tfrac12 \\cos(x_3) x_4`."""
    return np.tanh(X[:, 0] + X[:, 1]) + 0.5 * np.cos(X[:, 2]) * X[:, 3]


TARGETS = {"f1": f1, "f2": f2}


@dataclass
class Dataset:
    """Train/test tensors and the task (``"regression"`` or ``"classification"``).

    Numpy arrays (or lists, data frames) become tensors of their own dtype (``torch.as_tensor``):
    a float64 array stays float64, and :func:`~iclr25.kan_bounds.train.check_data` then names
    the conversion a float32 model needs. Chapter 15.
    """

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    task: str
    name: str = ""
    y_test_clean: torch.Tensor | None = None   # regression: noise-free test targets f(x)
    noise_var: float = 0.0                     # regression: label-noise variance (the Bayes risk)

    def __post_init__(self):
        for name in ("X_train", "y_train", "X_test", "y_test", "y_test_clean"):
            v = getattr(self, name)
            if v is None or isinstance(v, torch.Tensor):
                continue
            try:
                setattr(self, name, torch.as_tensor(np.asarray(v)))
            except (TypeError, ValueError, RuntimeError) as e:
                raise TypeError(f"{name}: cannot make a tensor of a {type(v).__name__} ({e}); "
                                "give a numeric array or tensor") from None

    @property
    def n_classes(self) -> int:
        return int(self.y_train.max()) + 1 if self.task == "classification" else 0


def _check_fractions(noise: float, random_frac: float) -> None:
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if not 0.0 <= random_frac <= 1.0:
        raise ValueError(f"random_frac must be in [0, 1], got {random_frac}")


def regression(target: str = "f1", n_train: int = 1000, n_test: int = 1000, *, noise: float = 0.0,
               random_frac: float = 0.0, seed: int = 0, noisy_test: bool = True,
               dtype=torch.float32) -> Dataset:
    """``x ~ U[-1, 1]^4``, ``y = f(x)`` standardised (train mean/std), plus Gaussian label noise of
    standard deviation ``noise`` (in units of the target's std), and a fraction ``random_frac`` of
    training targets replaced by a random permutation of the targets.

    With ``noisy_test`` (default) the test targets carry the same noise, so test loss minus train
    loss is the generalisation gap of one distribution; ``y_test_clean`` holds :math:`f(x)` of the
    test points, whose MSE is the excess risk (test MSE minus the noise variance ``noise_var`` in
    expectation). Introduced in chapter 15, notebook ``02-bound-vs-gap``.
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; valid: {', '.join(TARGETS)}")
    if n_train < 2 or n_test < 1:
        raise ValueError(f"need n_train >= 2 and n_test >= 1, got {n_train}, {n_test}")
    _check_fractions(noise, random_frac)
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n_train + n_test, 4))
    y = TARGETS[target](X)
    mu, sd = y[:n_train].mean(), y[:n_train].std()
    y = (y - mu) / sd
    ytr, clean = y[:n_train].copy(), y[n_train:]
    ytr += noise * rng.standard_normal(n_train)
    m = int(round(random_frac * n_train))
    if m:
        idx = rng.choice(n_train, m, replace=False)
        ytr[idx] = rng.permutation(ytr)[:m]
    yte = clean + noise * rng.standard_normal(n_test) if noisy_test else clean
    t = lambda a: torch.as_tensor(a, dtype=dtype)
    return Dataset(t(X[:n_train]), t(ytr[:, None]), t(X[n_train:]), t(yte[:, None]), "regression",
                   f"{target} (ours), noise {noise}, random {random_frac}",
                   y_test_clean=t(clean[:, None]), noise_var=float(noise) ** 2 if noisy_test else 0.0)


def digits(n_train: int | None = None, *, random_frac: float = 0.0, seed: int = 0,
           dtype=torch.float32) -> Dataset:
    """sklearn's bundled 8x8 digits (1,797 images, standing in for MNIST), pixels scaled to
    ``[-1, 1]``, a random split with ``n_train`` training images (default: half), and a fraction
    ``random_frac`` of training labels replaced by uniform random classes.
    Introduced in chapter 15, notebook ``03-digits-and-low-rank``.
    """
    from sklearn.datasets import load_digits

    _check_fractions(0.0, random_frac)
    Xa, ya = load_digits(return_X_y=True)
    n = len(ya)
    n_train = n // 2 if n_train is None else int(n_train)
    if not 1 <= n_train < n:
        raise ValueError(f"n_train must be in 1..{n - 1} (the digits have {n} images), got {n_train}")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    Xa = Xa / 8.0 - 1.0
    tr, te = perm[:n_train], perm[n_train:]
    ytr = ya[tr].copy()
    m = int(round(random_frac * n_train))
    if m:
        idx = rng.choice(n_train, m, replace=False)
        ytr[idx] = rng.integers(0, 10, size=m)
    return Dataset(torch.as_tensor(Xa[tr], dtype=dtype), torch.as_tensor(ytr),
                   torch.as_tensor(Xa[te], dtype=dtype), torch.as_tensor(ya[te]), "classification",
                   f"digits, random labels {random_frac}")


MNIST_FILES = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
               "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


def read_idx(path) -> np.ndarray:
    """Read one IDX file (MNIST's format; ``.gz`` allowed) into a numpy array."""
    import gzip
    import struct
    from pathlib import Path

    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (bad magic number {raw[:4]!r})")
    ndim = raw[3]
    shape = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape} but the file holds {data.size} values")
    return data.reshape(shape)


def mnist(directory, n_train: int = 10_000, n_test: int = 10_000, *, random_frac: float = 0.0,
          seed: int = 0, dtype=torch.float32) -> Dataset:
    """The paper's MNIST setting for a user who has the four IDX files (``.gz`` or not) in
    ``directory``: the first ``n_train`` training and ``n_test`` test images (paper: 10,000 each),
    flattened and scaled to ``[-1, 1]``, with ``random_frac`` random training labels. The book
    itself uses :func:`digits` (no download). Chapter 15, notebook ``03-digits-and-low-rank``.
    """
    from pathlib import Path

    _check_fractions(0.0, random_frac)
    d = Path(directory)
    found = {}
    for key, stem in MNIST_FILES.items():
        for name in (stem, stem + ".gz"):
            if (d / name).exists():
                found[key] = d / name
                break
        else:
            raise FileNotFoundError(
                f"MNIST file {stem}[.gz] not found in {d}; expected the four IDX files "
                f"{', '.join(MNIST_FILES.values())} (from the MNIST distribution)")
    Xtr, ytr = read_idx(found["train_images"]), read_idx(found["train_labels"])
    Xte, yte = read_idx(found["test_images"]), read_idx(found["test_labels"])
    if len(Xtr) != len(ytr) or len(Xte) != len(yte):
        raise ValueError("MNIST images and labels differ in number")
    if not (1 <= n_train <= len(Xtr) and 1 <= n_test <= len(Xte)):
        raise ValueError(f"n_train must be in 1..{len(Xtr)} and n_test in 1..{len(Xte)}, "
                         f"got {n_train}, {n_test}")
    rng = np.random.default_rng(seed)
    Xtr = Xtr[:n_train].reshape(n_train, -1) / 127.5 - 1.0
    Xte = Xte[:n_test].reshape(n_test, -1) / 127.5 - 1.0
    ytr = ytr[:n_train].astype(np.int64).copy()
    m = int(round(random_frac * n_train))
    if m:
        idx = rng.choice(n_train, m, replace=False)
        ytr[idx] = rng.integers(0, 10, size=m)
    return Dataset(torch.as_tensor(Xtr, dtype=dtype), torch.as_tensor(ytr),
                   torch.as_tensor(Xte, dtype=dtype), torch.as_tensor(yte[:n_test].astype(np.int64)),
                   "classification", f"MNIST, random labels {random_frac}")

"""Full-batch training that logs train/test loss, the generalisation gap and the measures (chapter 15)."""

from __future__ import annotations

import warnings

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..progress import progress
from .complexity import measures
from .data import Dataset
from .model import OutOfGridWarning, warn_outside_grid

__all__ = ["History", "train", "bound_terms", "check_data", "OPTIMIZERS", "UNITS", "loss_fn",
           "fit_regression", "run_grid"]

OPTIMIZERS = ("adam", "sgd")
#: what ``n_steps`` of :func:`train` counts
UNITS = ("epochs", "steps")


@dataclass
class History:
    """Per log: ``epoch`` (the epoch, or the SGD step when :func:`train` ran with
    ``unit="steps"``; ``unit`` says which), ``train_loss``, ``test_loss``, ``gap`` (test - train)
    and one list per measure (``l1``, ``bartlett``, ...); ``final`` holds the last row."""

    epoch: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    test_loss: list = field(default_factory=list)
    gap: list = field(default_factory=list)
    excess: list = field(default_factory=list)      # regression: MSE against f(x) on the test inputs
    train_acc: list = field(default_factory=list)
    test_acc: list = field(default_factory=list)
    measures: dict = field(default_factory=dict)
    seconds: float = 0.0
    unit: str = "epochs"

    @property
    def final(self) -> dict:
        out = {"epoch": self.epoch[-1], "train_loss": self.train_loss[-1],
               "test_loss": self.test_loss[-1], "gap": self.gap[-1]}
        if self.excess:
            out["excess"] = self.excess[-1]
        if self.train_acc:
            out.update(train_acc=self.train_acc[-1], test_acc=self.test_acc[-1])
        out.update({k: v[-1] for k, v in self.measures.items()})
        return out

    def frame(self):
        """The history as a ``pandas.DataFrame``."""
        import pandas as pd

        d = {"epoch": self.epoch, "train_loss": self.train_loss, "test_loss": self.test_loss,
             "gap": self.gap}
        if self.excess:
            d["excess"] = self.excess
        if self.train_acc:
            d.update(train_acc=self.train_acc, test_acc=self.test_acc)
        d.update(self.measures)
        return pd.DataFrame(d)


def loss_fn(task: str):
    """MSE for ``"regression"`` (the paper), cross-entropy for ``"classification"``."""
    if task == "regression":
        return F.mse_loss
    if task == "classification":
        return F.cross_entropy
    raise ValueError(f"unknown task {task!r}; valid: regression, classification")


def check_data(model: torch.nn.Module, data: Dataset) -> None:
    """The checks a user's own data meets first, as clear errors (types, shapes, dtypes, labels)
    and an :class:`~iclr25.kan_bounds.model.OutOfGridWarning` when training or test inputs leave
    the spline grid (the B-splines are zero there, only the SiLU branch is left). Called by
    :func:`train`; chapter 15."""
    n_out = model.widths[-1]
    p = next(model.parameters())
    for split in ("train", "test"):
        X, y = getattr(data, f"X_{split}"), getattr(data, f"y_{split}")
        for name, v in ((f"X_{split}", X), (f"y_{split}", y)):
            if not isinstance(v, torch.Tensor):  # set after the Dataset was built (it converts)
                want = torch.int64 if name[0] == "y" and data.task == "classification" else p.dtype
                kind = f"{type(v).__module__}.{type(v).__name__}".replace("builtins.", "")
                raise TypeError(f"{name} is a {kind}, not a torch.Tensor: use "
                                f"torch.as_tensor({name}, dtype={want})")
        if X.dtype != p.dtype:
            raise TypeError(f"X_{split} is {X.dtype} but the model's parameters are {p.dtype}: "
                            f"use X.to({p.dtype}) (or build the model with dtype={X.dtype})")
        if len(y) != len(X):
            raise ValueError(f"X_{split} has {len(X)} rows but y_{split} has {len(y)}")
        if data.task == "regression":
            if tuple(y.shape) != (len(X), n_out):
                hint = " (use y[:, None])" if y.dim() == 1 and n_out == 1 else ""
                raise ValueError(f"y_{split} has shape {tuple(y.shape)}; a regression KAN with "
                                 f"{n_out} output(s) expects ({len(X)}, {n_out}){hint}: a 1-D y "
                                 "would broadcast against the output and train to nothing")
            if y.dtype != p.dtype:
                raise TypeError(f"y_{split} is {y.dtype}; regression targets must be {p.dtype}")
        elif data.task == "classification":
            if y.dim() != 1 or y.dtype not in (torch.int64, torch.int32):
                raise ValueError(f"y_{split} must be a 1-D integer tensor of class labels, got "
                                 f"shape {tuple(y.shape)} and dtype {y.dtype}")
            if len(y) and (int(y.min()) < 0 or int(y.max()) >= n_out):
                raise ValueError(f"y_{split} has labels outside 0..{n_out - 1} (the model has "
                                 f"{n_out} outputs)")
    grid_range = getattr(model.layers[0], "grid_range", None) if hasattr(model, "layers") else None
    if grid_range is not None:
        lo, hi = grid_range
        warn_outside_grid(data.X_train, grid_range, "training inputs",
                          f"scale the inputs into the grid, e.g. sklearn's "
                          f"MinMaxScaler(feature_range=({lo:g}, {hi:g})), or widen grid_range")
        warn_outside_grid(data.X_test, grid_range, "test inputs",
                          "scale them with the scaler fitted on the training inputs, or widen "
                          "grid_range; predictions there are extrapolations")


def bound_terms(model, data: Dataset, *, delta: float = 0.05) -> dict:
    """The bound of :mod:`~iclr25.kan_bounds.bounds` on ``data``'s training sample, for both norm
    choices: ``bound`` and ``main_term`` (``l1``), ``main_term_spectral``, ``complexity`` (the
    network's :math:`\\bar R`, ``l1``), ``vacuous`` and ``loss_range`` (the largest possible
    loss). Chapter 15, notebook ``02-bound-vs-gap``."""
    from .bounds import kan_bound

    kw = dict(loss="mse" if data.task == "regression" else "ce", delta=delta)
    b1 = kan_bound(model, data.X_train, data.y_train, norms="l1", **kw)
    bs = kan_bound(model, data.X_train, data.y_train, norms="spectral", **kw)
    return {"bound": b1["bound"], "main_term": b1["main_term"], "complexity": b1["complexity"],
            "main_term_spectral": bs["main_term"], "bound_spectral": bs["bound"],
            "vacuous": float(b1["vacuous"]), "loss_range": b1["loss_range"]}


def train(model: torch.nn.Module, data: Dataset, *, n_steps: int, lr: float = 1e-2,
          optimizer: str = "adam", batch_size: int | None = None, momentum: float = 0.0,
          dropout: float | None = None, log_every: int | None = None, seed: int = 0,
          desc: str | None = None, log_bounds: bool = True, unit: str = "epochs") -> History:
    """Train ``model`` for ``n_steps`` epochs (``unit="epochs"``) or ``n_steps`` optimiser steps
    (``unit="steps"``), and log every ``log_every`` of the same unit (default ``n_steps // 10``)
    the losses without dropout, the gap, the excess risk (regression with ``y_test_clean``),
    :func:`~iclr25.kan_bounds.complexity.measures` and (``log_bounds``) :func:`bound_terms` on the
    training sample.

    ``batch_size``: ``None`` is full batch (one step per epoch); otherwise one pass over a fresh
    permutation in minibatches per epoch -- with ``optimizer="sgd"`` and ``momentum=0`` the paper's
    stochastic gradient descent. With ``unit="steps"`` the passes continue (a fresh permutation
    each) until ``n_steps`` minibatch updates are done, so runs on different training sizes get the
    same optimisation effort (chapter 15, issue 66: at equal epochs a larger sample meant more SGD
    steps and larger coefficients). ``dropout`` (if given) sets the activation dropout first (0.1:
    the paper's regularised KAN). Chapter 15, notebook ``02-bound-vs-gap``.
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; valid: {', '.join(UNITS)}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
    if int(n_steps) < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if batch_size is not None and int(batch_size) < 1:
        raise ValueError(f"batch_size must be a positive integer or None (full batch), got {batch_size}")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"momentum must be in [0, 1), got {momentum}")
    if data.X_train.shape[1] != model.widths[0]:
        raise ValueError(f"the data have {data.X_train.shape[1]} features but the model expects "
                         f"{model.widths[0]}")
    check_data(model, data)
    if dropout is not None:
        model.set_dropout(dropout)
    n_steps = int(n_steps)
    log_every = max(1, n_steps // 10) if log_every is None else int(log_every)
    torch.manual_seed(seed)
    opt = (torch.optim.Adam(model.parameters(), lr=lr) if optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum))
    crit = loss_fn(data.task)
    hist = History(unit=unit)
    import time
    t0 = time.perf_counter()
    n = len(data.X_train)
    gen = torch.Generator().manual_seed(seed)

    def log(epoch):
        model.eval()
        with torch.no_grad(), warnings.catch_warnings():
            # check_data warned once about inputs outside the grid; not again at every log
            warnings.simplefilter("ignore", OutOfGridWarning)
            out_tr, out_te = model(data.X_train), model(data.X_test)
            tr, te = float(crit(out_tr, data.y_train)), float(crit(out_te, data.y_test))
            if data.task == "regression" and data.y_test_clean is not None:
                hist.excess.append(float(crit(out_te, data.y_test_clean)))
        hist.epoch.append(epoch)
        hist.train_loss.append(tr)
        hist.test_loss.append(te)
        hist.gap.append(te - tr)
        if data.task == "classification":
            hist.train_acc.append(float((out_tr.argmax(1) == data.y_train).float().mean()))
            hist.test_acc.append(float((out_te.argmax(1) == data.y_test).float().mean()))
        extra = bound_terms(model, data) if log_bounds else {}
        for k, v in {**measures(model, data.X_train), **extra}.items():
            hist.measures.setdefault(k, []).append(v)
        model.train()

    def batches():
        if batch_size is None:
            return [None]
        perm = torch.randperm(n, generator=gen)
        return [perm[i:i + int(batch_size)] for i in range(0, n, int(batch_size))]

    def step(idx):
        Xb, yb = (data.X_train, data.y_train) if idx is None else (data.X_train[idx], data.y_train[idx])
        opt.zero_grad(set_to_none=True)
        loss = crit(model(Xb), yb)
        loss.backward()
        opt.step()
        return loss

    def check(loss, t):
        if not torch.isfinite(loss):
            raise FloatingPointError(f"training diverged at {unit[:-1]} {t} (loss {float(loss)}): "
                                     f"lower lr (now {lr}) or use a larger batch_size")

    model.train()
    if unit == "epochs":
        for epoch in progress(range(1, n_steps + 1), desc=desc or "train"):
            for idx in batches():
                loss = step(idx)
            check(loss, epoch)
            if epoch % log_every == 0 or epoch == n_steps:
                log(epoch)
    else:
        bar = progress(total=n_steps, desc=desc or "train")
        t = 0
        while t < n_steps:
            for idx in batches():
                loss = step(idx)
                t += 1
                bar.update(1)
                if t % log_every == 0 or t == n_steps:
                    check(loss, t)
                    log(t)
                if t == n_steps:
                    break
        bar.close()
    hist.seconds = time.perf_counter() - t0
    model.eval()
    return hist


def fit_regression(cfg, *, target: str, noise: float | None = None, random_frac: float = 0.0,
                   dropout: float = 0.0, seed: int = 0, hidden: int | None = None,
                   widths=None, n_train: int | None = None, n_steps: int | None = None,
                   batch_size: int | None = None, log_every: int | None = None,
                   unit: str | None = None):
    """One notebook-02 run: data from :func:`~iclr25.kan_bounds.data.regression` (noisy train and
    test targets, ``cfg.noise`` unless given), a fresh seeded :class:`~iclr25.kan_bounds.model.KAN`
    of shape ``widths`` (or ``[4, hidden, 2 hidden, hidden, 1]``), :func:`train` with ``cfg``'s
    optimiser, step size, batch size and unit (``cfg.unit``: the sweep counts SGD steps, so that
    every training size gets the same number). Returns ``(model, history)``.
    Chapter 15, notebook ``02-bound-vs-gap``."""
    from .data import regression
    from .model import KAN

    if widths is None:
        if hidden is None:
            raise ValueError("give hidden (the KAN [4, h, 2h, h, 1]) or widths")
        widths = (4, int(hidden), 2 * int(hidden), int(hidden), 1)
    noise = cfg.noise if noise is None else noise
    n_train = n_train or cfg.n_trains[-1]
    data = regression(target, n_train, cfg.n_test, noise=noise, random_frac=random_frac, seed=seed)
    torch.manual_seed(seed)
    model = KAN(widths, grid_size=cfg.grid_size)
    steps = n_steps or cfg.n_steps
    hist = train(model, data, n_steps=steps, lr=cfg.lr, optimizer=cfg.optimizer,
                 batch_size=batch_size or cfg.batch_size, dropout=dropout, seed=seed,
                 log_every=log_every or cfg.log_every or None,
                 unit=unit or getattr(cfg, "unit", "epochs"),
                 desc=f"{target} {list(widths)} n={n_train} p={dropout} s={seed}")
    return model, hist


def run_grid(cfg, rows, *, return_histories: bool = False):
    """Run :func:`fit_regression` for every dict in ``rows`` (its keyword arguments: ``target``,
    ``hidden`` or ``widths``, ``n_train``, ``dropout``, ``seed``, ...) and return one row per run with
    its final losses, gap, excess risk, bound terms and parameter count (and, with
    ``return_histories``, the list of :class:`History` s too). Chapter 15, notebook ``02-bound-vs-gap``."""
    import pandas as pd

    out, hists = [], []
    for r in rows:
        model, h = fit_regression(cfg, **r)
        out.append({**r, **h.final, "seconds": h.seconds,
                    "n_params": sum(p.numel() for p in model.parameters())})
        hists.append(h)
    df = pd.DataFrame(out)
    return (df, hists) if return_histories else df

"""The three-regimes run (Fig. 1a, Fig. 4): the core's TinyGPT trained by plain SGD with the
recorder on, on the core's offline Wikipedia text.

Each training sample is one window of ``seq_len + 1`` tokens, used once (index ``t * B + i``), so
every training iteration has its own samples and the data value embeddings tell how much the
samples of each iteration move the final model's validation loss.

Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
"""

from __future__ import annotations

import contextlib
import time

import torch

from .. import tinygpt
from ..tinygpt import lm_loss, lr_schedule
from .recorder import GradRecorder

__all__ = ["lr_schedule", "train_tinygpt_sgd"]  # lr_schedule: the core's (iclr25.tinygpt)


class _PlainSGD(torch.optim.Optimizer):
    """``p <- p - lr * grad``, written out as the recorder's replay assumes (no momentum, no decay)."""

    def __init__(self, params):
        super().__init__(params, {"lr": 0.0})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p -= group["lr"] * p.grad


def _window(stream: torch.Tensor, starts: torch.Tensor, seq_len: int):
    win = torch.stack([stream[s:s + seq_len + 1] for s in starts.tolist()])
    return win[:, :-1], win[:, 1:]


def train_tinygpt_sgd(model, train_stream: torch.Tensor, val_stream: torch.Tensor, *, n_steps: int,
                      batch_size: int, seq_len: int, lr: float, warmup: int, schedule: str = "cosine",
                      min_lr_ratio: float = 0.1, n_val: int = 16, checkpoints=(), seed: int = 0,
                      recorder: GradRecorder | None = None, grad_clip: float | None = None) -> dict:
    """Train ``model`` by SGD on random windows of ``train_stream``, recording every step.

    ``checkpoints`` lists step counts ``k`` at which the per-sample gradients of ``n_val`` fixed
    validation windows are probed (``hist["val_grads"][k]``; ``k = n_steps`` is the final model).
    Returns a history with ``loss``, ``lr`` (per step), ``val_loss`` at the checkpoints and
    ``seconds``.

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    if n_steps < 1 or batch_size < 1 or seq_len < 1 or not lr > 0:
        raise ValueError("n_steps, batch_size, seq_len and lr must be positive")
    for s in (train_stream, val_stream):
        if s.dim() != 1 or s.numel() < seq_len + 2:
            raise ValueError(f"token streams must be 1-D and longer than seq_len + 1 = {seq_len + 1}")
    gen = torch.Generator().manual_seed(seed)
    vstarts = torch.randint(0, val_stream.numel() - seq_len - 1, (n_val,), generator=gen)
    xv, yv = _window(val_stream, vstarts, seq_len)
    ckpts = sorted(set(int(k) for k in checkpoints))
    bad = [k for k in ckpts if not 0 <= k <= n_steps]
    if bad:
        raise ValueError(f"checkpoints must be step counts in 0..{n_steps}, got {bad}")
    hist = {"loss": [], "lr": [], "val_grads": {}, "val_loss": {}}

    def probe(k):
        model.zero_grad()
        if recorder is not None:
            with recorder.probe() as pr:
                loss = lm_loss(model(xv), yv)
                loss.backward()
            hist["val_grads"][k] = pr.grads
        else:
            with torch.no_grad():
                loss = lm_loss(model(xv), yv)
        hist["val_loss"][k] = float(loss.detach())

    def batch(_gen, size):       # this run's generator: the validation windows came first
        starts = torch.randint(0, train_stream.numel() - seq_len - 1, (size,), generator=gen)
        return _window(train_stream, starts, seq_len)

    def rate(t):
        return lr_schedule(t, n_steps, lr, warmup, schedule, min_lr_ratio)

    def record(t, x, y):         # sample indices t * B .. (t + 1) * B - 1: each window used once
        if recorder is None:
            return contextlib.nullcontext()
        return recorder.step(torch.arange(t * batch_size, (t + 1) * batch_size), lr=rate(t), epoch=0)

    def after(t, loss):
        hist["loss"].append(float(loss.detach()))
        hist["lr"].append(rate(t))
        if t + 1 in ckpts and t + 1 < n_steps:
            probe(t + 1)

    t0 = time.perf_counter()
    if 0 in ckpts:
        probe(0)
    tinygpt.train(model, batch, n_steps=n_steps, batch_size=batch_size, lr=lr, seq_len=seq_len,
                  seed=seed, schedule=rate, grad_clip=grad_clip, optimizer=_PlainSGD,
                  step_context=record, on_step=after, log_every=n_steps + 1, desc="TinyGPT SGD")
    model.train()
    if n_steps in ckpts:
        probe(n_steps)
    hist["seconds"] = time.perf_counter() - t0
    model.eval()
    return hist

"""The three-regimes run (Fig. 1a, Fig. 4): the core's TinyGPT trained by plain SGD with the
recorder on, on the core's offline Wikipedia text.

Each training sample is one window of ``seq_len + 1`` tokens, used once (index ``t * B + i``), so
every training iteration has its own samples and the data value embeddings tell how much the
samples of each iteration move the final model's validation loss.

Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
"""

from __future__ import annotations

import math
import time

import torch

from ..progress import progress
from ..tinygpt import lm_loss
from .recorder import GradRecorder

__all__ = ["lr_schedule", "train_tinygpt_sgd"]

_SCHEDULES = ("cosine", "constant", "linear")


def lr_schedule(step: int, n_steps: int, lr: float, warmup: int, schedule: str = "cosine",
                min_lr_ratio: float = 0.1) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine/linear decay to ``min_lr_ratio * lr``
    (or constant).

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    if schedule not in _SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; valid: {', '.join(_SCHEDULES)}")
    if warmup and step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
    frac = (step - warmup) / max(1, n_steps - warmup)
    shape = 0.5 * (1 + math.cos(math.pi * frac)) if schedule == "cosine" else 1 - frac
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * shape)


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

    model.train()
    t0 = time.perf_counter()
    for t in progress(range(n_steps), desc="TinyGPT SGD"):
        if t in ckpts:
            probe(t)
        cur = lr_schedule(t, n_steps, lr, warmup, schedule, min_lr_ratio)
        starts = torch.randint(0, train_stream.numel() - seq_len - 1, (batch_size,), generator=gen)
        x, y = _window(train_stream, starts, seq_len)
        model.zero_grad()
        idx = torch.arange(t * batch_size, (t + 1) * batch_size)
        if recorder is not None:
            with recorder.step(idx, lr=cur, epoch=0):
                loss = lm_loss(model(x), y)
                loss.backward()
        else:
            loss = lm_loss(model(x), y)
            loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p -= cur * p.grad
        hist["loss"].append(float(loss.detach()))
        hist["lr"].append(cur)
    if n_steps in ckpts:
        probe(n_steps)
    hist["seconds"] = time.perf_counter() - t0
    model.eval()
    return hist

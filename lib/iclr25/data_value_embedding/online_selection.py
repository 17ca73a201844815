"""When to select data (Fig. 1b): online selection by gradient alignment, in chosen phases only.

The paper's practical point (Sec. 1 and 5.3): since the data of the brief warm-up and of the late
phase influence the final model most, online data selection need only run then. Its experiment
picks each batch from a larger candidate pool by the alignment of each candidate's gradient with
a validation gradient (as Fan et al. 2024, adapted in App. E.3.2), at every iteration, in the
first 2,000 and after 20,000 iterations only, or in the first ones only, and compares the final
validation loss with training without selection.

Here, on notebook 03's model and data: every step draws ``pool_factor * batch_size`` candidate
windows from the training stream; a *selecting* step keeps the ``batch_size`` candidates whose
per-sample gradients (every ``nn.Linear`` weight, recorded exactly by
:class:`~.recorder.GradRecorder`) have the largest dot product with the mean gradient of a fresh
batch of validation windows; any other step keeps a random ``batch_size`` of the pool. The
candidate pools, the random picks and the validation batches are drawn from their own seeded
generators at every step of every arm, so the arms of one seed see the same candidates and
differ only in which they keep. The validation stream is cut in two: the first half guides the
choice, the second half measures the final loss.

Introduced in ``notebooks/02-data-value-embedding/04-when-to-select.ipynb``.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from .. import tinygpt
from ..tinygpt import lm_loss
from .lm import _window, make_lm
from .recorder import GradRecorder

__all__ = ["ARMS", "selection_steps", "gradient_alignment", "train_with_selection",
           "validation_loss", "selection_run", "gain_fraction"]

#: the arms of Fig. 1b: where online selection runs
ARMS = ("none", "all", "early+late", "early")


def selection_steps(arm: str, n_steps: int, *, early_frac: float = 0.04,
                    late_frac: float = 0.16) -> np.ndarray:
    """Boolean mask over the ``n_steps`` iterations: where ``arm`` selects.

    ``"none"``: nowhere; ``"all"``: everywhere; ``"early"``: the first ``round(early_frac *
    n_steps)`` iterations (at least one); ``"early+late"``: those and the last ``round(late_frac
    * n_steps)``.

    Introduced in ``notebooks/02-data-value-embedding/04-when-to-select.ipynb``.
    """
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; valid: {', '.join(ARMS)}")
    if n_steps < 1:
        raise ValueError(f"n_steps must be positive, got {n_steps}")
    if not (0 < early_frac < 1 and 0 <= late_frac < 1 and early_frac + late_frac <= 1):
        raise ValueError(f"need 0 < early_frac, 0 <= late_frac and early_frac + late_frac <= 1; "
                         f"got {early_frac}, {late_frac}")
    mask = np.zeros(n_steps, dtype=bool)
    if arm == "all":
        mask[:] = True
    elif arm != "none":
        mask[:max(1, round(early_frac * n_steps))] = True
        if arm == "early+late":
            n_late = round(late_frac * n_steps)
            if n_late:
                mask[n_steps - n_late:] = True
    return mask


def gradient_alignment(model, recorder: GradRecorder, x_pool, y_pool, x_val, y_val) -> torch.Tensor:
    """``g(z) . mean_v g(v)`` for each candidate window ``z`` of the pool: its per-sample gradient
    (mean token loss of the window; the recorder's layers) dotted with the mean per-sample
    gradient of the validation windows. Returns ``(len(x_pool),)``; leaves ``.grad`` set.

    Introduced in ``notebooks/02-data-value-embedding/04-when-to-select.ipynb``.
    """
    with recorder.probe() as pv:
        model.zero_grad(set_to_none=True)
        lm_loss(model(x_val), y_val).backward()
    with recorder.probe() as pp:
        model.zero_grad(set_to_none=True)
        lm_loss(model(x_pool), y_pool).backward()
    model.zero_grad(set_to_none=True)
    return pp.grads @ pv.grads.mean(0)


def train_with_selection(model, train_stream: torch.Tensor, guide_stream: torch.Tensor, *,
                         select, batch_size: int, seq_len: int, lr: float, warmup: int,
                         pool_factor: int = 2, val_batch: int = 16, seed: int = 0,
                         grad_clip: float | None = 1.0, weight_decay: float = 0.1,
                         betas: tuple = (0.9, 0.95)) -> dict:
    """Train ``model`` with AdamW (notebook 03's headline setting: ``betas``, ``weight_decay``,
    ``grad_clip``, linear warm-up over ``warmup`` steps then cosine decay to 10%) for
    ``len(select)`` steps, choosing each batch from a pool of ``pool_factor * batch_size``
    windows of ``train_stream``: by :func:`gradient_alignment` with ``val_batch`` windows of
    ``guide_stream`` where ``select[t]``, at random elsewhere.

    Returns a history: ``loss`` per step, ``alignment`` (per selecting step, the mean alignment
    of the kept candidates minus that of the whole pool) and ``seconds``.

    Introduced in ``notebooks/02-data-value-embedding/04-when-to-select.ipynb``.
    """
    select = np.asarray(select, dtype=bool).reshape(-1)
    n_steps = len(select)
    if n_steps < 1 or batch_size < 1 or pool_factor < 1 or val_batch < 1 or not lr > 0:
        raise ValueError("select must be non-empty and batch_size, pool_factor, val_batch and lr "
                         "positive")
    for name, s in (("train_stream", train_stream), ("guide_stream", guide_stream)):
        if s.dim() != 1 or s.numel() < seq_len + 2:
            raise ValueError(f"{name} must be a 1-D token stream longer than seq_len + 1 = "
                             f"{seq_len + 1}")
    pool = pool_factor * batch_size
    pick_gen = torch.Generator().manual_seed(seed + 10_000)     # random keeps (every step)
    guide_gen = torch.Generator().manual_seed(seed + 20_000)    # validation batches (every step)
    recorder = GradRecorder(model)
    hist = {"loss": [], "alignment": []}
    step = [0]

    def batch(gen, _size):
        t = step[0]
        step[0] += 1
        starts = torch.randint(0, train_stream.numel() - seq_len - 1, (pool,), generator=gen)
        x, y = _window(train_stream, starts, seq_len)
        keep = torch.randperm(pool, generator=pick_gen)[:batch_size]
        vstarts = torch.randint(0, guide_stream.numel() - seq_len - 1, (val_batch,),
                                generator=guide_gen)
        if select[t]:
            xv, yv = _window(guide_stream, vstarts, seq_len)
            a = gradient_alignment(model, recorder, x, y, xv, yv)
            keep = torch.argsort(a, descending=True, stable=True)[:batch_size]
            hist["alignment"].append(float(a[keep].mean() - a.mean()))
        return x[keep], y[keep]

    t0 = time.perf_counter()
    out = tinygpt.train(model, batch, n_steps=n_steps, batch_size=batch_size, lr=lr,
                        seq_len=seq_len, seed=seed, schedule="cosine", warmup=warmup,
                        min_lr_ratio=0.1, weight_decay=weight_decay, betas=tuple(betas),
                        grad_clip=grad_clip, log_every=1, desc="LM selection")
    hist["loss"] = out["loss"]
    hist["seconds"] = time.perf_counter() - t0
    return hist


@torch.no_grad()
def validation_loss(model, stream: torch.Tensor, *, n_windows: int, seq_len: int, seed: int = 0,
                    chunk: int = 64) -> float:
    """Mean next-token loss over ``n_windows`` windows of ``stream`` drawn by ``seed``.

    Introduced in ``notebooks/02-data-value-embedding/04-when-to-select.ipynb``.
    """
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, stream.numel() - seq_len - 1, (n_windows,), generator=gen)
    x, y = _window(stream, starts, seq_len)
    model.eval()
    total = 0.0
    for i in range(0, n_windows, chunk):
        total += float(lm_loss(model(x[i:i + chunk]), y[i:i + chunk])) * len(x[i:i + chunk])
    return total / n_windows


def selection_run(data, cfg, *, arm: str, seed: int) -> dict:
    """One arm of Fig. 1b at one seed: notebook 03's model (``cfg``, a
    :class:`~.configs.SelectionConfig`) trained by :func:`train_with_selection` where
    :func:`selection_steps` says, then its loss on ``cfg.n_val`` windows of the held-out half of
    the validation stream (the same windows for every arm and seed). ``seed`` seeds the
    initialisation, the candidate pools, the random keeps and the validation batches.

    Returns ``final_val_loss``, ``n_selected`` (selecting steps), ``hist`` and ``seconds``.

    Introduced in ``notebooks/02-data-value-embedding/04-when-to-select.ipynb``.
    """
    half = data.val.numel() // 2
    guide, held_out = data.val[:half], data.val[half:]
    mask = selection_steps(arm, cfg.n_steps, early_frac=cfg.early_frac, late_frac=cfg.late_frac)
    model = make_lm(cfg.arch, d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=cfg.n_heads,
                    max_len=cfg.seq_len, vocab_size=data.vocab_size, seed=seed)
    t0 = time.perf_counter()
    hist = train_with_selection(model, data.train, guide, select=mask, batch_size=cfg.batch_size,
                                seq_len=cfg.seq_len, lr=cfg.lr,
                                warmup=max(1, round(cfg.warmup_frac * cfg.n_steps)),
                                pool_factor=cfg.pool_factor, val_batch=cfg.val_batch, seed=seed)
    loss = validation_loss(model, held_out, n_windows=cfg.n_val, seq_len=cfg.seq_len, seed=0)
    return dict(arm=arm, seed=seed, final_val_loss=loss, n_selected=int(mask.sum()), hist=hist,
                seconds=time.perf_counter() - t0)


def gain_fraction(loss_none, loss_arm, loss_all) -> np.ndarray:
    """The fraction of the full-selection gain that an arm recovers, per replicate:
    ``(L_none - L_arm) / (L_none - L_all)``. Raises where full selection gained exactly nothing
    (the fraction is undefined there).

    Introduced in ``notebooks/02-data-value-embedding/04-when-to-select.ipynb``.
    """
    n, a, f = (np.asarray(x, dtype=float).reshape(-1) for x in (loss_none, loss_arm, loss_all))
    if not n.shape == a.shape == f.shape:
        raise ValueError(f"need one loss per replicate in each arm; got {n.shape}, {a.shape}, {f.shape}")
    gain = n - f
    if np.any(gain == 0):
        raise ValueError("full selection changed no loss in some replicate: the fraction is undefined")
    return (n - a) / gain

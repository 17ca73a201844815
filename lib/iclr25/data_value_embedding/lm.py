"""The three-regimes runs (Fig. 1a, Fig. 4): a small decoder trained with the recorder on.

The paper's setting (Sec. 5.3 and its appendix): Pythia-410M -- a GPT-NeoX decoder -- pretrained
on 1% of the Pile with AdamW (betas 0.9/0.95, weight decay 0.1, gradient clip 1.0, batch 16), a
learning-rate warm-up of 2,000 iterations and cosine decay; data value embeddings computed with
SGD as a proxy for Adam (the recursion uses the scheduled learning rate). Here:

- :func:`pythia_like` builds the same model class (``transformers``' ``GPTNeoXForCausalLM``:
  rotary positions on a quarter of each head, parallel attention and MLP residual, untied input
  and output embeddings) at book scale, randomly initialised from a config (nothing downloaded);
- :func:`train_lm` trains it (or the core's TinyGPT) on the core's offline Wikipedia text with
  ``"adamw"`` (the paper's optimiser; the embeddings are then the paper's SGD proxy) or
  ``"sgd"`` (plain SGD, where the recursion is the exact first-order TSLOO of the recorded
  layers);
- :func:`iteration_influence` is Fig. 1a's curve, :func:`regime_summary` reads the three regimes
  off it, :func:`regimes_run` does one panel of the small multiples.

Each training sample is one window of ``seq_len + 1`` tokens, used once (index ``t * B + i``), so
every iteration has its own samples.

Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
"""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np
import torch
from torch import nn

from .. import tinygpt
from ..tinygpt import lm_loss, lr_schedule
from .recorder import GradRecorder

__all__ = ["lr_schedule", "train_tinygpt_sgd", "train_lm", "CausalLM", "pythia_like",
           "make_lm", "ARCHS", "OPTIMIZERS", "iteration_influence", "regime_summary",
           "regimes_run"]  # lr_schedule: the core's (iclr25.tinygpt)

ARCHS = ("pythia", "tinygpt")
OPTIMIZERS = ("adamw", "sgd")


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


class CausalLM(nn.Module):
    """A ``transformers`` causal LM seen as ``ids -> logits`` (what :func:`train_lm` expects).

    ``net`` is the wrapped model; ``n_params`` counts its parameters.

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.net(input_ids=idx, use_cache=False).logits


def pythia_like(*, vocab_size: int = 256, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                max_len: int = 64, seed: int = 0) -> CausalLM:
    """Pythia's model class (GPT-NeoX) at book scale, randomly initialised under ``seed``.

    As Pythia: rotary position embedding on 25% of each head's dimensions, attention and MLP in
    parallel on the residual stream, untied input and output embeddings, LayerNorm, GELU MLP of
    width ``4 d_model``, normal initialisation of std 0.02. Built from a config by
    ``transformers`` (no download). Pythia-410M itself has 24 layers of width 1024.

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    try:
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    except ImportError as err:  # pragma: no cover - transformers is a core dependency
        raise ImportError("pythia_like needs the `transformers` package (GPTNeoXForCausalLM); "
                          "install the book's environment (pip install -e .)") from err
    for name, v in dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                        n_heads=n_heads, max_len=max_len).items():
        if int(v) < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    cfg = GPTNeoXConfig(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layers,
                        num_attention_heads=n_heads, intermediate_size=4 * d_model,
                        max_position_embeddings=max_len, rotary_pct=0.25,
                        use_parallel_residual=True, tie_word_embeddings=False,
                        hidden_dropout=0.0, attention_dropout=0.0, initializer_range=0.02)
    cfg._attn_implementation = "sdpa"
    with torch.random.fork_rng():
        torch.manual_seed(int(seed))
        net = GPTNeoXForCausalLM(cfg)
    return CausalLM(net)


def make_lm(arch: str, *, d_model: int, n_layers: int, n_heads: int, max_len: int,
            vocab_size: int = 256, seed: int = 0) -> nn.Module:
    """``"pythia"`` (:func:`pythia_like`, the paper's model class) or ``"tinygpt"`` (the core's
    GPT-2-style :class:`~iclr25.tinygpt.TinyGPT`, tied embeddings).

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; valid: {', '.join(ARCHS)}")
    if arch == "pythia":
        return pythia_like(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                           n_heads=n_heads, max_len=max_len, seed=seed)
    with torch.random.fork_rng():
        torch.manual_seed(int(seed))
        return tinygpt.TinyGPT(tinygpt.TinyGPTConfig(
            vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
            d_ff=4 * d_model, max_len=max_len))


def _window(stream: torch.Tensor, starts: torch.Tensor, seq_len: int):
    win = torch.stack([stream[s:s + seq_len + 1] for s in starts.tolist()])
    return win[:, :-1], win[:, 1:]


def train_lm(model, train_stream: torch.Tensor, val_stream: torch.Tensor, *, n_steps: int,
             batch_size: int, seq_len: int, lr: float, warmup: int, optimizer: str = "sgd",
             schedule: str = "cosine", min_lr_ratio: float = 0.1, n_val: int = 16,
             checkpoints=(), seed: int = 0, recorder: GradRecorder | None = None,
             grad_clip: float | None = None, weight_decay: float = 0.1,
             betas: tuple = (0.9, 0.95)) -> dict:
    """Train ``model`` on random windows of ``train_stream``, recording every step.

    ``optimizer="sgd"``: plain SGD on the batch-mean loss (the recursion's assumption).
    ``optimizer="adamw"``: the paper's AdamW (``weight_decay`` on matrices, ``betas``,
    ``grad_clip``; pass ``grad_clip=1.0`` for the paper's clip); the recorder still stores the
    scheduled learning rate, so the embeddings are the paper's SGD proxy. The rate warms up
    linearly over ``warmup`` steps, then decays (``schedule``) to ``min_lr_ratio * lr``.

    ``checkpoints`` lists step counts ``k`` at which the per-sample gradients of ``n_val`` fixed
    validation windows are probed (``hist["val_grads"][k]``; ``k = n_steps`` is the final model).
    Returns a history with ``loss``, ``lr`` (per step), ``val_loss`` at the checkpoints and
    ``seconds``.

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
    if n_steps < 1 or batch_size < 1 or seq_len < 1 or not lr > 0:
        raise ValueError("n_steps, batch_size, seq_len and lr must be positive")
    if not 0 <= warmup <= n_steps:
        raise ValueError(f"warmup must be in 0..n_steps={n_steps}, got {warmup}")
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
    opt = dict(optimizer=_PlainSGD) if optimizer == "sgd" else dict(weight_decay=weight_decay,
                                                                   betas=tuple(betas))
    tinygpt.train(model, batch, n_steps=n_steps, batch_size=batch_size, lr=lr, seq_len=seq_len,
                  seed=seed, schedule=rate, grad_clip=grad_clip, step_context=record,
                  on_step=after, log_every=n_steps + 1, desc=f"LM {optimizer}", **opt)
    model.train()
    if n_steps in ckpts:
        probe(n_steps)
    hist["seconds"] = time.perf_counter() - t0
    model.eval()
    return hist


def train_tinygpt_sgd(model, train_stream: torch.Tensor, val_stream: torch.Tensor, *, n_steps: int,
                      batch_size: int, seq_len: int, lr: float, warmup: int, schedule: str = "cosine",
                      min_lr_ratio: float = 0.1, n_val: int = 16, checkpoints=(), seed: int = 0,
                      recorder: GradRecorder | None = None, grad_clip: float | None = None) -> dict:
    """:func:`train_lm` with plain SGD (kept for the benchmark and earlier code).

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    return train_lm(model, train_stream, val_stream, n_steps=n_steps, batch_size=batch_size,
                    seq_len=seq_len, lr=lr, warmup=warmup, optimizer="sgd", schedule=schedule,
                    min_lr_ratio=min_lr_ratio, n_val=n_val, checkpoints=checkpoints, seed=seed,
                    recorder=recorder, grad_clip=grad_clip)


def iteration_influence(emb, lrs, g_val: torch.Tensor, *, kind: str = "signed") -> np.ndarray:
    """Fig. 1a's curve: per iteration, the mean influence of its samples on the loss whose
    gradient is ``g_val``, divided by that iteration's learning rate ``lrs[t]``.

    ``emb`` is a :class:`~.embed.DVEmb`; ``kind="signed"`` averages the influence scores (the
    paper's plot), ``"abs"`` their absolute values. Returns an array of length ``len(lrs)``.

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    if kind not in ("signed", "abs"):
        raise ValueError(f"unknown kind {kind!r}; valid: signed, abs")
    n = len(lrs)
    if int(emb.row_step.max()) >= n:
        raise ValueError(f"the embeddings cover {int(emb.row_step.max()) + 1} steps but {n} "
                         "learning rates were given")
    g = torch.as_tensor(g_val).to(emb.rows.dtype).reshape(-1)
    score = emb.rows @ g
    if kind == "abs":
        score = score.abs()
    score = score / torch.as_tensor(lrs, dtype=score.dtype)[emb.row_step]
    total = torch.zeros(n, dtype=score.dtype).index_add_(0, emb.row_step, score)
    count = torch.bincount(emb.row_step, minlength=n).clamp(min=1)
    return (total / count).numpy()


def _z(a: np.ndarray, b: np.ndarray) -> float:
    """Welch's z of mean(a) - mean(b)."""
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) if min(len(a), len(b)) > 1 else 0.0
    d = float(a.mean() - b.mean())
    return d / se if se > 0 else math.copysign(math.inf, d) if d else 0.0


def regime_summary(curve, warmup: int, *, late_frac: float = 0.1, z_min: float = 2.0) -> dict:
    """The three regimes read off a per-iteration curve.

    Windows: ``early`` = the warm-up iterations ``[0, warmup)``; ``basin`` = the middle half
    ``[T/4, 3T/4)``; ``late`` = the last ``late_frac`` of the iterations. ``early_peak`` /
    ``late_ascent`` hold when that window's mean exceeds the basin's by more than ``z_min``
    standard errors (Welch's z over the per-iteration values, which are noisy); ``three_regimes``
    when both hold. ``basin_sd`` is the basin's per-iteration standard deviation.

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    c = np.asarray(curve, dtype=float)
    T = len(c)
    if T < 8:
        raise ValueError(f"need at least 8 iterations to read regimes, got {T}")
    if not 1 <= warmup < T // 4:
        raise ValueError(f"warmup must be in 1..{T // 4 - 1} (before the basin window "
                         f"[T/4, 3T/4)), got {warmup}")
    if not 0 < late_frac <= 0.25:
        raise ValueError(f"late_frac must be in (0, 0.25], got {late_frac}")
    early, basin, late = c[:warmup], c[T // 4:3 * T // 4], c[T - max(2, round(late_frac * T)):]
    z_early, z_late = _z(early, basin), _z(late, basin)
    out = dict(early=float(early.mean()), basin=float(basin.mean()), late=float(late.mean()),
               basin_sd=float(basin.std(ddof=1)),
               z_early=z_early, z_late=z_late, early_peak=bool(z_early > z_min),
               late_ascent=bool(z_late > z_min))
    out["three_regimes"] = out["early_peak"] and out["late_ascent"]
    return out


def regimes_run(data, *, arch: str, optimizer: str, lr: float, n_steps: int, warmup: int,
                d_model: int, n_layers: int, n_heads: int, seq_len: int, batch_size: int,
                proj_dim: int, n_val: int, seed: int = 0, checkpoints=()) -> dict:
    """One panel of the small multiples: train, record, embed, and read the regimes.

    ``data`` is a :class:`~iclr25.tinygpt.TextDataset`. AdamW runs use the paper's betas
    (0.9, 0.95), weight decay 0.1 and gradient clip 1.0; SGD runs clip nothing. Returns a dict
    with ``signed`` and ``abs`` curves (:func:`iteration_influence` against the final model's
    mean validation gradient), ``grad_norm`` (mean norm of the recorded per-sample gradients per
    iteration), ``no_decay`` (the signed curve without the trajectory term, i.e. the final
    validation gradient dotted with ``eta_t g_t(z)``, TracIn-like), the regimes of each
    (``regimes``, ``regimes_abs``, ``regimes_no_decay``), ``hist``, ``records``, ``emb`` and
    ``model``.

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    from .embed import DVEmb, compute_dvemb

    model = make_lm(arch, d_model=d_model, n_layers=n_layers, n_heads=n_heads, max_len=seq_len,
                    vocab_size=data.vocab_size, seed=seed)
    rec = GradRecorder(model, proj_dim=proj_dim, seed=seed)
    ck = sorted(set(int(k) for k in checkpoints) | {n_steps})
    hist = train_lm(model, data.train, data.val, n_steps=n_steps, batch_size=batch_size,
                    seq_len=seq_len, lr=lr, warmup=warmup, optimizer=optimizer, n_val=n_val,
                    checkpoints=ck, seed=seed, recorder=rec,
                    grad_clip=1.0 if optimizer == "adamw" else None)
    emb = compute_dvemb(rec.records)
    g_val = hist["val_grads"][n_steps].mean(0)
    signed = iteration_influence(emb, hist["lr"], g_val, kind="signed")
    absolute = iteration_influence(emb, hist["lr"], g_val, kind="abs")
    grad_norm = np.array([float(g.norm(dim=1).mean()) for g in rec.records.grads])
    # the same scores without the trajectory term prod (I - eta H): eta_t g_t (TracIn-like)
    plain = DVEmb(rows=torch.cat([e * g for e, g in zip(rec.records.lrs, rec.records.grads)]),
                  row_step=emb.row_step, row_index=emb.row_index, row_epoch=emb.row_epoch,
                  n_train=emb.n_train)
    no_decay = iteration_influence(plain, hist["lr"], g_val, kind="signed")
    return dict(signed=signed, abs=absolute, grad_norm=grad_norm, no_decay=no_decay,
                regimes_no_decay=regime_summary(no_decay, warmup),
                regimes=regime_summary(signed, warmup), regimes_abs=regime_summary(absolute, warmup),
                hist=hist, records=rec.records, emb=emb, model=model, lr=lr, n_steps=n_steps,
                optimizer=optimizer, seed=seed)

"""Training TopK and ReLU sparse autoencoders with the paper's recipe (chapter 06).

Gao et al. (ICLR 2025), Sec. 2 and App. A.1, as read in the official code (facts only):

- loss: the reconstruction MSE normalised by the activations' variance (the fraction of variance
  unexplained), plus ``auxk_coef`` times the AuxK loss: the ``auxk`` largest pre-activations among
  *dead* latents reconstruct the main reconstruction's error ``e = x - x_hat`` (normalised by
  ``||e||^2``); Multi-TopK adds ``L(4k) / 8``;
- a latent is dead when it has not fired (activation > 1e-3) for ``dead_tokens`` tokens;
- init: ``b_pre`` = geometric median of a sample, unit-norm decoder rows, encoder tied to the
  decoder; every step projects out the decoder gradient's component along each dictionary vector
  and renormalises the rows after the Adam step (eps 6.25e-10);
- learning rate: ``lr ∝ 1/sqrt(n)``; we use ``2e-4 / sqrt(n / 2^14)`` (EleutherAI sparsify's rule).

:func:`topk_loss_and_grads` is the fast step: one dense matmul (the encoder forward) and a top-k,
then only sparse products (:mod:`iclr25.topk_sae.kernels`) -- the dense (batch, n) code is never
formed and the encoder's gradient touches only the k selected latents per token.
:func:`topk_loss_reference` is the same loss through autograd on dense codes; the tests check that
both give the same gradients.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..progress import progress
from .kernels import SparsePattern, sampled_rowdot, scatter_rows, sparse_decode, topk_rows
from .model import ReLUSAE, TopKSAE

__all__ = ["default_lr", "activation_scale", "mse_scale", "topk_loss_and_grads",
           "topk_loss_reference", "TrainLog", "train_sae", "train_relu_sae", "DEAD_THRESHOLD",
           "batches", "as_tensor_acts"]

#: A latent "fires" on a token when its activation exceeds this (the official code's 1e-3).
DEAD_THRESHOLD = 1e-3


def default_lr(n_latents: int) -> float:
    """``2e-4 / sqrt(n / 2^14)``: Adam's learning rate scaled as 1/sqrt(n) (chapter 06)."""
    return 2e-4 / math.sqrt(n_latents / 2 ** 14)


def as_tensor_acts(acts) -> torch.Tensor:
    """A (N, d) float32 tensor view/copy of ``acts`` (tensor, numpy array or float16 memmap)."""
    if isinstance(acts, torch.Tensor):
        return acts.float()
    return torch.from_numpy(np.asarray(acts, dtype=np.float32))


def mse_scale(sample) -> float:
    """``1 / mean((x - mean x)^2)``: turns the MSE into the fraction of variance unexplained."""
    x = as_tensor_acts(sample)
    var = float(((x - x.mean(0)) ** 2).mean())
    if not var > 0:
        raise ValueError("the activations have zero variance")
    return 1.0 / var


def activation_scale(sample) -> float:
    """The scalar ``c`` with ``E ||c x||^2 = d``: a fixed rescaling of the inputs (chapter 06)."""
    x = as_tensor_acts(sample)
    return float(math.sqrt(x.shape[1] / float((x ** 2).sum(1).mean())))


def batches(acts, batch_size: int, n_steps: int, seed: int = 0, device=None):
    """Yield ``n_steps`` float32 batches of rows of ``acts`` (epochs of a seeded permutation), on
    ``device`` (default: where ``acts`` is; CPU for arrays).

    ``acts`` may be a float16 ``np.memmap``: only the rows of one batch are read at a time.
    """
    N = len(acts)
    if N < 1:
        raise ValueError("no activations to train on")
    bs = min(int(batch_size), N)
    rng = np.random.default_rng(seed)
    order, pos = rng.permutation(N), 0
    for _ in range(int(n_steps)):
        if pos + bs > N:
            order, pos = rng.permutation(N), 0
        rows = np.sort(order[pos:pos + bs])
        pos += bs
        if isinstance(acts, torch.Tensor):
            x = acts[torch.from_numpy(rows).to(acts.device)].float()
        else:
            x = torch.from_numpy(np.asarray(acts[rows], dtype=np.float32))
        yield x if device is None else x.to(device, non_blocking=True)


def _terms(sae: TopKSAE):
    """The (k, weight) terms of the loss: L(k), and L(4k)/8 with Multi-TopK."""
    terms = [(sae.k, 1.0)]
    if sae.multi_topk:
        terms.append((min(4 * sae.k, sae.n_latents), 1.0 / 8))
    return terms


@torch.no_grad()
def topk_loss_and_grads(sae: TopKSAE, x: torch.Tensor, scale: float,
                        dead: torch.Tensor | None = None, *, backend: str | None = None,
                        out: torch.Tensor | None = None
                        ) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """The loss of one batch and its gradients, written into ``sae``'s ``.grad`` fields.

    The gradients replace what the ``.grad`` tensors held (no accumulation across calls); existing
    ``.grad`` tensors are overwritten in place, so an optimiser loop without ``zero_grad`` reuses
    them.

    Parameters
    ----------
    sae
        The autoencoder.
    x
        A (B, d) float32 batch.
    scale
        :func:`mse_scale` of the training activations.
    dead
        (n,) bool mask of dead latents for AuxK (``None``: no AuxK term).
    out
        Optional (B, n) float32 buffer for the pre-activations, reused from step to step
        (:func:`train_sae` passes one). Allocating B x n fresh floats every step costs about a
        third of the encoder matmul on the CPU (the pages are faulted in and zeroed anew).

    Returns
    -------
    (stats, idx, vals)
        ``stats`` has ``loss`` (the total), ``fvu`` (main term, k), ``aux`` (AuxK term before its
        coefficient); ``idx``/``vals`` the (B, k) code of the batch (for dead-latent tracking).
    """
    B, d = x.shape
    n = sae.n_latents
    be = backend if backend is not None else sae.backend
    W_enc, W_dec, b_pre = sae.W_enc, sae.W_dec, sae.b_pre
    if out is not None and (out.shape != (B, n) or out.dtype != x.dtype
                            or out.device != x.device):
        raise ValueError(f"out must be a ({B}, {n}) {x.dtype} tensor on {x.device}; got "
                         f"{tuple(out.shape)} {out.dtype} on {out.device}")
    x_c = x - b_pre
    pre = torch.addmm(sae.b_enc, x_c, W_enc.T, out=out)   # (B, n): the one dense matmul
    terms = _terms(sae)
    K = max(kk for kk, _ in terms)
    if pre.device.type == "cpu":
        vp_all, idx_all = topk_rows(pre, K)         # sorted, so top-k is a prefix of top-4k
    else:
        vp_all, idx_all = pre.topk(K, dim=-1)
    # the gradients go into the parameters' existing .grad tensors when there are any (the
    # first term overwrites, later terms add): no fresh (n, d) allocations from step to step
    written: set[str] = set()

    def grad_buf(name):
        p = getattr(sae, name)
        if p.grad is None or p.grad.shape != p.shape or p.grad.device != p.device:
            p.grad = torch.empty_like(p)
        return p.grad

    def acc(name, g):
        (grad_buf(name).add_(g) if name in written else grad_buf(name).copy_(g))
        written.add(name)

    def acc_scatter(name, idx, c, Y, pattern):
        scatter_rows(idx, c, Y, n, backend=be, pattern=pattern, out=grad_buf(name),
                     accumulate=name in written)
        written.add(name)

    stats = {"loss": 0.0, "fvu": float("nan"), "aux": 0.0}
    err_main = None

    def backprop(idx, vp, vals, g_out):
        """Add the gradients of a sparse decode whose output gradient is ``g_out`` (B, d)."""
        pattern = SparsePattern(idx, n) if (be or "torch") == "torch" else None
        acc_scatter("W_dec", idx, vals, g_out, pattern)
        g_pre = sampled_rowdot(idx, g_out, W_dec, backend=be) * (vp > 0)   # d/d pre at the code
        acc_scatter("W_enc", idx, g_pre, x_c, pattern)
        acc("b_enc", torch.zeros_like(sae.b_enc).index_add_(0, idx.reshape(-1),
                                                            g_pre.reshape(-1)))

    for kk, w in terms:
        idx, vp = idx_all[:, :kk].contiguous(), vp_all[:, :kk].contiguous()
        vals = vp.relu()
        err = sparse_decode(idx, vals, W_dec, backend=be) + b_pre - x     # x_hat - x
        fvu = scale * float((err ** 2).mean())
        stats["loss"] += w * fvu
        if kk == sae.k and err_main is None:
            stats["fvu"], err_main = fvu, err
        g = err.mul(w * 2.0 * scale / (B * d))     # dL/dx_hat
        acc("b_pre", g.sum(0))
        backprop(idx, vp, vals, g)

    dead_cols = dead.to(pre.device).nonzero().reshape(-1) if dead is not None else None
    n_dead = 0 if dead_cols is None else int(dead_cols.numel())
    if sae.auxk > 0 and n_dead > 0 and sae.auxk_coef > 0:
        ka = min(sae.auxk, n_dead)
        avp, j = pre.index_select(1, dead_cols).topk(ka, dim=-1)   # only the dead columns
        aidx = dead_cols[j]
        avals = avp.relu()
        resid = -err_main                           # e = x - x_hat (detached)
        denom = max(float((resid ** 2).sum()), 1e-30)
        diff = sparse_decode(aidx, avals, W_dec, backend=be) - resid
        aux = float((diff ** 2).sum()) / denom
        stats["aux"] = aux
        stats["loss"] += sae.auxk_coef * aux
        backprop(aidx, avp, avals, diff.mul_(2.0 * sae.auxk_coef / denom))
    del pre
    b_pre.grad.sub_(sae.b_enc.grad @ W_enc)          # x_c = x - b_pre feeds the encoder
    return stats, idx_all[:, :sae.k], vp_all[:, :sae.k].relu()


def topk_loss_reference(sae: TopKSAE, x: torch.Tensor, scale: float,
                        dead: torch.Tensor | None = None) -> torch.Tensor:
    """The same loss as :func:`topk_loss_and_grads` through autograd on dense codes (for tests)."""
    pre = sae.pre_acts(x)
    total = pre.new_zeros(())
    err_main = None
    for kk, w in _terms(sae):
        vp, idx = pre.topk(kk, dim=-1)
        z = torch.zeros_like(pre).scatter(1, idx, vp.relu())
        err = z @ sae.W_dec + sae.b_pre - x
        total = total + w * scale * (err ** 2).mean()
        if err_main is None:
            err_main = err
    n_dead = int(dead.sum()) if dead is not None else 0
    if sae.auxk > 0 and n_dead > 0:
        ka = min(sae.auxk, n_dead)
        avp, aidx = pre.masked_fill(~dead, float("-inf")).topk(ka, dim=-1)
        za = torch.zeros_like(pre).scatter(1, aidx, avp.relu())
        resid = (x - (err_main + x)).detach()
        total = total + sae.auxk_coef * ((za @ sae.W_dec - resid) ** 2).sum() / (resid ** 2).sum()
    return total


@dataclass
class TrainLog:
    """What :func:`train_sae` records every ``log_every`` steps (chapter 06, ``02-dead-latents``)."""

    step: list = field(default_factory=list)
    tokens: list = field(default_factory=list)
    fvu: list = field(default_factory=list)
    aux: list = field(default_factory=list)
    dead_fraction: list = field(default_factory=list)
    seconds: float = 0.0
    tokens_since_fired: torch.Tensor | None = None

    def as_frame(self):
        import pandas as pd
        return pd.DataFrame({"step": self.step, "tokens": self.tokens, "fvu": self.fvu,
                             "aux": self.aux, "dead_fraction": self.dead_fraction})


def _make_opt(params, lr: float):
    kw = dict(lr=lr, eps=6.25e-10, betas=(0.9, 0.999))
    try:
        return torch.optim.Adam(params, fused=True, **kw)
    except (RuntimeError, TypeError):  # pragma: no cover - no fused Adam for this device
        return torch.optim.Adam(params, **kw)


def train_sae(sae: TopKSAE, acts, *, n_steps: int, batch_size: int = 4096, lr: float | None = None,
              dead_tokens: int = 10_000_000, seed: int = 0, log_every: int = 10,
              init_b_pre: bool = True, scale: float | None = None, backend: str | None = None,
              desc: str | None = "TopK SAE", checkpoints=(), on_checkpoint=None) -> TrainLog:
    """Train ``sae`` on ``acts`` (N, d) with the paper's recipe; returns a :class:`TrainLog`.

    ``on_checkpoint(step, sae)`` is called after each step listed in ``checkpoints`` (e.g. to
    evaluate on held-out data along the way: loss against training tokens).

    ``dead_tokens``: a latent that has not fired for this many training tokens counts as dead
    and feeds the AuxK loss (paper: 10M). ``lr=None`` uses :func:`default_lr`. ``scale`` defaults to
    :func:`mse_scale` of up to 32,768 rows. Chapter 06 (``01-topk-vs-relu-synthetic``).
    """
    if not isinstance(sae, TopKSAE):
        raise TypeError(f"train_sae trains a TopKSAE; got {type(sae).__name__} "
                        "(use train_relu_sae for ReLUSAE)")
    shape = tuple(acts.shape) if hasattr(acts, "shape") else np.shape(acts)
    if len(acts) == 0 or len(shape) != 2 or shape[1] != sae.d_model:
        raise ValueError(f"acts must have shape (N, d_model={sae.d_model}); got {shape}")
    if n_steps < 1 or batch_size < 1 or dead_tokens < 1:
        raise ValueError("n_steps, batch_size and dead_tokens must be positive")
    device = sae.W_dec.device                       # every tensor of the loop lives here
    sample = next(batches(acts, min(len(acts), 32768), 1, seed=seed + 1, device=device))
    if init_b_pre:
        sae.init_b_pre_(sample)
    scale = mse_scale(sample) if scale is None else float(scale)
    opt = _make_opt(sae.parameters(), default_lr(sae.n_latents) if lr is None else lr)
    since = torch.zeros(sae.n_latents, dtype=torch.long, device=device)
    fired = torch.zeros(sae.n_latents, dtype=torch.bool, device=device)
    log = TrainLog()
    import time
    t0 = time.perf_counter()
    it = batches(acts, batch_size, n_steps, seed=seed, device=device)
    buf = None                                      # the (B, n) pre-activations, reused
    checkpoints = {int(c) for c in checkpoints}
    if checkpoints and on_checkpoint is None:
        raise ValueError("checkpoints given without on_checkpoint")
    for step, x in enumerate(progress(it, total=n_steps, desc=desc), start=1):
        dead = since >= dead_tokens
        if buf is None or buf.shape[0] != x.shape[0]:
            buf = torch.empty(x.shape[0], sae.n_latents, dtype=x.dtype, device=x.device)
        stats, idx, vals = topk_loss_and_grads(sae, x, scale, dead, backend=backend, out=buf)
        sae.project_decoder_grad_()
        opt.step()
        sae.normalize_decoder_()
        fired.zero_()
        fired[idx[vals > DEAD_THRESHOLD]] = True
        since += x.shape[0]
        since[fired] = 0
        if step % log_every == 0 or step == n_steps:
            log.step.append(step)
            log.tokens.append(step * x.shape[0])
            log.fvu.append(stats["fvu"])
            log.aux.append(stats["aux"])
            log.dead_fraction.append(float((since >= dead_tokens).float().mean()))
        if step in checkpoints:
            on_checkpoint(step, sae)
    log.seconds = time.perf_counter() - t0
    log.tokens_since_fired = since
    return log


def train_relu_sae(sae: ReLUSAE, acts, *, n_steps: int, batch_size: int = 4096,
                   lr: float | None = None, seed: int = 0, init_b_pre: bool = True,
                   scale: float | None = None, desc: str | None = "ReLU SAE") -> TrainLog:
    """Train the ReLU + L1 baseline with autograd (same init, Adam and decoder projection as
    :func:`train_sae`); loss ``FVU + l1_coef * mean ||z||_1`` (chapter 06)."""
    if not isinstance(sae, ReLUSAE):
        raise TypeError(f"train_relu_sae trains a ReLUSAE; got {type(sae).__name__}")
    device = sae.W_dec.device
    sample = next(batches(acts, min(len(acts), 32768), 1, seed=seed + 1, device=device))
    if init_b_pre:
        sae.init_b_pre_(sample)
    scale = mse_scale(sample) if scale is None else float(scale)
    opt = _make_opt(sae.parameters(), default_lr(sae.n_latents) if lr is None else lr)
    log = TrainLog()
    import time
    t0 = time.perf_counter()
    for step, x in enumerate(progress(batches(acts, batch_size, n_steps, seed=seed, device=device),
                                      total=n_steps, desc=desc), start=1):
        opt.zero_grad(set_to_none=True)
        z = sae.dense_code(x)
        fvu = scale * ((sae.decode(z) - x) ** 2).mean()
        loss = fvu + sae.l1_coef * z.sum(1).mean()
        loss.backward()
        sae.project_decoder_grad_()
        opt.step()
        sae.normalize_decoder_()
        if step % 10 == 0 or step == n_steps:
            log.step.append(step)
            log.tokens.append(step * x.shape[0])
            log.fvu.append(float(fvu.detach()))
            log.aux.append(0.0)
            log.dead_fraction.append(float("nan"))
    log.seconds = time.perf_counter() - t0
    return log

"""Sparse kernels of a TopK sparse autoencoder: decode and the sparse gradients.

Chapter 06 (``notebooks/06-topk-sae/``). A TopK code has k nonzeros per token, so everything after
the encoder's dense forward matmul is sparse:

- decode: ``x_hat[b] = sum_j vals[b, j] * W_dec[idx[b, j]]`` (B x k x d multiply-adds);
- the gradient of the code values: ``g_vals[b, j] = <W_dec[idx[b, j]], g_x_hat[b]>``
  (a *sampled* dense product, only at the k selected latents);
- the decoder and encoder weight gradients: ``G_W[i] = sum_{(b, j): idx[b, j] = i} c[b, j] * y[b]``,
  a sparse (n x B) times dense (B x d) product.

Each has a plain reference (dense, or gathers) and a fast path behind one function:

``"torch"``
    vectorised CPU/GPU torch: ``embedding_bag`` for decode, ``sparse.sampled_addmm`` for the
    sampled product, a CSR ``addmm`` (into a reused buffer) for the scatter;
``"triton"``
    Triton kernels (:mod:`iclr25.topk_sae.triton_kernels`) on CUDA tensors, or on the CPU under
    Triton's interpreter (``TRITON_INTERPRET=1``), which is how the tests check their numerics;
``"reference"``
    dense / gather implementations that a reader can check by eye.

:func:`default_backend` picks ``"triton"`` for CUDA tensors when Triton imports, else ``"torch"``.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

__all__ = ["BACKENDS", "default_backend", "check_code", "topk_rows", "sparse_decode",
           "sampled_rowdot", "scatter_rows", "SparsePattern"]

BACKENDS = ("torch", "triton", "reference")

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
warnings.filterwarnings("ignore", message=".*Sparse invariant checks are implicitly disabled.*")


def _triton_ok() -> bool:
    try:
        from . import triton_kernels
        return triton_kernels.available()
    except Exception:  # pragma: no cover - triton missing or broken
        return False


def default_backend(device: torch.device | str | None = None) -> str:
    """``"triton"`` for CUDA tensors when Triton works, else ``"torch"`` (chapter 06)."""
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda" and _triton_ok():
        return "triton"
    return "torch"


def _backend(backend: str | None, t: torch.Tensor) -> str:
    if backend is None:
        return default_backend(t.device)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    return backend


def check_code(idx: torch.Tensor, vals: torch.Tensor, n_latents: int) -> None:
    """Raise ``ValueError`` unless ``idx``/``vals`` are a (B, k) sparse code over ``n_latents``."""
    if idx.shape != vals.shape or idx.dim() != 2:
        raise ValueError(f"a sparse code is idx and vals of the same shape (batch, k); got "
                         f"{tuple(idx.shape)} and {tuple(vals.shape)}")
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n_latents):
        raise ValueError(f"latent indices must lie in [0, {n_latents}); got "
                         f"{int(idx.min())}..{int(idx.max())}")


def topk_rows(pre: torch.Tensor, k: int, *, block: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest entries of each row of ``pre`` (B, n), sorted: ``(values, indices)``, each (B, k).

    Equal to ``pre.topk(k, dim=-1)`` (up to the order of ties), but faster on the CPU for
    ``k << n``: split each row into blocks of ``block`` entries and take every block's maximum; the
    k-th largest block maximum ``t`` is at most the row's k-th largest entry, because the k best
    block maxima are k distinct entries. An entry above ``t`` therefore lies in one of the fewer
    than k blocks whose maximum exceeds ``t``, so the top k of the row are among the entries of the
    k best blocks. One pass of block maxima over the row, then a top-k over ``k * block``
    candidates instead of ``n``. Falls back to ``torch.topk`` when ``n`` is not a multiple of
    ``block`` or the candidates would not be fewer than ``n / 2``. Chapter 06.
    """
    if pre.dim() != 2:
        raise ValueError(f"topk_rows takes a (batch, n) matrix; got shape {tuple(pre.shape)}")
    B, n = pre.shape
    k = int(k)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}]; got {k}")
    if block < 2 or n % block or 2 * k * block > n or not pre.is_contiguous():
        return pre.topk(k, dim=-1)
    best = pre.view(B, n // block, block).amax(-1).topk(k, dim=-1, sorted=False).indices
    cols = (best.unsqueeze(-1) * block
            + torch.arange(block, device=pre.device)).reshape(B, k * block)
    vals, j = pre.gather(1, cols).topk(k, dim=-1)
    return vals, cols.gather(1, j)


def sparse_decode(idx: torch.Tensor, vals: torch.Tensor, W_dec: torch.Tensor, *,
                  backend: str | None = None) -> torch.Tensor:
    """``sum_j vals[b, j] * W_dec[idx[b, j]]``: the decoder on a sparse code, shape (B, d).

    Never forms the dense (B, n) latent matrix except on the ``"reference"`` backend.
    Differentiable in ``vals`` and ``W_dec`` on the torch and reference backends. Chapter 06.
    """
    check_code(idx, vals, W_dec.shape[0])
    be = _backend(backend, W_dec)
    if be == "reference":
        z = torch.zeros(idx.shape[0], W_dec.shape[0], dtype=vals.dtype, device=vals.device)
        z = z.scatter_add(1, idx, vals)
        return z @ W_dec
    if be == "triton":
        from . import triton_kernels
        return triton_kernels.decode(idx, vals, W_dec)
    return F.embedding_bag(idx, W_dec, per_sample_weights=vals, mode="sum")


def sampled_rowdot(idx: torch.Tensor, G: torch.Tensor, W: torch.Tensor, *,
                   backend: str | None = None) -> torch.Tensor:
    """``out[b, j] = <W[idx[b, j]], G[b]>``, shape (B, k): the dense product ``G @ W.T`` sampled
    at the code's k latents per token (the gradient of the code values). Chapter 06."""
    be = _backend(backend, W)
    if be == "reference":
        return (G @ W.T).gather(1, idx)
    if be == "triton":
        from . import triton_kernels
        return triton_kernels.rowdot(idx, G, W)
    B, k = idx.shape
    if B == 0 or k == 0:
        return G.new_zeros(B, k)
    crow = torch.arange(0, B * k + 1, k, device=idx.device)
    pattern = torch.sparse_csr_tensor(crow, idx.reshape(-1), G.new_zeros(B * k),
                                      size=(B, W.shape[0]), check_invariants=False)
    return torch.sparse.sampled_addmm(pattern, G, W.T, beta=0.0).values().reshape(B, k)


class SparsePattern:
    """The transpose of a (B, k) code's pattern, sorted by latent, reused by several scatters.

    ``scatter(c, Y)`` returns ``sum_{(b, j): idx[b, j] = i} c[b, j] * Y[b]`` for every latent i,
    shape (n, d): a CSR (n x B) matrix, one row per latent listing the tokens that selected it,
    times ``Y``. Chapter 06.
    """

    def __init__(self, idx: torch.Tensor, n_latents: int) -> None:
        B, k = idx.shape
        self.shape = (B, k)
        self.n = n_latents
        flat = idx.reshape(-1)
        self.perm = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=n_latents)
        self.crow = torch.zeros(n_latents + 1, dtype=torch.long, device=idx.device)
        self.crow[1:] = counts.cumsum(0)
        self.tokens = torch.div(self.perm, k, rounding_mode="floor")
        self.counts = counts

    def scatter(self, c: torch.Tensor, Y: torch.Tensor, *, out: torch.Tensor | None = None,
                accumulate: bool = False) -> torch.Tensor:
        """The (n, d) scatter; written into ``out`` when given (added to it if ``accumulate``).

        Writing into a buffer kept from step to step matters on the CPU: a fresh (n, d) result
        is a large allocation whose pages the kernel faults in and zeroes on every step.
        """
        B, _ = self.shape
        m = torch.sparse_csr_tensor(self.crow, self.tokens, c.reshape(-1)[self.perm],
                                    size=(self.n, B), check_invariants=False)
        if out is None:
            return torch.sparse.mm(m, Y)
        return torch.addmm(out, m, Y, beta=1.0 if accumulate else 0.0, out=out)


def scatter_rows(idx: torch.Tensor, c: torch.Tensor, Y: torch.Tensor, n_latents: int, *,
                 backend: str | None = None, pattern: SparsePattern | None = None,
                 out: torch.Tensor | None = None, accumulate: bool = False) -> torch.Tensor:
    """``out[i] = sum_{(b, j): idx[b, j] = i} c[b, j] * Y[b]``, shape (n, d): the weight gradient
    of a sparse code (decoder: ``c = vals, Y = dL/dx_hat``; encoder: ``c = dL/dpre, Y = x - b_pre``).

    ``out``: an (n, d) tensor to write the result into (overwritten, or added to when
    ``accumulate``); returned. Chapter 06."""
    check_code(idx, c, n_latents)
    be = _backend(backend, Y)
    if out is not None and tuple(out.shape) != (n_latents, Y.shape[1]):
        raise ValueError(f"out must have shape ({n_latents}, {Y.shape[1]}); got {tuple(out.shape)}")
    if be == "torch":
        pattern = pattern if pattern is not None else SparsePattern(idx, n_latents)
        return pattern.scatter(c, Y, out=out, accumulate=accumulate)
    if be == "reference":
        z = torch.zeros(idx.shape[0], n_latents, dtype=c.dtype, device=c.device)
        res = z.scatter_add(1, idx, c).T @ Y
    else:
        from . import triton_kernels
        res = triton_kernels.scatter(idx, c, Y, n_latents)
    if out is None:
        return res
    return out.add_(res) if accumulate else out.copy_(res)

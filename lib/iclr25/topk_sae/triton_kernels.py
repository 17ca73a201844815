"""Triton kernels for the sparse parts of a TopK SAE step (the CUDA path of chapter 06).

Three kernels, the same three products as :mod:`iclr25.topk_sae.kernels`:

- ``decode``: one program per (token, block of d): ``sum_j vals[b, j] * W[idx[b, j], :]``;
- ``rowdot``: one program per (token, slot j): ``<W[idx[b, j]], G[b]>``;
- ``scatter``: one program per (token, slot j): ``out[idx[b, j]] += c[b, j] * Y[b]`` (atomic adds).

They run on CUDA tensors, or on CPU tensors when ``TRITON_INTERPRET=1`` was set before Triton was
first imported (Triton's interpreter), which is how ``tests/topk_sae`` checks them against the
torch path on a machine without a GPU. The sums are in float32; ``scatter``'s atomic adds make the
order of summation, and so the last bits, vary between runs on a GPU.
"""

from __future__ import annotations

import os

import torch

try:  # pragma: no cover - depends on the environment
    import triton
    import triton.language as tl
    _IMPORT_ERROR: Exception | None = None
except Exception as err:  # pragma: no cover
    triton = None
    tl = None
    _IMPORT_ERROR = err

__all__ = ["available", "interpreting", "decode", "rowdot", "scatter"]


def interpreting() -> bool:
    """Whether Triton runs in interpreter mode (``TRITON_INTERPRET=1``): kernels run on the CPU."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def available() -> bool:
    """Triton imports, and either a CUDA GPU is present or the interpreter is on. Chapter 06."""
    return triton is not None and (torch.cuda.is_available() or interpreting())


def _need(t: torch.Tensor) -> None:
    if triton is None:
        raise RuntimeError(f"the triton backend needs the `triton` package ({_IMPORT_ERROR})")
    if t.device.type != "cuda" and not interpreting():
        raise RuntimeError("the triton backend needs CUDA tensors, or TRITON_INTERPRET=1 set "
                           "before triton is imported (CPU interpreter)")


if triton is not None:  # pragma: no branch

    @triton.jit
    def _decode_kernel(idx_ptr, vals_ptr, w_ptr, out_ptr, K, D, BLOCK_D: tl.constexpr):
        b = tl.program_id(0)
        blk = tl.program_id(1)
        cols = blk * BLOCK_D + tl.arange(0, BLOCK_D)
        mask = cols < D
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for j in range(0, K):
            row = tl.load(idx_ptr + b * K + j)
            v = tl.load(vals_ptr + b * K + j).to(tl.float32)
            w = tl.load(w_ptr + row * D + cols, mask=mask, other=0.0).to(tl.float32)
            acc += v * w
        tl.store(out_ptr + b * D + cols, acc, mask=mask)

    @triton.jit
    def _rowdot_kernel(idx_ptr, g_ptr, w_ptr, out_ptr, K, D, BLOCK_D: tl.constexpr):
        b = tl.program_id(0)
        j = tl.program_id(1)
        row = tl.load(idx_ptr + b * K + j)
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for start in range(0, D, BLOCK_D):
            cols = start + tl.arange(0, BLOCK_D)
            mask = cols < D
            g = tl.load(g_ptr + b * D + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + row * D + cols, mask=mask, other=0.0).to(tl.float32)
            acc += g * w
        tl.store(out_ptr + b * K + j, tl.sum(acc, axis=0))

    @triton.jit
    def _scatter_kernel(idx_ptr, c_ptr, y_ptr, out_ptr, K, D, BLOCK_D: tl.constexpr):
        b = tl.program_id(0)
        j = tl.program_id(1)
        row = tl.load(idx_ptr + b * K + j)
        c = tl.load(c_ptr + b * K + j).to(tl.float32)
        for start in range(0, D, BLOCK_D):
            cols = start + tl.arange(0, BLOCK_D)
            mask = cols < D
            y = tl.load(y_ptr + b * D + cols, mask=mask, other=0.0).to(tl.float32)
            tl.atomic_add(out_ptr + row * D + cols, c * y, mask=mask)


def _block(D: int) -> int:
    return min(1024, triton.next_power_of_2(D))


def decode(idx: torch.Tensor, vals: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Sparse decode on Triton: (B, k) code, (n, d) dictionary -> (B, d). Chapter 06."""
    _need(W)
    idx, vals, W = idx.contiguous(), vals.contiguous().float(), W.contiguous().float()
    B, K = idx.shape
    D = W.shape[1]
    out = torch.empty(B, D, dtype=torch.float32, device=W.device)
    if B == 0:
        return out
    BD = _block(D)
    _decode_kernel[(B, triton.cdiv(D, BD))](idx, vals, W, out, K, D, BLOCK_D=BD)
    return out


def rowdot(idx: torch.Tensor, G: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """``<W[idx[b, j]], G[b]>`` on Triton, shape (B, k). Chapter 06."""
    _need(W)
    idx, G, W = idx.contiguous(), G.contiguous().float(), W.contiguous().float()
    B, K = idx.shape
    D = W.shape[1]
    out = torch.empty(B, K, dtype=torch.float32, device=W.device)
    if B == 0 or K == 0:
        return out
    _rowdot_kernel[(B, K)](idx, G, W, out, K, D, BLOCK_D=_block(D))
    return out


def scatter(idx: torch.Tensor, c: torch.Tensor, Y: torch.Tensor, n: int) -> torch.Tensor:
    """``out[i] = sum_{idx[b, j] = i} c[b, j] Y[b]`` on Triton, shape (n, d). Chapter 06."""
    _need(Y)
    idx, c, Y = idx.contiguous(), c.contiguous().float(), Y.contiguous().float()
    B, K = idx.shape
    D = Y.shape[1]
    out = torch.zeros(n, D, dtype=torch.float32, device=Y.device)
    if B == 0 or K == 0:
        return out
    _scatter_kernel[(B, K)](idx, c, Y, out, K, D, BLOCK_D=_block(D))
    return out

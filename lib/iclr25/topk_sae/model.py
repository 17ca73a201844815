"""The autoencoders of chapter 06: :class:`TopKSAE` (Gao et al.) and the :class:`ReLUSAE` baseline.

Gao et al., *Scaling and Evaluating Sparse Autoencoders*, ICLR 2025 (arXiv:2406.04093), Sec. 2:

    z     = ReLU(TopK(W_enc (x - b_pre) + b_enc))        (Eq. 3; b_enc is the latent bias)
    x_hat = W_dec z + b_pre

with the rows of ``W_dec`` (stored here as an (n, d) matrix, one dictionary vector per row) kept at
unit norm. The ReLU baseline (Sec. 2.2) has ``z = ReLU(W_enc (x - b_pre) + b_enc)`` and an L1
penalty ``lambda * ||z||_1`` on the code.

Weights are saved in the layout SAELens uses (``sae_weights.safetensors`` with ``W_enc`` of shape
(d_in, d_sae), ``W_dec`` (d_sae, d_in), ``b_enc``, ``b_dec``; ``cfg.json`` with its field names), so
``sae_lens.SAE.load_from_disk(folder)`` reads a folder written by :func:`save`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from .kernels import BACKENDS, sparse_decode

__all__ = ["TopKSAE", "ReLUSAE", "save", "load", "geometric_median"]


def _check_x(x: torch.Tensor, d_model: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    if x.dim() != 2 or x.shape[1] != d_model:
        raise ValueError(f"activations must have shape (batch, d_model={d_model}); got "
                         f"{tuple(x.shape)}")
    return x.float() if x.dtype != torch.float32 else x


def _unit_rows(n: int, d: int, gen: torch.Generator) -> torch.Tensor:
    W = torch.randn(n, d, generator=gen)
    return W / W.norm(dim=1, keepdim=True)


class _SAEBase(nn.Module):
    def __init__(self, d_model: int, n_latents: int, *, seed: int = 0, init: str = "tied") -> None:
        super().__init__()
        if int(d_model) < 1 or int(n_latents) < 1:
            raise ValueError(f"d_model and n_latents must be positive; got {d_model}, {n_latents}")
        if init not in ("tied", "random"):
            raise ValueError(f"unknown init {init!r}; valid: tied, random")
        self.d_model, self.n_latents, self.init = int(d_model), int(n_latents), init
        gen = torch.Generator().manual_seed(int(seed))
        W_dec = _unit_rows(self.n_latents, self.d_model, gen)
        if init == "tied":   # Sec. A.1: the encoder starts as the decoder's transpose
            W_enc = W_dec.clone()
        else:                # independent (PyTorch-default-like) init of the encoder
            bound = 1.0 / self.d_model ** 0.5
            W_enc = (torch.rand(self.n_latents, self.d_model, generator=gen) * 2 - 1) * bound
        self.W_enc = nn.Parameter(W_enc)                      # (n, d)
        self.b_enc = nn.Parameter(torch.zeros(self.n_latents))
        self.W_dec = nn.Parameter(W_dec)                      # (n, d), unit rows
        self.b_pre = nn.Parameter(torch.zeros(self.d_model))

    def pre_acts(self, x: torch.Tensor) -> torch.Tensor:
        """``W_enc (x - b_pre) + b_enc``, shape (batch, n): the one dense matmul of a step."""
        x = _check_x(x, self.d_model)
        return torch.addmm(self.b_enc, x - self.b_pre, self.W_enc.T)

    @torch.no_grad()
    def normalize_decoder_(self) -> None:
        """Rescale every dictionary vector (row of ``W_dec``) to unit norm, in place."""
        self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def project_decoder_grad_(self) -> None:
        """Remove from ``W_dec.grad`` its component along each (unit) dictionary vector, so the
        step moves along the sphere (Sec. A.1, "gradient projection")."""
        if self.W_dec.grad is None:
            return
        g, W = self.W_dec.grad, self.W_dec
        n, d = W.shape
        along = torch.bmm(g.view(n, 1, d), W.detach().view(n, d, 1)).view(n, 1)  # <g_i, W_i>
        g.addcmul_(along, W, value=-1.0)

    @torch.no_grad()
    def init_b_pre_(self, sample: torch.Tensor, max_iter: int = 100) -> None:
        """Set ``b_pre`` to the geometric median of ``sample`` (Sec. A.1)."""
        self.b_pre.copy_(geometric_median(_check_x(torch.as_tensor(sample), self.d_model),
                                          max_iter=max_iter))


class TopKSAE(_SAEBase):
    """A k-sparse autoencoder: keep the k largest pre-activations of each token (chapter 06,
    ``01-topk-vs-relu-synthetic``).

    Parameters
    ----------
    d_model, n_latents, k
        Input width d, dictionary size n, active latents per token k (paper: k = 32).
    auxk, auxk_coef
        The AuxK loss: the ``auxk`` largest pre-activations among dead latents reconstruct the
        residual error, weighted by ``auxk_coef`` (paper: k_aux = 512, 1/32). ``auxk=0`` turns it off.
    multi_topk
        Train with ``L(k) + L(4k) / 8`` (Sec. 5.3) so the code also works at test-time k' > k.
    init
        ``"tied"`` (encoder = decoder transpose, the paper's) or ``"random"``.
    backend
        Kernel backend for decode (:data:`iclr25.topk_sae.kernels.BACKENDS`); ``None``: by device.
    """

    def __init__(self, d_model: int, n_latents: int, k: int, *, auxk: int = 512,
                 auxk_coef: float = 1 / 32, multi_topk: bool = False, init: str = "tied",
                 seed: int = 0, backend: str | None = None) -> None:
        super().__init__(d_model, n_latents, seed=seed, init=init)
        if not 1 <= int(k) <= self.n_latents:
            raise ValueError(f"k must be in [1, n_latents={self.n_latents}]; got {k}")
        if int(auxk) < 0:
            raise ValueError(f"auxk must be >= 0; got {auxk}")
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
        self.k, self.auxk, self.auxk_coef = int(k), int(auxk), float(auxk_coef)
        self.multi_topk, self.backend = bool(multi_topk), backend

    def encode(self, x: torch.Tensor, k: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The sparse code of ``x``: ``(idx, vals)``, each (batch, k), ``vals = ReLU(top-k
        pre-activations)`` in decreasing order. ``k`` overrides the training k (test-time k)."""
        k = self.k if k is None else int(k)
        if not 1 <= k <= self.n_latents:
            raise ValueError(f"k must be in [1, n_latents={self.n_latents}]; got {k}")
        vals, idx = self.pre_acts(x).topk(k, dim=-1)
        return idx, vals.relu()

    def decode(self, idx: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
        """``W_dec^T z + b_pre`` from a sparse code, without forming the dense code."""
        return sparse_decode(idx, vals, self.W_dec, backend=self.backend) + self.b_pre

    def forward(self, x: torch.Tensor, k: int | None = None) -> torch.Tensor:
        """The reconstruction ``x_hat`` (batch, d)."""
        return self.decode(*self.encode(x, k))

    def dense_code(self, x: torch.Tensor, k: int | None = None) -> torch.Tensor:
        """The code as a dense (batch, n) matrix (for analysis on small batches)."""
        idx, vals = self.encode(x, k)
        return torch.zeros(idx.shape[0], self.n_latents, dtype=vals.dtype).scatter(1, idx, vals)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_latents={self.n_latents}, k={self.k}, "
                f"auxk={self.auxk}, multi_topk={self.multi_topk}, init={self.init!r}")


class ReLUSAE(_SAEBase):
    """The ReLU + L1 baseline: ``z = ReLU(W_enc (x - b_pre) + b_enc)``, loss ``||x - x_hat||^2 /
    var + l1_coef * ||z||_1`` with unit-norm decoder rows (chapter 06, ``01-topk-vs-relu-synthetic``)."""

    def __init__(self, d_model: int, n_latents: int, l1_coef: float, *, init: str = "tied",
                 seed: int = 0) -> None:
        super().__init__(d_model, n_latents, seed=seed, init=init)
        if not float(l1_coef) >= 0:
            raise ValueError(f"l1_coef must be >= 0; got {l1_coef}")
        self.l1_coef = float(l1_coef)

    def dense_code(self, x: torch.Tensor) -> torch.Tensor:
        """The (batch, n) code ``ReLU(W_enc (x - b_pre) + b_enc)``."""
        return self.pre_acts(x).relu()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense_code(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return z @ self.W_dec + self.b_pre

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.dense_code(x))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_latents={self.n_latents}, l1_coef={self.l1_coef}"


@torch.no_grad()
def geometric_median(X: torch.Tensor, *, max_iter: int = 100, tol: float = 1e-7) -> torch.Tensor:
    """The point minimising the sum of Euclidean distances to the rows of ``X`` (Weiszfeld's
    iterations in float64, started at the mean). Used for ``b_pre`` (Sec. A.1). Chapter 06."""
    X = torch.as_tensor(X, dtype=torch.float64)
    if X.dim() != 2 or X.shape[0] == 0:
        raise ValueError(f"geometric_median needs a non-empty (n, d) matrix; got {tuple(X.shape)}")
    y = X.mean(0)
    for _ in range(max_iter):
        w = 1.0 / (X - y).norm(dim=1).clamp_min(1e-12)
        y_new = (w[:, None] * X).sum(0) / w.sum()
        if (y_new - y).norm() <= tol * (1 + y.norm()):
            y = y_new
            break
        y = y_new
    return y.float()


def save(sae: TopKSAE, folder: str | Path, *, metadata: dict | None = None) -> Path:
    """Write ``sae`` to ``folder`` in SAELens's layout (``sae_weights.safetensors`` + ``cfg.json``).

    SAELens computes ``z = TopK(ReLU? ...)`` on ``x - b_dec`` (``apply_b_dec_to_input``), which is
    our ``b_pre``. Chapter 06 (``03-scaling-laws``).
    """
    from safetensors.torch import save_file

    if not isinstance(sae, TopKSAE):
        raise TypeError(f"save writes a TopKSAE; got {type(sae).__name__}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {"W_enc": sae.W_enc.detach().T.contiguous(), "W_dec": sae.W_dec.detach().contiguous(),
               "b_enc": sae.b_enc.detach().contiguous(), "b_dec": sae.b_pre.detach().contiguous()}
    save_file(tensors, str(folder / "sae_weights.safetensors"))
    cfg = {"architecture": "topk", "d_in": sae.d_model, "d_sae": sae.n_latents, "k": sae.k,
           "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True,
           "normalize_activations": "none", "reshape_activations": "none",
           "rescale_acts_by_decoder_norm": False,
           "metadata": {"model_name": None, "hook_name": None, "hook_head_index": None,
                        "prepend_bos": False, "dataset_path": None, "context_size": None,
                        "sae_lens_training_version": None,
                        "iclr25": {"auxk": sae.auxk, "auxk_coef": sae.auxk_coef,
                                   "multi_topk": sae.multi_topk, "init": sae.init,
                                   **(metadata or {})}}}
    (folder / "cfg.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return folder


def load(folder: str | Path) -> TopKSAE:
    """Read a :class:`TopKSAE` from a folder in SAELens's layout (see :func:`save`). Chapter 06."""
    from safetensors.torch import load_file

    folder = Path(folder)
    wfile, cfile = folder / "sae_weights.safetensors", folder / "cfg.json"
    for f in (wfile, cfile):
        if not f.is_file():
            raise FileNotFoundError(f"{f} not found: a saved SAE folder holds "
                                    "sae_weights.safetensors and cfg.json (see iclr25.topk_sae.save)")
    cfg = json.loads(cfile.read_text())
    if cfg.get("architecture") != "topk" or "k" not in cfg:
        raise ValueError(f"{cfile}: architecture {cfg.get('architecture')!r}, expected 'topk' with k")
    extra = (cfg.get("metadata") or {}).get("iclr25") or {}
    sae = TopKSAE(cfg["d_in"], cfg["d_sae"], cfg["k"], auxk=extra.get("auxk", 512),
                  auxk_coef=extra.get("auxk_coef", 1 / 32),
                  multi_topk=extra.get("multi_topk", False), init=extra.get("init", "tied"))
    t = load_file(str(wfile))
    with torch.no_grad():
        sae.W_enc.copy_(t["W_enc"].T)
        sae.W_dec.copy_(t["W_dec"])
        sae.b_enc.copy_(t["b_enc"])
        sae.b_pre.copy_(t["b_dec"])
    return sae

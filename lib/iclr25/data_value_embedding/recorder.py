"""Recording per-sample gradients during the user's own SGD step (chapter 02).

The paper's storage step: during ordinary training, every ``nn.Linear`` layer's input activation
``a`` and output gradient ``b`` are captured, and the per-sample gradient of the layer's weight is
their outer product ``b a^T`` (summed over sequence positions for sequence models). With
``proj_dim`` set, both factors are first multiplied by fixed Gaussian matrices, so the stored
vector is ``(P_b ⊗ P_a)^T vec(b a^T)`` -- a random projection of the per-sample gradient that never
materialises the full gradient (Sec. 4.2 of the paper). A bias is folded in as a constant 1
appended to ``a``.

Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch
from torch import nn

__all__ = ["GradRecorder", "Records", "Probe"]

_REDUCTIONS = ("mean", "sum")


@dataclass
class Records:
    """What :class:`GradRecorder` stored: one entry per training step.

    Attributes
    ----------
    grads
        Per step, a ``(B_t, p)`` tensor of (projected) per-sample gradients ``g_t(z)``.
    lrs
        Per step, the step size ``eta_t`` of the paper's *summed* SGD update
        ``theta_{t+1} = theta_t - eta_t sum_z g_t(z)`` (``lr / B`` for a mean loss).
    indices
        Per step, the training-set indices of the batch (a ``LongTensor``).
    epochs
        Per step, the epoch it belongs to.
    layer_slices
        Which columns of ``grads`` belong to which layer (name -> slice).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """

    grads: list = field(default_factory=list)
    lrs: list = field(default_factory=list)
    indices: list = field(default_factory=list)
    epochs: list = field(default_factory=list)
    layer_slices: dict = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return len(self.grads)

    @property
    def dim(self) -> int:
        if not self.grads:
            raise ValueError("no steps recorded yet")
        return int(self.grads[0].shape[1])

    @property
    def n_train(self) -> int:
        """One more than the largest training index seen."""
        return int(max(int(i.max()) for i in self.indices)) + 1 if self.indices else 0

    @property
    def n_rows(self) -> int:
        return int(sum(g.shape[0] for g in self.grads))

    def nbytes(self) -> int:
        """Bytes held by the stored gradients (the paper's O(T B p~) storage)."""
        return int(sum(g.numel() * g.element_size() for g in self.grads))

    def append(self, grads: torch.Tensor, lr: float, indices, epoch: int = 0) -> None:
        """Add one step by hand (gradients computed elsewhere)."""
        grads = torch.as_tensor(grads)
        indices = torch.as_tensor(indices, dtype=torch.long).reshape(-1)
        if grads.dim() != 2 or grads.shape[0] != indices.numel():
            raise ValueError(f"grads must be (batch, p) with one row per index; got "
                             f"{tuple(grads.shape)} for {indices.numel()} indices")
        if self.grads and grads.shape[1] != self.dim:
            raise ValueError(f"gradient width {grads.shape[1]} differs from earlier steps ({self.dim})")
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"the learning rate must be positive and finite, got {lr}")
        self.grads.append(grads)
        self.lrs.append(float(lr))
        self.indices.append(indices)
        self.epochs.append(int(epoch))

    def truncate(self, n_steps: int) -> "Records":
        """The first ``n_steps`` steps (what had been recorded at checkpoint ``n_steps``)."""
        if not 0 < n_steps <= self.n_steps:
            raise ValueError(f"n_steps must be in 1..{self.n_steps}, got {n_steps}")
        return Records(self.grads[:n_steps], self.lrs[:n_steps], self.indices[:n_steps],
                       self.epochs[:n_steps], dict(self.layer_slices))

    def columns(self, sl: slice) -> "Records":
        """The same steps restricted to the gradient columns ``sl`` (one layer)."""
        return Records([g[:, sl] for g in self.grads], list(self.lrs), list(self.indices),
                       list(self.epochs), {})


@dataclass
class Probe:
    """Per-sample gradients captured by :meth:`GradRecorder.probe` (filled on exit)."""

    grads: torch.Tensor | None = None


class _Layer:
    def __init__(self, name: str, module: nn.Linear, proj_dim: int | None, gen: torch.Generator,
                 dtype: torch.dtype) -> None:
        self.name, self.module = name, module
        self.has_bias = module.bias is not None
        d_in = module.in_features + int(self.has_bias)
        d_out = module.out_features
        self.d_in, self.d_out = d_in, d_out
        self.acts: list[torch.Tensor] = []
        self.outgrads: list[torch.Tensor] = []
        self.P_a = self.P_b = None
        if proj_dim is not None:
            k = math.isqrt(proj_dim)
            # P_a, P_b ~ N(0, 1/k): E[P P^T] = I, so projected inner products are unbiased
            if k < d_in:
                self.P_a = torch.randn(d_in, k, generator=gen, dtype=dtype) / math.sqrt(k)
            if k < d_out:
                self.P_b = torch.randn(d_out, k, generator=gen, dtype=dtype) / math.sqrt(k)
        self.k_in = self.P_a.shape[1] if self.P_a is not None else d_in
        self.k_out = self.P_b.shape[1] if self.P_b is not None else d_out

    @property
    def dim(self) -> int:
        return self.k_in * self.k_out

    def per_sample(self, scale: float) -> torch.Tensor:
        if not self.acts or len(self.acts) != len(self.outgrads):
            raise RuntimeError(
                f"layer {self.name!r}: {len(self.acts)} forward and {len(self.outgrads)} backward "
                "passes were seen inside the step; run one forward and one loss.backward() inside it")
        total = None
        # the backward hooks fire in reverse order of the forward calls
        for a, b in zip(self.acts, reversed(self.outgrads)):
            if self.has_bias:
                a = torch.cat([a, a.new_ones(*a.shape[:-1], 1)], dim=-1)
            if self.P_a is not None:
                a = a @ self.P_a.to(a)
            if self.P_b is not None:
                b = b @ self.P_b.to(b)
            if a.dim() == 2:
                g = b.unsqueeze(2) * a.unsqueeze(1)                    # (B, k_out, k_in): b a^T
            else:
                g = torch.einsum("b...o,b...i->boi", b, a)             # sum over positions
            g = g.reshape(g.shape[0], -1)
            total = g if total is None else total + g
        self.acts.clear()
        self.outgrads.clear()
        return total * scale


class GradRecorder:
    """Record (projected) per-sample gradients, learning rates and indices during SGD.

    Use it around your own training step; the forward pass and ``loss.backward()`` must happen
    inside the ``with`` block, the optimiser step may follow it::

        rec = GradRecorder(model, proj_dim=64)
        for epoch, idx in schedule:
            with rec.step(idx, lr=lr, epoch=epoch):
                loss = F.cross_entropy(model(X[idx]), y[idx])   # mean over the batch
                opt.zero_grad(); loss.backward()
            opt.step()
        emb = compute_dvemb(rec.records)

    Parameters
    ----------
    model
        The network; every ``nn.Linear`` in it is recorded unless ``layers`` names some.
    layers
        Module names (as in ``model.named_modules()``) of the ``nn.Linear`` layers to record.
    proj_dim
        Per-layer dimension of the random projection (a perfect square ``k*k``: each factor is
        projected to ``k``); ``None`` stores exact per-sample gradients.
    seed
        Seeds the projection matrices.
    loss_reduction
        ``"mean"`` (default: the loss averages over the batch; gradients are rescaled by the
        batch size and ``eta_t = lr / B``) or ``"sum"``.
    dtype
        dtype of the stored gradients (default: the model's).
    keep_on_device
        Keep the stored gradients on the model's device (default: move them to the CPU, as the
        paper's storage step does); the recursion then runs there too.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """

    def __init__(self, model: nn.Module, *, layers: Sequence[str] | None = None,
                 proj_dim: int | None = None, seed: int = 0, loss_reduction: str = "mean",
                 dtype: torch.dtype | None = None, keep_on_device: bool = False) -> None:
        if loss_reduction not in _REDUCTIONS:
            raise ValueError(f"unknown loss_reduction {loss_reduction!r}; valid: {', '.join(_REDUCTIONS)}")
        if proj_dim is not None:
            if int(proj_dim) < 1 or math.isqrt(int(proj_dim)) ** 2 != int(proj_dim):
                k = max(1, math.isqrt(max(1, int(proj_dim))))
                raise ValueError(f"proj_dim must be a perfect square k*k (each factor is projected "
                                 f"to k), got {proj_dim}; e.g. {k * k} or {(k + 1) ** 2}")
            proj_dim = int(proj_dim)
        named = dict(model.named_modules())
        if layers is None:
            chosen = [(n, m) for n, m in named.items() if isinstance(m, nn.Linear)]
        else:
            bad = [n for n in layers if n not in named]
            if bad:
                lin = [n for n, m in named.items() if isinstance(m, nn.Linear)]
                raise ValueError(f"unknown layer name(s) {bad}; the model's Linear layers: {lin}")
            notlin = [n for n in layers if not isinstance(named[n], nn.Linear)]
            if notlin:
                raise ValueError(f"layer(s) {notlin} are not nn.Linear; only Linear layers are recorded")
            chosen = [(n, named[n]) for n in layers]
        if not chosen:
            raise ValueError("the model has no nn.Linear layer to record")
        param = next(model.parameters())
        self.dtype = dtype or param.dtype
        gen = torch.Generator().manual_seed(int(seed))
        self.model = model
        self.keep_on_device = bool(keep_on_device)
        self.proj_dim = proj_dim
        self.loss_reduction = loss_reduction
        self._layers = [_Layer(n, m, proj_dim, gen, self.dtype) for n, m in chosen]
        self.records = Records()
        start = 0
        for L in self._layers:
            self.records.layer_slices[L.name] = slice(start, start + L.dim)
            start += L.dim
        self._active = False
        self._handles: list = []

    @property
    def dim(self) -> int:
        """Width p~ of a stored gradient (sum over layers)."""
        return sum(L.dim for L in self._layers)

    def projection_matrix(self) -> torch.Tensor:
        """The ``(p~, p)`` matrix ``Pi`` that the recorder applies to a full per-sample gradient:
        a stored gradient is ``Pi g``, with ``g`` in the recorded layers' ``[W | b]`` row-major
        layout (:func:`~.mlp.per_sample_grads`'s). Block-diagonal over layers, each block
        ``P_b^T (x) P_a^T`` (the identity where a factor is not projected). With it a
        LoGRA-style baseline projects a Hessian, ``Pi H Pi^T``, with the same random matrices.

        Introduced in ``notebooks/02-data-value-embedding/02-recursion-and-cost.ipynb``.
        """
        blocks = []
        for L in self._layers:
            Pa = L.P_a if L.P_a is not None else torch.eye(L.d_in, dtype=self.dtype)
            Pb = L.P_b if L.P_b is not None else torch.eye(L.d_out, dtype=self.dtype)
            blocks.append(torch.kron(Pb.T, Pa.T).to(self.dtype))
        return torch.block_diag(*blocks)

    def _install(self) -> None:
        def fwd(L: _Layer):
            def hook(mod, inputs, output):
                if not self._active or not torch.is_grad_enabled():
                    return
                L.acts.append(inputs[0].detach())
                output.register_hook(lambda g: L.outgrads.append(g.detach()))
            return hook

        self._handles = [L.module.register_forward_hook(fwd(L)) for L in self._layers]

    def _remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        self._active = False

    def _collect(self, batch: int) -> torch.Tensor:
        scale = float(batch) if self.loss_reduction == "mean" else 1.0
        parts = [L.per_sample(scale).to(self.dtype) for L in self._layers]
        g = torch.cat(parts, dim=1)
        if g.shape[0] != batch:
            raise ValueError(f"the batch had {g.shape[0]} samples but {batch} indices were given")
        return g

    @contextmanager
    def step(self, indices, lr: float, epoch: int = 0) -> Iterator[None]:
        """Record one SGD step: run the forward pass and ``loss.backward()`` inside.

        ``indices`` are the batch's training-set indices (their order is the batch's order),
        ``lr`` the optimiser's learning rate for this step.
        """
        idx = torch.as_tensor(indices, dtype=torch.long).reshape(-1)
        if not (float(lr) > 0 and math.isfinite(float(lr))):
            raise ValueError(f"lr must be positive and finite, got {lr}")
        for L in self._layers:
            L.acts.clear(); L.outgrads.clear()
        self._install()
        self._active = True
        try:
            yield
            g = self._collect(idx.numel())
        finally:
            self._remove()
        eta = float(lr) / idx.numel() if self.loss_reduction == "mean" else float(lr)
        self.records.append(g if self.keep_on_device else g.cpu(), eta, idx, epoch)

    @contextmanager
    def probe(self) -> Iterator[Probe]:
        """Capture per-sample gradients without recording a step (e.g. of test points).

        Inside, run the forward pass and ``backward`` of the loss (same reduction as training);
        on exit ``probe.grads`` holds the ``(n, p)`` per-sample gradients.
        """
        out = Probe()
        for L in self._layers:
            L.acts.clear(); L.outgrads.clear()
        self._install()
        self._active = True
        try:
            yield out
            n = self._layers[0].acts[0].shape[0]
            out.grads = self._collect(n).cpu()
        finally:
            self._remove()

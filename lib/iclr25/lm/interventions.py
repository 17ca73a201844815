"""Writing activations: a context manager that edits the residual stream, the MLP or the heads
during forward passes, and the edits chapters use (add, project out, scale, set).

Part of the shared core (:mod:`iclr25.lm`). Chapter 05 (knowledge neurons) scales and sets MLP
units, 08 (ReFAT) projects out and adds the refusal direction, 10 (ideology probes) steers
heads, 13 (systematic outliers) ablates outlier dimensions.

Sites (``SITES``)::

    resid_pre    the residual stream entering decoder layer l         (batch, seq, d_model)
    resid_post   the residual stream leaving decoder layer l          (batch, seq, d_model)
                 (what capture_residual records)
    mlp          the MLP's hidden units, the input of mlp.down_proj   (batch, seq, d_ff)
    mlp_out      the MLP block's output, before it joins the residual (batch, seq, d_model)
    heads        each head's output, the input of self_attn.o_proj    (batch, seq, heads, head_dim)
    attn_out     the attention block's output (o_proj's output)       (batch, seq, d_model)

An edit ``fn`` maps the activation (restricted to ``rows`` and ``positions`` when given) to a
tensor of the same shape; it is called as ``fn(x)`` or, when it takes two arguments,
``fn(x, layer)``. Nothing is detached: under ``torch.enable_grad()`` gradients flow through the
edit (into a steering vector, an ``alpha``, or the model), which integrated gradients and
training with an ablation applied need. Under ``torch.no_grad()`` nothing is recorded.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Callable

import torch
from torch import nn

from ._common import head_dim as _head_dim
from .hooks import _resolve_layers, decoder_layers

__all__ = ["SITES", "intervene", "Intervention", "add", "project_out", "scale", "set_value"]

#: The sites :func:`intervene` can edit, with what each holds.
SITES: dict[str, str] = {
    "resid_pre": "the residual stream entering the decoder layer (batch, seq, d_model)",
    "resid_post": "the residual stream leaving the decoder layer (batch, seq, d_model)",
    "mlp": "the MLP's hidden units, the input of mlp.down_proj (batch, seq, d_ff)",
    "mlp_out": "the MLP block's output (batch, seq, d_model)",
    "heads": "each head's output, the input of self_attn.o_proj (batch, seq, heads, head_dim)",
    "attn_out": "the attention block's output, o_proj's output (batch, seq, d_model)",
}


def _arity(fn: Callable) -> int:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return 1
    if any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values()):
        return 2
    return 2 if len(params) >= 2 else 1


def _indices(spec, n: int, what: str, strict: bool) -> list[int] | None:
    if spec is None:
        return None
    chosen = [spec] if isinstance(spec, int) else list(spec)
    out = []
    for p in chosen:
        if not isinstance(p, int) or isinstance(p, bool):
            raise TypeError(f"{what} must be ints, got {p!r}")
        if -n <= p < n:
            out.append(p % n)
        elif strict:
            raise IndexError(f"{what[:-1]} {p} out of range for a batch of {n}")
    return out


class Intervention:
    """The handle :func:`intervene` yields: ``.calls`` counts the edited forward passes (per
    layer: ``.calls_per_layer``); ``.site`` and ``.layers`` say where it acts."""

    def __init__(self, site: str, layers: list[int], fn: Callable, positions, rows):
        self.site, self.layers, self.fn = site, layers, fn
        self.positions, self.rows = positions, rows
        self.calls_per_layer = {layer: 0 for layer in layers}
        self._two = _arity(fn) == 2

    @property
    def calls(self) -> int:
        return sum(self.calls_per_layer.values())

    def _call(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        y = self.fn(x, layer) if self._two else self.fn(x)
        if not isinstance(y, torch.Tensor) or y.shape != x.shape:
            got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise ValueError(f"the edit at {self.site} layer {layer} must return a tensor of the "
                             f"input's shape {tuple(x.shape)}, got {got}")
        return y

    def apply(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        self.calls_per_layer[layer] += 1
        if self.rows is None and self.positions is None:
            return self._call(x, layer).to(x.dtype)
        B, T = x.shape[0], x.shape[1]
        rows = _indices(self.rows, B, "rows", strict=True)
        pos = _indices(self.positions, T, "positions", strict=False)  # absent in a short pass
        rows = list(range(B)) if rows is None else rows
        pos = list(range(T)) if pos is None else pos
        if not rows or not pos:
            return x
        r = torch.tensor(rows, device=x.device)[:, None]
        p = torch.tensor(pos, device=x.device)[None, :]
        out = x.clone()
        out[r, p] = self._call(x[r, p], layer).to(x.dtype)
        return out


@contextlib.contextmanager
def intervene(model: nn.Module, site: str, fn: Callable, layers: int | Iterable[int] | None = None,
              positions: int | Sequence[int] | None = None,
              rows: int | Sequence[int] | None = None) -> Iterator[Intervention]:
    """Edit activations at ``site`` of ``layers`` during every forward pass inside the block.

    Part of the shared core (chapters 05, 08, 10, 13; see the module docstring for the sites).
    Works inside :func:`iclr25.lm.generate_batch` and ``model.generate`` (every decoding step),
    and keeps the autograd graph. Hooks are removed on exit, also when the body raises.

    Parameters
    ----------
    site
        One of :data:`SITES`.
    fn
        The edit: ``fn(x) -> x'`` or ``fn(x, layer) -> x'`` of the same shape; the helpers
        :func:`add`, :func:`project_out`, :func:`scale`, :func:`set_value` build common ones.
    layers
        Layer numbers (negative count from the end); ``None``: every layer.
    positions
        Token positions of each forward pass to edit (negative count from the end: ``-1`` is
        the last prompt token of a left-padded batch, and, while generating with the KV cache,
        each new token). Positions a pass does not have are left alone. ``None``: all.
    rows
        Batch rows to edit; ``None``: all.

    Yields
    ------
    Intervention
        Its ``.calls`` counts the edits made.

    Example
    -------
    >>> with lm.intervene(model, "resid_post", lm.add(direction, alpha=4.0), layers=[12]):
    ...     out = lm.generate_batch(model, tok, prompts, max_new_tokens=32)
    """
    if site not in SITES:
        raise ValueError(f"unknown site {site!r}; valid sites: {', '.join(SITES)}")
    if not callable(fn):
        raise TypeError(f"fn must be callable (x) -> x or (x, layer) -> x, got {type(fn).__name__}")
    blocks = decoder_layers(model)
    chosen = _resolve_layers(model, layers)
    iv = Intervention(site, chosen, fn, positions, rows)
    if positions is not None:
        _indices(positions, 10**9, "positions", strict=False)   # type check early
    handles = []
    try:
        for layer in chosen:
            handles.append(_install(model, blocks[layer], site, layer, iv))
        yield iv
    finally:
        for h in handles:
            h.remove()


def _replace_first(output, new):
    if isinstance(output, tuple):
        return (new,) + tuple(output[1:])
    if isinstance(output, list):
        return [new] + list(output[1:])
    return new


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


def _install(model: nn.Module, block: nn.Module, site: str, layer: int, iv: Intervention):
    if site == "resid_pre":
        def pre(mod, args, kwargs):
            if args:
                return (iv.apply(args[0], layer),) + tuple(args[1:]), kwargs
            kwargs = dict(kwargs)
            kwargs["hidden_states"] = iv.apply(kwargs["hidden_states"], layer)
            return args, kwargs
        return block.register_forward_pre_hook(pre, with_kwargs=True)
    if site == "resid_post":
        return block.register_forward_hook(
            lambda mod, args, out: _replace_first(out, iv.apply(_first(out), layer)))
    mlp = getattr(block, "mlp", None)
    attn = getattr(block, "self_attn", None)
    if site == "mlp":
        down = getattr(mlp, "down_proj", None)
        if down is None:
            raise TypeError(f"decoder layer {layer} has no .mlp.down_proj module")
        return down.register_forward_pre_hook(
            lambda mod, args: (iv.apply(args[0], layer),) + tuple(args[1:]))
    if site == "mlp_out":
        if mlp is None:
            raise TypeError(f"decoder layer {layer} has no .mlp module")
        return mlp.register_forward_hook(
            lambda mod, args, out: _replace_first(out, iv.apply(_first(out), layer)))
    o_proj = getattr(attn, "o_proj", None)
    if o_proj is None:
        raise TypeError(f"decoder layer {layer} has no .self_attn.o_proj module")
    if site == "attn_out":
        return o_proj.register_forward_hook(lambda mod, args, out: iv.apply(out, layer))
    # heads
    hd = _head_dim(model, attn)

    def pre_heads(mod, args):
        x = args[0]
        h = x.reshape(*x.shape[:-1], x.shape[-1] // hd, hd)
        return (iv.apply(h, layer).reshape(x.shape),) + tuple(args[1:])
    return o_proj.register_forward_pre_hook(pre_heads)


# --------------------------------------------------------------------------------------------
# the edits
# --------------------------------------------------------------------------------------------

def _as_tensor(v, like: torch.Tensor) -> torch.Tensor:
    t = v if isinstance(v, torch.Tensor) else torch.as_tensor(v)
    return t.to(device=like.device, dtype=like.dtype if t.is_floating_point() or
                not like.is_floating_point() else like.dtype)


def _check_feature_shape(vec: torch.Tensor, x: torch.Tensor, what: str) -> None:
    if vec.dim() == 0 or vec.dim() > x.dim() or tuple(x.shape[x.dim() - vec.dim():]) != tuple(vec.shape):
        raise ValueError(f"{what} of shape {tuple(vec.shape)} does not fit activations of shape "
                         f"{tuple(x.shape)}: it must match their last dimensions (e.g. "
                         f"{tuple(x.shape[-1:])}, or {tuple(x.shape[-2:])} per head)")


class add:
    """``x + alpha * direction``: steering (chapters 08, 10).

    ``direction`` matches the activation's last dimension(s): ``(d_model,)`` for the residual
    sites, ``(d_ff,)`` for ``mlp``, ``(head_dim,)`` (every head) or ``(heads, head_dim)`` for
    ``heads``. ``alpha`` may be a tensor that requires grad; a dict ``{layer: alpha}`` gives a
    per-layer strength.
    """

    def __init__(self, direction, alpha=1.0):
        self.direction = direction
        self.alpha = alpha

    def __call__(self, x: torch.Tensor, layer: int | None = None) -> torch.Tensor:
        d = _as_tensor(self.direction, x)
        _check_feature_shape(d, x, "direction")
        alpha = self.alpha[layer] if isinstance(self.alpha, dict) else self.alpha
        if isinstance(alpha, torch.Tensor):
            alpha = alpha.to(device=x.device, dtype=x.dtype)
        return x + alpha * d


class project_out:
    """Remove the component along ``direction``: ``x - (x.u - c) u`` with ``u`` the unit
    direction (directional ablation, chapter 08's refusal direction).

    ``to="zero"`` sets the component to 0; ``to="mean"`` to its mean over the rows and
    positions of the current pass (left padding included: pass a number for a mean computed
    elsewhere); a number ``c`` sets it to ``c``. Direction shapes as in :class:`add`.
    """

    def __init__(self, direction, to: str | float = "zero"):
        if isinstance(to, str) and to not in ("zero", "mean"):
            raise ValueError(f"to must be 'zero', 'mean' or a number, got {to!r}")
        self.direction = direction
        self.to = to

    def __call__(self, x: torch.Tensor, layer: int | None = None) -> torch.Tensor:
        d = _as_tensor(self.direction, x)
        _check_feature_shape(d, x, "direction")
        u = d / d.norm(dim=-1, keepdim=True).clamp(min=torch.finfo(d.dtype).tiny)
        coef = (x * u).sum(-1, keepdim=True)
        if self.to == "zero":
            target = torch.zeros_like(coef)
        elif self.to == "mean":
            lead = tuple(range(coef.dim() - d.dim()))
            target = coef.mean(dim=lead, keepdim=True)
        else:
            target = torch.as_tensor(self.to, dtype=x.dtype, device=x.device)
        return x + (target - coef) * u


def _unit_axis(x: torch.Tensor) -> int:
    return -2 if x.dim() == 4 else -1      # heads: (batch, seq, heads, head_dim)


def _units(units, n: int) -> torch.Tensor:
    idx = torch.as_tensor(units, dtype=torch.long).reshape(-1)
    if len(idx) and (int(idx.min()) < -n or int(idx.max()) >= n):
        raise IndexError(f"units {units!r} out of range for {n} units")
    return idx % n


class scale:
    """Multiply some units by ``factor``: MLP neurons (``mlp``; chapter 05's knowledge neurons),
    heads (``heads``: whole heads), or residual dimensions (chapter 13's outlier dimensions).
    ``factor=0`` ablates them."""

    def __init__(self, units, factor):
        self.units = units
        self.factor = factor

    def __call__(self, x: torch.Tensor, layer: int | None = None) -> torch.Tensor:
        axis = _unit_axis(x)
        idx = _units(self.units, x.shape[axis]).to(x.device)
        shape = [1] * x.dim()
        shape[axis] = x.shape[axis]
        f = torch.ones(shape, dtype=x.dtype, device=x.device)
        f = f.index_fill(axis, idx, 0.0)
        factor = self.factor
        if isinstance(factor, torch.Tensor):
            factor = factor.to(device=x.device, dtype=x.dtype)
        keep = f
        sel = 1 - f
        return x * keep + x * sel * factor


class set_value:
    """Set some units (as in :class:`scale`) to ``value`` (a number or a tensor broadcastable to
    the selected units)."""

    def __init__(self, units, value):
        self.units = units
        self.value = value

    def __call__(self, x: torch.Tensor, layer: int | None = None) -> torch.Tensor:
        axis = _unit_axis(x)
        idx = _units(self.units, x.shape[axis]).to(x.device)
        out = x.clone()
        v = self.value
        if isinstance(v, torch.Tensor):
            v = v.to(device=x.device, dtype=x.dtype)
        if axis == -1:
            out[..., idx] = v
        else:
            out[..., idx, :] = v
        return out

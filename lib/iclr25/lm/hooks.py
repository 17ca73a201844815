"""Reading activations: context managers over plain PyTorch forward hooks.

Part of the shared core (:mod:`iclr25.lm`; the package docstring gives the index conventions).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable

import torch
from torch import nn

from ._common import head_dim as _head_dim

__all__ = [
    "decoder_layers",
    "ActivationRecorder",
    "capture_residual",
    "capture_attention",
    "capture_mlp",
    "capture_heads",
]


# --------------------------------------------------------------------------------------------
# hooks
# --------------------------------------------------------------------------------------------

def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The list of decoder layers of a ``transformers`` causal LM (Llama, Mistral, Qwen2, ...).

    Part of the shared core. Looks for ``model.model.layers``, ``model.layers`` and
    ``model.transformer.h`` in that order.
    """
    for path in ("model.layers", "layers", "transformer.h"):
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList):
            return obj
    raise TypeError(f"cannot find the decoder layers of {type(model).__name__} "
                    "(looked for .model.layers, .layers and .transformer.h)")


def _resolve_layers(model: nn.Module, layers: int | Iterable[int] | None) -> list[int]:
    n = len(decoder_layers(model))
    if layers is None:
        return list(range(n))
    chosen = [layers] if isinstance(layers, int) else list(layers)
    out = []
    for layer in chosen:
        if not isinstance(layer, int) or not -n <= layer < n:
            raise IndexError(f"layer {layer!r} out of range for a model with {n} layers")
        out.append(layer % n)
    return sorted(set(out))


#: The statistics ``reduce=`` can keep.
REDUCTIONS = ("mean", "sum", "var", "max", "min")


def _check_positions(positions):
    if positions is None:
        return None
    if isinstance(positions, bool):
        raise TypeError("positions must be an int or a sequence of ints")
    if isinstance(positions, int):
        return positions
    if isinstance(positions, torch.Tensor):
        positions = positions.tolist()
    out = list(positions)
    if not out or any(not isinstance(p, int) or isinstance(p, bool) for p in out):
        raise TypeError(f"positions must be an int or a non-empty sequence of ints, got "
                        f"{positions!r}")
    return out


def _take_positions(tensor: torch.Tensor, positions, axis: int) -> torch.Tensor:
    T = tensor.shape[axis]
    chosen = [positions] if isinstance(positions, int) else positions
    for p in chosen:
        if not -T <= p < T:
            raise IndexError(f"position {p} out of range for a pass of {T} tokens")
    if isinstance(positions, int):
        return tensor.select(axis, positions % T)
    idx = torch.tensor([p % T for p in positions], device=tensor.device)
    return tensor.index_select(axis, idx)


class ActivationRecorder(Mapping):
    """What a ``capture_*`` context manager yields: a read-only mapping ``layer -> tensor``.

    Part of the shared core. ``rec[layer]`` is the activation recorded at the latest forward
    pass; negative layer numbers count from the end. ``rec.all(layer)`` lists every pass when
    the recorder was made with ``keep_all=True``. ``rec.stack()`` stacks all recorded layers
    into one tensor ``(n_layers_recorded, ...)``. Tensors are detached (and on the CPU when
    ``to_cpu=True``).

    ``positions`` keeps only some token positions of each pass (an int drops the position axis,
    a list keeps it; negative numbers count from the end, so ``-1`` is the last token, which is
    the last *prompt* token of a left-padded batch). ``reduce`` keeps, instead of the tensors, a
    running statistic over every row seen in every pass: ``"mean"``, ``"sum"``, ``"var"``,
    ``"max"`` or ``"min"`` over batch and positions (attention maps: over the batch), computed
    in float64; ``rec[l]`` is then the statistic (e.g. ``(d_model,)``) and ``rec.count(l)`` the
    number of rows folded in.

    Attributes
    ----------
    kind
        ``"residual"``, ``"attention"``, ``"mlp"`` or ``"heads"``.
    layers
        The layer numbers being recorded, ascending.
    """

    def __init__(self, kind: str, layers: list[int], n_layers: int, *, to_cpu: bool = False,
                 keep_all: bool = False, positions: int | Iterable[int] | None = None,
                 reduce: str | None = None) -> None:
        if reduce is not None and reduce not in REDUCTIONS:
            raise ValueError(f"unknown reduce {reduce!r}; valid: {', '.join(REDUCTIONS)}")
        if reduce is not None and keep_all:
            raise ValueError("reduce= keeps one running statistic; it cannot be combined with "
                             "keep_all=True")
        self.kind = kind
        self.layers = list(layers)
        self._n_layers = n_layers
        self._to_cpu = to_cpu
        self._keep_all = keep_all
        self._positions = _check_positions(positions)
        self.reduce = reduce
        self._data: dict[int, list[torch.Tensor]] = {}
        self._stats: dict[int, dict[str, Any]] = {}

    def _select(self, tensor: torch.Tensor) -> torch.Tensor:
        if self._positions is None:
            return tensor
        axis = 2 if self.kind == "attention" else 1
        return _take_positions(tensor, self._positions, axis)

    def _feature_dims(self, tensor: torch.Tensor) -> int:
        if self.kind == "attention":   # reduce over the batch only: maps differ per position
            return tensor.dim() - 1
        return 2 if self.kind == "heads" else 1

    def _accumulate(self, layer: int, tensor: torch.Tensor) -> None:
        nf = self._feature_dims(tensor)
        x = tensor.reshape(-1, *tensor.shape[tensor.dim() - nf:]).double()
        st = self._stats.get(layer)
        if st is not None and st["shape"] != tuple(x.shape[1:]):
            raise ValueError(f"reduce={self.reduce!r}: layer {layer}'s activations changed shape "
                             f"from {st['shape']} to {tuple(x.shape[1:])} between passes")
        if st is None:
            st = self._stats[layer] = {"shape": tuple(x.shape[1:]), "n": 0, "dtype": tensor.dtype,
                                       "sum": torch.zeros_like(x[0]), "sumsq": torch.zeros_like(x[0]),
                                       "max": torch.full_like(x[0], -float("inf")),
                                       "min": torch.full_like(x[0], float("inf"))}
        st["n"] += x.shape[0]
        st["sum"] += x.sum(0)
        if self.reduce == "var":
            st["sumsq"] += (x * x).sum(0)
        if self.reduce == "max":
            st["max"] = torch.maximum(st["max"], x.max(0).values)
        if self.reduce == "min":
            st["min"] = torch.minimum(st["min"], x.min(0).values)
        self._data[layer] = []     # marks the layer as recorded

    def _statistic(self, layer: int) -> torch.Tensor:
        st = self._stats[layer]
        n = st["n"]
        if self.reduce == "sum":
            out = st["sum"]
        elif self.reduce == "mean":
            out = st["sum"] / n
        elif self.reduce == "var":   # population variance over every token seen
            mean = st["sum"] / n
            out = (st["sumsq"] / n - mean * mean).clamp(min=0)
        else:
            out = st[self.reduce]
        return out.to(st["dtype"])

    def count(self, layer: int) -> int:
        """How many rows (tokens; for attention maps, sequences) a ``reduce=`` recorder has
        folded into its statistic for ``layer``."""
        key = self._key(layer)
        return int(self._stats[key]["n"]) if self.reduce else sum(
            t.reshape(-1, *t.shape[t.dim() - self._feature_dims(t):]).shape[0]
            for t in self._data[key])

    def _record(self, layer: int, tensor: torch.Tensor) -> None:
        tensor = self._select(tensor.detach())
        if self.reduce is not None:
            self._accumulate(layer, tensor)
            return
        if self._to_cpu:
            tensor = tensor.cpu()
        if self._keep_all:
            self._data.setdefault(layer, []).append(tensor)
        else:
            self._data[layer] = [tensor]

    def _key(self, layer: int) -> int:
        if not isinstance(layer, int):
            raise KeyError(layer)
        key = layer % self._n_layers if -self._n_layers <= layer < 0 else layer
        if key not in self.layers:
            raise KeyError(f"layer {layer} is not recorded by this {self.kind} recorder "
                           f"(recorded layers: {self.layers})")
        if key not in self._data:
            raise KeyError(f"nothing recorded yet for layer {layer}: run a forward pass inside "
                           "the `with` block first")
        return key

    def __getitem__(self, layer: int) -> torch.Tensor:
        key = self._key(layer)
        if self.reduce is not None:
            out = self._statistic(key)
            return out.cpu() if self._to_cpu else out
        return self._data[key][-1]

    def all(self, layer: int) -> list[torch.Tensor]:
        """Every recorded pass for ``layer`` (only the latest unless ``keep_all=True``)."""
        if self.reduce is not None:
            return [self[layer]]
        return list(self._data[self._key(layer)])

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def stack(self) -> torch.Tensor:
        """The latest activations of all recorded layers, stacked on a new first axis."""
        return torch.stack([self[layer] for layer in self])

    def clear(self) -> None:
        """Forget everything recorded so far."""
        self._data.clear()
        self._stats.clear()

    def __repr__(self) -> str:
        shapes = {layer: tuple(self[layer].shape) for layer in list(self)[:3]}
        more = ", ..." if len(self) > 3 else ""
        return (f"ActivationRecorder(kind={self.kind!r}, layers={len(self.layers)}, "
                f"recorded={len(self)}, shapes={shapes}{more})")


@contextlib.contextmanager
def _hooked(model: nn.Module, kind: str, layers, to_cpu: bool, keep_all: bool,
            install: Callable[[ActivationRecorder, int, nn.Module], Any], positions=None,
            reduce=None):
    blocks = decoder_layers(model)
    chosen = _resolve_layers(model, layers)
    rec = ActivationRecorder(kind, chosen, len(blocks), to_cpu=to_cpu, keep_all=keep_all,
                             positions=positions, reduce=reduce)
    handles = []
    try:
        for layer in chosen:
            handles.append(install(rec, layer, blocks[layer]))
        yield rec
    finally:
        for handle in handles:
            handle.remove()


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


def capture_residual(model: nn.Module, layers: int | Iterable[int] | None = None, *,
                     to_cpu: bool = False, keep_all: bool = False,
                  positions: int | Iterable[int] | None = None, reduce: str | None = None):
    """Record the residual stream after each decoder layer.

    Part of the shared core.

    Parameters
    ----------
    model
        A ``transformers`` causal LM (see :func:`decoder_layers`).
    layers
        Layer numbers to record (an int, an iterable, negative numbers count from the end);
        ``None`` records all.
    to_cpu, keep_all, positions, reduce
        See :class:`ActivationRecorder` (``positions=-1``: the last token only;
        ``reduce="mean"``: a running mean instead of the tensors).

    Yields
    ------
    ActivationRecorder
        ``rec[l]`` has shape ``(batch, seq, d_model)`` and equals
        ``output_hidden_states=True``'s ``hidden_states[l + 1]`` for all but the last layer;
        for the last layer, ``hidden_states[-1]`` is ``model.model.norm(rec[-1])`` (see the
        module docstring).
    """
    def install(rec, layer, block):
        return block.register_forward_hook(lambda mod, args, out: rec._record(layer, _first(out)))

    return _hooked(model, "residual", layers, to_cpu, keep_all, install, positions, reduce)


def _set_attn(model: nn.Module, impl: str | None) -> None:
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:  # pragma: no cover - older transformers
        model.config._attn_implementation = impl


@contextlib.contextmanager
def capture_attention(model: nn.Module, layers: int | Iterable[int] | None = None, *,
                      to_cpu: bool = False, keep_all: bool = False,
                  positions: int | Iterable[int] | None = None, reduce: str | None = None):
    """Record attention probabilities (after softmax) per layer.

    Part of the shared core. Fused attention kernels (SDPA, flash) never form the probability
    matrix, so inside the block the model runs ``transformers``' eager attention; the previous
    implementation is restored on exit. Eager and SDPA attention agree to float rounding
    (logits differ by ~1e-5), not bit for bit.

    Yields
    ------
    ActivationRecorder
        ``rec[l]`` has shape ``(batch, heads, query, key)``: each row sums to 1 and is zero
        above the diagonal (causal). With grouped-query attention (SmolLM2: 9 query heads
        sharing 3 key/value heads) there is one map per *query* head.
    """
    config = getattr(model, "config", None)
    previous = getattr(config, "_attn_implementation", None) if config is not None else None
    switch = config is not None and previous not in (None, "eager")
    if switch:
        _set_attn(model, "eager")
    try:
        def install(rec, layer, block):
            attn = getattr(block, "self_attn", None)
            if attn is None:
                raise TypeError(f"decoder layer {layer} has no .self_attn module")

            def hook(mod, args, out):
                weights = out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else None
                if weights is None:
                    raise RuntimeError(
                        f"layer {layer}'s attention returned no probabilities; this model's "
                        "attention implementation cannot expose them")
                rec._record(layer, weights)

            return attn.register_forward_hook(hook)

        with _hooked(model, "attention", layers, to_cpu, keep_all, install, positions,
                     reduce) as rec:
            yield rec
    finally:
        if switch:
            _set_attn(model, previous)


def capture_mlp(model: nn.Module, layers: int | Iterable[int] | None = None, *,
                to_cpu: bool = False, keep_all: bool = False,
                positions: int | Iterable[int] | None = None, reduce: str | None = None):
    """Record the MLP's hidden activations: the input of ``mlp.down_proj``.

    Part of the shared core. For a gated (SwiGLU) MLP such as Llama's this is
    ``act(gate_proj(x)) * up_proj(x)``, the "neurons" that knowledge-neuron and SAE work reads.

    Yields
    ------
    ActivationRecorder
        ``rec[l]`` has shape ``(batch, seq, d_ff)`` (``d_ff`` = 1536 for SmolLM2-135M).
    """
    def install(rec, layer, block):
        down = getattr(getattr(block, "mlp", None), "down_proj", None)
        if down is None:
            raise TypeError(f"decoder layer {layer} has no .mlp.down_proj module")
        return down.register_forward_pre_hook(lambda mod, args: rec._record(layer, args[0]))

    return _hooked(model, "mlp", layers, to_cpu, keep_all, install, positions, reduce)


def capture_heads(model: nn.Module, layers: int | Iterable[int] | None = None, *,
                  to_cpu: bool = False, keep_all: bool = False,
                  positions: int | Iterable[int] | None = None, reduce: str | None = None):
    """Record each attention head's output before the output projection ``o_proj``.

    Part of the shared core. ``o_proj(rec[l].flatten(-2))`` is the attention block's output
    (what is added to the residual stream), and head ``h``'s own contribution is
    ``rec[l][..., h, :] @ o_proj.weight[:, h*head_dim:(h+1)*head_dim].T``.

    Yields
    ------
    ActivationRecorder
        ``rec[l]`` has shape ``(batch, seq, heads, head_dim)`` (9 x 64 for SmolLM2-135M).
    """
    def install(rec, layer, block):
        attn = getattr(block, "self_attn", None)
        o_proj = getattr(attn, "o_proj", None)
        if o_proj is None:
            raise TypeError(f"decoder layer {layer} has no .self_attn.o_proj module")
        hd = _head_dim(model, attn)

        def pre_hook(mod, args):
            x = args[0]
            rec._record(layer, x.reshape(*x.shape[:-1], x.shape[-1] // hd, hd))

        return o_proj.register_forward_pre_hook(pre_hook)

    return _hooked(model, "heads", layers, to_cpu, keep_all, install, positions, reduce)



"""LoRA in plain PyTorch: low-rank adapters on a model's linear layers (Hu et al., 2022).

Part of the shared core (:mod:`iclr25.lm`). Chapters 08 (ReFAT) and 17 (soft preference
learning) fine-tune SmolLM2 with it; :func:`iclr25.lm.train` trains it.

A wrapped linear layer computes ``W x + (alpha / r) * B A dropout(x)`` with ``A`` (r x d_in)
Kaiming-uniform and ``B`` (d_out x r) zero at init, so a fresh adapter leaves the model unchanged
(tested). Only ``A`` and ``B`` train; every other parameter is frozen by :func:`add`.
(Plain torch rather than ``peft``: a few dozen lines, no dependency on ``peft`` following the
pinned ``transformers``.)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch import nn

from .hooks import _resolve_layers, decoder_layers

__all__ = ["LoRALinear", "add", "merge", "remove", "save", "load", "trainable_parameters",
           "lora_config"]


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update (chapter 08, 17)."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRA wraps nn.Linear layers, got {type(base).__name__}")
        self.base = base
        self.r, self.alpha = int(r), float(alpha)
        self.scaling = self.alpha / self.r
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(self.r, base.in_features, dtype=w.dtype,
                                               device=w.device))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, self.r, dtype=w.dtype,
                                               device=w.device))
        bound = 1 / math.sqrt(base.in_features)   # nn.Linear's default (Kaiming uniform, a=sqrt 5)
        with torch.no_grad():
            a = torch.rand(self.lora_A.shape, generator=generator, dtype=torch.float32)
            self.lora_A.copy_((a * 2 - 1) * bound)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    @property
    def weight(self) -> torch.Tensor:   # so code that reads .weight of a projection still works
        return self.base.weight

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def delta_weight(self) -> torch.Tensor:
        """``(alpha / r) B A``: what :func:`merge` adds to the base weight."""
        return (self.lora_B @ self.lora_A) * self.scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        update = (self.dropout(x) @ self.lora_A.t()) @ self.lora_B.t()
        return self.base(x) + update * self.scaling

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha:g}"


def _targets_in(model: nn.Module, targets: Sequence[str], layers) -> list[tuple[int, str]]:
    blocks = decoder_layers(model)
    chosen = _resolve_layers(model, layers)
    found = []
    names_seen: set[str] = set()
    for layer in chosen:
        for name, mod in blocks[layer].named_modules():
            names_seen.add(name.rsplit(".", 1)[-1])
            if name.rsplit(".", 1)[-1] in targets and isinstance(mod, (nn.Linear, LoRALinear)):
                found.append((layer, name))
    missing = [t for t in targets if not any(n.rsplit(".", 1)[-1] == t for _, n in found)]
    if missing:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in blocks[chosen[0]].named_modules()
                         if isinstance(m, nn.Linear)}) if chosen else []
        raise ValueError(f"no linear layer named {missing} in the decoder layers; valid "
                         f"targets: {linear}")
    return found


def _set_module(root: nn.Module, dotted: str, new: nn.Module) -> None:
    parent_name, _, child = dotted.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, new)


def add(model: nn.Module, r: int = 8, alpha: float = 16.0, dropout: float = 0.0,
        targets: Sequence[str] = ("q_proj", "v_proj"), layers: int | Iterable[int] | None = None,
        *, seed: int = 0) -> nn.Module:
    """Wrap the ``targets`` linear layers of ``layers`` with LoRA adapters; freeze the rest.

    Part of the shared core (chapters 08, 17). In place; returns ``model``.

    Parameters
    ----------
    r, alpha, dropout
        The rank, the scale (the update is multiplied by ``alpha / r``) and the dropout on the
        adapter's input.
    targets
        Names of linear layers inside each decoder layer (Llama: ``q_proj``, ``k_proj``,
        ``v_proj``, ``o_proj``, ``gate_proj``, ``up_proj``, ``down_proj``).
    layers
        Decoder layers to adapt (``None``: all; e.g. ``range(26, 30)`` for the top four).
    seed
        Seeds the initialisation of ``A`` (``B`` starts at zero).
    """
    if not isinstance(r, int) or r < 1:
        raise ValueError(f"r must be a positive integer, got {r!r}")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
    if isinstance(targets, str):
        targets = (targets,)
    if any(isinstance(m, LoRALinear) for m in model.modules()):
        raise ValueError("the model already has LoRA adapters; merge or remove them first")
    gen = torch.Generator().manual_seed(seed)
    blocks = decoder_layers(model)
    found = _targets_in(model, tuple(targets), layers)
    for p in model.parameters():
        p.requires_grad_(False)
    for layer, name in found:
        base = blocks[layer].get_submodule(name)
        _set_module(blocks[layer], name, LoRALinear(base, r, alpha, dropout, generator=gen))
    model._iclr25_lora = {"r": r, "alpha": float(alpha), "dropout": float(dropout),
                          "targets": list(targets),
                          "layers": sorted({layer for layer, _ in found})}
    return model


def lora_config(model: nn.Module) -> dict | None:
    """The ``add`` arguments of the model's adapters (``None`` when it has none)."""
    return getattr(model, "_iclr25_lora", None) if any(
        isinstance(m, LoRALinear) for m in model.modules()) else None


def _lora_modules(model: nn.Module) -> list[tuple[str, LoRALinear]]:
    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoRALinear)]


@torch.no_grad()
def merge(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base weight (``W += alpha/r B A``) and unwrap it.

    Part of the shared core. The merged model computes what the adapted one did (to float
    rounding; tested) at the base model's cost. In place; returns ``model``. Parameters stay
    frozen.
    """
    mods = _lora_modules(model)
    if not mods:
        raise ValueError("the model has no LoRA adapters to merge")
    for name, m in mods:
        m.base.weight += m.delta_weight().to(m.base.weight.dtype)
        _set_module(model, name, m.base)
    if hasattr(model, "_iclr25_lora"):
        del model._iclr25_lora
    return model


def remove(model: nn.Module) -> nn.Module:
    """Unwrap every adapter without merging (back to the base model). In place."""
    for name, m in _lora_modules(model):
        _set_module(model, name, m.base)
    if hasattr(model, "_iclr25_lora"):
        del model._iclr25_lora
    return model


def trainable_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """The parameters that require grad, by name (after :func:`add`: the adapters' A and B).

    Part of the shared core; ``sum(p.numel() for p in trainable_parameters(m).values())``
    counts them.
    """
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def save(model: nn.Module, path: str | os.PathLike) -> Path:
    """Save the adapters (A and B of each, and the ``add`` arguments) to a safetensors file.

    Part of the shared core. Only the adapters are written (kilobytes to a few MB), not the
    base model.
    """
    from safetensors.torch import save_file

    mods = _lora_modules(model)
    if not mods:
        raise ValueError("the model has no LoRA adapters to save")
    tensors = {}
    for name, m in mods:
        tensors[f"{name}.lora_A"] = m.lora_A.detach().contiguous().cpu()
        tensors[f"{name}.lora_B"] = m.lora_B.detach().contiguous().cpu()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"iclr25_lora": json.dumps(lora_config(model) or {})}
    save_file(tensors, str(path), metadata=meta)
    return path


def load(model: nn.Module, path: str | os.PathLike) -> nn.Module:
    """Add adapters as saved by :func:`save` to ``model`` (the same base model) and load them.

    Part of the shared core. In place; returns ``model``. Raises ``FileNotFoundError`` for a
    missing file and ``ValueError`` when the file does not fit the model.
    """
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no LoRA adapter file at {path}")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if "iclr25_lora" not in meta:
        raise ValueError(f"{path} is not a LoRA file written by iclr25.lm.lora.save")
    cfg = json.loads(meta["iclr25_lora"])
    if not lora_config(model):
        add(model, r=cfg["r"], alpha=cfg["alpha"], dropout=cfg["dropout"],
            targets=cfg["targets"], layers=cfg["layers"])
    mods = dict(_lora_modules(model))
    want = {f"{n}.lora_{ab}" for n in mods for ab in "AB"}
    if set(tensors) != want:
        raise ValueError(f"{path} does not fit this model's adapters: missing "
                         f"{sorted(want - set(tensors))[:3]}, unexpected "
                         f"{sorted(set(tensors) - want)[:3]}")
    with torch.no_grad():
        for name, m in mods.items():
            for ab in "AB":
                p = getattr(m, f"lora_{ab}")
                t = tensors[f"{name}.lora_{ab}"]
                if t.shape != p.shape:
                    raise ValueError(f"{path}: {name}.lora_{ab} has shape {tuple(t.shape)}, the "
                                     f"model's has {tuple(p.shape)}")
                p.copy_(t.to(p.dtype))
    return model

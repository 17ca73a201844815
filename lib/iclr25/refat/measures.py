"""The replicates the chapter's registry (``book/claims/08-refat.yaml``) judges: per-prompt values
and their controls. Chapter 08 (ReFAT). The notebooks compute these and hand them to
:class:`iclr25.registry.Registry`; nothing here sets a threshold or a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

__all__ = ["placement_values", "random_placement", "refusals", "random_like", "shift_cosines", "strongest_attack", "log_ratio_of_medians",
           "trained_layers", "universal_suffix", "attack_inputs", "robustness_refusals"]


def placement_values(pos, neg) -> np.ndarray:
    """Per positive score: the fraction of negative scores below it (ties count one half). Their
    mean is the AUROC (:func:`iclr25.refat.auroc`). Chapter 08."""
    pos, neg = np.asarray(pos, float).ravel(), np.asarray(neg, float).ravel()
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("placement_values needs at least one positive and one negative score")
    s = np.sort(neg)
    below = np.searchsorted(s, pos, side="left")
    ties = np.searchsorted(s, pos, side="right") - below
    return (below + 0.5 * ties) / len(neg)


def random_placement(acts_pos: torch.Tensor, acts_neg: torch.Tensor, n_dirs: int = 100,
                     seed: int = 0) -> np.ndarray:
    """The random-direction control of :func:`placement_values`: for ``n_dirs`` random unit
    directions, the placement value of each positive row of ``acts_pos`` (``(n, d)``) against
    ``acts_neg``, each direction with its better sign (the one with AUROC >= 0.5), averaged over
    the directions: ``(n,)``. Chapter 08."""
    a, b = torch.as_tensor(acts_pos).double(), torch.as_tensor(acts_neg).double()
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"acts must be (n, d) with equal d, got {tuple(a.shape)} and {tuple(b.shape)}")
    g = torch.Generator().manual_seed(seed)
    dirs = torch.randn(n_dirs, a.shape[1], generator=g, dtype=torch.float64)
    out = np.zeros(len(a))
    pa, pb = (a @ dirs.T).numpy(), (b @ dirs.T).numpy()
    for k in range(n_dirs):
        v = placement_values(pa[:, k], pb[:, k])
        if v.mean() < 0.5:
            v = placement_values(-pa[:, k], -pb[:, k])
        out += v
    return out / n_dirs


def refusals(model, tok, prompts: Sequence[str], *, max_new_tokens: int, edit=None,
             chat: bool = True, batch_size: int = 16) -> np.ndarray:
    """Refusal (0/1, prefix judge) of each prompt's greedy reply, optionally inside ``edit()``
    (a context manager factory); ``chat=False`` for prompts already chat-formatted (prefilling).
    Chapter 08."""
    import contextlib

    from .. import lm
    from .judges import prefix_refusal

    with (edit() if edit is not None else contextlib.nullcontext()):
        texts = lm.generate_batch(model, tok, list(prompts), max_new_tokens=max_new_tokens,
                                  batch_size=batch_size, chat=chat).texts
    return prefix_refusal(texts).astype(float)


def random_like(rf, seed: int = 0, *, acts_neg: torch.Tensor | None = None):
    """A :class:`~iclr25.refat.RefusalFeature` at ``rf``'s layers with random directions of the
    same norms (the random-direction control of RFA and activation addition). ``acts_neg``
    (``(n, len(layers), d)``, harmless activations) sets its harmless mean projection, so mean
    mode moves the projection to the harmless mean of that direction; without it the mean is 0.
    Chapter 08."""
    from .features import RefusalFeature

    g = torch.Generator().manual_seed(seed)
    v = torch.randn(rf.raw.shape, generator=g, dtype=torch.float64)
    v = v / v.norm(dim=-1, keepdim=True) * rf.raw.double().norm(dim=-1, keepdim=True)
    u = v / v.norm(dim=-1, keepdim=True)
    if acts_neg is None:
        mu = torch.zeros(len(rf.layers), dtype=torch.float64)
    else:
        b = torch.as_tensor(acts_neg).double()
        if b.shape[1:] != rf.raw.shape:
            raise ValueError(f"acts_neg must be (n, {rf.raw.shape[0]}, {rf.raw.shape[1]}), got {tuple(b.shape)}")
        mu = (b * u).sum(-1).mean(0)
    return RefusalFeature(list(rf.layers), v.float(), mu.float(), mu.float())


def shift_cosines(acts_attacked: torch.Tensor, acts_clean: torch.Tensor, rf,
                  layers: Sequence[int]) -> np.ndarray:
    """Per prompt: ``cos(h_l(attacked) - h_l(clean), -r_l)`` averaged over ``layers`` (``acts``:
    paired ``(n, len(rf.layers), d)``). Chapter 08 (the paper's Sec. 3.2, per prompt)."""
    a, c = torch.as_tensor(acts_attacked).double(), torch.as_tensor(acts_clean).double()
    if a.shape != c.shape:
        raise ValueError(f"paired activations needed, got {tuple(a.shape)} and {tuple(c.shape)}")
    idx = [rf.index(l) for l in layers]
    d = (a - c)[:, idx]                                     # (n, L, d)
    r = -rf.raw.double()[idx]                               # (L, d)
    cos = (d * r).sum(-1) / (d.norm(dim=-1) * r.norm(dim=-1)).clamp(min=1e-12)
    return cos.mean(1).numpy()


def strongest_attack(rates: Mapping[str, float]) -> str:
    """The attack with the lowest refusal rate (the first of equals, in the mapping's order)."""
    if not rates:
        raise ValueError("no attacks given")
    names = list(rates)
    return names[int(np.argmin([rates[k] for k in names]))]


def log_ratio_of_medians(num_seconds, den_seconds) -> float:
    """``ln(median(num) / median(den))`` (chapter 08: a step's cost against another's)."""
    a, b = np.median(np.asarray(num_seconds, float)), np.median(np.asarray(den_seconds, float))
    if not (a > 0 and b > 0):
        raise ValueError(f"step times must be positive, got medians {a} and {b}")
    return float(np.log(a / b))


def trained_layers(n_layers: int, lora_layers: int) -> list[int]:
    """The stream layers refusal training moves: the inputs of the adapted decoder layers and the
    stream after the last one, ``n - lora_layers .. n``; layer ``n - lora_layers`` itself is the
    input of the lowest adapted layer, which training does not change, so it is left out."""
    return list(range(n_layers - lora_layers + 1, n_layers + 1))


def universal_suffix(gcg_results: Sequence[Mapping]) -> str:
    """The universal GCG-lite suffix: of the suffixes found on training prompts (the dicts of
    :func:`iclr25.refat.gcg_suffixes`), the one with the lowest final target loss. Chapter 08."""
    if not gcg_results:
        raise ValueError("no GCG-lite results given")
    best = min(gcg_results, key=lambda g: g["losses"][-1])
    return best["suffix"]


def attack_inputs(tok, prompts: Sequence[str], attack: str, suffix: str | None = None):
    """``(inputs, chat)``: ``prompts`` under ``attack`` for :func:`refusals` (chapter 08):
    ``"template: <name>"`` (a jailbreak template), ``"GCG-lite"`` (the universal ``suffix``
    appended), ``"prefilling"`` (the reply started with :data:`~iclr25.refat.data.PREFILL`;
    chat-formatted here, so ``chat=False``) or ``"none"``."""
    from .data import apply_template, prefill_texts

    prompts = list(prompts)
    if attack == "none":
        return prompts, True
    if attack.startswith("template: "):
        return apply_template(prompts, attack[len("template: "):]), True
    if attack == "GCG-lite":
        if suffix is None:
            raise ValueError("attack 'GCG-lite' needs the universal suffix (suffix=...)")
        sep = "" if suffix.startswith(" ") else " "
        return [p + sep + suffix for p in prompts], True
    if attack == "prefilling":
        return prefill_texts(tok, prompts), False
    raise ValueError(f"unknown attack {attack!r}; valid: none, 'template: <name>', GCG-lite, prefilling")


def robustness_refusals(model, tok, harmful: Sequence[str], harmless: Sequence[str], *, attacks,
                        rf, suffix: str | None, max_new_tokens: int) -> dict[str, np.ndarray]:
    """Per-prompt refusal (0/1) of ``model`` on ``harmful`` under each of ``attacks`` (names of
    :func:`attack_inputs`) and under white-box RFA with ``rf`` (the default positions, mean mode),
    and on ``harmless`` with no attack (``"over-refusal"``). Chapter 08 (``03-refat-training``)."""
    from .features import rfa

    out = {}
    chat = [a for a in attacks if a != "prefilling"]
    groups = [attack_inputs(tok, harmful, a, suffix)[0] for a in chat] + [list(harmless)]
    flat = refusals(model, tok, [p for g in groups for p in g], max_new_tokens=max_new_tokens)
    i = 0
    for name, g in zip(chat + ["over-refusal"], groups):
        out[name], i = flat[i:i + len(g)], i + len(g)
    if "prefilling" in attacks:
        out["prefilling"] = refusals(model, tok, attack_inputs(tok, harmful, "prefilling")[0],
                                     max_new_tokens=max_new_tokens, chat=False)
    out["RFA"] = refusals(model, tok, harmful, max_new_tokens=max_new_tokens,
                          edit=lambda: rfa(model, rf))
    return out

"""Editing facts through their knowledge neurons, and how to score an edit (chapter 05).

A knowledge neuron ``(l, i)`` writes the column ``W_down[:, i]`` of layer ``l``'s
``down_proj`` into the residual stream (Dai et al.'s "value slot"). Two edits:

- **erase**: set the column to 0 (the neuron's activation no longer reaches the residual);
- **update** (the paper's Eq. 2, after Dai et al.): move the column away from the old answer's
  output embedding and towards the new one,
  :math:`v_i \\leftarrow v_i - \\lambda_1 E(t) + \\lambda_2 E(t')`.

:func:`edited` applies an edit inside a ``with`` block and restores the weights on exit.
:func:`erase_scores` measures one edit the paper's way: reliability on the query whose KNs were
used, generalisation on held-out paraphrases, locality on other facts' queries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .attribution import _mlp_down

__all__ = ["MODES", "edited", "EditScores", "erase_scores", "clean_probs"]

MODES = ("erase", "update")


@contextlib.contextmanager
def edited(model: nn.Module, units, mode: str = "erase", *, old_token: int | None = None,
           new_token: int | None = None, lam1: float = 1.0, lam2: float = 1.0) -> Iterator[int]:
    """Apply ``mode`` to the ``down_proj`` columns of ``units`` (flat ids ``layer * d_ff + i``)
    inside the block; restored on exit, also when the body raises (chapter 05). Yields the
    number of columns edited."""
    if mode not in MODES:
        raise ValueError(f"unknown edit mode {mode!r}; valid: {', '.join(MODES)}")
    downs = _mlp_down(model)
    d_ff = downs[0].in_features
    units = sorted(int(u) for u in units)
    if units and not 0 <= units[0] <= units[-1] < len(downs) * d_ff:
        raise IndexError(f"unit ids must be in [0, {len(downs) * d_ff})")
    if mode == "update" and (old_token is None or new_token is None):
        raise ValueError("mode='update' needs old_token and new_token")
    saved = []
    try:
        with torch.no_grad():
            E = model.get_output_embeddings().weight if mode == "update" else None
            for u in units:
                l, i = divmod(u, d_ff)
                W = downs[l].weight
                saved.append((W, i, W[:, i].clone()))
                if mode == "erase":
                    W[:, i] = 0
                else:
                    W[:, i] += -lam1 * E[old_token].to(W.dtype) + lam2 * E[new_token].to(W.dtype)
        yield len(units)
    finally:
        with torch.no_grad():
            for W, i, col in reversed(saved):
                W[:, i] = col


@dataclass
class EditScores:
    """One erasure's scores (chapter 05), each in [0, 1], higher is better.

    rel
        relative drop of ``p(target | q_edit)`` on the query (or queries) whose KNs were used;
    gen
        the same on held-out paraphrases of the fact;
    loc
        ``1 - mean |relative change|`` of other facts' answer probabilities;
    n_units
        how many neurons were erased.
    """

    rel: float
    gen: float
    loc: float
    n_units: int

    @property
    def avg(self) -> float:
        return (self.rel + self.gen + self.loc) / 3


def _parts(edit_queries, heldout_queries, target, other_queries, other_targets) -> dict:
    return {"edit": (list(edit_queries), [target] * len(edit_queries)),
            "heldout": (list(heldout_queries), [target] * len(heldout_queries)),
            "other": (list(other_queries), list(other_targets))}


def _probs(model, tokenizer, parts: dict, batch_size: int) -> dict:
    from .effects import scaled_prob

    qs = [q for k in parts for q in parts[k][0]]
    tg = [t for k in parts for t in parts[k][1]]
    p = scaled_prob(model, tokenizer, qs, tg, [()] * len(qs), batch_size=batch_size)
    out, i = {}, 0
    for k in parts:
        out[k] = p[i:i + len(parts[k][0])]
        i += len(parts[k][0])
    return out


def clean_probs(model, tokenizer, edit_queries: Sequence[str], heldout_queries: Sequence[str],
                target: int, other_queries: Sequence[str], other_targets: Sequence[int], *,
                batch_size: int = 32) -> dict:
    """The unedited probabilities that :func:`erase_scores` compares with, to compute once and
    pass as ``before`` when several edits of one fact are scored (chapter 05)."""
    return _probs(model, tokenizer, _parts(edit_queries, heldout_queries, target, other_queries,
                                           other_targets), batch_size)


def erase_scores(model, tokenizer, units, edit_queries: Sequence[str], heldout_queries: Sequence[str],
                 target: int, other_queries: Sequence[str], other_targets: Sequence[int], *,
                 before: dict | None = None, batch_size: int = 32) -> EditScores:
    """Erase ``units`` and score the edit (see :class:`EditScores`; chapter 05). ``before`` may
    hold the clean probabilities ``{"edit", "heldout", "other"}`` to skip recomputing them."""
    parts = _parts(edit_queries, heldout_queries, target, other_queries, other_targets)

    def probs() -> dict:
        return _probs(model, tokenizer, parts, batch_size)

    if before is None:
        before = probs()
    with edited(model, units, "erase") as n:
        after = probs()

    def drop(k):
        if not len(before[k]):
            return float("nan")
        return float(((before[k] - after[k]) / before[k].clamp(min=1e-12)).clamp(0, 1).mean())

    change = ((after["other"] - before["other"]) / before["other"].clamp(min=1e-12)).abs().clamp(0, 1)
    loc = float(1 - change.mean()) if len(change) else float("nan")
    return EditScores(drop("edit"), drop("heldout"), loc, n)

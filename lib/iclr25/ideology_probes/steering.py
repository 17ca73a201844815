"""ITI-style steering of the most predictive heads (the paper's Fig. 4, A5, A7, A8).

For each chosen head ``(l, h)`` the probe's direction is added to the head's output (before
``o_proj``, so it passes through the output projection) at the last position of every forward
pass: the last prompt token, then each new token while generating:

    z_{l,h} <- z_{l,h} + alpha * sigma_{l,h} * u_{l,h},   u = unit(w_{l,h} * std(z_{l,h}))

``w`` is the head's ridge coefficient and ``std`` the per-dimension standard deviation of the
head's activations over the probing prompts (the paper's ``coef * std``); we normalise it to a
unit vector ``u`` and scale by ``sigma``, the standard deviation of the activations along ``u``,
so ``alpha`` counts standard deviations (ITI's convention) whatever the label's units.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from .. import lm
from ..progress import progress

__all__ = ["steering_directions", "steer_heads", "generate_steered", "steering_grid", "random_heads",
           "heads_in_layers"]


def steering_directions(coef: np.ndarray, acts: np.ndarray,
                        heads: Sequence[tuple[int, int]]) -> dict[int, torch.Tensor]:
    """Per-layer direction tensors ``{layer: (n_heads, head_dim)}`` (zero rows for heads not
    chosen) for :func:`steer_heads`: ``sigma * unit(coef * std)`` per chosen head.

    Defined in chapter 10 (ideology probes). ``coef`` is the probe's ``(L, H, d)``
    coefficients (:attr:`HeadProbe.coef_`), ``acts`` the ``(n, L, H, d)`` activations it was
    fitted on."""
    coef = np.asarray(coef)
    acts = np.asarray(acts)
    if coef.ndim != 3 or acts.ndim != 4 or acts.shape[1:] != coef.shape:
        raise ValueError(f"coef must be (L, H, d) and acts (n, L, H, d) with the same (L, H, d); "
                         f"got {coef.shape} and {acts.shape}")
    L, H, d = coef.shape
    heads = [(int(l), int(h)) for l, h in heads]
    if not heads:
        raise ValueError("heads is empty: choose at least one (layer, head)")
    bad = [(l, h) for l, h in heads if not (0 <= l < L and 0 <= h < H)]
    if bad:
        raise ValueError(f"heads {bad} out of range for {L} layers x {H} heads")
    out: dict[int, torch.Tensor] = {}
    for l, h in heads:
        z = acts[:, l, h, :].astype(np.float64)
        v = coef[l, h] * z.std(0)                      # the paper's coef * std
        norm = np.linalg.norm(v)
        if norm == 0:
            continue
        u = v / norm
        sigma = float((z @ u).std())                   # SD of the activations along u
        out.setdefault(l, torch.zeros(H, d))
        out[l][h] = torch.as_tensor(sigma * u, dtype=torch.float32)
    return out


@contextlib.contextmanager
def steer_heads(model: nn.Module, directions: dict[int, torch.Tensor], alpha: float):
    """Add ``alpha * directions[l]`` to the head outputs of layer ``l`` at the last position of
    every forward pass inside the block (works while generating; hooks removed on exit).

    Defined in chapter 10 (ideology probes); built on :func:`iclr25.lm.intervene` at site
    ``"heads"``."""
    if not directions:
        raise ValueError("no directions to steer with")
    dirs = {int(l): torch.as_tensor(v) for l, v in directions.items()}

    def edit(x, layer):
        return x + alpha * dirs[layer].to(device=x.device, dtype=x.dtype)

    with lm.intervene(model, "heads", edit, layers=sorted(dirs), positions=-1) as iv:
        yield iv


class _RowAlphas:
    """The edit of a batch in which each row has its own alpha: ``x + alpha_row * d_layer``."""

    def __init__(self, dirs: dict[int, torch.Tensor], alpha_rows: torch.Tensor) -> None:
        self.dirs, self.alpha_rows = dirs, alpha_rows

    def __call__(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        if x.shape[0] != len(self.alpha_rows):
            raise RuntimeError(f"a batch of {x.shape[0]} rows but {len(self.alpha_rows)} alphas")
        a = self.alpha_rows.to(device=x.device, dtype=x.dtype).view(-1, *([1] * (x.dim() - 1)))
        return x + a * self.dirs[layer].to(device=x.device, dtype=x.dtype)


def generate_steered(model: nn.Module, tokenizer, prompts: Sequence[str],
                     directions: dict[int, torch.Tensor] | None, alphas: Sequence[float], *,
                     max_new_tokens: int = 40, batch_size: int | None = None,
                     desc: str | None = "steering") -> pd.DataFrame:
    """Greedy continuations of ``prompts`` (already chat-formatted, e.g.
    :func:`~iclr25.ideology_probes.data.steering_prompts`) for each ``alpha``: a table with
    ``alpha``, ``prompt`` (index), ``text``. ``alpha = 0`` (or ``directions=None``) is the
    unsteered model.

    All (alpha, prompt) rows decode in one batch of :func:`iclr25.lm.generate_batch`, each row
    with its own alpha (``batch_size=None``); the row order is the one ``generate_batch`` uses
    (prompts sorted by length, stable), and the tests check that the texts equal one call per
    alpha. An int ``batch_size`` instead runs one call per alpha.

    Defined in chapter 10 (ideology probes)."""
    alphas = [float(a) for a in alphas]
    prompts = list(prompts)
    if not alphas or not prompts:
        raise ValueError("need at least one alpha and one prompt")
    if batch_size is not None or not directions:
        rows = []
        for a in progress(alphas, desc=desc):
            ctx = (steer_heads(model, directions, a) if directions and a != 0
                   else contextlib.nullcontext())
            with ctx:
                gens = lm.generate_batch(model, tokenizer, prompts, chat=False,
                                         max_new_tokens=max_new_tokens, batch_size=batch_size or 16)
            rows += [{"alpha": a, "prompt": i, "text": t} for i, t in enumerate(gens.texts)]
        return pd.DataFrame(rows)
    jobs = [(a, i) for a in alphas for i in range(len(prompts))]
    texts = [prompts[i] for _, i in jobs]
    lens = [len(tokenizer(t)["input_ids"]) for t in texts]            # as generate_batch encodes
    order = sorted(range(len(jobs)), key=lambda k: -lens[k])          # and sorts them
    alpha_rows = torch.tensor([jobs[k][0] for k in order], dtype=torch.float32)
    dirs = {int(l): torch.as_tensor(v) for l, v in directions.items()}
    with lm.intervene(model, "heads", _RowAlphas(dirs, alpha_rows), layers=sorted(dirs),
                      positions=-1):
        gens = lm.generate_batch(model, tokenizer, texts, chat=False,
                                 max_new_tokens=max_new_tokens, batch_size=len(texts))
    return pd.DataFrame([{"alpha": a, "prompt": i, "text": t} for (a, i), t in zip(jobs, gens.texts)])


def steering_grid(model: nn.Module, tokenizer, prompts: Sequence[str],
                  configs: dict[str, dict[int, torch.Tensor]], alphas: Sequence[float], *,
                  max_new_tokens: int = 40) -> pd.DataFrame:
    """:func:`generate_steered` for several head sets (``{name: directions}``), each set's
    non-zero alphas in one batch, the unsteered ``alpha = 0`` texts generated once and shared:
    a table with ``config``, ``alpha``, ``prompt``, ``text``.

    Defined in chapter 10 (ideology probes)."""
    if not configs:
        raise ValueError("configs is empty: pass {name: directions}")
    alphas = [float(a) for a in alphas]
    base = generate_steered(model, tokenizer, prompts, None, [0.0], max_new_tokens=max_new_tokens,
                            desc=None) if 0.0 in alphas else None
    parts = []
    for name in progress(list(configs), desc="head sets"):
        df = generate_steered(model, tokenizer, prompts, configs[name],
                              [a for a in alphas if a != 0.0], max_new_tokens=max_new_tokens)
        if base is not None:
            df = pd.concat([base, df], ignore_index=True)
        parts.append(df.assign(config=name))
    out = pd.concat(parts, ignore_index=True)
    return out[["config", "alpha", "prompt", "text"]].sort_values(["config", "alpha", "prompt"],
                                                                  kind="stable").reset_index(drop=True)


def random_heads(n_layers: int, n_heads: int, k: int, *, seed: int = 0,
                 exclude: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """``k`` heads drawn uniformly (a control for the top-``k`` heads), avoiding ``exclude``."""
    pool = [(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in set(exclude)]
    if not 1 <= k <= len(pool):
        raise ValueError(f"k must be in [1, {len(pool)}], got {k!r}")
    idx = np.random.default_rng(seed).choice(len(pool), size=k, replace=False)
    return [pool[i] for i in sorted(idx)]


def heads_in_layers(rho: np.ndarray, layers: Sequence[int], k: int) -> list[tuple[int, int]]:
    """The ``k`` best heads (by ``rho``) among ``layers`` only (Fig. A7: early vs late layers)."""
    masked = np.full_like(rho, -np.inf)
    layers = list(layers)
    masked[layers] = rho[layers]
    n = int(np.isfinite(masked).sum())
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}] for layers {layers}, got {k!r}")
    flat = np.argsort(-masked.ravel(), kind="stable")[:k]
    H = rho.shape[1]
    return [(int(i // H), int(i % H)) for i in flat]


"""The replicates and controls that chapter 11's notebooks hand to the claims registry
(``book/claims/11-retrieval-problem.yaml``).

The registry judges a finding from replicates: per test example (a bootstrap over examples of one
trained model) or per training seed (a t interval). The functions here turn the chapter's models
and measurements into those replicates, and compute the registered controls (the random-head
ablation, the emergence gap, the composed patching's "other heads"), so the notebooks stay thin.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .model import binding_predictions, predict
from .task import RetrievalTask, binding_targets

__all__ = ["correct", "correct_by_depth", "binding_correct_per_context", "emergence_gap",
           "control_heads", "mc_counts", "composed_stats", "hop_patch_stats", "seed_accuracies"]


def correct(model, task: RetrievalTask, depth: int, *, n: int = 512, seed: int = 10_000) -> np.ndarray:
    """Per-example correctness (1.0 or 0.0) on the ``n`` examples of depth ``depth`` that
    :func:`~iclr25.retrieval_problem.accuracy` draws with the same ``seed`` (its mean is that
    accuracy)."""
    batch = task.sample(n, seed, depth=depth)
    return (predict(model, batch.X) == np.asarray(batch.y)).astype(float)


def correct_by_depth(model, task: RetrievalTask, *, n: int = 512,
                     seed: int = 10_000) -> dict[int, np.ndarray]:
    """``{D: per-example correctness}`` for D = 1..Dmax, on the examples of
    :func:`~iclr25.retrieval_problem.accuracy_by_depth` (same seeds: the means agree)."""
    return {d: correct(model, task, d, n=n, seed=seed + d) for d in range(1, task.max_depth + 1)}


def binding_correct_per_context(model, task: RetrievalTask, *, n: int = 256,
                                seed: int = 20_000) -> np.ndarray:
    """Per context (on the examples of :func:`~iclr25.retrieval_problem.binding_accuracy`), the
    fraction of its bound neighbours (left and right pooled: the targets that name a symbol, not
    *none*) that the binding readout names correctly. Contexts without a bound neighbour are
    dropped."""
    batch = task.sample(n, seed, depth="mixed")
    lt, rt = binding_targets(task, batch.X)
    pl, pr = binding_predictions(model, batch.X)
    V = task.n_symbols
    hits = ((pl == lt) & (lt < V)).sum(axis=1) + ((pr == rt) & (rt < V)).sum(axis=1)
    bound = (lt < V).sum(axis=1) + (rt < V).sum(axis=1)
    keep = bound > 0
    return hits[keep] / bound[keep]


def emergence_gap(t1: int, t2: int) -> int:
    """The registered emergence statistic of one seed: the step at which the hop-2 head reaches
    the threshold minus the step at which the hop-1 head does; 0 when either never does (-1)."""
    if t1 < 0 or t2 < 0:
        return 0
    return int(t2) - int(t1)


def control_heads(n_layers: int, n_heads: int, hop_heads: Iterable[tuple[int, int]], k: int,
                  seed: int = 0) -> list[tuple[int, int]]:
    """The random-ablation control of ``ablate-hop*``: ``k`` heads drawn (seeded, without
    replacement) from the heads identified for no hop; all of them if fewer; ``[]`` (nothing
    ablated: the clean model) when every head is a hop head."""
    hop = set(map(tuple, hop_heads))
    others = [(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in hop]
    if len(others) <= k:
        return others
    idx = np.random.default_rng(seed).choice(len(others), size=k, replace=False)
    return [others[i] for i in sorted(idx)]


def mc_counts(max_depth: int, n_per_depth: int, n_end: int | None = None) -> dict[int, int]:
    """Questions per prompt family at each depth of notebook 01: ``n_end`` at D = 1 and at the
    largest D (the judged depths), ``n_per_depth`` at the depths between (figure only)."""
    if max_depth < 1 or n_per_depth < 1 or (n_end is not None and n_end < 1):
        raise ValueError(f"max_depth, n_per_depth and n_end must be positive, got {max_depth}, "
                         f"{n_per_depth}, {n_end}")
    end = n_per_depth if n_end is None else n_end
    return {d: (end if d in (1, max_depth) else n_per_depth) for d in range(1, max_depth + 1)}


def composed_stats(together: dict) -> tuple[float, float]:
    """From :class:`~iclr25.retrieval_problem.ComposedPatching`'s ``together``: the smaller of
    the binding and reading heads' fractions moved (0 where a set is empty: no circuit found)
    and the largest fraction moved by any set of other heads (0 where there is none)."""
    circuit = min(float(together.get("binding heads", 0.0)), float(together.get("reading heads", 0.0)))
    others = [float(v) for k, v in together.items() if k.startswith("other")]
    return circuit, max(others, default=0.0)


def hop_patch_stats(row: dict, max_depth: int) -> tuple[float, float]:
    """From one seed's row of notebook 03's patching table: the smallest fraction moved over the
    hops ``1..max_depth`` and the fraction moved by all other heads together."""
    return (min(float(row[f"hop {k} heads moved"]) for k in range(1, max_depth + 1)),
            float(row["all other heads moved"]))


def seed_accuracies(task: RetrievalTask, n_seeds: int, *, n_layers: int, n_steps: int,
                    binding: bool, eval_n: int = 512, seed: int = 0, **train) -> tuple[np.ndarray, list]:
    """Train ``n_seeds`` models (seed ``s``: initialisation ``seed + 100 s``, batches ``seed + s``,
    the implicit curriculum, ``binding`` targets or not) and return ``(acc, results)``: ``acc[s,
    D - 1]`` the accuracy of seed ``s`` at depth ``D`` on the test examples of
    :func:`~iclr25.retrieval_problem.accuracy_by_depth` (``seed + 9_000``), the replicates of
    notebook 04's per-seed entries, and the :class:`~iclr25.retrieval_problem.TrainResult` of each
    seed. ``train``: ``d_model``, ``n_heads``, ``init_std`` (the model) and the keyword arguments of
    :func:`~iclr25.retrieval_problem.train_retrieval`."""
    from .model import accuracy_by_depth, make_model, train_retrieval

    model_kw = {k: train.pop(k) for k in ("d_model", "n_heads", "init_std") if k in train}
    acc, results = np.zeros((n_seeds, task.max_depth)), []
    for s in range(n_seeds):
        model = make_model(task, n_layers, seed=seed + 100 * s, **model_kw)
        res = train_retrieval(model, task, n_steps=n_steps, ic="mixed", binding=binding,
                              seed=seed + s, **train)
        a = accuracy_by_depth(model, task, n=eval_n, seed=seed + 9_000)
        acc[s] = [a[d] for d in range(1, task.max_depth + 1)]
        results.append(res)
    return acc, results

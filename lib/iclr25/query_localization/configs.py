"""The chapter's runs at each profile (see :mod:`iclr25.profiles`), and the attribution cache that
lets notebooks 02 and 03 reuse what 01 computed (chapter 05).

``smoke`` scores ~8 facts x 4 paraphrases by Dai et al.'s per-layer path with one step (the
code path of ``book`` at the cost of gradient x activation); ``book`` ~40 facts x 5 paraphrases by
Dai et al.'s per-layer integrated gradients with m = 20 (the paper's estimator, issue 56; the
joint path is a labelled variant whose agreement notebook 01 measures); ``paper`` every fact the
model knows x 6 paraphrases, the same estimator (hours on a CPU).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import paths
from ..profiles import make_config

__all__ = ["Config", "RUNS", "config", "FactRun", "fact_run", "kn_sets_of", "KNSets", "top_k_sets",
           "layer_matched_random", "Consistency", "consistency_of"]


@dataclass(frozen=True)
class Config:
    """Every knob of chapter 05's notebooks."""

    relations: tuple = ("capital", "city_state")
    n_candidates: int = 10       # candidate facts per relation before the knowledge filter
    n_queries: int = 4           # paraphrases per fact (paper: ParaRel's, >= 2 per fact)
    min_correct: int = 3         # keep a fact answered top-1 in >= this many paraphrases
    max_facts: int | None = 8    # cap on kept facts (relations interleaved)
    path: str = "per_layer"      # attribution: per_layer (Dai et al.) | joint | grad_x_act
    n_steps: int = 1             # IG steps m (paper / Dai et al.: 20)
    cross_q: float = 0.95        # tau = this quantile of the cross-fact CS distribution (registered)
    n_pseudo: int = 200          # pseudo-facts (queries of different facts) for that distribution
    threshold: float = 0.3       # KN: attribution > threshold x max (Dai et al.: 0.2-0.3)
    cs_threshold: float = 0.3    # static consistency threshold (paper's example: 0.3)
    max_share: float | None = 0.5  # drop units that are KNs of > this share of facts (None: keep)
    top_k: int = 10              # equal-size KN sets for Delta Prob (own vs neighbour)
    enhance: float = 2.0         # factor for "enhance" (suppress is 0)
    alpha: float = 0.0           # knowledge-synapse scaling factor (Eq. 5; 0 = suppress)
    n_seen: int = 2              # queries the editing methods may localise with; the rest held out
    beta1: float = 1.0           # CAS = beta1 * mu - beta2 * sigma (Eq. 7; unreported in the paper)
    beta2: float = 1.0
    n_other: int = 12            # other facts' queries for locality
    seed: int = 0


RUNS = {
    "smoke": dict(n_candidates=12, n_queries=4, max_facts=8, path="per_layer", n_steps=1,
                  n_seen=2, n_other=8),
    "book": dict(n_candidates=120, n_queries=5, max_facts=40, path="per_layer", n_steps=20,
                 n_seen=3, n_other=10),
    "paper": dict(n_candidates=1000, n_queries=6, max_facts=None, path="per_layer", n_steps=20,
                  n_seen=4, n_other=50),
}


def config(profile: str | None = None, **overrides) -> Config:
    """The chapter's config at ``profile`` with ``overrides`` (``None`` values keep the profile's;
    chapter 05). Unknown names or values raise an error listing the valid ones."""
    if isinstance(overrides.get("relations"), str):
        overrides["relations"] = tuple(r.strip() for r in overrides["relations"].split(","))
    cfg = make_config(Config, RUNS, profile, **overrides)
    from .attribution import PATHS
    from .facts import TEMPLATES

    bad = [r for r in cfg.relations if r not in TEMPLATES]
    if bad:
        raise ValueError(f"unknown relation(s) {bad}; valid: {', '.join(TEMPLATES)}")
    if cfg.path not in PATHS:
        raise ValueError(f"unknown path {cfg.path!r}; valid: {', '.join(PATHS)}")
    if not 2 <= cfg.n_queries <= 6:
        raise ValueError(f"n_queries must be in [2, 6] (the templates per relation), got {cfg.n_queries}")
    if not 1 <= cfg.min_correct <= cfg.n_queries:
        raise ValueError(f"min_correct must be in [1, n_queries={cfg.n_queries}], got {cfg.min_correct}")
    if not 0 < cfg.cross_q < 1:
        raise ValueError(f"cross_q must be in (0, 1) (a quantile), got {cfg.cross_q}")
    if cfg.n_pseudo < 1:
        raise ValueError(f"n_pseudo must be >= 1, got {cfg.n_pseudo}")
    if not 1 <= cfg.n_seen < cfg.n_queries:
        raise ValueError(f"n_seen must be in [1, n_queries - 1 = {cfg.n_queries - 1}] (the rest are "
                         f"held out), got {cfg.n_seen}")
    return cfg


@dataclass
class FactRun:
    """The kept facts and their attributions (what notebook 01 computes and 02-03 reuse)."""

    known: object                # facts.KnownFacts
    prompts: list
    targets: list
    attr: object                 # attribution.Attributions
    cached: bool = False

    @property
    def n_facts(self) -> int:
        return len(self.known.facts)


def _key(cfg: Config) -> str:
    keep = {k: v for k, v in dataclasses.asdict(cfg).items()
            if k in ("relations", "n_candidates", "n_queries", "min_correct", "max_facts", "path",
                     "n_steps", "seed")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:12]


def fact_run(model, tokenizer, cfg: Config, *, cache: bool = True, show_progress: bool = True) -> FactRun:
    """Build the fact set, filter it and attribute every query (chapter 05). With ``cache``, the
    result is saved under ``runs/05-query-localization/`` keyed by the settings, and read back
    by the next notebook with the same settings."""
    from .attribution import attribute
    from .facts import filter_known, make_facts

    # keyed by the settings and by the code that builds the facts and their attributions
    file = paths.artifact_path(Path(paths.runs_dir()) / "05-query-localization", "facts", _key(cfg),
                               [__name__, "iclr25.query_localization.attribution",
                                "iclr25.query_localization.facts"], suffix=".pt")
    if cache and file.exists():
        try:
            return FactRun(**torch.load(file, weights_only=False), cached=True)
        except Exception:  # noqa: BLE001 - a stale or partial cache is recomputed
            pass
    cands = make_facts(cfg.relations, cfg.n_candidates, cfg.n_queries, seed=cfg.seed)
    known = filter_known(model, tokenizer, cands, min_correct=cfg.min_correct, max_facts=cfg.max_facts)
    if len(known.facts) < 2:
        raise RuntimeError(f"only {len(known.facts)} of {len(cands)} candidate facts pass the "
                           f"knowledge filter (top-1 in >= {cfg.min_correct} of {cfg.n_queries} "
                           "queries); raise n_candidates or lower min_correct")
    prompts = [q for f in known.facts for q in f.queries]
    targets = [t for t in known.targets for _ in range(cfg.n_queries)]
    attr = attribute(model, tokenizer, prompts, targets, path=cfg.path, n_steps=cfg.n_steps,
                     batch_size=120, show_progress=show_progress)
    run = FactRun(known, prompts, targets, attr)
    if cache:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(".tmp")
        torch.save({"known": known, "prompts": prompts, "targets": targets, "attr": attr}, tmp)
        tmp.replace(file)
    return run


def kn_sets_of(run: FactRun, cfg: Config) -> "KNSets":
    """Each query's KN set (threshold x max of its attributions), with the fact-agnostic units
    (KNs of more than ``cfg.max_share`` of the facts) removed (chapter 05)."""
    from .localize import kn_sets, shared_units

    raw = kn_sets(run.attr.scores, cfg.threshold)
    n_q = cfg.n_queries
    by_fact = [raw[i * n_q:(i + 1) * n_q] for i in range(run.n_facts)]
    shared = shared_units(by_fact, cfg.max_share) if cfg.max_share is not None else frozenset()
    sets = [s - shared for s in raw]
    return KNSets(sets, raw, shared, n_q)


@dataclass
class KNSets:
    """KN sets per query (``sets``), before the shared units were removed (``raw``), and the
    removed units (``shared``); ``fact(i)`` lists fact i's sets."""

    sets: list
    raw: list
    shared: frozenset
    n_queries: int

    def fact(self, i: int, raw: bool = False) -> list:
        src = self.raw if raw else self.sets
        return src[i * self.n_queries:(i + 1) * self.n_queries]


def top_k_sets(run: FactRun, kn: KNSets, k: int) -> list:
    """Each query's ``k`` highest-attributed units after the shared units are removed: KN sets
    of equal size, so that own and neighbour sets compare fairly (chapter 05)."""
    from .localize import kn_sets

    flat = run.attr.scores.reshape(run.attr.scores.shape[0], -1).clone()
    if kn.shared:
        flat[:, sorted(kn.shared)] = -float("inf")
    return kn_sets(flat, top_k=k)


def layer_matched_random(sets: list, d_ff: int, seed: int = 0) -> list:
    """For each set, as many random units, each in the same layer as one of the set's units (a
    control with the set's layer profile; chapter 05)."""
    import random

    rng = random.Random(seed)
    out = []
    for s in sets:
        out.append(frozenset((u // d_ff) * d_ff + rng.randrange(d_ff) for u in s))
    return out


@dataclass
class Consistency:
    """Each fact's consistency score (``cs``), the cross-fact CS distribution (``pseudo``), the
    threshold ``tau`` (its ``cfg.cross_q`` quantile) and each fact's class (``"K_II"`` where
    ``cs <= tau``); the same in notebooks 01-03 of chapter 05."""

    cs: object
    pseudo: object
    tau: float
    classes: object


def consistency_of(run: FactRun, kn: KNSets, cfg: Config) -> Consistency:
    """The consistency scores of ``run``'s facts and the cross-fact threshold (chapter 05;
    :func:`iclr25.query_localization.measures.pseudo_fact_cs`, seeded by ``cfg.seed``)."""
    from . import measures

    rels = [f.relation for f in run.known.facts]
    cs = measures.pair_jaccards(kn.sets, cfg.n_queries).mean(1)
    pseudo = measures.pseudo_fact_cs(kn.sets, rels, cfg.n_queries, cfg.n_pseudo, seed=cfg.seed)
    tau = measures.cross_fact_threshold(pseudo, cfg.cross_q)
    return Consistency(cs, pseudo, tau, measures.classes(cs, tau))

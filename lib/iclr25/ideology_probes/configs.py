"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

``smoke`` keeps each notebook to seconds (a few dozen short prompts), ``book`` runs a few hundred
prompts on 2 CPU cores at the sizes the registry (``book/claims/10-ideology-probes.yaml``) asks
for (10 split seeds, >= 200 outlets, monitored personas and steering items), ``paper`` approaches
the paper's sizes (552 lawmakers, top-32 ensembles, 200-token statements) on SmolLM2.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["ProbingConfig", "TransferConfig", "SteeringConfig", "probing", "transfer", "steering",
           "RUNS"]


@dataclass(frozen=True)
class ProbingConfig:
    """``01-head-probing``: per-head ridge maps on personas and on real state labels."""

    n_personas: int        # fictional politicians (paper: 552 lawmakers of the 116th Congress)
    n_cues: int            # implicit cues per bio
    years: tuple           # presidential elections of the state x year prompts
    k: int                 # top-k ensemble (paper: 32 of 1024 heads; ours 8 of 270 is the same share)
    alpha: float = 1.0     # ridge penalty (paper: 1)
    folds: int = 2         # paper: 2-fold KFold, random_state 42
    n_splits: int = 10     # split seeds 42, 43, ... (the paper: one, 42); registered: 10
    batch_size: int = 16
    seed: int = 0


@dataclass(frozen=True)
class TransferConfig:
    """``02-probe-transfer``: persona-trained probes on outlets, states, senators and tokens."""

    n_personas: int
    n_cues: int
    n_outlets: int         # fictional outlets (paper: Ad Fontes outlets)
    n_senators: int        # senators of 2002 (all 100; fewer, balanced by party, in smoke)
    years: tuple
    k: int
    n_monitor: int         # fresh personas whose statements are monitored token by token (>= 200)
    max_new_tokens: int    # greedy tokens per monitored statement
    alpha: float = 1.0
    batch_size: int = 16
    seed: int = 0


@dataclass(frozen=True)
class SteeringConfig:
    """``03-steering-heads``: slant at -A and +A for top-k, random, early and late heads, and
    coherence; items are (topic, sampling seed) pairs."""

    n_personas: int
    n_cues: int
    k: int                 # top-k heads steered (paper: 16 ... 96 of 1024; book 24 of 270)
    A: float               # steering strength in SDs, runs at -A, 0, +A (paper: -30 ... 30, own units)
    n_topics: int          # of the paper's nine topics
    n_samples: int         # sampling seeds per topic: items = n_topics x n_samples (>= 200)
    max_new_tokens: int    # paper: max_length 200
    k_layers: int          # heads steered in the early-vs-late comparison (Fig. A7)
    temperature: float = 0.7   # sampling temperature (the same seeded draws in every run)
    alpha: float = 1.0
    batch_size: int = 16
    seed: int = 0


_YEARS = (1996, 2000, 2004, 2008, 2012)

RUNS = {
    "probing": {
        "smoke": dict(n_personas=40, n_cues=4, years=(2012,), k=8, n_splits=3),
        "book": dict(n_personas=240, n_cues=4, years=_YEARS, k=8, n_splits=10),
        "paper": dict(n_personas=552, n_cues=4, years=(1980,) + (1984, 1988, 1992) + _YEARS, k=32,
                      n_splits=10),
    },
    "transfer": {
        "smoke": dict(n_personas=40, n_cues=4, n_outlets=16, n_senators=20, years=(2012,), k=8,
                      n_monitor=6, max_new_tokens=12),
        "book": dict(n_personas=240, n_cues=4, n_outlets=200, n_senators=100, years=_YEARS, k=8,
                     n_monitor=200, max_new_tokens=32),
        "paper": dict(n_personas=552, n_cues=4, n_outlets=300, n_senators=100, years=_YEARS, k=32,
                      n_monitor=200, max_new_tokens=200),
    },
    "steering": {
        "smoke": dict(n_personas=40, n_cues=4, k=8, A=20.0, n_topics=3, n_samples=2,
                      max_new_tokens=12, k_layers=8),
        "book": dict(n_personas=240, n_cues=4, k=24, A=20.0, n_topics=9, n_samples=23,
                     max_new_tokens=32, k_layers=16),
        "paper": dict(n_personas=552, n_cues=4, k=64, A=20.0, n_topics=9, n_samples=23,
                      max_new_tokens=200, k_layers=32),
    },
}


def _tuple(overrides: dict, *names: str) -> dict:
    out = dict(overrides)
    for n in names:
        v = out.get(n)
        if isinstance(v, str):
            out[n] = tuple(float(x) if "." in x else int(x) for x in v.split(","))
        elif v is not None and not isinstance(v, tuple):
            out[n] = tuple(v) if hasattr(v, "__iter__") else (v,)
    return out


def probing(profile: str | None = None, **overrides) -> ProbingConfig:
    """The config of ``01-head-probing`` (chapter 10)."""
    return make_config(ProbingConfig, RUNS["probing"], profile, **_tuple(overrides, "years"))


def transfer(profile: str | None = None, **overrides) -> TransferConfig:
    """The config of ``02-probe-transfer`` (chapter 10)."""
    return make_config(TransferConfig, RUNS["transfer"], profile, **_tuple(overrides, "years"))


def steering(profile: str | None = None, **overrides) -> SteeringConfig:
    """The config of ``03-steering-heads`` (chapter 10)."""
    cfg = make_config(SteeringConfig, RUNS["steering"], profile, **overrides)
    if not 1 <= cfg.n_topics <= 9:
        raise ValueError(f"n_topics must be between 1 and 9 (the paper's topics), got {cfg.n_topics}")
    if not cfg.A > 0:
        raise ValueError(f"A (the steering strength; runs at -A, 0, +A) must be > 0, got {cfg.A}")
    if not (isinstance(cfg.n_samples, int) and cfg.n_samples >= 1):
        raise ValueError(f"n_samples must be a positive integer, got {cfg.n_samples!r}")
    if not cfg.temperature > 0:
        raise ValueError(f"temperature must be > 0, got {cfg.temperature}")
    return cfg

"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

The paper trains 64 transformers per formulation for 24k steps at batch 128 (GPU scale). Our
``smoke`` and ``book`` profiles train a few tiny TinyGPTs (d_model 64, 2 heads) for a few hundred
to a few thousand steps on CPU; ``paper`` uses the paper's step count and batch size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["LMConfig", "DepthConfig", "EmergenceConfig", "lm_config", "depth_config",
           "emergence_config"]


@dataclass(frozen=True)
class LMConfig:
    """Notebook 01: zero-shot multiple choice with SmolLM2."""

    n_per_depth: int          # questions per depth (paper: 500 per formulation)
    max_depth: int = 6        # D = 1..max_depth
    model: str = "smollm2-135m-instruct"
    seed: int = 0


@dataclass(frozen=True)
class DepthConfig:
    """Notebook 02: accuracy over (layers t, depth D), with and without the curriculum."""

    layers: tuple             # t values (paper: 1..4+)
    max_depth: int            # Dmax of the task (the heatmap's D axis)
    n_steps: int              # training steps per model (paper: 24k)
    noic_layers: tuple = (2,) # t values also trained without the curriculum (the ablation)
    n_seeds: int = 1          # models per cell (paper: 64)
    n_symbols: int = 16       # alphabet V
    n_chains: int = 3         # chains in the context (chance = 1/n_chains)
    batch_size: int = 128     # paper: 128
    lr: float = 3e-3
    d_model: int = 64
    n_heads: int = 2
    eval_n: int = 512         # test examples per depth
    seed: int = 0


@dataclass(frozen=True)
class EmergenceConfig:
    """Notebook 03: per-head hop scores over training, emergence order, ablation."""

    n_steps: int
    checkpoint_every: int
    n_seeds: int = 2
    n_layers: int = 2
    max_depth: int = 2
    n_symbols: int = 16
    n_chains: int = 3
    batch_size: int = 128
    lr: float = 3e-3
    d_model: int = 64
    n_heads: int = 2
    threshold: float = 0.5    # hop score at which a head has "emerged"
    eval_n: int = 256
    # TransformerLens's 0.8 / sqrt(d_model): with GPT-2's scheme (None) two of three seeds had
    # not learned D = 2 after 1,200 steps; with this one every seed of eight learns it by ~400
    init_std: float | None = 0.1
    seed: int = 0


LM = {"smoke": {"n_per_depth": 4}, "book": {"n_per_depth": 30}, "paper": {"n_per_depth": 500}}
DEPTH = {
    "smoke": {"layers": (1, 2), "max_depth": 2, "n_steps": 900},
    # a Dmax = 4 task (24 symbols, 12 facts) did not train at all within 2000 steps on CPU, so the
    # book profile keeps the smoke task and adds a third layer (see the chapter page)
    "book": {"layers": (1, 2, 3), "noic_layers": (2,), "max_depth": 2, "n_steps": 1200},
    "paper": {"layers": (1, 2, 3, 4), "noic_layers": (1, 2, 3, 4), "max_depth": 6,
              "n_steps": 24_000, "n_seeds": 4, "n_symbols": 32, "n_chains": 4},
}
EMERGE = {
    # checkpoints every 10 steps: the two heads form within ~50 steps of each other
    "smoke": {"n_steps": 600, "checkpoint_every": 10, "n_seeds": 1},
    "book": {"n_steps": 800, "checkpoint_every": 10, "n_seeds": 8},
    "paper": {"n_steps": 24_000, "checkpoint_every": 250, "n_seeds": 16, "n_layers": 3,
              "max_depth": 4, "n_symbols": 24},
}


def lm_config(profile: str | None = None, **overrides) -> LMConfig:
    """Notebook 01's settings at ``profile`` (see :class:`LMConfig`)."""
    return make_config(LMConfig, LM, profile, **overrides)


def depth_config(profile: str | None = None, **overrides) -> DepthConfig:
    """Notebook 02's settings at ``profile`` (see :class:`DepthConfig`)."""
    cfg = make_config(DepthConfig, DEPTH, profile, **overrides)
    layers = tuple(int(t) for t in cfg.layers)
    if not layers or min(layers) < 1:
        raise ValueError(f"layers must be a non-empty list of positive integers, got {cfg.layers!r}")
    # the ablation is trained for the depths of noic_layers that are also in layers
    noic = tuple(int(t) for t in cfg.noic_layers if int(t) in layers)
    return dataclasses.replace(cfg, layers=layers, noic_layers=noic)


def emergence_config(profile: str | None = None, **overrides) -> EmergenceConfig:
    """Notebook 03's settings at ``profile`` (see :class:`EmergenceConfig`)."""
    return make_config(EmergenceConfig, EMERGE, profile, **overrides)

"""The chapter's runs at each profile (see :mod:`iclr25.profiles`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["Fig3Config", "RecursionConfig", "RegimesConfig", "fig3", "recursion", "regimes", "TABLES"]


@dataclass(frozen=True)
class Fig3Config:
    """Notebook 01: exact TSLOO on digits (paper: MNIST MLP, see the chapter page).

    The IF baseline's damping is chosen on ``n_val`` validation points (disjoint from the
    ``n_test`` attributed ones) from ``n_val_removed`` retrainings without a random training point.
    """

    n_train: int          # training points (dattri's example: 5,000 MNIST images)
    n_test: int           # validation points whose loss is attributed
    hidden: int           # MLP hidden width
    batch_size: int       # paper's example: 64
    n_epochs: int         # paper's example: 3
    lr: float             # SGD learning rate on the mean loss
    damping: float        # the naive fixed IF damping (1e-2; H + lambda I stays indefinite)
    n_val: int = 16       # held-out validation points for choosing the IF damping
    n_val_removed: int = 32  # random training points removed (and retrained) for that choice
    seed: int = 0


@dataclass(frozen=True)
class RecursionConfig:
    """Notebook 02: recursion vs explicit product, projection error, cost."""

    n_train: int
    hidden: int
    batch_size: int
    n_epochs: int
    lr: float
    proj_dims: tuple      # per-layer projection dimensions (perfect squares)
    n_test: int
    cost_dims: tuple      # gradient widths p for the timing sweep
    cost_rows: int        # recorded samples in the timing sweep
    seed: int = 0


@dataclass(frozen=True)
class RegimesConfig:
    """Notebook 03: TinyGPT by SGD, influence per iteration and per checkpoint."""

    max_docs: int
    d_model: int
    n_layers: int
    n_heads: int
    seq_len: int
    batch_size: int
    n_steps: int
    lr: float
    warmup: int
    proj_dim: int         # per-layer projection (paper: 1024 in total for Pythia-410M)
    n_checkpoints: int
    n_val: int
    seed: int = 0


TABLES = {
    "fig3": {
        "smoke": dict(n_train=256, n_test=8, hidden=16, batch_size=32, n_epochs=6, lr=0.2,
                      damping=1e-2),
        "book": dict(n_train=600, n_test=16, hidden=20, batch_size=32, n_epochs=6, lr=0.2,
                     damping=1e-2),
        "paper": dict(n_train=1500, n_test=50, hidden=32, batch_size=64, n_epochs=6, lr=0.2,
                      damping=1e-2),
    },
    "recursion": {
        "smoke": dict(n_train=96, hidden=8, batch_size=16, n_epochs=2, lr=0.5,
                      proj_dims=(4, 16, 64, 256), n_test=8, cost_dims=(64, 256), cost_rows=512),
        "book": dict(n_train=192, hidden=12, batch_size=16, n_epochs=3, lr=0.5,
                     proj_dims=(4, 16, 64, 256, 1024), n_test=16, cost_dims=(64, 256, 1024),
                     cost_rows=2048),
        "paper": dict(n_train=400, hidden=16, batch_size=32, n_epochs=3, lr=0.5,
                      proj_dims=(4, 16, 64, 256, 1024), n_test=32, cost_dims=(256, 1024, 4096),
                      cost_rows=16384),
    },
    "regimes": {
        "smoke": dict(max_docs=200, d_model=32, n_layers=1, n_heads=2, seq_len=32, batch_size=8,
                      n_steps=120, lr=0.3, warmup=10, proj_dim=16, n_checkpoints=4, n_val=8),
        "book": dict(max_docs=2000, d_model=64, n_layers=2, n_heads=4, seq_len=64, batch_size=16,
                     n_steps=1000, lr=0.3, warmup=50, proj_dim=64, n_checkpoints=6, n_val=16),
        "paper": dict(max_docs=10033, d_model=128, n_layers=4, n_heads=4, seq_len=128,
                      batch_size=16, n_steps=10000, lr=0.3, warmup=500, proj_dim=64,
                      n_checkpoints=10, n_val=64),
    },
}


def fig3(profile: str | None = None, **overrides) -> Fig3Config:
    """Notebook 01's run at ``profile``."""
    return make_config(Fig3Config, TABLES["fig3"], profile, **overrides)


def recursion(profile: str | None = None, **overrides) -> RecursionConfig:
    """Notebook 02's run at ``profile``."""
    return make_config(RecursionConfig, TABLES["recursion"], profile, **overrides)


def regimes(profile: str | None = None, **overrides) -> RegimesConfig:
    """Notebook 03's run at ``profile``."""
    return make_config(RegimesConfig, TABLES["regimes"], profile, **overrides)

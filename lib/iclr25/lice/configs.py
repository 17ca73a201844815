"""The chapter's runs at each profile (see :mod:`iclr25.profiles`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["SPNConfig", "CFConfig", "TradeoffConfig", "config", "CONFIGS"]


@dataclass(frozen=True)
class SPNConfig:
    """Notebook 01: SPN on 2-D mixed data."""
    n_rows: int = 1000              # generated rows
    min_instances_slice: int = 200  # LearnSPN (paper: 200)
    n_points: int = 200             # random points for the fixed-x check (paper plan: 200)
    n_mio_points: int = 20          # of which solved as MIO
    grid: int = 40                  # grid resolution of the plot
    seed: int = 0


@dataclass(frozen=True)
class CFConfig:
    """Notebooks 02 (credit) and 04 (adult): the main table under the paper's protocol."""
    dataset: str = "credit"         # paper: credit, adult, gmsc
    n_factuals: int = 20            # paper: 500 per data set (5 folds x 100)
    n_train_adult: int = 3000       # Adult rows used for training (paper: all of a fold)
    hidden: tuple = (20, 10)        # MLP hidden layers (paper: [20, 10])
    n_epochs: int = 50              # paper: 50
    min_instances_slice: int = 200  # paper: 200
    max_bins: int = 10
    alpha: float = 0.1              # LiCE optimize (paper: 0.1)
    n_cf: int = 10                  # counterfactuals per factual, most likely valid one reported (paper: 10)
    node_limit: int | None = 100    # SCIP branch-and-bound nodes of the one solve per factual and method
                                    # (deterministic; None: to optimality; paper: Gurobi, 120 s)
    collect: str = "pool"           # "pool": one solve, the n_cf best distinct solutions SCIP kept (the official
                                    # code: one Gurobi solve, PoolSolutions=10); "nogood": n_cf re-solves
    warm: bool = True               # the same feasible start for every MIO-based method (nearest repaired training
                                    # row feasible for all of them); the paper gives Gurobi none
    separating: str = "fast"        # SCIP cutting-plane effort ("fast", "off", "default")
    heuristics: str = "aggressive"  # SCIP primal-heuristics emphasis, the same for every MIO-based method
    time_limit: float = 120.0       # SCIP CPU s per factual and method: only a safety net, never hit in book
    n_dice: int = 10                # DiCE counterfactuals before SPN selection (paper: 10)
    methods: tuple = ("MIO", "LiCE (optimize)", "LiCE (median)", "DiCE (+spn)", "NN (FACE-like)")
    seed: int = 0


@dataclass(frozen=True)
class TradeoffConfig:
    """Notebook 03: the likelihood-distance front and scaling."""
    n_factuals: int = 3
    alphas: tuple = (0.0, 0.05, 0.1, 0.3, 1.0)
    quantiles: tuple = (0.1, 0.25, 0.5, 0.75)
    slices: tuple = (400, 200, 100)       # min_instances_slice for SPN size (paper range 1000..100)
    widths: tuple = (10, 20, 40)
    hidden: tuple = (20, 10)
    n_epochs: int = 50
    min_instances_slice: int = 200
    node_limit: int | None = 5000   # SCIP nodes per solve (deterministic); the front's check uses optimal solves
    time_limit: float = 120.0       # SCIP CPU s per solve: only a safety net
    features: tuple | None = None         # a subset of the credit features (None: all 20)
    seed: int = 0


# 8 of the 20 credit features (both causal rules and the monotone age kept): small MIPs that
# SCIP solves to optimality within seconds, so the front's monotonicity can be checked
_FEATURES8 = ("checking", "duration", "history", "amount", "savings", "employment", "residence", "age")

CONFIGS = {
    "spn": (SPNConfig, {
        "smoke": dict(n_rows=600, n_points=200, n_mio_points=10, grid=30),
        "book": dict(n_rows=2000, n_points=200, n_mio_points=50, grid=60),
        "paper": dict(n_rows=5000, n_points=1000, n_mio_points=200, grid=100),
    }),
    "cf": (CFConfig, {
        "smoke": dict(n_factuals=3, n_epochs=20, node_limit=10, n_dice=4, n_train_adult=1000,
                      methods=("MIO", "LiCE (optimize)", "DiCE (+spn)", "NN (FACE-like)")),
        "book": dict(n_factuals=20, node_limit=100),
        "paper": dict(n_factuals=200, n_train_adult=24000, node_limit=None, separating="default",
                      time_limit=1200.0,
                      methods=("MIO", "LiCE (optimize)", "LiCE (quartile)", "LiCE (sample)",
                               "LiCE (median)", "DiCE (+spn)", "NN (FACE-like)")),
    }),
    "tradeoff": (TradeoffConfig, {
        "smoke": dict(n_factuals=2, alphas=(0.0, 0.03, 0.1), quantiles=(0.25, 0.5), slices=(400, 150),
                      widths=(4, 8), hidden=(8,), n_epochs=30, node_limit=2000, features=_FEATURES8),
        "book": dict(n_factuals=6, alphas=(0.0, 0.03, 0.1, 0.3), quantiles=(0.1, 0.25, 0.5, 0.75),
                     hidden=(10,), node_limit=5000, widths=(5, 10, 20), features=_FEATURES8),
        "paper": dict(n_factuals=50, slices=(1000, 500, 200, 100), widths=(10, 20, 40, 80),
                      node_limit=None, time_limit=1200.0),
    }),
}


def config(name: str, profile: str | None = None, **overrides):
    """The config of run ``name`` ("spn", "cf", "tradeoff") at ``profile``."""
    if name not in CONFIGS:
        raise ValueError(f"unknown run {name!r}; valid: {sorted(CONFIGS)}")
    cls, table = CONFIGS[name]
    return make_config(cls, table, profile, **overrides)

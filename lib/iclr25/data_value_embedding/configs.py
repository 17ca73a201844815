"""The chapter's runs at each profile (see :mod:`iclr25.profiles`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["Fig3Config", "RecursionConfig", "RegimesConfig", "SelectionConfig", "fig3", "recursion",
           "regimes", "selection", "TABLES"]


@dataclass(frozen=True)
class Fig3Config:
    """Notebook 01: exact TSLOO on digits (paper: MNIST MLP, see the chapter page).

    The IF baseline's damping is chosen on ``n_val`` validation points (disjoint from the
    ``n_test`` attributed ones) from ``n_val_removed`` retrainings without a random training point.
    The whole comparison runs at every learning rate of ``lrs`` (the registered sweep) and every
    training seed ``seed, ..., seed + n_seeds - 1``; ``lr`` is the rate of the single-rate
    comparisons (hindsight and fixed damping, TracIn, the cross-item control).
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
    lrs: tuple = (0.05, 0.1, 0.2)  # the registered learning-rate sweep
    n_seeds: int = 4      # training seeds (data split, initialisation, batch order)
    seed: int = 0


@dataclass(frozen=True)
class RecursionConfig:
    """Notebook 02: recursion vs explicit product, projection error, cost.

    The projection study repeats at training seeds ``seed, ..., seed + n_seeds - 1`` (data,
    initialisation, training and projection); the projected influence function chooses its
    damping on ``n_val`` validation points from ``n_val_removed`` retrainings, as in notebook 01.
    The timing repeats ``n_repeats`` times at the largest ``cost_dims``.
    """

    n_train: int
    hidden: int
    batch_size: int
    n_epochs: int
    lr: float
    proj_dims: tuple      # per-layer projection dimensions (perfect squares)
    n_test: int
    cost_dims: tuple      # gradient widths p for the timing sweep
    cost_rows: int        # recorded samples in the timing sweep
    n_seeds: int = 5
    n_repeats: int = 5
    n_val: int = 16
    n_val_removed: int = 32
    seed: int = 0


@dataclass(frozen=True)
class RegimesConfig:
    """Notebook 03: the paper's Fig. 1a setting at book scale, and a sweep over lr and steps.

    The headline run is the paper's setting: ``arch`` (``"pythia"``: GPT-NeoX, Pythia's class)
    trained with AdamW (betas 0.9/0.95, weight decay 0.1, clip 1.0) at peak rate ``lr`` for
    ``n_steps``, warm-up over the first ``warmup_frac`` of the steps then cosine decay,
    embeddings by the SGD proxy; repeated at every seed in ``seeds``. The small multiples run
    every ``sweep_steps`` x (AdamW at ``adamw_lrs``, SGD at ``sgd_lrs``) at the first seed.
    """

    max_docs: int
    arch: str
    d_model: int
    n_layers: int
    n_heads: int
    seq_len: int
    batch_size: int       # paper: 16 sequences of 1,024 tokens
    n_steps: int          # headline run (paper: more than 50,000 iterations)
    lr: float             # headline AdamW peak rate (paper: 3e-4 for Pythia-410M)
    warmup_frac: float    # paper: 2,000 warm-up iterations, "less than 4%" of training
    proj_dim: int         # per-layer projection (perfect square; paper: 1024 in total)
    n_checkpoints: int
    n_val: int            # validation windows whose mean loss is attributed
    seeds: tuple          # headline run repeated at these seeds
    sweep_steps: tuple    # rows of the small multiples
    adamw_lrs: tuple      # columns (AdamW, the paper's optimiser with the SGD proxy)
    sgd_lrs: tuple        # columns (plain SGD, where the recursion is exact)
    seed: int = 0


@dataclass(frozen=True)
class SelectionConfig:
    """Notebook 04: online data selection in the notebook-03 model's headline setting.

    Each step draws ``pool_factor * batch_size`` candidate windows; a selecting step keeps the
    ``batch_size`` whose per-sample gradients align best with the gradient of a batch of
    ``val_batch`` validation windows, any other step keeps a random ``batch_size`` of them. The
    arms select at every step, in the first ``early_frac`` and the last ``late_frac`` of the steps,
    in the first ``early_frac`` only, or never; each at every seed of ``seeds``. The final
    validation loss is the mean over ``n_val`` windows disjoint from those that guide the choice.
    """

    max_docs: int
    arch: str
    d_model: int
    n_layers: int
    n_heads: int
    seq_len: int
    batch_size: int
    n_steps: int
    lr: float
    warmup_frac: float
    n_val: int
    val_batch: int
    seeds: tuple
    pool_factor: int = 2      # App. E.3.2: a 2x larger candidate pool
    early_frac: float = 0.04  # the paper's "less than 4%" warm-up region
    late_frac: float = 0.16   # with early_frac, 20% of the steps: the paper's > 5x saving
    seed: int = 0


TABLES = {
    "fig3": {
        "smoke": dict(n_train=256, n_test=8, hidden=16, batch_size=32, n_epochs=6, lr=0.2,
                      damping=1e-2, n_seeds=2),
        "book": dict(n_train=600, n_test=16, hidden=20, batch_size=32, n_epochs=6, lr=0.2,
                     damping=1e-2, n_seeds=4),
        "paper": dict(n_train=1500, n_test=50, hidden=32, batch_size=64, n_epochs=6, lr=0.2,
                      damping=1e-2, n_seeds=4),
    },
    "recursion": {
        "smoke": dict(n_train=96, hidden=8, batch_size=16, n_epochs=2, lr=0.5,
                      proj_dims=(4, 16, 64, 256), n_test=8, cost_dims=(64, 256), cost_rows=512,
                      n_seeds=2, n_repeats=2),
        "book": dict(n_train=192, hidden=12, batch_size=16, n_epochs=3, lr=0.5,
                     proj_dims=(4, 16, 64, 256, 1024), n_test=16, cost_dims=(64, 256, 1024),
                     cost_rows=2048, n_seeds=5, n_repeats=5),
        "paper": dict(n_train=400, hidden=16, batch_size=32, n_epochs=3, lr=0.5,
                      proj_dims=(4, 16, 64, 256, 1024), n_test=32, cost_dims=(256, 1024, 4096),
                      cost_rows=16384, n_seeds=5, n_repeats=5),
    },
    "regimes": {
        "smoke": dict(max_docs=200, arch="pythia", d_model=32, n_layers=1, n_heads=2, seq_len=32,
                      batch_size=8, n_steps=80, lr=3e-3, warmup_frac=0.04, proj_dim=16,
                      n_checkpoints=4, n_val=32, seeds=(0, 1), sweep_steps=(80,),
                      adamw_lrs=(3e-3,), sgd_lrs=(0.3,)),
        "book": dict(max_docs=2000, arch="pythia", d_model=64, n_layers=2, n_heads=4, seq_len=32,
                     batch_size=16, n_steps=1000, lr=3e-3, warmup_frac=0.04, proj_dim=64,
                     n_checkpoints=6, n_val=128, seeds=(0, 1, 2), sweep_steps=(250, 1000),
                     adamw_lrs=(1e-3, 3e-3), sgd_lrs=(0.1, 0.3)),
        "paper": dict(max_docs=10033, arch="pythia", d_model=128, n_layers=4, n_heads=4,
                      seq_len=128, batch_size=16, n_steps=20000, lr=1e-3, warmup_frac=0.04,
                      proj_dim=64, n_checkpoints=10, n_val=256, seeds=(0, 1, 2),
                      sweep_steps=(5000, 20000), adamw_lrs=(3e-4, 1e-3, 3e-3),
                      sgd_lrs=(0.03, 0.1, 0.3)),
    },
    "selection": {
        "smoke": dict(max_docs=200, arch="pythia", d_model=32, n_layers=1, n_heads=2, seq_len=32,
                      batch_size=8, n_steps=80, lr=3e-3, warmup_frac=0.04, n_val=32, val_batch=8,
                      seeds=(0, 1)),
        "book": dict(max_docs=2000, arch="pythia", d_model=64, n_layers=2, n_heads=4, seq_len=32,
                     batch_size=16, n_steps=1000, lr=3e-3, warmup_frac=0.04, n_val=128,
                     val_batch=16, seeds=(0, 1, 2)),
        "paper": dict(max_docs=10033, arch="pythia", d_model=128, n_layers=4, n_heads=4,
                      seq_len=128, batch_size=16, n_steps=20000, lr=1e-3, warmup_frac=0.04,
                      n_val=256, val_batch=16, seeds=(0, 1, 2)),
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


def selection(profile: str | None = None, **overrides) -> SelectionConfig:
    """Notebook 04's run at ``profile``."""
    return make_config(SelectionConfig, TABLES["selection"], profile, **overrides)

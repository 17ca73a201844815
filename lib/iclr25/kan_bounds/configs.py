"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

Paper (arXiv:2410.08026, as far as could be read): KAN [4, 50, 100, 50, 1], 10,000 training and
10,000 test samples, 1,000 epochs, SGD, dropout 0.1 on the activations for the regularised KAN.
``paper`` uses those sizes (and sweeps widths and sample sizes up to them); ``book`` keeps one run of
the paper's shape on 10,000 points with fewer epochs and shrinks the sweep; ``smoke`` shrinks all.

The sweep of notebook 02 trains every run for the same number of SGD steps (``n_steps`` counts
minibatch updates, ``unit="steps"``), not epochs: at equal epochs a larger training set meant more
steps and larger coefficients, which confounded the bound's dependence on n (issue 66).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["SweepConfig", "DigitsConfig", "sweep", "digits_run", "RUNS"]


@dataclass(frozen=True)
class SweepConfig:
    """Notebook 02: the simulated experiment -- bound against gap over KAN widths and sample sizes,
    trained with minibatch SGD for the same number of steps, over seeds, plus one KAN of the
    paper's shape on 10,000 points."""

    hidden: tuple = (4, 8, 16, 32, 50)    # KAN [4, h, 2h, h, 1]; h = 50 is the paper's [4, 50, 100, 50, 1]
    n_trains: tuple = (1000, 3000, 10_000)  # training sizes (paper: 10,000)
    n_test: int = 10_000                  # paper: 10,000
    noise: float = 0.5                    # label-noise std on train and test, in target-std units (ours)
    grid_size: int = 5                    # G (pykan default style)
    n_steps: int = 200_000                # SGD steps per run of the sweep (1,000 epochs of 10,000 points)
    unit: str = "steps"                   # n_steps counts SGD steps: equal for every training size
    optimizer: str = "sgd"                # paper: stochastic gradient descent
    lr: float = 0.03                      # ours (the paper's step size could not be read)
    batch_size: int = 50                  # ours (not readable either)
    dropout: float = 0.1                  # the regularised KAN (paper: 0.1)
    dropout_hidden: int = 8               # the regularised KANs of the sweep: [4, h, 2h, h, 1] at every n
    n_seeds: int = 3                      # training seeds of the whole sweep
    targets: tuple = ("f1", "f2")         # the two simulated setups (functions ours)
    paper_widths: tuple = (4, 50, 100, 50, 1)   # the paper-shape run ...
    paper_n: int = 10_000                 # ... on 10,000 + n_test points
    paper_steps: int = 1000               # ... for this many epochs
    paper_batch: int = 100
    delta: float = 0.05                   # confidence of the bound
    log_every: int = 0                    # 0: n_steps // 10
    seed: int = 0


@dataclass(frozen=True)
class DigitsConfig:
    """Notebook 03: digits (standing in for MNIST) and the low-rank RKHS KANs."""

    hidden: int = 32                      # KAN [64, hidden, 10]
    grid_size: int = 5
    n_train: int = 900                    # of 1,797 digits (paper: 10,000 MNIST images)
    n_steps: int = 300                    # epochs
    optimizer: str = "sgd"                # paper: SGD
    lr: float = 0.2                       # ours
    batch_size: int = 50                  # ours
    dropout: float = 0.1
    random_fracs: tuple = (0.0, 0.5, 1.0)
    ranks: tuple = (1, 2, 4, 8)           # low-rank RKHS KAN ranks
    n_seeds: int = 3
    delta: float = 0.05
    seed: int = 0


RUNS = {
    "sweep": {
        "smoke": dict(hidden=(4, 8), n_trains=(200, 800), n_test=1000, n_steps=300, targets=("f1",),
                      dropout_hidden=4, n_seeds=2, paper_widths=(4, 8, 16, 8, 1),
                      paper_n=2000, paper_steps=5),
        "book": dict(hidden=(4, 8, 16), n_trains=(300, 1000, 3000), n_test=3000, n_steps=2000,
                     paper_steps=60),
        "paper": dict(),
    },
    "digits": {
        "smoke": dict(hidden=8, n_train=600, n_steps=15, random_fracs=(0.0, 1.0), ranks=(1, 2, 4),
                      n_seeds=2),
        "book": dict(hidden=16, n_steps=100),
        "paper": dict(hidden=64, n_steps=1000),
    },
}


def sweep(profile: str | None = None, **overrides) -> SweepConfig:
    """Notebook 02's config at ``profile``. Chapter 15, notebook ``02-bound-vs-gap``."""
    return make_config(SweepConfig, RUNS["sweep"], profile, **overrides)


def digits_run(profile: str | None = None, **overrides) -> DigitsConfig:
    """Notebook 03's config at ``profile``. Chapter 15, notebook ``03-digits-and-low-rank``."""
    return make_config(DigitsConfig, RUNS["digits"], profile, **overrides)

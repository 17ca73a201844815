"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

Paper (arXiv:2410.08026, as far as could be read): KAN [4, 50, 100, 50, 1], 10,000 training and
10,000 test samples, 1,000 epochs, dropout 0.1 on the activations for the regularised KAN. ``paper``
uses those sizes; ``book`` and ``smoke`` shrink the network, the data and the epochs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["SweepConfig", "DigitsConfig", "sweep", "digits_run", "RUNS"]


@dataclass(frozen=True)
class SweepConfig:
    """Notebook 02: the simulated bound-vs-gap sweeps."""

    widths: tuple = (4, 50, 100, 50, 1)   # paper: [4, 50, 100, 50, 1]
    grid_size: int = 5                    # G (pykan default style)
    n_train: int = 10_000                 # paper: 10,000
    n_test: int = 10_000                  # paper: 10,000
    n_steps: int = 1000                   # full-batch epochs (paper: 1,000)
    lr: float = 1e-2                      # Adam (ours; the paper uses SGD)
    dropout: float = 0.1                  # the regularised KAN (paper: 0.1)
    noise_levels: tuple = (0.0, 0.5, 1.0, 2.0)
    random_fracs: tuple = (0.0, 0.5, 1.0)
    targets: tuple = ("f1", "f2")
    n_seeds: int = 3                      # seeds for the dropout comparison
    log_every: int = 0                    # 0: n_steps // 10
    seed: int = 0


@dataclass(frozen=True)
class DigitsConfig:
    """Notebook 03: digits (standing in for MNIST) and the low-rank RKHS KANs."""

    hidden: int = 32                      # KAN [64, hidden, 10]
    grid_size: int = 5
    n_train: int = 900                    # of 1,797 digits (paper: 10,000 MNIST images)
    n_steps: int = 300
    lr: float = 1e-2
    dropout: float = 0.1
    random_fracs: tuple = (0.0, 0.5, 1.0)
    ranks: tuple = (1, 2, 4, 8)           # low-rank RKHS KAN ranks
    n_seeds: int = 3
    seed: int = 0


RUNS = {
    "sweep": {
        "smoke": dict(widths=(4, 8, 8, 1), n_train=400, n_test=400, n_steps=100,
                      noise_levels=(0.0, 1.0), random_fracs=(0.0, 1.0), targets=("f1",)),
        "book": dict(widths=(4, 16, 32, 16, 1), n_train=1000, n_test=1000, n_steps=300,
                     noise_levels=(0.0, 0.5, 1.0, 2.0), random_fracs=(0.0, 1.0)),
        "paper": dict(),
    },
    "digits": {
        "smoke": dict(hidden=8, n_train=600, n_steps=60, random_fracs=(0.0, 1.0), ranks=(1, 2, 4, 8),
                      n_seeds=2),
        "book": dict(hidden=16, n_steps=300),
        "paper": dict(hidden=64, n_steps=1000),
    },
}


def sweep(profile: str | None = None, **overrides) -> SweepConfig:
    """Notebook 02's config at ``profile``. Chapter 15, notebook ``02-bound-vs-gap``."""
    return make_config(SweepConfig, RUNS["sweep"], profile, **overrides)


def digits_run(profile: str | None = None, **overrides) -> DigitsConfig:
    """Notebook 03's config at ``profile``. Chapter 15, notebook ``03-digits-and-low-rank``."""
    return make_config(DigitsConfig, RUNS["digits"], profile, **overrides)

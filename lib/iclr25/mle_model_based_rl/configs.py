"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

The test-bed is tiny (S = 6, A = 2) at every profile; the profiles differ in the number of seeds,
episodes K and horizons. ``paper`` has no paper numbers to match (a theory paper): it simply runs
longer and with more seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["VersionSpaceConfig", "OnlineConfig", "OfflineConfig", "version_space_config",
           "online_config", "offline_config"]


@dataclass(frozen=True)
class VersionSpaceConfig:
    """Notebook 01: coverage of the MLE version space and its size against data."""

    H: int = 16                          # horizon
    n_q: int = 21                        # gamble-probability grid size (|Pcal| = 4 * n_slip * n_q)
    slip_grid: tuple = (0.0, 0.1, 0.2)   # slip grid of the model class
    q_true: float = 0.5                  # the true model
    slip_true: float = 0.2
    rho: float = 0.4                     # exit reward (per step, x 1/H)
    deltas: tuple = (0.5, 0.2, 0.1, 0.05)
    n_seeds: int = 200                   # independent data sets per delta
    n_traj: int = 20                     # trajectories per data set (coverage test)
    data_sizes: tuple = (1, 3, 10, 30, 100, 300, 1000)
    seed: int = 0


@dataclass(frozen=True)
class OnlineConfig:
    """Notebook 02: O-MBRL against baselines, horizons and return variance."""

    K: int = 800                         # episodes, second-order comparison (paper: any K)
    K_horizon: int = 400                 # episodes, horizon comparison
    K_baselines: int = 400               # episodes, baselines
    horizons: tuple = (8, 32)            # H values of the horizon-free comparison
    H: int = 8                           # horizon of the second-order and baseline runs
    n_seeds: int = 10
    n_q: int = 21
    slip_grid: tuple = (0.0, 0.1, 0.2)
    delta: float = 0.1                   # beta = log(|Pcal| / delta)
    eps: float = 0.1                     # eps-greedy exploration rate
    seed: int = 0


@dataclass(frozen=True)
class OfflineConfig:
    """Notebook 03: CPPO-LR pessimism against K, coverage and plug-in planning."""

    H: int = 16
    K_grid: tuple = (30, 100, 300, 1000, 3000)
    K_coverage: int = 1000
    p_gamble_grid: tuple = (0.5, 0.2, 0.1, 0.05, 0.02)   # behaviour's gamble probability
    p_gamble_poor: float = 0.02          # poor coverage for the plug-in comparison
    n_seeds: int = 20
    slip_grid: tuple = (0.0, 0.1, 0.2, 0.3)
    delta: float = 0.1
    fit_from: int = 100                  # fit log-log slopes on K >= fit_from
    seed: int = 0


_VS = {"smoke": {}, "book": {"n_seeds": 1000}, "paper": {"n_seeds": 5000, "n_q": 41}}
_ON = {"smoke": {},
       "book": {"K": 1500, "K_horizon": 800, "K_baselines": 600, "horizons": (8, 32, 64),
                "n_seeds": 20},
       "paper": {"K": 5000, "K_horizon": 3000, "K_baselines": 2000, "horizons": (8, 16, 32, 64, 128),
                 "n_seeds": 100}}
_OFF = {"smoke": {},
        "book": {"K_grid": (30, 100, 300, 1000, 3000, 10000), "n_seeds": 60},
        "paper": {"K_grid": (30, 100, 300, 1000, 3000, 10000, 30000), "n_seeds": 200}}


def version_space_config(profile: str | None = None, **overrides) -> VersionSpaceConfig:
    """Config of notebook ``01-mle-version-space`` at ``profile``."""
    return make_config(VersionSpaceConfig, _VS, profile, **overrides)


def online_config(profile: str | None = None, **overrides) -> OnlineConfig:
    """Config of notebook ``02-online-optimism`` at ``profile``."""
    return make_config(OnlineConfig, _ON, profile, **overrides)


def offline_config(profile: str | None = None, **overrides) -> OfflineConfig:
    """Config of notebook ``03-offline-pessimism`` at ``profile``."""
    return make_config(OfflineConfig, _OFF, profile, **overrides)

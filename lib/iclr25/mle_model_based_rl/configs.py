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
    data_sizes: tuple = (1, 3, 10, 30, 100, 300, 1000)   # the registry pairs the first with the last
    n_rep: int = 50                      # independent data sets per size (registered: 200)
    seed: int = 0


@dataclass(frozen=True)
class OnlineConfig:
    """Notebook 02: O-MBRL against baselines, horizons and return variance."""

    K: int = 800                         # episodes, second-order comparison (paper: any K)
    K_baselines: int = 400               # episodes, baselines
    horizons: tuple = (8, 32)            # H values of the horizon-free comparison (river lock)
    K_river: int = 150                   # episodes per run of the horizon comparison
    river_gap: float = 0.05              # margin between swimming and the safe option (both signs run)
    river_p_grid: tuple = tuple(round(0.05 * i, 2) for i in range(1, 20))  # model class: swim p
    river_back_grid: tuple = (0.0, 0.1, 0.2, 0.3)                          # model class: back
    ucb_scales: tuple = (0.003, 0.01, 0.03, 0.1, 0.2, 0.35, 0.7, 1.4)  # registered grid of UCBVI-CH's c
    bf_scales: tuple = (0.003, 0.01, 0.03, 0.1, 0.2, 0.35, 0.7, 1.4)   # the same grid for UCBVI-BF
    beta_scales: tuple = (0.125, 0.25, 0.5, 1.0, 2.0) # registered grid of O-MBRL's beta multiplier
    growing_p_grid: tuple = (0.3, 0.4, 0.5, 0.6, 0.7)  # growing river: a coarser class (2^(H/8) locks)
    growing_back_grid: tuple = (0.1, 0.2, 0.3)
    n_blocks: int = 6                    # disjoint blocks of evaluation seeds: one slope each
    n_tune: int = 4                      # tuning seeds per knob (separate from the evaluation seeds)
    n_river: int = 12                    # evaluation seeds per learner and H
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
    n_family: int = 16                   # instances of the worst-case family (gaps on a log grid)
    gap_min: float = 1e-3                # smallest gap q - rho of the family
    n_family_seeds: int = 20             # data sets per (K, instance) for the realised gap
    tiny_K_grid: tuple = (5, 20, 80, 320)  # data sizes of the brute-force restriction check
    tiny_seeds: int = 10
    n_blocks: int = 5                    # disjoint blocks of data sets: one replicate of a slope each
    variance_q: tuple = (0.5, 0.7, 0.85, 0.95)  # second order: gamble probabilities (rho = q - 0.1)
    K_variance: int = 3000               # data-set size of the second-order sweep
    horizons: tuple = (8, 16)            # horizon sweep of the realised gap
    K_horizon: int = 1000                # data-set size of the horizon sweep
    lcb_grid: tuple = (1 / 27, 1 / 9, 1 / 3, 1.0, 3.0, 9.0, 27.0)  # VI-LCB penalty x textbook width
    n_lcb_tune: int = 5                  # held-out data sets per H for tuning VI-LCB
    seed: int = 0


_VS = {"smoke": {}, "book": {"n_seeds": 1000, "n_rep": 200},
       "paper": {"n_seeds": 5000, "n_q": 41, "n_rep": 1000}}
_ON = {"smoke": {},
       "book": {"K": 1500, "K_baselines": 600, "horizons": (8, 16, 32, 64),
                "n_seeds": 20, "K_river": 300, "n_tune": 8, "n_river": 24},
       "paper": {"K": 5000, "K_baselines": 2000, "horizons": (8, 16, 32, 64, 128),
                 "n_seeds": 100, "K_river": 2000, "n_tune": 20, "n_river": 100}}
_OFF = {"smoke": {},
        "book": {"K_grid": (30, 100, 300, 1000, 3000, 10000), "n_seeds": 60, "fit_from": 300,
                 "n_family": 24, "n_family_seeds": 60, "tiny_seeds": 50,
                 "horizons": (8, 16, 32, 64), "n_lcb_tune": 20},
        "paper": {"K_grid": (30, 100, 300, 1000, 3000, 10000, 30000), "n_seeds": 200, "fit_from": 300,
                  "n_family": 40, "n_family_seeds": 200, "tiny_seeds": 200, "gap_min": 3e-4,
                  "horizons": (8, 16, 32, 64, 128), "n_lcb_tune": 50}}


def version_space_config(profile: str | None = None, **overrides) -> VersionSpaceConfig:
    """Config of notebook ``01-mle-version-space`` at ``profile``."""
    return make_config(VersionSpaceConfig, _VS, profile, **overrides)


def online_config(profile: str | None = None, **overrides) -> OnlineConfig:
    """Config of notebook ``02-online-optimism`` at ``profile``."""
    return make_config(OnlineConfig, _ON, profile, **overrides)


def offline_config(profile: str | None = None, **overrides) -> OfflineConfig:
    """Config of notebook ``03-offline-pessimism`` at ``profile``."""
    return make_config(OfflineConfig, _OFF, profile, **overrides)

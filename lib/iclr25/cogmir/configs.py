"""Profiles of chapter 03's notebooks (smoke: CI, book: the rendered book, paper: larger)."""

from __future__ import annotations

from dataclasses import dataclass

from iclr25.profiles import make_config

__all__ = ["HerdAuthority", "StatusCertainty", "RumorChain", "herd_authority",
           "status_certainty", "rumor"]


@dataclass(frozen=True)
class HerdAuthority:
    seed: int
    n_known_pool: int        # known questions pretested (both option orders)
    n_known: int             # at most this many pretested questions per cell (2 trials each)
    n_unknown: int           # unknown questions per cell (2 trials each)
    n_others: tuple = (1, 3, 7, 49)
    letter_pretest: bool = False   # also pretest with A/B letters (shows the letter bias)
    scripted_ps: tuple = (0.1, 0.5, 0.9)
    batch_size: int = 16

    def __post_init__(self):
        if any(int(n) < 1 for n in self.n_others):
            raise ValueError(f"n_others must be positive, got {self.n_others}")
        if self.n_known_pool < 2 or self.n_known < 1 or self.n_unknown < 2:
            raise ValueError("need n_known_pool >= 2, n_known >= 1, n_unknown >= 2")


HERD = {
    "smoke": {"n_known_pool": 28, "n_known": 16, "n_unknown": 12, "n_others": (1, 7, 49)},
    "book": {"n_known_pool": 60, "n_known": 30, "n_unknown": 30, "letter_pretest": True},
    "paper": {"n_known_pool": 94, "n_known": 50, "n_unknown": 96, "letter_pretest": True},
}


def herd_authority(profile=None, **overrides) -> HerdAuthority:
    """Config of ``01-herd-and-authority`` (chapter 03)."""
    overrides.setdefault("seed", 0)
    return make_config(HerdAuthority, {k: {"seed": 0, **v} for k, v in HERD.items()},
                       profile, **overrides)


@dataclass(frozen=True)
class StatusCertainty:
    seed: int
    n_halo: int              # unknown questions for halo (4 trials each)
    n_price: int             # price items for confirmation (2 trials each)
    n_games: int             # chance games for the gambler (4 trials each)
    n_rating: int            # competitions for Ben Franklin (2 trials each)
    streaks: tuple = (0, 1, 3, 5, 10)
    batch_size: int = 16

    def __post_init__(self):
        if not 1 <= self.n_games <= 12 or not 1 <= self.n_price <= 24 or \
                not 1 <= self.n_rating <= 12:
            raise ValueError("n_games <= 12, n_price <= 24 and n_rating <= 12 (the banks' "
                             "sizes), each >= 1")
        if 0 not in self.streaks:
            raise ValueError("streaks must include 0, the no-history control")


STATUS = {
    "smoke": {"n_halo": 4, "n_price": 8, "n_games": 4, "n_rating": 4, "streaks": (0, 1, 3, 10)},
    "book": {"n_halo": 16, "n_price": 24, "n_games": 12, "n_rating": 12},
    "paper": {"n_halo": 40, "n_price": 24, "n_games": 12, "n_rating": 12},
}


def status_certainty(profile=None, **overrides) -> StatusCertainty:
    """Config of ``02-status-and-certainty`` (chapter 03)."""
    overrides.setdefault("seed", 0)
    return make_config(StatusCertainty, {k: {"seed": 0, **v} for k, v in STATUS.items()},
                       profile, **overrides)


@dataclass(frozen=True)
class RumorChain:
    seed: int
    n_narratives: int
    hops: int
    max_new_tokens: int
    n_null_draws: int = 5
    batch_size: int = 16

    def __post_init__(self):
        if not 2 <= self.n_narratives <= 30:
            raise ValueError(f"n_narratives must be in [2, 30] (30 narratives ship), got "
                             f"{self.n_narratives}")
        if self.hops < 2 or self.max_new_tokens < 8:
            raise ValueError("need hops >= 2 (a trend) and max_new_tokens >= 8")


RUMOR = {
    "smoke": {"n_narratives": 3, "hops": 3, "max_new_tokens": 32},
    "book": {"n_narratives": 10, "hops": 5, "max_new_tokens": 48},
    "paper": {"n_narratives": 30, "hops": 10, "max_new_tokens": 64},
}


def rumor(profile=None, **overrides) -> RumorChain:
    """Config of ``03-rumor-chain`` (chapter 03)."""
    overrides.setdefault("seed", 0)
    return make_config(RumorChain, {k: {"seed": 0, **v} for k, v in RUMOR.items()}, profile,
                       **overrides)

"""Profiles of chapter 03's notebooks (smoke: CI, book: the rendered book, paper: larger)."""

from __future__ import annotations

from dataclasses import dataclass

from iclr25.profiles import make_config

__all__ = ["HerdAuthority", "StatusCertainty", "RumorChain", "herd_authority",
           "status_certainty", "rumor"]


@dataclass(frozen=True)
class HerdAuthority:
    seed: int
    n_known_pool: int        # known questions pretested (both option orders); 0: the whole bank
    n_known: int             # at most this many pretested questions (2 prompts each)
    n_unknown: int           # unknown questions (2 prompts each, the cue on the second slot)
    n_others: tuple = (1, 3, 7, 49)
    letter_pretest: bool = False   # also pretest with A/B letters (shows the letter bias)
    scripted_ps: tuple = (0.1, 0.5, 0.9)
    batch_size: int = 16

    def __post_init__(self):
        if any(int(n) < 1 for n in self.n_others) or not {7, 49} <= set(self.n_others):
            raise ValueError(f"n_others must be positive and hold 7 (the dissent cell) and 49 "
                             f"(the registered herd), got {self.n_others}")
        if self.n_known_pool < 0 or self.n_known_pool == 1 or self.n_known < 1 \
                or self.n_unknown < 2:
            raise ValueError("need n_known_pool >= 2 (or 0: the whole bank), n_known >= 1, "
                             "n_unknown >= 2")


HERD = {
    "smoke": {"n_known_pool": 10, "n_known": 4, "n_unknown": 4, "n_others": (1, 7, 49)},
    # registered (issue 54): the paper's 100 unknown questions; the whole known bank pretested,
    # the first 100 that survive used (200 prompts)
    "book": {"n_known_pool": 0, "n_known": 100, "n_unknown": 100},
    "paper": {"n_known_pool": 0, "n_known": 1000, "n_unknown": 100, "letter_pretest": True},
}


def herd_authority(profile=None, **overrides) -> HerdAuthority:
    """Config of ``01-herd-and-authority`` (chapter 03)."""
    overrides.setdefault("seed", 0)
    return make_config(HerdAuthority, {k: {"seed": 0, **v} for k, v in HERD.items()},
                       profile, **overrides)


@dataclass(frozen=True)
class StatusCertainty:
    seed: int
    n_halo: int              # unknown questions for halo (4 prompts each)
    n_price: int             # price items for confirmation (2 prompts per anchor)
    n_anchors: int           # anchor amounts of each side (registered: 5)
    n_games: int             # chance games for the gambler (4 prompts each)
    n_rating: int            # competitions for Ben Franklin (2 competitors each)
    levels: tuple = tuple(range(1, 11))   # initial favourability levels (Ben Franklin)
    streaks: tuple = (0, 10)
    batch_size: int = 16

    def __post_init__(self):
        if not 1 <= self.n_games <= 62 or not 1 <= self.n_price <= 24 or \
                not 1 <= self.n_rating <= 12 or not 1 <= self.n_anchors <= 5:
            raise ValueError("n_games <= 62, n_price <= 24, n_rating <= 12 and n_anchors <= 5 "
                             "(the banks' sizes), each >= 1")
        if not {0, 10} <= set(self.streaks):
            raise ValueError("streaks must include 0 (the no-history control) and 10 (registered)")


STATUS = {
    "smoke": {"n_halo": 2, "n_price": 2, "n_anchors": 2, "n_games": 2, "n_rating": 1,
              "levels": (2, 8)},
    # registered (issue 54): 50 x 4 halo, 24 x 2 x 5 prices, 50 x 4 games, 12 x 2 x 10 ratings
    "book": {"n_halo": 50, "n_price": 24, "n_anchors": 5, "n_games": 50, "n_rating": 12},
    "paper": {"n_halo": 50, "n_price": 24, "n_anchors": 5, "n_games": 50, "n_rating": 12,
              "streaks": (0, 1, 3, 5, 10)},
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
    n_seeds: int = 3              # sampling seeds seed .. seed + n_seeds - 1 (registered: 3)
    temperature: float = 1.0      # the paper's temperature
    n_null_draws: int = 5
    batch_size: int = 16

    def __post_init__(self):
        if not 2 <= self.n_narratives <= 30:
            raise ValueError(f"n_narratives must be in [2, 30] (30 narratives ship), got "
                             f"{self.n_narratives}")
        if self.hops < 2 or self.max_new_tokens < 8 or self.n_seeds < 1:
            raise ValueError("need hops >= 2 (a trend), max_new_tokens >= 8 and n_seeds >= 1")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")


RUMOR = {
    "smoke": {"n_narratives": 2, "hops": 2, "max_new_tokens": 24, "n_seeds": 2},
    "book": {"n_narratives": 10, "hops": 5, "max_new_tokens": 48},
    "paper": {"n_narratives": 30, "hops": 10, "max_new_tokens": 64},
}


def rumor(profile=None, **overrides) -> RumorChain:
    """Config of ``03-rumor-chain`` (chapter 03)."""
    overrides.setdefault("seed", 0)
    return make_config(RumorChain, {k: {"seed": 0, **v} for k, v in RUMOR.items()}, profile,
                       **overrides)

"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

One config per notebook: data size, the Logic-Logit search budget (types, rules per type, rule
length, beam) and the baselines' sizes. The paper gives no hyperparameters (its reviewers asked for
them); ours are stated here and on the chapter page.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import ProfileError, make_config

__all__ = ["Config", "config", "RUNS"]


@dataclass(frozen=True)
class Config:
    """One notebook's run (names follow the book's vocabulary)."""

    n_obs: int             # choices used (train + test)
    test_size: float = 0.3 # held-out share
    max_types: int = 3     # rule types Frank-Wolfe may add
    max_rules: int = 3     # rules per type (R)
    max_len: int = 3       # predicates per rule
    beam_width: int = 10   # conjunctions kept per beam level
    refine_iters: int = 5  # EM rounds after Frank-Wolfe
    n_bins: int = 4        # quantile bins per numeric feature (real data)
    n_classes: int = 3     # latent-class MNL classes
    em_iters: int = 30     # latent-class EM iterations
    nn_steps: int = 300    # neural utility model: Adam steps
    budgets: tuple = (1, 2, 3)  # rules-per-type sweep (notebook 03)
    seeds: tuple = (0,)    # recovery repeated over these seeds (notebook 01)
    tafeng_obs: int = 1200 # Ta Feng purchases used (notebook 03; 8,595 in all)
    seed: int = 0


_NB01 = {"smoke": dict(n_obs=2500, max_types=3, max_rules=2, max_len=3, beam_width=6, seeds=(0, 1)),
         "book": dict(n_obs=8000, max_types=4, max_rules=3, max_len=3, beam_width=10, seeds=(0, 1, 2)),
         "paper": dict(n_obs=50000, max_types=6, max_rules=5, max_len=3, beam_width=20,
                       seeds=(0, 1, 2, 3, 4))}
_NB02 = {"smoke": dict(n_obs=1500, max_types=3, max_rules=2, max_len=3, beam_width=6, em_iters=15),
         "book": dict(n_obs=6000, max_types=5, max_rules=3, max_len=3, beam_width=10),
         "paper": dict(n_obs=50000, max_types=8, max_rules=5, max_len=3, beam_width=20)}
_NB03 = {"smoke": dict(n_obs=1200, max_types=2, max_rules=2, max_len=2, beam_width=5,
                       budgets=(1, 2), em_iters=8, nn_steps=100, refine_iters=3, tafeng_obs=600),
         "book": dict(n_obs=12000, max_types=3, max_rules=3, max_len=3, beam_width=8,
                      budgets=(1, 2, 3), em_iters=30, nn_steps=400, tafeng_obs=3000),
         "paper": dict(n_obs=12000, max_types=6, max_rules=5, max_len=3, beam_width=20,
                       budgets=(1, 2, 3, 4, 5), em_iters=100, nn_steps=1000, tafeng_obs=8595)}

RUNS = {"01-consider-then-choose": _NB01, "02-inside-the-solver": _NB02, "03-real-choices": _NB03,
        "04-mode-and-basket-choices": _NB03}


def config(notebook: str, profile: str | None = None, **overrides) -> Config:
    """The :class:`Config` of ``notebook`` (a key of :data:`RUNS`) at ``profile``; ``overrides``
    set fields (``None`` keeps the profile's value)."""
    if notebook not in RUNS:
        raise ProfileError(f"unknown notebook {notebook!r}; valid: {', '.join(RUNS)}")
    return make_config(Config, RUNS[notebook], profile, **overrides)

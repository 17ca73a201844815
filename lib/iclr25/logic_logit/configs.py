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
    """One notebook's run (names follow the book's vocabulary).

    Every hyperparameter of every model is chosen on a validation split of the training choices
    (``val_fraction`` of them, whole respondents where the data name them) with the same number of
    tries: Logic-Logit's rules-per-type budget from ``budgets``, the MNLs' L2 penalty from
    ``l2_tries``, the latent-class MNLs' number of classes from ``class_tries``, the neural
    model's width from ``nn_widths``. The claims are judged over ``n_seeds`` replicates: fresh
    planted data per seed (notebooks 01-02) or a fresh subsample and split per seed (03-04),
    seeds ``seed, seed + 1, ...`` (:attr:`replicates`).
    """

    n_obs: int             # choices used (train + test)
    test_size: float = 0.3 # held-out share
    max_types: int = 3     # rule types Frank-Wolfe may add
    max_len: int = 3       # predicates per rule
    beam_width: int = 10   # conjunctions kept per beam level
    refine_iters: int = 5  # EM rounds after Frank-Wolfe
    n_bins: int = 4        # quantile bins per numeric feature
    em_iters: int = 30     # latent-class EM iterations
    nn_steps: int = 300    # neural utility model: most L-BFGS steps (early stopping picks fewer)
    budgets: tuple = (1, 2, 3)          # Logic-Logit's rules per type R: the tries
    l2_tries: tuple = (3e-1, 1e-2, 3e-4)  # MNL L2 penalties: the tries (the centres of L2_GRID's thirds)
    class_tries: tuple = (2, 3, 4)      # latent-class MNL classes: the tries
    nn_widths: tuple = (8, 16, 32)      # neural utility hidden units: the tries
    val_fraction: float = 0.2           # validation share of the training choices
    n_seeds: int = 1       # replicates: seeds (01-02) or subsample-and-split seeds (03-04)
    tafeng_obs: int = 1200 # Ta Feng purchases used (notebook 04; 8,595 in all)
    n_draws: int = 20      # random models of the same shape per seed (recovery's chance level)
    seed: int = 0

    def __post_init__(self) -> None:
        tries = {k: len(getattr(self, k)) for k in ("budgets", "l2_tries", "class_tries", "nn_widths")}
        if len(set(tries.values())) != 1:
            raise ValueError(f"every model gets the same number of tries; got {tries}")
        if self.n_seeds < 1:
            raise ValueError(f"n_seeds must be >= 1, got {self.n_seeds}")

    @property
    def replicates(self) -> tuple:
        """The seeds of the replicates: ``seed, seed + 1, ..., seed + n_seeds - 1``."""
        return tuple(range(self.seed, self.seed + self.n_seeds))


_SMOKE_TRIES = dict(budgets=(1, 2), l2_tries=(1e-1, 1e-3), class_tries=(2, 3), nn_widths=(8, 16))
_NB01 = {"smoke": dict(n_obs=2500, max_types=3, max_len=3, beam_width=6, n_seeds=2, n_draws=10,
                       **_SMOKE_TRIES),
         "book": dict(n_obs=8000, max_types=4, max_len=3, beam_width=10, n_seeds=5),
         "paper": dict(n_obs=50000, max_types=6, max_len=3, beam_width=20, n_seeds=5,
                       budgets=(1, 2, 3, 4, 5), l2_tries=(1.0, 1e-1, 1e-2, 1e-3, 1e-4),
                       class_tries=(2, 3, 4, 5, 6), nn_widths=(8, 16, 32, 64, 128))}
_NB02 = {"smoke": dict(n_obs=1500, max_types=3, max_len=3, beam_width=6, em_iters=15, n_seeds=2,
                       **_SMOKE_TRIES),
         "book": dict(n_obs=6000, max_types=5, max_len=3, beam_width=10, n_seeds=5),
         "paper": dict(n_obs=50000, max_types=8, max_len=3, beam_width=20, n_seeds=5,
                       budgets=(1, 2, 3, 4, 5), l2_tries=(1.0, 1e-1, 1e-2, 1e-3, 1e-4),
                       class_tries=(2, 3, 4, 5, 6), nn_widths=(8, 16, 32, 64, 128))}
_NB03 = {"smoke": dict(n_obs=1200, max_types=2, max_len=2, beam_width=5, em_iters=8, nn_steps=100,
                       refine_iters=3, tafeng_obs=600, n_seeds=2, **_SMOKE_TRIES),
         "book": dict(n_obs=8000, max_types=3, max_len=3, beam_width=8, em_iters=30, nn_steps=400,
                      tafeng_obs=2000, n_seeds=3),
         "paper": dict(n_obs=12000, max_types=6, max_len=3, beam_width=20, em_iters=100, nn_steps=1000,
                       tafeng_obs=8595, n_seeds=3, budgets=(1, 2, 3, 4, 5),
                       l2_tries=(1.0, 1e-1, 1e-2, 1e-3, 1e-4), class_tries=(2, 3, 4, 5, 6),
                       nn_widths=(8, 16, 32, 64, 128))}

RUNS = {"01-consider-then-choose": _NB01, "02-inside-the-solver": _NB02, "03-real-choices": _NB03,
        "04-mode-and-basket-choices": _NB03}


def config(notebook: str, profile: str | None = None, **overrides) -> Config:
    """The :class:`Config` of ``notebook`` (a key of :data:`RUNS`) at ``profile``; ``overrides``
    set fields (``None`` keeps the profile's value)."""
    if notebook not in RUNS:
        raise ProfileError(f"unknown notebook {notebook!r}; valid: {', '.join(RUNS)}")
    return make_config(Config, RUNS[notebook], profile, **overrides)

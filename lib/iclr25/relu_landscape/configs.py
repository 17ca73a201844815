"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

The paper's runs are small (N <= 7 points, width 50), so with the compiled GD loop even ``smoke``
runs them at the paper's own scale; the profiles differ in how many random perturbations the
numerical local-minimum test draws, how fine the tolerance sweep of the certificate is, how many
replicates notebooks 01-03 run (the paper's own initialisation, torch seed 12, and the next torch
seeds) and how many seeds the seed study (04) runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["RunConfig", "fig3", "fig11", "fig12", "RUNS"]


@dataclass(frozen=True)
class RunConfig:
    """One training run of chapter 18 (names follow the book's vocabulary)."""

    dataset: str          # a name in iclr25.relu_landscape.DATASETS
    width: int            # hidden neurons m (paper: 50)
    init_scale: float     # std of the Gaussian init (paper: width ** mu)
    lr: float             # GD step size
    n_steps: int          # GD iterations
    log_every: int = 2000 # snapshot period (paper: 2000)
    seed: int = 0
    rho_neg: float = 0.0  # negative slope: 0 is ReLU, > 0 leaky ReLU (an extension of the paper)
    stop_loss: float = 1e-5  # the official code's stopping loss
    n_perturb: int = 5000    # random perturbations in the Fig. 10 test
    tol_step: int = 1        # decades between the values of a tolerance sweep (chapter 18, issue 39)
    n_seeds: int = 10        # seeds of the seed study, 04 (the paper shows one run, torch seed 12)
    generator: str = "numpy" # "torch": the official draw (seed 12 is the paper's own init)
    n_replicates: int = 6    # replicates of 01-03: the paper's init (torch seed 12) and seeds 13, 14, ...


_FIG3 = dict(dataset="five_point", width=50, init_scale=50.0 ** -3, lr=1e-3, n_steps=600_000)
_FIG11 = dict(dataset="three_d_seven_point", width=50, init_scale=50.0 ** -6.5, lr=1e-3,
              n_steps=800_000)
_FIG12 = dict(dataset="two_d_two_out", width=50, init_scale=50.0 ** -6.5, lr=2e-3, n_steps=300_000)

RUNS = {
    "fig3": {"smoke": {**_FIG3, "n_perturb": 1000, "tol_step": 3, "n_seeds": 3, "n_replicates": 2},
             "book": _FIG3, "paper": {**_FIG3, "n_seeds": 20, "n_replicates": 20}},
    "fig11": {"smoke": {**_FIG11, "n_perturb": 1000, "n_replicates": 1},
              "book": {**_FIG11, "n_replicates": 3}, "paper": {**_FIG11, "n_replicates": 10}},
    "fig12": {"smoke": {**_FIG12, "n_perturb": 1000, "n_replicates": 1},
              "book": {**_FIG12, "n_replicates": 3}, "paper": {**_FIG12, "n_replicates": 10}},
}


def fig3(profile: str | None = None, **overrides) -> RunConfig:
    """The Fig. 3 run (5 points, width 50, init 50^-3, lr 1e-3, 6e5 steps) at ``profile``."""
    return make_config(RunConfig, RUNS["fig3"], profile, **overrides)


def fig11(profile: str | None = None, **overrides) -> RunConfig:
    """The Fig. 11 run (3-D input, 7 points, init 50^-6.5, lr 1e-3, 8e5 steps)."""
    return make_config(RunConfig, RUNS["fig11"], profile, **overrides)


def fig12(profile: str | None = None, **overrides) -> RunConfig:
    """The Fig. 12 run (2-D input and output, 4 points, init 50^-6.5, lr 2e-3, 3e5 steps)."""
    return make_config(RunConfig, RUNS["fig12"], profile, **overrides)

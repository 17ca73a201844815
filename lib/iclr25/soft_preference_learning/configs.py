"""The chapter's runs at each profile (see :mod:`iclr25.profiles`). Chapter 17.

``smoke`` keeps each notebook within seconds (few steps, few samples), ``book`` runs the same
experiments larger (within a few minutes on 2 cores), ``paper`` moves towards the paper's
settings (LoRA on a 7B model for thousands of steps is out of reach here; ``paper`` only
lengthens our runs).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["BanditConfig", "LMBanditConfig", "DiversityConfig", "closed_form", "lm_bandit",
           "diversity"]


@dataclass(frozen=True)
class BanditConfig:
    """``01-closed-form``: the exact bandit."""

    p: tuple                # population preference over the K responses
    ref_concentration: float  # Dirichlet concentration of the random reference policy
    n_comparisons: int      # Bradley-Terry comparisons (the paper: a preference data set)
    betas: tuple            # DPO's beta grid (the paper: 0.1)
    alphas: tuple           # SPL's alpha grid at spl_beta
    spl_beta: float         # SPL's beta for the alpha grid (the paper: 0.1)
    n_seeds: int            # comparison data sets (seeds) for the seed-dependent findings
    seed: int = 0


@dataclass(frozen=True)
class LMBanditConfig:
    """``02-lm-bandit``: one prompt, K one-word answers, LoRA on SmolLM2-135M-Instruct."""

    n_answers: int          # K answers used (at most 8)
    n_pairs: int            # Bradley-Terry preference pairs
    beta: float             # the paper: 0.1
    alphas: tuple           # SPL alphas (alpha = beta is DPO, added automatically)
    n_steps: int
    batch_size: int         # pairs per step (0: every pair each step)
    lr: float
    lora_r: int
    lora_layers: int        # LoRA on the top lora_layers decoder layers
    temperatures: tuple     # token-level temperatures applied to the DPO model
    seed: int = 0


@dataclass(frozen=True)
class DiversityConfig:
    """``03-diversity-and-calibration``: free text, calibration and pass@N."""

    n_pref_prompts: int     # story prompts whose samples make the preference pairs
    n_pref_samples: int     # samples per prompt for the pairs
    n_samples: int          # evaluation samples per method (the paper: 100 stories)
    max_new_tokens: int
    beta: float             # the paper: 0.1
    spl_alpha: float        # SPL alpha of the language-model runs
    temperatures: tuple     # token-level temperatures of the DPO model
    n_steps: int
    batch_size: int
    lr: float
    lora_r: int
    lora_layers: int
    n_questions: int        # synthetic multiple-choice questions (calibration)
    n_choices: int
    n_mc_comparisons: int   # comparisons per question
    mc_alpha: float         # SPL alpha of the calibration bandits
    n_add_train: int        # addition problems for the preference pairs
    n_add_test: int         # held-out addition problems
    add_steps: int
    pass_ns: tuple          # N of pass@N
    seed: int = 0


P8 = (0.28, 0.2, 0.15, 0.11, 0.09, 0.07, 0.06, 0.04)

_BANDIT = {
    "smoke": dict(p=(0.35, 0.25, 0.15, 0.12, 0.08, 0.05), ref_concentration=2.0,
                  n_comparisons=300_000, betas=(1.0, 0.5, 0.2, 0.1, 0.05),
                  alphas=(0.1, 0.25, 0.5, 1.0, 2.0), spl_beta=0.1, n_seeds=3),
    "book": dict(p=(0.35, 0.25, 0.15, 0.12, 0.08, 0.05), ref_concentration=2.0,
                 n_comparisons=300_000, betas=(2.0, 1.0, 0.5, 0.2, 0.1, 0.05, 0.02),
                 alphas=(0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0), spl_beta=0.1, n_seeds=10),
    "paper": dict(p=(0.35, 0.25, 0.15, 0.12, 0.08, 0.05), ref_concentration=2.0,
                  n_comparisons=1_000_000, betas=(2.0, 1.0, 0.5, 0.2, 0.1, 0.05, 0.02),
                  alphas=(0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0), spl_beta=0.1, n_seeds=20),
}

_LM = {
    "smoke": dict(n_answers=8, n_pairs=2000, beta=0.1, alphas=(0.5, 1.0), n_steps=10,
                  batch_size=0, lr=5e-3, lora_r=8, lora_layers=2,
                  temperatures=(1.0, 2.0, 5.0, 10.0)),
    "book": dict(n_answers=8, n_pairs=5000, beta=0.1, alphas=(0.5, 1.0), n_steps=60,
                 batch_size=0, lr=3e-3, lora_r=8, lora_layers=2,
                 temperatures=(1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)),
    "paper": dict(n_answers=8, n_pairs=20000, beta=0.1, alphas=(0.5, 1.0), n_steps=500,
                  batch_size=0, lr=1e-3, lora_r=16, lora_layers=8,
                  temperatures=(1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)),
}

_DIV = {
    "smoke": dict(n_pref_prompts=2, n_pref_samples=4, n_samples=6, max_new_tokens=10, beta=0.1,
                  spl_alpha=0.5, temperatures=(1.0, 1.5), n_steps=3, batch_size=2, lr=3e-3,
                  lora_r=8, lora_layers=2, n_questions=60, n_choices=4, n_mc_comparisons=200,
                  mc_alpha=1.0, n_add_train=4, n_add_test=6, add_steps=3, pass_ns=(1, 4, 16)),
    "book": dict(n_pref_prompts=4, n_pref_samples=6, n_samples=24, max_new_tokens=20, beta=0.1,
                 spl_alpha=0.5, temperatures=(1.0, 1.3, 1.6), n_steps=30, batch_size=4, lr=3e-3,
                 lora_r=8, lora_layers=2, n_questions=400, n_choices=4, n_mc_comparisons=300,
                 mc_alpha=1.0, n_add_train=24, n_add_test=24, add_steps=30,
                 pass_ns=(1, 4, 16, 64)),
    "paper": dict(n_pref_prompts=8, n_pref_samples=16, n_samples=100, max_new_tokens=48,
                  beta=0.1, spl_alpha=0.5, temperatures=(1.0, 1.3, 1.6, 2.0), n_steps=500,
                  batch_size=16, lr=5e-4, lora_r=16, lora_layers=8, n_questions=2000,
                  n_choices=4, n_mc_comparisons=1000, mc_alpha=1.0, n_add_train=200,
                  n_add_test=100, add_steps=500, pass_ns=(1, 4, 16, 64, 256)),
}


def closed_form(profile: str | None = None, **overrides) -> BanditConfig:
    """The config of ``01-closed-form`` (chapter 17)."""
    return make_config(BanditConfig, _BANDIT, profile, **overrides)


def lm_bandit(profile: str | None = None, **overrides) -> LMBanditConfig:
    """The config of ``02-lm-bandit`` (chapter 17)."""
    cfg = make_config(LMBanditConfig, _LM, profile, **overrides)
    if not 2 <= cfg.n_answers <= 8:
        raise ValueError(f"n_answers must be in [2, 8], got {cfg.n_answers}")
    return cfg


def diversity(profile: str | None = None, **overrides) -> DiversityConfig:
    """The config of ``03-diversity-and-calibration`` (chapter 17)."""
    return make_config(DiversityConfig, _DIV, profile, **overrides)

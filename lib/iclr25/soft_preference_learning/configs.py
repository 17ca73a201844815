"""The chapter's runs at each profile (see :mod:`iclr25.profiles`). Chapter 17.

``smoke`` keeps each notebook within seconds (few steps, few samples), ``book`` runs the same
experiments larger (within a few minutes on 2 cores), ``paper`` moves towards the paper's
settings (LoRA on a 7B model for thousands of steps is out of reach here; ``paper`` only
lengthens our runs).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["BanditConfig", "LMBanditConfig", "DiversityConfig", "BestOfNConfig",
           "CalibrationConfig", "closed_form", "lm_bandit", "diversity", "best_of_n", "calibration"]


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
    n_seeds: int = 4        # replicates (seeds seed, seed + 1, ...): pairs and LoRA drawn anew
    seed: int = 0


@dataclass(frozen=True)
class DiversityConfig:
    """``03-diversity-and-calibration``: one-sentence stories, diversity against quality."""

    n_prompts: int          # story prompts (pairs and evaluation; tasks.STORY_PROMPTS)
    n_pref_samples: int     # samples per prompt for the preference pairs
    n_samples: int          # evaluation samples per prompt and setting (the paper: 100 stories)
    max_new_tokens: int
    beta: float             # the paper: 0.1
    spl_alpha: float        # SPL's entropy coefficient
    temperatures: tuple     # token-level temperatures of the DPO model (the first must be 1)
    n_steps: int
    batch_size: int
    lr: float
    lora_r: int
    lora_layers: int
    n_seeds: int            # replicates (seeds seed, seed + 1, ...)
    seed: int = 0


@dataclass(frozen=True)
class BestOfNConfig:
    """``04-best-of-n``: exact pass@k on held-out arithmetic problems."""

    n_train: int            # training problems (preference pairs: right answer > near misses)
    n_test: int             # held-out problems (the hard ones are below the reference's median)
    beta: float             # the paper: 0.1
    spl_alpha: float        # SPL's entropy coefficient
    temperatures: tuple     # token-level temperatures of the DPO model (the first must be 1)
    k: int                  # pass@k (the registry: 16)
    n_steps: int
    batch_size: int
    lr: float
    lora_r: int
    lora_layers: int
    seed: int = 0


@dataclass(frozen=True)
class CalibrationConfig:
    """``05-calibration``: a tabular bandit with known answer frequencies, and cloze multiple
    choice on SmolLM2."""

    n_questions: int        # tabular questions (half tune the temperature, half test)
    n_choices: int
    n_mc_comparisons: int   # Bradley-Terry comparisons per tabular question
    mc_alpha: float         # SPL's alpha in the bandit
    beta: float             # the paper: 0.1
    n_cloze_train: int      # cloze items whose (right > distractor) pairs train the LMs
    n_cloze_test: int       # held-out cloze items scored
    spl_alpha: float        # SPL's alpha on the LM
    n_steps: int
    batch_size: int
    lr: float
    lora_r: int
    lora_layers: int
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
                  temperatures=(1.0, 2.0, 5.0, 10.0), n_seeds=2),
    "book": dict(n_answers=8, n_pairs=5000, beta=0.1, alphas=(0.5, 1.0), n_steps=60,
                 batch_size=0, lr=3e-3, lora_r=8, lora_layers=2,
                 temperatures=(1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)),
    "paper": dict(n_answers=8, n_pairs=20000, beta=0.1, alphas=(0.5, 1.0), n_steps=500,
                  batch_size=0, lr=1e-3, lora_r=16, lora_layers=8,
                  temperatures=(1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)),
}

_DIV = {
    "smoke": dict(n_prompts=2, n_pref_samples=4, n_samples=4, max_new_tokens=10, beta=0.1,
                  spl_alpha=0.5, temperatures=(1.0, 1.6), n_steps=3, batch_size=2, lr=3e-3,
                  lora_r=8, lora_layers=2, n_seeds=2),
    "book": dict(n_prompts=8, n_pref_samples=6, n_samples=8, max_new_tokens=16, beta=0.1,
                 spl_alpha=0.5, temperatures=(1.0, 1.3, 1.6, 2.0), n_steps=30, batch_size=4,
                 lr=3e-3, lora_r=8, lora_layers=2, n_seeds=3),
    "paper": dict(n_prompts=8, n_pref_samples=16, n_samples=100, max_new_tokens=48,
                  beta=0.1, spl_alpha=0.5, temperatures=(1.0, 1.3, 1.6, 2.0), n_steps=500,
                  batch_size=16, lr=5e-4, lora_r=16, lora_layers=8, n_seeds=3),
}

_BON = {
    "smoke": dict(n_train=8, n_test=40, beta=0.1, spl_alpha=0.5, temperatures=(1.0, 1.6), k=16,
                  n_steps=3, batch_size=8, lr=1e-3, lora_r=8, lora_layers=2),
    "book": dict(n_train=64, n_test=800, beta=0.1, spl_alpha=0.5, temperatures=(1.0, 1.3, 1.6, 2.0),
                 k=16, n_steps=40, batch_size=16, lr=1e-3, lora_r=8, lora_layers=2),
    "paper": dict(n_train=512, n_test=2000, beta=0.1, spl_alpha=0.5,
                  temperatures=(1.0, 1.3, 1.6, 2.0), k=16, n_steps=400, batch_size=32, lr=5e-4,
                  lora_r=16, lora_layers=8),
}

_CAL = {
    "smoke": dict(n_questions=60, n_choices=4, n_mc_comparisons=200, mc_alpha=1.0, beta=0.1,
                  n_cloze_train=16, n_cloze_test=24, spl_alpha=1.0, n_steps=3, batch_size=8,
                  lr=1e-3, lora_r=8, lora_layers=2),
    "book": dict(n_questions=400, n_choices=4, n_mc_comparisons=300, mc_alpha=1.0, beta=0.1,
                 n_cloze_train=300, n_cloze_test=362, spl_alpha=1.0, n_steps=40, batch_size=16,
                 lr=1e-3, lora_r=8, lora_layers=2),
    "paper": dict(n_questions=2000, n_choices=4, n_mc_comparisons=1000, mc_alpha=1.0, beta=0.1,
                  n_cloze_train=300, n_cloze_test=362, spl_alpha=1.0, n_steps=400,
                  batch_size=32, lr=5e-4, lora_r=16, lora_layers=8),
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


def _temps_start_at_1(cfg):
    if not cfg.temperatures or cfg.temperatures[0] != 1.0:
        raise ValueError(f"temperatures must start at 1.0 (the untempered model), got {cfg.temperatures}")
    return cfg


def diversity(profile: str | None = None, **overrides) -> DiversityConfig:
    """The config of ``03-diversity-and-calibration`` (chapter 17)."""
    cfg = make_config(DiversityConfig, _DIV, profile, **overrides)
    if not 1 <= cfg.n_prompts <= 8:
        raise ValueError(f"n_prompts must be in [1, 8] (tasks.STORY_PROMPTS), got {cfg.n_prompts}")
    return _temps_start_at_1(cfg)


def best_of_n(profile: str | None = None, **overrides) -> BestOfNConfig:
    """The config of ``04-best-of-n`` (chapter 17)."""
    return _temps_start_at_1(make_config(BestOfNConfig, _BON, profile, **overrides))


def calibration(profile: str | None = None, **overrides) -> CalibrationConfig:
    """The config of ``05-calibration`` (chapter 17)."""
    return make_config(CalibrationConfig, _CAL, profile, **overrides)

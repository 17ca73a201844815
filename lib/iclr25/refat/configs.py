"""The chapter's runs at each profile (see :mod:`iclr25.profiles`). Chapter 08 (ReFAT).

The refusal-trained ("aligned") SmolLM2 is shared by the three notebooks: :class:`SFTConfig`
is the same in each, and :func:`iclr25.refat.pipeline.aligned_model` caches its LoRA adapters
under ``runs/08-refat/`` (keyed by the config) so later notebooks reuse it. Settings come from a
pilot (see the chapter page): 60 steps of batch 8 at lr 1e-3 on 96 + 96 prompts reach full
refusal on held-out nouns; RFA from layer 16 removes it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..profiles import make_config

__all__ = ["SFTConfig", "DirectionConfig", "AttackConfig", "TrainConfig", "sft", "direction",
           "attacks", "training"]


@dataclass(frozen=True)
class SFTConfig:
    """The refusal SFT that gives SmolLM2 its refusal behaviour."""

    n_train: int            # training prompts per class (harmful, harmless)
    n_test: int             # held-out prompts per class (unseen nouns)
    lora_layers: int        # LoRA on the top lora_layers decoder layers (states below cached)
    lora_r: int
    n_steps: int
    batch_size: int
    lr: float
    seed: int = 0

    def key(self) -> str:
        return "-".join(f"{v}" for v in asdict(self).values())


@dataclass(frozen=True)
class DirectionConfig:
    """``01-refusal-direction``."""

    sft: SFTConfig
    n_dir: int              # prompts per class for the difference of means (paper: 32 in training)
    rfa_from: int           # RFA at every layer from here to the end (the paper: all layers)
    rfa_sweep: tuple        # start layers of the RFA sweep (figure)
    act_add_alpha: float    # activation addition strength (x r_l)
    max_new_tokens: int
    n_eval: int             # judged held-out prompts per class (held-out nouns and templates)
    n_rand_dirs: int        # random directions of the separation control
    seed: int = 0


@dataclass(frozen=True)
class AttackConfig:
    """``02-rfa-approximates-attacks``."""

    sft: SFTConfig
    n_dir: int
    n_gcg_prompts: int      # GCG-lite prompts (the paper: HarmBench, hundreds)
    gcg_iters: int          # (GCG: 500)
    gcg_topk: int           # (GCG: 256)
    gcg_cands: int          # (GCG: 512)
    suffix_len: int         # (GCG: 20)
    n_random: int           # random directions for the null distribution
    max_new_tokens: int
    n_eval: int             # judged held-out prompts per class (held-out nouns and templates)
    n_select: int           # training prompts on which the strongest input attack is chosen
    seed: int = 0


@dataclass(frozen=True)
class TrainConfig:
    """``03-refat-training``."""

    sft: SFTConfig
    n_dir: int              # rows per class for the recomputed feature (paper: 32)
    n_dir_eval: int         # prompts per class for the white-box RFA of the evaluation
    n_rows: int             # training rows per class (the first n_rows of the SFT's training set)
    rfa_from: int
    p_rfa: float            # paper: 0.5
    recalc_every: int       # K, paper: 4
    n_steps: int            # fine-tuning steps of RT and ReFAT from the SFT model
    lr: float
    seeds: tuple
    n_eval: int             # judged held-out prompts per class (held-out nouns and templates)
    templates: tuple        # jailbreak templates evaluated
    at_steps: int           # AT-lite steps timed
    gcg_iters: int
    gcg_cands: int
    suffix_len: int
    max_new_tokens: int
    seed: int = 0


_SFT = {
    "smoke": dict(n_train=48, n_test=8, lora_layers=8, lora_r=8, n_steps=30, batch_size=8, lr=2e-3),
    "book": dict(n_train=96, n_test=24, lora_layers=8, lora_r=8, n_steps=60, batch_size=8, lr=1e-3),
    "paper": dict(n_train=96, n_test=24, lora_layers=8, lora_r=8, n_steps=60, batch_size=8, lr=1e-3),
}
_DIR = {
    "smoke": dict(n_dir=16, rfa_from=16, rfa_sweep=(16,), act_add_alpha=1.0, max_new_tokens=8,
                  n_eval=8, n_rand_dirs=20),
    # book: the judged measurements run on 200 held-out prompts per class (the registry); the
    # descriptive sweep of start layers keeps three (it was five) to pay for them
    "book": dict(n_dir=32, rfa_from=16, rfa_sweep=(12, 16, 22), act_add_alpha=1.0,
                 max_new_tokens=8, n_eval=200, n_rand_dirs=100),
    "paper": dict(n_dir=32, rfa_from=16, rfa_sweep=tuple(range(4, 30, 2)), act_add_alpha=1.0,
                  max_new_tokens=16, n_eval=210, n_rand_dirs=100),
}
_ATT = {
    "smoke": dict(n_dir=16, n_gcg_prompts=1, gcg_iters=2, gcg_topk=32, gcg_cands=4, suffix_len=6,
                  n_random=200, max_new_tokens=8, n_eval=8, n_select=4),
    "book": dict(n_dir=32, n_gcg_prompts=2, gcg_iters=12, gcg_topk=32, gcg_cands=8, suffix_len=8,
                 n_random=1000, max_new_tokens=8, n_eval=200, n_select=32),
    "paper": dict(n_dir=32, n_gcg_prompts=8, gcg_iters=100, gcg_topk=64, gcg_cands=64, suffix_len=12,
                  n_random=1000, max_new_tokens=16, n_eval=210, n_select=64),
}
_TRAIN = {
    # smoke: 3 steps and 4-token replies (the refusal phrases are their first 2-3 tokens), for <= 45 s
    "smoke": dict(n_dir=8, n_dir_eval=8, n_rows=12, rfa_from=16, p_rfa=0.5, recalc_every=4, n_steps=3,
                  lr=1e-3, seeds=(0,), n_eval=4, templates=("override",), at_steps=1, gcg_iters=1,
                  gcg_cands=4, suffix_len=6, max_new_tokens=4),
    # book: 12 steps (30 steps took 608 s in all and 20 steps 521 s on one thread; the smoke
    # pilot's 6 steps already gave ReFAT full refusal under RFA), two templates, 3 seeds because the
    # RT-vs-ReFAT claims are stated across seeds. The registry judges 200 held-out prompts per class
    # x (RFA, GCG-lite, 2 templates, prefilling, harmless) x 6 trained models: replies of 4 tokens
    # (the refusal phrases are their first 2-3 tokens) and one timed AT-lite step (its GCG-lite at
    # 02's setting) keep the notebook within its former budget. gcg_iters/gcg_cands/suffix_len
    # are no longer used (AT-lite takes 02's attack setting, as registered).
    "book": dict(n_dir=16, n_dir_eval=32, n_rows=96, rfa_from=16, p_rfa=0.5, recalc_every=4, n_steps=12,
                 lr=1e-3, seeds=(0, 1, 2), n_eval=200, templates=("override", "novel"), at_steps=1,
                 gcg_iters=3, gcg_cands=8, suffix_len=8, max_new_tokens=4),
    "paper": dict(n_dir=32, n_dir_eval=32, n_rows=96, rfa_from=16, p_rfa=0.5, recalc_every=4, n_steps=200,
                  lr=1e-3, seeds=(0, 1, 2), n_eval=210, templates=("override", "novel", "prefix", "persona"),
                  at_steps=4, gcg_iters=20, gcg_cands=16, suffix_len=8, max_new_tokens=16),
}


def sft(profile: str | None = None, **overrides) -> SFTConfig:
    """The refusal-SFT config of a profile (chapter 08)."""
    return make_config(SFTConfig, _SFT, profile, **overrides)


def _with_sft(cls, table, profile, overrides):
    sft_over = {k: overrides.pop(k) for k in list(overrides) if k.startswith("sft_")}
    s = sft(profile, **{k[4:]: v for k, v in sft_over.items()})
    from ..profiles import resolve
    tab = {p: dict(v, sft=s) for p, v in table.items()}
    return make_config(cls, tab, resolve(profile), **overrides)


def direction(profile: str | None = None, **overrides) -> DirectionConfig:
    """``01-refusal-direction`` (chapter 08); ``sft_<field>=`` overrides the SFT config."""
    return _with_sft(DirectionConfig, _DIR, profile, overrides)


def attacks(profile: str | None = None, **overrides) -> AttackConfig:
    """``02-rfa-approximates-attacks`` (chapter 08)."""
    return _with_sft(AttackConfig, _ATT, profile, overrides)


def training(profile: str | None = None, **overrides) -> TrainConfig:
    """``03-refat-training`` (chapter 08)."""
    return _with_sft(TrainConfig, _TRAIN, profile, overrides)

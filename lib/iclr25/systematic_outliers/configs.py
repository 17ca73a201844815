"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

``smoke`` keeps every notebook within seconds (a few short SmolLM2 sequences, tiny GPTs trained
for tens of steps), ``book`` runs the same experiments a few times larger on 2 CPU cores,
``paper`` moves to the paper's settings (GPT-2 small, 12 layers x 768, context 1024, 50k steps
of ~0.5M tokens; needs a GPU and days).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["CensusConfig", "LifecycleConfig", "VariantsConfig", "census", "lifecycle",
           "variants", "compression", "RUNS"]


@dataclass(frozen=True)
class CensusConfig:
    """``01-outlier-census``: outliers of SmolLM2 (and Gemma-3-270M) on Wikipedia text."""

    n_seq: int             # sequences (paper: a few validation sequences per model)
    seq_len: int           # tokens per sequence
    k: int                 # top values kept per layer (paper: top-3)
    tau: float             # outlier token: max |x| > tau x mean |x| (paper code: 1000)
    gemma: bool            # also run Gemma-3-270M base (book and paper profiles)
    seed: int = 0


@dataclass(frozen=True)
class LifecycleConfig:
    """``02-outlier-lifecycle``: emergence, spread, disappearance; mean vs zero reset."""

    n_seq: int             # sequences for the statistics and the outlier means
    seq_len: int
    n_ppl: int             # held-out texts for perplexity
    ppl_len: int           # tokens per perplexity text
    threshold: float       # |x| above which an entry of an outlier dim counts as the outlier
    seed: int = 0


@dataclass(frozen=True)
class VariantsConfig:
    """``03-softmax-is-the-cause`` and ``04-outliers-and-compression``: tiny GPT variants."""

    tokenizer: str         # byte | smollm2 (paper: GPT-2 BPE)
    d_model: int           # paper: 768
    n_layers: int          # paper: 12
    n_heads: int           # paper: 12
    seq_len: int           # paper: 1024
    batch_size: int        # paper: 480 (12 x 40 accumulation); our paper profile 64, no accumulation
    n_steps: int           # paper: 50000 (analysed checkpoint)
    lr: float              # paper: 6e-4
    warmup: int            # paper: 2000
    variants: tuple        # which attention variants to train
    n_eval: int            # held-out windows for statistics and perplexity
    max_docs: int | None = None   # corpus documents (None: all 10,033)
    n_seeds: int = 1       # training seeds per variant (seed, seed + 1, ...)
    seed: int = 0
    bias: bool = False     # biases in the linear layers and LayerNorms (official GPT-2: none)
    n_lm_texts: int = 200  # 04: held-out texts for SmolLM2's activation quantization
    lm_len: int = 128      # 04: tokens per text

    @property
    def d_ff(self) -> int:
        return 4 * self.d_model


_ALL = ("default", "vbias", "attn_bias", "cabias", "ca_scale", "sigmoid")

RUNS = {
    "census": {
        "smoke": dict(n_seq=3, seq_len=48, k=3, tau=1000.0, gemma=True),
        "book": dict(n_seq=200, seq_len=128, k=3, tau=1000.0, gemma=True),
        "paper": dict(n_seq=64, seq_len=512, k=3, tau=1000.0, gemma=True),
    },
    "lifecycle": {
        "smoke": dict(n_seq=2, seq_len=48, n_ppl=3, ppl_len=48, threshold=1000.0),
        "book": dict(n_seq=200, seq_len=128, n_ppl=200, ppl_len=128, threshold=1000.0),
        "paper": dict(n_seq=64, seq_len=512, n_ppl=128, ppl_len=512, threshold=1000.0),
    },
    "variants": {
        "smoke": dict(tokenizer="byte", d_model=32, n_layers=2, n_heads=2, seq_len=32,
                      batch_size=8, n_steps=30, lr=3e-3, warmup=5, variants=_ALL, n_eval=8,
                      max_docs=400, n_seeds=2),
        "book": dict(tokenizer="byte", d_model=48, n_layers=3, n_heads=4, seq_len=64,
                     batch_size=16, n_steps=200, lr=3e-3, warmup=20, variants=_ALL, n_eval=32,
                     max_docs=3000, n_seeds=3),
        "paper": dict(tokenizer="smollm2", d_model=768, n_layers=12, n_heads=12, seq_len=1024,
                      batch_size=64, n_steps=50000, lr=6e-4, warmup=2000, variants=_ALL,
                      n_eval=64, max_docs=None, n_seeds=3),
    },
}
RUNS["compression"] = {p: dict(v, variants=("default", "ca_scale"))
                       for p, v in RUNS["variants"].items()}
# 04 judges the same models as 03 (same seeds, steps and batches): only default and ca_scale
RUNS["compression"]["smoke"].update(n_lm_texts=4, lm_len=48)


def census(profile: str | None = None, **overrides) -> CensusConfig:
    """The config of ``01-outlier-census`` (chapter 13)."""
    return make_config(CensusConfig, RUNS["census"], profile, **overrides)


def lifecycle(profile: str | None = None, **overrides) -> LifecycleConfig:
    """The config of ``02-outlier-lifecycle`` (chapter 13)."""
    return make_config(LifecycleConfig, RUNS["lifecycle"], profile, **overrides)


def _variants_table(name: str, profile, overrides) -> VariantsConfig:
    if "variants" in overrides and overrides["variants"] is not None:
        v = overrides["variants"]
        v = tuple(v.split(",")) if isinstance(v, str) else tuple(v)
        from .variants import VARIANTS

        bad = [x for x in v if x not in VARIANTS]
        if bad:
            raise ValueError(f"unknown attention variant(s) {bad}; valid: {', '.join(VARIANTS)}")
        overrides = dict(overrides, variants=v)
    return make_config(VariantsConfig, RUNS[name], profile, **overrides)


def variants(profile: str | None = None, **overrides) -> VariantsConfig:
    """The config of ``03-softmax-is-the-cause`` (chapter 13)."""
    return _variants_table("variants", profile, overrides)


def compression(profile: str | None = None, **overrides) -> VariantsConfig:
    """The config of ``04-outliers-and-compression`` (chapter 13)."""
    return _variants_table("compression", profile, overrides)

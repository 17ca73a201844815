"""Per-notebook configs of chapter 19 for the three profiles (see :mod:`iclr25.profiles`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["TextProxyConfig", "ToyConfig", "DebiasConfig", "text_proxy", "toy", "debias"]


@dataclass(frozen=True)
class TextProxyConfig:
    """Notebook 01: SmolLM2 with textual persons."""

    seeds: tuple = (0, 1, 2)
    n_traits: int = 20          # paper: 20 traits (10 positive, 10 negative: 240 items each)
    n_skills: int = 9           # paper: 21 skills (216 items)
    n_occupations: int = 9      # paper: 40 occupations (216 items); an item = value x description x template x seed
    n_descriptions: int = 4     # description templates per seed (paper: 1000 images per data set)
    n_templates: int = 2        # question templates per value (the test half)
    batch_size: int = 16
    model: str = "smollm2-135m-instruct"


@dataclass(frozen=True)
class ToyConfig:
    """Notebook 02: the toy VLA with injected occupational skew."""

    seeds: tuple = (0, 1)
    n_occupations: int = 8
    n_train: int = 1024
    n_eval: int = 64
    n_steps: int = 600           # with base rates (below); without, 1500 did not suffice on seed 1
    lr: float = 3e-3             # peak of warm-up + cosine; 5e-3 was unstable in the pilot
    batch_size: int = 64
    d_model: int = 64
    n_layers: int = 2
    share_range: tuple = (0.3, 0.95)   # injected shares of women: Delta from -0.4 to +0.9
    spread: float = 0.8          # occupations' gender-neutral base rates of "Yes" (toy_vla.base_rates)


@dataclass(frozen=True)
class DebiasConfig:
    """Notebook 03: five debiasing families on the toy VLA."""

    seed: int = 0
    n_occupations: int = 8
    n_train: int = 1024
    n_eval: int = 64
    n_steps: int = 600           # training the toy VLA (notebook 02's recipe)
    debias_steps: int = 60       # each trained debiasing method, each learning rate of the grid
    lr: float = 3e-3
    debias_lrs: tuple = (1e-4, 1e-3, 1e-2)   # the same grid for every trained method
    debias_images: int = 2       # training portraits per debiasing step (x every training prompt)
    n_val: int = 64              # held-out training-distribution portraits that select the lr
    batch_size: int = 64
    d_model: int = 64
    n_layers: int = 2
    lora_r: int = 4
    prune_heads: int = 2
    share_range: tuple = (0.3, 0.95)
    spread: float = 0.8


_TEXT = {"smoke": dict(seeds=(0,), n_traits=4, n_skills=2, n_occupations=3, n_descriptions=2, n_templates=1),
         "book": {}, "paper": dict(n_skills=16, n_occupations=32)}
_TOY = {"smoke": dict(seeds=(0,), n_train=128, n_eval=16, n_steps=60),
        "book": {}, "paper": dict(n_steps=5000, n_train=4096, n_eval=256, seeds=(0, 1, 2, 3, 4))}
_DEB = {"smoke": dict(n_train=128, n_eval=16, n_steps=300, debias_steps=10, n_val=16),   # the toy must learn colour for capability-axis-moves
        "book": {}, "paper": dict(n_steps=5000, n_train=4096, n_eval=256, debias_steps=1000)}


def _seeds(v):
    if v is None or isinstance(v, tuple):
        return v
    if isinstance(v, int):
        return (v,)
    return tuple(int(s) for s in str(v).split(",")) if isinstance(v, str) else tuple(v)


def text_proxy(profile=None, **kw) -> TextProxyConfig:
    """Config of notebook 01 (``seeds`` may be an int, a list or ``"0,1,2"``)."""
    kw["seeds"] = _seeds(kw.get("seeds"))
    return make_config(TextProxyConfig, _TEXT, profile, **kw)


def toy(profile=None, **kw) -> ToyConfig:
    """Config of notebook 02."""
    kw["seeds"] = _seeds(kw.get("seeds"))
    return make_config(ToyConfig, _TOY, profile, **kw)


def debias(profile=None, **kw) -> DebiasConfig:
    """Config of notebook 03."""
    return make_config(DebiasConfig, _DEB, profile, **kw)

"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

SIM runs are cheap: the ``book`` and ``paper`` profiles run the official scale (5,000 points per
cluster, 64 dimensions, batch 128, 40 epochs, official lr 0.1 = our 0.003125, see
:mod:`iclr25.sim_dynamics.train`). ``smoke`` keeps the gradient-flow time ``t = lr x steps`` of
the paper (about 12-15) with 1,000 points per cluster and a 4x larger step. The diffusion check is
shrunk from the paper's 32x32 U-Net to 8x8 images and a 4-layer conv denoiser.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["LinearTheoryConfig", "SwingByConfig", "DiffusionConfig", "linear_theory", "swing_by",
           "diffusion_check", "RUNS"]


@dataclass(frozen=True)
class LinearTheoryConfig:
    """Notebook 01: one-layer linear models against the closed form; learning order."""

    mu: tuple = (1.0, 2.0)                # signal strengths (run.sh: dists 1,2)
    var: tuple = (0.05, 0.05)             # per-axis variances (run.sh: sigma 0.05)
    var_sweep: tuple = (0.05, 0.1, 0.5, 1.0, 2.0)  # variances of concept 1 (run.sh ids 2-6)
    multi_mu: tuple = (1.0, 2.0, 3.0, 4.0)  # the 4-concept task (run.sh id 1)
    multi_var: float = 0.5
    n: int = 5000                         # points per cluster
    dim: int = 64
    lr: float = 0.003125                  # official 0.1 with F.mse_loss in 64-d
    batch_size: int = 128
    n_epochs: int = 40
    n_seeds: int = 3
    seed: int = 0


@dataclass(frozen=True)
class SwingByConfig:
    """Notebook 02: the symmetric two-layer model (theory), the init-sign ablation, the paper's MLPs."""

    mu: tuple = (1.0, 2.0)
    var: tuple = (0.05, 0.05)
    hdim: int = 64
    sym_init_scale: float = 0.05          # U(0, 0.05) entries, W(0) ~ 0.05 (official theory figure: U(0, 0.2))
    sym_lr: float = 0.005
    sym_n_epochs: int = 75                # 75 x 24 steps: t = 9
    sym_n: int = 1000
    official_ids: tuple = (28, 29, 26, 27, 7, 12)   # run.sh lines (main text: 28, 29)
    mlp_n: int = 5000                     # points per cluster of the official runs (official: 5000)
    n_epochs: int = 40                    # official
    ablation_id: int = 28                 # the official MLP of the init-sign ablation
    n_seeds: int = 5
    batch_size: int = 128
    seed: int = 0


@dataclass(frozen=True)
class DiffusionConfig:
    """Notebook 03: a conditional DDPM on generated colour x size images (held-out composition)."""

    img: int = 8                          # image side (paper: 32)
    n_per_class: int = 512                # training images per composition (paper: 2048)
    arch: str = "conv"                    # "conv" (4 conv layers) or "mlp" (paper: U-Net [64, 128, 256])
    hidden: int = 32                      # channels (conv) or width (mlp)
    n_diffusion: int = 50                 # DDPM noise levels (paper: continuous VDM)
    n_steps: int = 1500                   # AdamW steps (paper: 20k)
    batch_size: int = 128                 # (paper: 64)
    lr: float = 1e-3                      # (paper: AdamW 1e-3)
    n_checkpoints: int = 16               # read-outs of the held-out composition during training
    n_samples: int = 32                   # samples generated per composition and read-out
    n_seeds: int = 5                      # independent runs (seeds seed, seed + 1, ...; registered: 5)
    seed: int = 0


_LT_SMOKE = dict(n=1000, lr=0.0125, n_seeds=2)
_SB_SMOKE = dict(mlp_n=1000, n_seeds=3)
RUNS = {
    "linear_theory": {"smoke": _LT_SMOKE, "book": {}, "paper": {"n_seeds": 10}},
    "swing_by": {"smoke": _SB_SMOKE, "book": {}, "paper": {"n_seeds": 10}},
    "diffusion": {"smoke": dict(n_per_class=256, n_steps=300, n_checkpoints=6, n_samples=16,
                                hidden=16, n_seeds=2),
                  "book": {}, "paper": dict(n_per_class=2048, n_steps=20000, n_checkpoints=40, n_samples=128)},
}


def linear_theory(profile: str | None = None, **overrides) -> LinearTheoryConfig:
    """Notebook 01's config at ``profile`` (see the module docstring)."""
    return make_config(LinearTheoryConfig, RUNS["linear_theory"], profile, **overrides)


def swing_by(profile: str | None = None, **overrides) -> SwingByConfig:
    """Notebook 02's config at ``profile``."""
    return make_config(SwingByConfig, RUNS["swing_by"], profile, **overrides)


def diffusion_check(profile: str | None = None, **overrides) -> DiffusionConfig:
    """Notebook 03's config at ``profile``."""
    return make_config(DiffusionConfig, RUNS["diffusion"], profile, **overrides)

"""The diffusion check: a small conditional DDPM on generated images of two concepts.

The paper (Sec. 5, after Park et al. 2024) trains a text/concept-conditioned diffusion model on
32x32 images of a circle whose *colour* and *size* are the two concepts, holds out one
composition, and follows the generated held-out images in concept space over training. We shrink
everything to run on two CPU cores: 8x8 RGB images (default), an MLP denoiser conditioned on the
two-bit concept vector and a sinusoidal time embedding (a small conv net by default, an MLP as
the alternative), a cosine-schedule DDPM with 50 noise levels, a few thousand AdamW steps. Concepts are read out from pixel statistics (no classifier
network): the ink's blue-minus-red balance (colour) and its total brightness (size), each mapped
to [0, 1] by the means of the two training classes.

Introduced in notebook ``09-sim-dynamics/03-diffusion-check``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..progress import progress

__all__ = ["COMPOSITIONS", "HELD_OUT", "make_images", "ConceptReadout", "Denoiser", "ConvDenoiser", "ARCHS", "DDPM",
           "DiffusionRun", "train_diffusion", "held_out_summary"]

COMPOSITIONS = ((0, 0), (0, 1), (1, 0), (1, 1))   # (colour, size): 0 = red / small, 1 = blue / large
HELD_OUT = (1, 1)
_COLOURS = np.array([[0.85, 0.25, 0.35], [0.35, 0.25, 0.85]])   # reddish, bluish
_RADII = (0.22, 0.42)                                            # fraction of the image side


def make_images(concepts, img: int = 8, seed: int = 0, noise: float = 0.02) -> np.ndarray:
    """Images (n, 3, img, img) in [0, 1] of an anti-aliased disc with the given (colour, size) bits.

    ``concepts`` : (n, 2) array of 0/1. The disc's centre jitters by up to half a pixel.
    Introduced in ``03-diffusion-check``.
    """
    c = np.asarray(concepts)
    if c.ndim != 2 or c.shape[1] != 2 or not np.isin(c, (0, 1)).all():
        raise ValueError(f"concepts must be an (n, 2) array of 0/1 bits, got shape {c.shape}")
    if int(img) != img or img < 4:
        raise ValueError(f"img must be an integer >= 4, got {img}")
    rng = np.random.default_rng(seed)
    n = c.shape[0]
    yy, xx = np.mgrid[0:img, 0:img] + 0.5
    centre = img / 2 + rng.uniform(-0.5, 0.5, (n, 2))
    r = np.array(_RADII)[c[:, 1]] * img
    dist = np.sqrt((yy[None] - centre[:, 0, None, None]) ** 2 + (xx[None] - centre[:, 1, None, None]) ** 2)
    alpha = np.clip(r[:, None, None] - dist + 0.5, 0, 1)                       # coverage of each pixel
    col = _COLOURS[c[:, 0]]                                                    # (n, 3)
    X = alpha[:, None] * col[:, :, None, None]
    X = X + noise * rng.standard_normal(X.shape)
    return np.clip(X, 0, 1).astype(np.float32)


@dataclass
class ConceptReadout:
    """Concept coordinates of images from pixel statistics, calibrated on labelled images.

    colour score: (blue - red) / (blue + red) over the ink; size score: total ink brightness.
    ``to_concept`` maps both to [0, 1]-scaled coordinates (class 0 mean -> 0, class 1 mean -> 1);
    ``predict`` thresholds them at 0.5.
    """

    lo: np.ndarray
    hi: np.ndarray

    @staticmethod
    def raw(X) -> np.ndarray:
        X = np.clip(np.asarray(X, float), 0, 1)
        if X.ndim != 4 or X.shape[1] != 3:
            raise ValueError(f"images must be (n, 3, H, W), got shape {X.shape}")
        R, B = X[:, 0].sum((1, 2)), X[:, 2].sum((1, 2))
        colour = (B - R) / (B + R + 1e-6)
        size = X.mean(1).sum((1, 2))
        return np.stack([colour, size], 1)

    @classmethod
    def fit(cls, X, concepts) -> "ConceptReadout":
        S = cls.raw(X)
        c = np.asarray(concepts)
        lo = np.array([S[c[:, k] == 0, k].mean() for k in range(2)])
        hi = np.array([S[c[:, k] == 1, k].mean() for k in range(2)])
        return cls(lo, hi)

    def to_concept(self, X) -> np.ndarray:
        return (self.raw(X) - self.lo) / (self.hi - self.lo)

    def predict(self, X) -> np.ndarray:
        return (self.to_concept(X) > 0.5).astype(int)


def _time_embedding(t, dim: int = 32):
    """Sinusoidal embedding of the noise level ``t`` in [0, 1]."""
    half = dim // 2
    freqs = torch.exp(-math.log(100.0) * torch.arange(half, dtype=torch.float32) / half)
    ang = t.float()[:, None] * freqs[None] * 100.0
    return torch.cat([torch.sin(ang), torch.cos(ang)], 1)


class Denoiser(nn.Module):
    """MLP denoiser x0_hat(x_t, t, c) (predicts the clean image).

    The noise level enters through an MLP of its sinusoidal embedding, the concept vector ``c``
    (two bits, as +-1) through a linear map; both are added to each hidden layer, so the two
    concepts enter additively (a linear concept embedding, like the paper's concept-vector
    conditioning)."""

    def __init__(self, d: int, hidden: int = 256, temb: int = 32, T: int = 100):
        super().__init__()
        self.temb, self.T = temb, T
        self.emb = nn.Sequential(nn.Linear(temb, hidden), nn.SiLU(), nn.Linear(hidden, 2 * hidden))
        self.cond = nn.Linear(2, 2 * hidden)
        self.l1, self.l2, self.l3 = nn.Linear(d, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, d)

    def forward(self, x, t, c):
        e = self.emb(_time_embedding(t / self.T, self.temb)) + self.cond(2 * c.float() - 1)
        e1, e2 = e.chunk(2, 1)
        h = nn.functional.silu(self.l1(x) + e1)
        h = nn.functional.silu(self.l2(h) + e2)
        return self.l3(h)


class ConvDenoiser(nn.Module):
    """Small convolutional denoiser x0_hat(x_t, t, c) on (3, img, img) images.

    Four 3x3 convolutions (receptive field 9x9, the whole 8x8 image) with ``hidden`` channels; the
    noise-level embedding (an MLP of its sinusoidal code) plus a linear map of the concept bits adds
    a per-channel bias to each hidden layer. Unlike the MLP it shares weights across positions, so
    "what colour is ink" can be learned once for every pixel. Input and output are flattened images.
    """

    def __init__(self, d: int, hidden: int = 32, temb: int = 32, T: int = 100):
        super().__init__()
        self.img = int(round(math.sqrt(d // 3)))
        if 3 * self.img * self.img != d:
            raise ValueError(f"ConvDenoiser needs d = 3 * img^2, got d = {d}")
        self.temb, self.T = temb, T
        self.emb = nn.Sequential(nn.Linear(temb, 64), nn.SiLU(), nn.Linear(64, 3 * hidden))
        self.cond = nn.Linear(2, 3 * hidden)
        self.c1 = nn.Conv2d(3, hidden, 3, padding=1)
        self.c2 = nn.Conv2d(hidden, hidden, 3, padding=1)
        self.c3 = nn.Conv2d(hidden, hidden, 3, padding=1)
        self.out = nn.Conv2d(hidden, 3, 3, padding=1)

    def forward(self, x, t, c):
        n = x.shape[0]
        e = self.emb(_time_embedding(t / self.T, self.temb)) + self.cond(2 * c.float() - 1)
        e1, e2, e3 = e[:, :, None, None].chunk(3, 1)
        h = nn.functional.silu(self.c1(x.view(n, 3, self.img, self.img)) + e1)
        h = nn.functional.silu(self.c2(h) + e2)
        h = nn.functional.silu(self.c3(h) + e3)
        return self.out(h).reshape(n, -1)


ARCHS = {"mlp": Denoiser, "conv": ConvDenoiser}


class DDPM:
    """Cosine-schedule DDPM (Nichol & Dhariwal 2021) with ``T`` noise levels on flattened images."""

    def __init__(self, T: int = 100):
        if int(T) != T or T < 2:
            raise ValueError(f"T must be an integer >= 2, got {T}")
        self.T = int(T)
        s = 0.008
        f = torch.cos((torch.arange(T + 1, dtype=torch.float64) / T + s) / (1 + s) * math.pi / 2) ** 2
        abar = f / f[0]
        self.betas = torch.clamp(1 - abar[1:] / abar[:-1], max=0.999).float()
        self.alphas = 1 - self.betas
        self.abar = torch.cumprod(self.alphas, 0)

    def q_sample(self, x0, t, eps):
        """``x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps`` (``t`` indexes levels 0..T-1)."""
        a = self.abar[t][:, None]
        return a.sqrt() * x0 + (1 - a).sqrt() * eps

    def posterior(self, x0, xt, i: int):
        """Mean and variance of ``q(x_{i-1} | x_i, x0)`` (Ho et al. 2020, eq. 6-7) at level ``i``.

        ``mean = sqrt(abar_{i-1}) beta_i / (1 - abar_i) x0 + sqrt(alpha_i) (1 - abar_{i-1}) / (1 - abar_i) x_i``,
        ``var = beta_i (1 - abar_{i-1}) / (1 - abar_i)``, with ``abar_{-1} = 1`` (so at ``i = 0`` the
        mean is ``x0`` and the variance 0). Tested against Gaussian conditioning of the joint law.
        """
        i = int(i)
        if not 0 <= i < self.T:
            raise ValueError(f"level i must be in [0, {self.T - 1}], got {i}")
        ab = self.abar[i]
        ab_prev = self.abar[i - 1] if i > 0 else torch.tensor(1.0)
        b = self.betas[i]
        mean = (ab_prev.sqrt() * b / (1 - ab)) * x0 + (self.alphas[i].sqrt() * (1 - ab_prev) / (1 - ab)) * xt
        return mean, b * (1 - ab_prev) / (1 - ab)

    @torch.no_grad()
    def sample(self, model, c, d, generator):
        """Ancestral sampling of ``len(c)`` images with fixed noise from ``generator``.

        The model predicts the clean image x0; each step clips it to the data range [-1, 1] and
        samples the Gaussian posterior q(x_{t-1} | x_t, x0) (Ho et al. 2020, eq. 6-7)."""
        n = c.shape[0]
        x = torch.randn(n, d, generator=generator)
        for i in reversed(range(self.T)):
            t = torch.full((n,), i, dtype=torch.long)
            x0 = model(x, t, c).clamp(-1, 1)
            mean, var = self.posterior(x0, x, i)
            if i > 0:
                x = mean + var.sqrt() * torch.randn(n, d, generator=generator)
            else:
                x = mean
        return x


@dataclass
class DiffusionRun:
    """What :func:`train_diffusion` records.

    steps : (K,) Adam steps of the read-outs; concept : (K, 4, n, 2) concept coordinates of the
    generated images per composition (``COMPOSITIONS`` order); accuracy : (K, 4) fraction of
    samples whose two read-out bits equal the conditioning; loss : (n_steps,) training losses;
    samples : (K, n_show, 3, img, img) generated held-out images at each read-out.
    """

    steps: np.ndarray
    concept: np.ndarray
    accuracy: np.ndarray
    loss: np.ndarray
    samples: np.ndarray
    readout: ConceptReadout
    train_images: np.ndarray

    @property
    def held_out(self) -> int:
        return COMPOSITIONS.index(HELD_OUT)


def train_diffusion(cfg, show_progress: bool = True) -> DiffusionRun:
    """Train the conditional DDPM on three compositions and read out all four during training.

    ``cfg`` : a :class:`~iclr25.sim_dynamics.configs.DiffusionConfig`. The held-out composition
    (blue, large) is never trained on; it is generated by conditioning on its concept bits.
    Introduced in ``03-diffusion-check``.
    """
    torch.manual_seed(cfg.seed)
    train_c = np.array([c for c in COMPOSITIONS if c != HELD_OUT for _ in range(cfg.n_per_class)])
    Xtr = make_images(train_c, cfg.img, seed=cfg.seed)
    readout = ConceptReadout.fit(Xtr, train_c)
    d = 3 * cfg.img * cfg.img
    X = torch.as_tensor(Xtr.reshape(len(Xtr), d) * 2 - 1)
    C = torch.as_tensor(train_c)
    if cfg.arch not in ARCHS:
        raise ValueError(f"unknown arch {cfg.arch!r}; valid: {', '.join(ARCHS)}")
    model = ARCHS[cfg.arch](d, cfg.hidden, T=cfg.n_diffusion)
    ddpm = DDPM(cfg.n_diffusion)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(cfg.seed + 1)
    # read-outs spaced geometrically: the concepts are picked up early
    check = np.unique(np.geomspace(max(1, cfg.n_steps // 200), cfg.n_steps, cfg.n_checkpoints).round().astype(int))
    allc = torch.as_tensor(np.repeat(np.array(COMPOSITIONS), cfg.n_samples, 0))
    concept, acc, shown, losses = [], [], [], []
    bar = progress(total=cfg.n_steps, desc="DDPM") if show_progress else None
    for step in range(1, cfg.n_steps + 1):
        idx = torch.randint(0, len(X), (cfg.batch_size,), generator=g)
        t = torch.randint(0, ddpm.T, (cfg.batch_size,), generator=g)
        eps = torch.randn(cfg.batch_size, d, generator=g)
        loss = ((model(ddpm.q_sample(X[idx], t, eps), t, C[idx]) - X[idx]) ** 2).mean()   # x0-prediction
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if bar is not None:
            bar.update(1)
        if step in check:
            model.eval()
            gen = ddpm.sample(model, allc, d, torch.Generator().manual_seed(cfg.seed + 12345))
            model.train()
            imgs = ((gen.numpy() + 1) / 2).reshape(-1, 3, cfg.img, cfg.img)
            z = readout.to_concept(imgs).reshape(4, cfg.n_samples, 2)
            bits = (z > 0.5).astype(int)
            target = np.array(COMPOSITIONS)[:, None, :]
            concept.append(z)
            acc.append((bits == target).all(-1).mean(-1))
            ho = COMPOSITIONS.index(HELD_OUT)
            shown.append(np.clip(imgs.reshape(4, cfg.n_samples, 3, cfg.img, cfg.img)[ho, :8], 0, 1))
    if bar is not None:
        bar.close()
    return DiffusionRun(steps=check, concept=np.array(concept), accuracy=np.array(acc),
                        loss=np.array(losses), samples=np.array(shown), readout=readout,
                        train_images=Xtr)


def held_out_summary(run: DiffusionRun, reach: float = 0.5, train_ok: float = 0.9) -> dict:
    """What one run did with the held-out composition, from its read-outs.

    Only *valid* read-outs count: those at which every trained composition is generated with accuracy
    >= ``train_ok`` (before that the model draws much the same blob for every prompt, and the pixel
    read-out of a blob says nothing about concepts). ``acc``: (K,) held-out accuracy per read-out;
    ``valid``: (K,) bool; ``reached``: some valid read-out has accuracy >= ``reach``; ``first``: the
    first such read-out (-1 if none); ``drop``: after ``first``, the largest fall of the accuracy below
    its running maximum over valid read-outs (the non-monotonicity); ``z``: (K, 2) mean concept
    read-out of the held-out samples; ``dist``: (K,) their mean distance to the target (1, 1);
    ``swing``: after ``first``, at the valid read-out farthest from the target, the samples' mean is
    closer to a training composition than to the target; ``k_far``: that read-out (-1 if none).
    Introduced in ``03-diffusion-check``.
    """
    ho = run.held_out
    train = [j for j, c in enumerate(COMPOSITIONS) if c != HELD_OUT]
    valid = run.accuracy[:, train].min(1) >= train_ok
    acc = run.accuracy[:, ho]
    z = run.concept[:, ho].mean(1)
    dist = np.linalg.norm(run.concept[:, ho] - np.array(HELD_OUT), axis=-1).mean(1)
    hit = np.nonzero(valid & (acc >= reach))[0]
    first = int(hit[0]) if hit.size else -1
    drop, swing, k_far = 0.0, False, -1
    if first >= 0:
        later = np.nonzero(valid & (np.arange(len(acc)) >= first))[0]
        a = acc[later]
        drop = float(np.max(np.maximum.accumulate(a) - a))
        after = later[later > first]
        if after.size:
            k_far = int(after[np.argmax(dist[after])])
            d_train = min(np.linalg.norm(z[k_far] - np.array(c)) for c in COMPOSITIONS if c != HELD_OUT)
            swing = bool(d_train < np.linalg.norm(z[k_far] - np.array(HELD_OUT)))
    return {"acc": acc, "valid": valid, "reached": first >= 0, "first": first, "drop": drop, "z": z,
            "dist": dist, "swing": swing, "k_far": k_far}

"""The joint scaling law of reconstruction loss in n (latents) and k (active latents), Sec. 3.5:

    L(n, k) = exp(alpha + beta_k log k + beta_n log n + gamma log k log n) [+ exp(zeta + eta log k)]

The paper fits it to GPT-4 SAEs and reports beta_k = 0.26, beta_n = -0.017, gamma = -0.042 (the
second, irreducible term is optional here). The exponent of n at fixed k is
``beta_n + gamma log k`` and that of k at fixed n is ``beta_k + gamma log n``. Chapter 06
(``03-scaling-laws``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["JointLaw", "fit_joint_law", "PAPER_LAW", "PAPER_LAW_FULL", "run_grid"]


@dataclass(frozen=True)
class JointLaw:
    """A fitted L(n, k) (see the module docstring); ``zeta``/``eta`` are ``None`` without the
    irreducible term. ``rmse_log`` is the fit's root-mean-square error in log L."""

    alpha: float
    beta_k: float
    beta_n: float
    gamma: float
    zeta: float | None = None
    eta: float | None = None
    rmse_log: float = float("nan")

    def __call__(self, n, k):
        ln, lk = np.log(np.asarray(n, float)), np.log(np.asarray(k, float))
        out = np.exp(self.alpha + self.beta_k * lk + self.beta_n * ln + self.gamma * lk * ln)
        if self.zeta is not None:
            out = out + np.exp(self.zeta + self.eta * lk)
        return out

    def log_residuals(self, n, k, L) -> np.ndarray:
        """``log L - log L_fit`` at each point (positive: the law under-predicts the loss)."""
        return np.log(np.asarray(L, float)) - np.log(self(n, k))

    def n_exponent(self, k: float) -> float:
        """d log L / d log n at fixed k (ignoring the irreducible term)."""
        return self.beta_n + self.gamma * float(np.log(k))

    def k_exponent(self, n: float) -> float:
        """d log L / d log k at fixed n (ignoring the irreducible term)."""
        return self.beta_k + self.gamma * float(np.log(n))


#: The paper's fitted interaction-law coefficients (GPT-4, Sec. 3.5).
PAPER_LAW = {"beta_k": 0.26, "beta_n": -0.017, "gamma": -0.042}

#: The paper's full law with the irreducible term, as recalled by our brief (alpha, zeta, eta
#: could not be checked against the paper's text here; beta_k, beta_n, gamma are those above).
PAPER_LAW_FULL = {"alpha": -0.50, **PAPER_LAW, "zeta": -1.32, "eta": -0.085}


def fit_joint_law(n, k, L, *, irreducible: bool = False) -> JointLaw:
    """Fit :class:`JointLaw` to losses ``L`` measured at dictionary sizes ``n`` and ``k``.

    Without the irreducible term the law is linear in its parameters on log L, fitted by least
    squares (needs at least 4 points with two distinct n and two distinct k). With it, a
    nonlinear least-squares fit on log L starts from the linear fit. Chapter 06.
    """
    n, k, L = (np.asarray(a, dtype=float).ravel() for a in (n, k, L))
    if not (n.shape == k.shape == L.shape):
        raise ValueError(f"n, k and L must have the same length; got {n.size}, {k.size}, {L.size}")
    if np.any(n <= 0) or np.any(k <= 0) or np.any(L <= 0):
        raise ValueError("n, k and L must be positive")
    if len(np.unique(n)) < 2 or len(np.unique(k)) < 2 or n.size < 4:
        raise ValueError("fitting L(n, k) needs at least 4 points with two distinct n and k")
    ln, lk, y = np.log(n), np.log(k), np.log(L)
    A = np.stack([np.ones_like(ln), lk, ln, lk * ln], axis=1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    law = JointLaw(*map(float, coef))
    if irreducible:
        from scipy.optimize import least_squares

        def resid(p):
            return np.log(JointLaw(*p)(n, k)) - y

        p0 = list(coef) + [float(y.min()) - 2.0, 0.0]
        sol = least_squares(resid, p0, max_nfev=5000)
        law = JointLaw(*map(float, sol.x))
    pred = np.log(law(n, k))
    return JointLaw(**{**law.__dict__, "rmse_log": float(np.sqrt(np.mean((pred - y) ** 2)))})


def run_grid(X_train, X_eval, cfg, *, d_model: int | None = None, progress_desc: bool = True):
    """Train a TopK autoencoder at every (n, k) of ``cfg`` (a :class:`~.configs.ScalingConfig`)
    and evaluate it on ``X_eval`` at the fractions ``cfg.checkpoint_fracs`` of its training.

    A dictionary of ``n`` latents trains for ``cfg.steps_for(n)`` steps at learning rate
    ``cfg.lr_scale * default_lr(n)``. Returns ``(grid, curves, saes)``: ``grid`` one row per
    (n, k) at the end of training (``nmse``, ``l0``, ``dead_fraction``, ``shrinkage``,
    ``tokens``, ``seconds``, ``gain_last_doubling``: the relative NMSE drop over the last
    checkpoint interval, a convergence gauge), ``curves`` the held-out NMSE at every checkpoint
    (``n_latents``, ``k``, ``step``, ``tokens``, ``nmse``), ``saes`` {(n, k): model}. Chapter 06.
    """
    import time

    import pandas as pd

    from .metrics import evaluate
    from .model import TopKSAE
    from .train import default_lr, train_sae

    d = int(d_model or X_train.shape[1])
    rows, curves, saes = [], [], {}
    for n in cfg.ns:
        for k in cfg.ks:
            steps = cfg.steps_for(n)
            marks = sorted({max(1, int(round(f * steps))) for f in cfg.checkpoint_fracs} | {steps})
            sae = TopKSAE(d, n, k, auxk=cfg.auxk, seed=cfg.seed)
            curve = []
            on_ck = lambda step, m: curve.append(
                {"n_latents": n, "k": k, "step": step, "tokens": step * cfg.batch_size,
                 "nmse": evaluate(m, X_eval)["nmse"]})
            t0 = time.perf_counter()
            train_sae(sae, X_train, n_steps=steps, batch_size=cfg.batch_size,
                      lr=cfg.lr_scale * default_lr(n), dead_tokens=cfg.dead_tokens,
                      seed=cfg.seed, desc=f"n={n} k={k}" if progress_desc else None,
                      checkpoints=marks, on_checkpoint=on_ck)
            seconds = time.perf_counter() - t0
            res = evaluate(sae, X_eval)
            gain = (curve[-2]["nmse"] / curve[-1]["nmse"] - 1.0) if len(curve) > 1 else float("nan")
            rows.append({"n_latents": n, "k": k, **res, "tokens": steps * cfg.batch_size,
                         "seconds": seconds, "gain_last_doubling": gain})
            curves += curve
            saes[(n, k)] = sae
    return pd.DataFrame(rows), pd.DataFrame(curves), saes


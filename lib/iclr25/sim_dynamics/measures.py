"""The replicates the chapter's registry judges (``book/claims/09-sim-dynamics.yaml``).

Each function turns runs into one number per run (per training seed): a swing-by height with no
threshold, log ratios of learning times, a stage-wise indicator. The registry compares them with
their registered control (a null, a closed form, or the same number for a control model); nothing
here thresholds or judges.

Introduced in notebooks ``09-sim-dynamics/01-linear-theory``, ``02-swing-by`` and ``03-diffusion-check``.
"""

from __future__ import annotations

import numpy as np

from .analysis import _check_curve, _smooth

__all__ = ["swing_by_height", "log_time_ratio", "order_margin", "variance_effect", "stagewise",
           "bump_heights", "by_sign", "diffusion_measures"]


def swing_by_height(loss, smooth: int = 1) -> np.ndarray:
    """Swing-by height with no threshold, per run: the largest rise of the (smoothed) loss above its
    running minimum, relative to ``loss[0]``, counted only when the curve later falls below the peak
    minus half the rise; 0 otherwise (a monotone curve, or a rise that never comes down).

    ``loss`` : (T,) or (R, T). This is :func:`~iclr25.sim_dynamics.detect_swing_by`'s ``height``
    with the threshold at 0. Introduced in notebook ``09-sim-dynamics/02-swing-by``.
    """
    loss = _check_curve(loss)
    if loss.ndim == 2:
        return np.array([swing_by_height(l, smooth) for l in loss])
    y = _smooth(loss, smooth)
    rise = y - np.minimum.accumulate(y)
    i = int(np.argmax(rise))
    h = float(rise[i])
    if h <= 0 or i >= len(y) - 1 or not np.min(y[i:]) < y[i] - h / 2:
        return 0.0
    return h / abs(loss[0])


def _censor(t, t_end):
    t = np.asarray(t, float)
    return np.where(np.isnan(t), float(t_end), t)


def log_time_ratio(t_num, t_den, t_end) -> np.ndarray:
    """``ln(t_num / t_den)`` of learning times; a time never reached (NaN) counts as ``t_end``, the end of
    training (a lower bound of the true time). Introduced in notebook ``09-sim-dynamics/01-linear-theory``.
    """
    return np.log(_censor(t_num, t_end) / _censor(t_den, t_end))


def order_margin(t90, a, t_end) -> np.ndarray:
    """Per run, the smallest ``ln(t90(concept with the smaller a) / t90(concept with the next larger a))``
    over the adjacent pairs in the order of ``a``: > 0 iff every pair is learned in the order of ``a``.

    ``t90`` : (R, s) learning times (NaN: censored at ``t_end``); ``a`` : (s,). Introduced in notebook
    ``09-sim-dynamics/01-linear-theory``.
    """
    t90 = np.atleast_2d(np.asarray(t90, float))
    order = np.argsort(np.asarray(a, float))                 # ascending a
    if t90.shape[1] != len(order) or len(order) < 2:
        raise ValueError(f"t90 must be (R, s) with s = len(a) >= 2, got {t90.shape} and {len(order)}")
    t = _censor(t90[:, order], t_end)
    return np.log(t[:, :-1] / t[:, 1:]).min(1)


def variance_effect(t90_sweep, t_end) -> np.ndarray:
    """Per seed, the largest ``ln(t90(var_{i+1}) / t90(var_i))`` over adjacent values of a swept
    variance (``t90_sweep`` : (n_var, n_seeds), increasing variance): < 0 iff every step of the sweep
    shortens the learning time. Introduced in notebook ``09-sim-dynamics/01-linear-theory``.
    """
    t = _censor(t90_sweep, t_end)
    if t.ndim != 2 or t.shape[0] < 2:
        raise ValueError(f"t90_sweep must be (n_var >= 2, n_seeds), got {t.shape}")
    return np.log(t[1:] / t[:-1]).max(0)


def stagewise(jac) -> np.ndarray:
    """Per run, 1.0 when the off-diagonal entry ``w_12`` of the Jacobian rises above twice its start,
    then falls below half its peak, and ``w_11 < 0.5`` at the peak (growth, suppression, before the
    second growth); else 0.0. ``jac`` : (R, Tj, s, s). Introduced in notebook ``09-sim-dynamics/02-swing-by``.
    """
    jac = np.asarray(jac, float)
    if jac.ndim != 4 or jac.shape[1] < 2:
        raise ValueError(f"jac must be (R, Tj >= 2, s, s), got {jac.shape}")
    out = np.zeros(jac.shape[0])
    for r, w in enumerate(jac):
        k = int(np.argmax(w[:, 0, 1]))
        out[r] = float(w[k, 0, 1] > 2 * w[0, 0, 1] and w[-1, 0, 1] < 0.5 * w[k, 0, 1] and w[k, 0, 0] < 0.5)
    return out


def bump_heights(traj, smooth: int = 5) -> dict:
    """Swing-by heights (:func:`swing_by_height`) of the OOD centroid loss of every run: ``"step"`` logged
    before every step (moving average of ``smooth``) and ``"epoch"`` at the epoch checkpoints (the
    official figure's resolution, unsmoothed). Introduced in notebook ``09-sim-dynamics/02-swing-by``.
    """
    per_epoch = int(traj.jac_steps[1]) if len(traj.jac_steps) > 1 else 1
    cl = traj.ood_centroid_loss
    return {"step": swing_by_height(cl, smooth), "epoch": swing_by_height(cl[:, ::per_epoch])}


def by_sign(h_a, h_b, w_a):
    """Pairs of runs that differ in the sign of ``w_12(0)``: ``(height of the member with w_12(0) > 0,
    height of the other)``; ``w_a`` is the first member's ``w_12(0)`` (the second's has the other sign).
    Introduced in notebook ``09-sim-dynamics/02-swing-by``.
    """
    h_a, h_b, pos = np.asarray(h_a, float), np.asarray(h_b, float), np.asarray(w_a, float) > 0
    return np.where(pos, h_a, h_b), np.where(pos, h_b, h_a)


def _drop_after_peak(y) -> float:
    """The peak of ``y`` minus its lowest value after the peak (0 with fewer than two points)."""
    y = np.asarray(y, float)
    if y.size < 2:
        return 0.0
    k = int(np.argmax(y))
    return float(y[k] - y[k:].min())


def diffusion_measures(run, reach: float = 0.5, train_ok: float = 0.9) -> dict:
    """One run's replicates for the diffusion claims of notebook ``09-sim-dynamics/03-diffusion-check``.

    Read-outs count only when *valid* (every trained composition generated with accuracy >= ``train_ok``,
    as :func:`~iclr25.sim_dynamics.diffusion.held_out_summary` defines them). Returns

    * ``train_min``: the lowest final accuracy over the three trained compositions;
    * ``held_max``: the highest held-out accuracy over the valid read-outs (0 if there is none);
    * ``held_drop`` / ``train_drop``: over the valid read-outs, the held-out accuracy's peak minus its
      lowest value after the peak, and the same for the mean accuracy of the trained compositions;
    * ``swing``: after first reaching the held-out composition (accuracy >= ``reach``), at the valid
      read-out where the held-out samples' mean is farthest from the target, its distance to the target
      minus its distance to the nearest training composition (> 0: closer to a training composition);
      0 when the run never reaches the held-out composition or has no valid read-out after that.
    """
    from .diffusion import COMPOSITIONS, HELD_OUT, held_out_summary

    s = held_out_summary(run, reach=reach, train_ok=train_ok)
    train = [j for j, c in enumerate(COMPOSITIONS) if c != HELD_OUT]
    valid = s["valid"]
    swing = 0.0
    if s["k_far"] >= 0:
        z = s["z"][s["k_far"]]
        d_train = min(np.linalg.norm(z - np.array(c)) for c in COMPOSITIONS if c != HELD_OUT)
        swing = float(np.linalg.norm(z - np.array(HELD_OUT)) - d_train)
    return {"train_min": float(run.accuracy[-1, train].min()),
            "held_max": float(s["acc"][valid].max()) if valid.any() else 0.0,
            "held_drop": _drop_after_peak(s["acc"][valid]),
            "train_drop": _drop_after_peak(run.accuracy[valid][:, train].mean(1)),
            "swing": swing}

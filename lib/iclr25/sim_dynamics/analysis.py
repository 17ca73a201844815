"""Reading the dynamics: swing-by detection, monotonicity, and learning times.

Introduced in notebooks ``09-sim-dynamics/01-linear-theory`` and ``02-swing-by``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SwingBy", "detect_swing_by", "max_rise", "is_monotone", "learning_time"]


@dataclass(frozen=True)
class SwingBy:
    """An interior local maximum of an OOD loss curve.

    present : whether a rise of at least ``rel_tol * loss[0]`` above the running minimum is
        followed by a descent below the peak by at least half that rise.
    i_valley, i_peak : indices of the minimum before the peak and of the peak (-1 when absent).
    height : the rise ``loss[i_peak] - loss[i_valley]`` divided by ``loss[0]``.
    """

    present: bool
    i_valley: int
    i_peak: int
    height: float


def _smooth(y, window):
    if window <= 1:
        return y
    k = np.ones(window) / window
    pad = np.concatenate([np.full(window // 2, y[0]), y, np.full(window - 1 - window // 2, y[-1])])
    return np.convolve(pad, k, mode="valid")


def _check_curve(loss):
    loss = np.asarray(loss, float)
    if loss.ndim not in (1, 2) or loss.shape[-1] < 3:
        raise ValueError(f"loss must be (T,) or (R, T) with T >= 3, got shape {loss.shape}")
    if not np.all(np.isfinite(loss)):
        raise ValueError("loss contains NaN or inf (did training diverge?)")
    return loss


def max_rise(loss, smooth: int = 1) -> np.ndarray:
    """Largest ``loss[i] - min(loss[:i+1])`` relative to ``loss[0]``: 0 for a monotone curve."""
    loss = _check_curve(loss)
    if loss.ndim == 2:
        return np.array([max_rise(l, smooth) for l in loss])
    y = _smooth(loss, smooth)
    return float(np.max(y - np.minimum.accumulate(y)) / abs(loss[0]))


def is_monotone(loss, rel_tol: float = 1e-3, smooth: int = 1):
    """Whether the curve never rises by more than ``rel_tol * loss[0]`` above its running minimum."""
    r = max_rise(loss, smooth)
    return r <= rel_tol if np.ndim(r) == 0 else r <= rel_tol


def detect_swing_by(loss, rel_tol: float = 1e-2, smooth: int = 1):
    """Find the swing-by: an interior maximum of the OOD loss between two descents.

    ``loss`` : (T,) or (R, T) (then a list, one :class:`SwingBy` per run). The curve is smoothed by a
    moving average of ``smooth`` points (SGD noise); the peak is the point highest above the
    running minimum; it counts when it rises by more than ``rel_tol * loss[0]`` and the curve then
    falls again below ``peak - rise / 2``. Introduced in ``02-swing-by``.
    """
    loss = _check_curve(loss)
    if loss.ndim == 2:
        return [detect_swing_by(l, rel_tol, smooth) for l in loss]
    if not rel_tol > 0:
        raise ValueError(f"rel_tol must be positive, got {rel_tol}")
    y = _smooth(loss, smooth)
    runmin = np.minimum.accumulate(y)
    rise = y - runmin
    i_peak = int(np.argmax(rise))
    h = float(rise[i_peak])
    if h <= rel_tol * abs(loss[0]) or i_peak >= len(y) - 1:
        return SwingBy(False, -1, -1, h / abs(loss[0]))
    i_valley = int(np.argmin(y[:i_peak + 1]))
    descends = bool(np.min(y[i_peak:]) < y[i_peak] - h / 2)
    if not descends:
        return SwingBy(False, -1, -1, h / abs(loss[0]))
    return SwingBy(True, i_valley, i_peak, h / abs(loss[0]))


def learning_time(pred, target, t, frac: float = 0.9) -> np.ndarray:
    """First time each concept coordinate of ``pred`` reaches ``frac`` of its ``target``.

    ``pred`` : (T, s) or (R, T, s) OOD predictions in concept space; ``target`` : (s,) (the OOD
    centroid, ``mu``); ``t`` : (T,). Returns (s,) or (R, s); NaN where never reached.
    Introduced in ``01-linear-theory``.
    """
    pred = np.asarray(pred, float)
    target = np.asarray(target, float)
    t = np.asarray(t, float)
    if pred.ndim == 3:
        return np.stack([learning_time(p, target, t, frac) for p in pred])
    if pred.ndim != 2 or pred.shape[1] != target.shape[0] or pred.shape[0] != t.shape[0]:
        raise ValueError(f"pred must be (T, s) with T = len(t) = {t.shape[0]} and s = "
                         f"len(target) = {target.shape[0]}, got {pred.shape}")
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    out = np.full(target.shape[0], np.nan)
    for k in range(target.shape[0]):
        hit = np.nonzero(pred[:, k] / target[k] >= frac)[0]
        if hit.size:
            out[k] = t[hit[0]]
    return out

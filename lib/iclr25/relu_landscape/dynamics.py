"""Reading the saddle-to-saddle dynamics off a trajectory: plateaus, angles, balancedness."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .train import Trajectory

__all__ = ["Plateau", "find_plateaus", "neuron_angles", "direction_clusters", "balancedness"]


@dataclass(frozen=True)
class Plateau:
    """A stretch of iterations on which the loss is (relatively) flat."""

    start: int  # first iteration of the stretch
    end: int    # last iteration before the loss starts to fall again
    loss: float # loss in the middle of the plateau
    mid: int    # the middle iteration (where :func:`~.landscape.certify` is applied)


def find_plateaus(traj: Trajectory, *, rel_tol: float = 1e-4, min_len: int = 10_000) -> list[Plateau]:
    """Maximal stretches where the loss changes by less than ``rel_tol`` (relative) per 1,000 steps
    and that last at least ``min_len`` iterations. Introduced in chapter 18, ``01-saddle-to-saddle``.
    """
    steps, loss = np.asarray(traj.steps), np.asarray(traj.loss)
    if len(loss) < 2:
        return []
    rate = np.abs(np.diff(loss)) / np.maximum(loss[:-1], 1e-300) / (np.diff(steps) / 1000.0)
    flat = rate < rel_tol
    out, i = [], 0
    while i < len(flat):
        if not flat[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(flat) and flat[j + 1]:
            j += 1
        start, end = int(steps[i]), int(steps[j + 1])
        if end - start >= min_len:
            mid_i = (i + j + 1) // 2
            out.append(Plateau(start, end, float(loss[mid_i]), int(steps[mid_i])))
        i = j + 1
    return out


def neuron_angles(W: np.ndarray) -> np.ndarray:
    """Counter-clockwise angle of each w_j from (1, 0), in degrees in [0, 360) (d = 2; Fig. 3b).

    ``W`` may be (m, 2) or a stack (T, m, 2)."""
    W = np.asarray(W)
    if W.shape[-1] != 2:
        raise ValueError(f"angles are defined for d = 2 inputs, got d = {W.shape[-1]}")
    return np.degrees(np.arctan2(W[..., 1], W[..., 0])) % 360.0


def direction_clusters(W: np.ndarray, mask: np.ndarray | None = None, tol_deg: float = 2.0) -> list[list[int]]:
    """Group neurons (rows of ``W``, optionally only where ``mask``) whose directions lie within
    ``tol_deg`` degrees of a neighbour (single linkage on the circle for d = 2, on angles between
    unit vectors otherwise)."""
    idx = np.flatnonzero(np.ones(len(W), bool) if mask is None else mask)
    if len(idx) == 0:
        return []
    U = W[idx] / np.linalg.norm(W[idx], axis=1, keepdims=True)
    ang = np.degrees(np.arccos(np.clip(U @ U.T, -1, 1)))
    parent = list(range(len(idx)))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a in range(len(idx)):
        for b in range(a + 1, len(idx)):
            if ang[a, b] <= tol_deg:
                parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for a in range(len(idx)):
        groups.setdefault(find(a), []).append(int(idx[a]))
    return sorted(groups.values(), key=lambda g: -len(g))


def balancedness(W: np.ndarray, H: np.ndarray) -> np.ndarray:
    """||w_j||^2 - ||h_j||^2, conserved by gradient flow for (positively) homogeneous activations
    (paper, Fact 4.6: ||w_j|| and |h_j| move in sync). Shape (..., m)."""
    return np.sum(np.asarray(W) ** 2, axis=-1) - np.sum(np.asarray(H) ** 2, axis=-1)

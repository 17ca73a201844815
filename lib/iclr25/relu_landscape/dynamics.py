"""Reading the saddle-to-saddle dynamics off a trajectory: plateaus, angles, balancedness."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .train import Trajectory

__all__ = ["Plateau", "find_plateaus", "neuron_angles", "direction_clusters", "balancedness",
           "random_direction_groups", "hyperplane_angle", "random_hyperplane_angle",
           "plateau_end_deviation", "balance_after_escape"]


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


def _unit_directions(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    U = rng.standard_normal((n, d))
    return U / np.linalg.norm(U, axis=1, keepdims=True)


def random_direction_groups(n: int, d: int = 2, tol_deg: float = 2.0, n_draws: int = 200,
                            seed: int = 0) -> float:
    """The control of the direction-group count: the mean number of groups that
    :func:`direction_clusters` forms among ``n`` directions drawn uniformly on the unit sphere of
    R^d, over ``n_draws`` draws. Introduced in chapter 18, notebook ``01-saddle-to-saddle``."""
    if n < 1:
        return 0.0
    rng = np.random.default_rng(seed)
    return float(np.mean([len(direction_clusters(_unit_directions(rng, n, d), tol_deg=tol_deg))
                          for _ in range(n_draws)]))


def hyperplane_angle(U: np.ndarray, X: np.ndarray) -> float:
    """The smallest angle (degrees) between a direction (row of ``U``) and a hyperplane
    {w : w . x_n = 0} of a training input: arcsin |cos(u, x_n)|, minimised over both. 0 means a
    direction on a kink of the loss. Introduced in chapter 18, notebook ``01-saddle-to-saddle``."""
    U = np.atleast_2d(np.asarray(U, dtype=np.float64))
    X = np.asarray(X, dtype=np.float64)
    cos = (U @ X.T) / (np.linalg.norm(U, axis=1)[:, None] * np.linalg.norm(X, axis=1)[None, :])
    return float(np.degrees(np.arcsin(np.clip(np.abs(cos), 0, 1))).min())


def random_hyperplane_angle(n: int, X: np.ndarray, n_draws: int = 1000, seed: int = 0) -> float:
    """The control of :func:`hyperplane_angle`: its mean over ``n_draws`` sets of ``n`` directions
    drawn uniformly on the unit sphere. Introduced in chapter 18, notebook ``01-saddle-to-saddle``."""
    rng = np.random.default_rng(seed)
    d = np.asarray(X).shape[1]
    return float(np.mean([hyperplane_angle(_unit_directions(rng, n, d), X) for _ in range(n_draws)]))


def plateau_end_deviation(plateaus: list[Plateau], paper_ends, last_step: int) -> float:
    """max_i |t_i / t_paper,i - 1| over the first ``len(paper_ends)`` plateau ends before the end
    of the run (``last_step``); 1.0 when the run has fewer. Introduced in chapter 18, notebook
    ``01-saddle-to-saddle``."""
    ends = [p.end for p in plateaus if p.end < last_step]
    if len(ends) < len(paper_ends):
        return 1.0
    return float(max(abs(e / t - 1) for e, t in zip(ends, paper_ends)))


def balance_after_escape(traj: Trajectory, neurons, growth: float = 100.0) -> float:
    """Fact 4.6 measured: max over ``neurons`` and the logged steps at which each has escaped of
    | ||w_j|| / ||h_j|| - 1 |. Neuron j has escaped while h_j^2 exceeds ``growth`` times |c_j|, its
    initial imbalance c_j = ||w_j||^2 - ||h_j||^2 (conserved by gradient flow, so there the ratio
    is within sqrt(1 + 1/growth) of 1 and can leave it further only by GD's discretisation).
    Neurons that never escape are left out; nan when none does. Introduced in chapter 18, notebook ``01-saddle-to-saddle``."""
    neurons = np.asarray(neurons)
    idx = np.flatnonzero(neurons) if neurons.dtype == bool else neurons.astype(int)
    wn = np.linalg.norm(traj.W[:, idx], axis=-1)
    hn = np.linalg.norm(traj.H[:, idx], axis=-1)
    c = np.abs(wn[0] ** 2 - hn[0] ** 2)
    escaped = hn ** 2 > growth * c[None, :]
    if not escaped.any():
        return float("nan")
    ratio = wn[escaped] / hn[escaped]
    return float(np.abs(ratio - 1).max())

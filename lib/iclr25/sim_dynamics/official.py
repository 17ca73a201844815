"""The paper's own MLP runs at the official settings (``run.sh`` of ``FFTYYY/ConceptDynamics-code``).

The official ``main.py`` trains ``models/mlp.py``: ``nn.Linear`` layers **with biases** (the default;
``--no_bias`` turns them off) and PyTorch's default initialization, by plain SGD on ``F.mse_loss``
(a mean over the batch and the ``dim`` coordinates) with batch 128 for 40 epochs, walking the
once-shuffled training set in the same order every epoch. The loss figure of the main text
(``paint/loss_multi.py``) plots ``1/2 ||f(x_b) - x_b||^2`` at the OOD centroid at each epoch
checkpoint; the path figure (``paint/curve_multi.py``) plots ``f(x_b)`` mapped back to the concept
plane. ``paint.sh`` draws those two figures from runs 28 ("high dimensional") and 29 ("low
dimensional"); runs 26-27 (three layers) and 7-16 (two layers) are in the appendix.

Our loss is ``1/2 E||f(x) - x||^2``; ``F.mse_loss`` is ``2 / dim`` times it, so the official step
``lr`` is our ``lr * 2 / dim`` (:func:`our_lr`).

Introduced in notebook ``09-sim-dynamics/02-swing-by``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .analysis import detect_swing_by, learning_time
from .data import two_concept
from .train import MLPSpec, Trajectory, train_sim

__all__ = ["OfficialRun", "OFFICIAL_RUNS", "STARTS", "our_lr", "official_run", "official_control",
           "bump_summary"]


@dataclass(frozen=True)
class OfficialRun:
    """One line of the official ``run.sh`` (the settings it does not name are the defaults)."""

    id: int
    n_layers: int
    mu: tuple
    dim: int = 64
    hdim: int = 64
    relu: bool = False
    lr: float = 0.1              # official step on F.mse_loss
    rotate: bool = True          # ``--no_rotation`` turns the random embedding off
    var: tuple = (0.05, 0.05)    # the config's "sigma" is a variance
    where: str = ""

    @property
    def label(self) -> str:
        act = "ReLU" if self.relu else "linear"
        return f"id {self.id}: {self.n_layers}-layer {act}, dim {self.dim}, mu {tuple(self.mu)}"


OFFICIAL_RUNS = {
    28: OfficialRun(28, 4, (2.0, 4.0), where="main text (paint.sh: 'High dimensional')"),
    29: OfficialRun(29, 4, (2.0, 4.0), dim=2, hdim=4, lr=0.01, where="main text ('Low dimensional')"),
    26: OfficialRun(26, 3, (1.0, 2.0), dim=3, hdim=3, lr=0.01, rotate=False, where="appendix ('Small mu')"),
    27: OfficialRun(27, 3, (2.0, 4.0), dim=3, hdim=3, lr=0.01, rotate=False, where="appendix ('Large mu')"),
    7: OfficialRun(7, 2, (1.0, 2.0), where="appendix (2-layer linear)"),
    12: OfficialRun(12, 2, (1.0, 2.0), relu=True, where="appendix (2-layer ReLU)"),
}


def our_lr(official_lr: float, dim: int) -> float:
    """The official step on ``F.mse_loss`` as a step on our ``1/2 E||f(x) - x||^2``: ``lr * 2 / dim``."""
    if not (official_lr > 0 and dim >= 1):
        raise ValueError(f"need official_lr > 0 and dim >= 1, got {official_lr}, {dim}")
    return official_lr * 2.0 / dim


STARTS = ("default", "mirrored", "both")


def official_run(run_id: int, seeds, n: int = 5000, n_epochs: int = 40, bias: bool = True,
                 starts: str = "default", show_progress: bool = False):
    """Train official run ``run_id`` for each seed (one batched ensemble); returns ``(traj, data)``.

    ``seeds`` set the data (with its random embedding), the default-initialized weights and biases.
    ``bias=False`` is the official ``--no_bias``. ``starts="mirrored"`` starts from the mirror image
    of each default start (:func:`~iclr25.sim_dynamics.train.mirror_init`: ``J_12(0)`` changes sign);
    ``"both"`` trains the default starts and their mirror images in one ensemble (runs ``0..R-1``
    default, ``R..2R-1`` mirrored; ``data`` then lists each data set twice).
    The OOD loss is logged before every step; Jacobians once per epoch.
    """
    from .train import init_params, mirror_init

    if run_id not in OFFICIAL_RUNS:
        raise ValueError(f"unknown official run {run_id}; valid: {', '.join(map(str, OFFICIAL_RUNS))}")
    r = OFFICIAL_RUNS[run_id]
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    data = [two_concept(mu=r.mu, var=r.var, n=n, dim=r.dim, rotate=r.rotate, seed=s) for s in seeds]
    if starts not in STARTS:
        raise ValueError(f"unknown starts {starts!r}; valid: {', '.join(STARTS)}")
    spec = MLPSpec(n_layers=r.n_layers, hdim=r.hdim, relu=r.relu, bias=bias)
    inits = [init_params(spec, r.dim, s) for s in seeds]
    mirrored = [mirror_init(w, b, d.U, spec) for (w, b), d in zip(inits, data)]
    if starts == "mirrored":
        inits = mirrored
    elif starts == "both":
        inits, data, seeds = inits + mirrored, data + data, seeds + seeds
    per_epoch = math.ceil(3 * n / 128)
    traj = train_sim(data, spec, seeds=seeds, lr=our_lr(r.lr, r.dim), batch_size=128, n_epochs=n_epochs,
                     reshuffle=False, jac_every=per_epoch, inits=inits, show_progress=show_progress)
    return traj, data


def official_control(run_id: int, seeds, n: int = 5000, n_epochs: int = 40,
                     show_progress: bool = False):
    """The one-layer control of official run ``run_id``: a single ``nn.Linear`` (with bias, PyTorch's
    default initialization) trained on the same data (same seeds), with the same step, batch size,
    epochs and batch order. Its gradient-flow OOD loss has no swing-by mechanism (Sec. 4.1), so its
    bump heights are the null the registry judges the MLP's against. Returns ``(traj, data)``.
    Introduced in notebook ``09-sim-dynamics/02-swing-by``.
    """
    if run_id not in OFFICIAL_RUNS:
        raise ValueError(f"unknown official run {run_id}; valid: {', '.join(map(str, OFFICIAL_RUNS))}")
    r = OFFICIAL_RUNS[run_id]
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    data = [two_concept(mu=r.mu, var=r.var, n=n, dim=r.dim, rotate=r.rotate, seed=s) for s in seeds]
    per_epoch = math.ceil(3 * n / 128)
    traj = train_sim(data, MLPSpec(n_layers=1, bias=True), seeds=seeds, lr=our_lr(r.lr, r.dim),
                     batch_size=128, n_epochs=n_epochs, reshuffle=False, jac_every=per_epoch,
                     show_progress=show_progress)
    return traj, data


def bump_summary(traj: Trajectory, mu, rel_tol: float = 1e-3, smooth: int = 5) -> dict:
    """Swing-by read-outs of one ensemble on the OOD centroid loss ``1/2 ||f(x_b) - x_b||^2``.

    ``step``: :func:`detect_swing_by` on the loss before every step (moving average of ``smooth``);
    ``epoch``: on the loss at the epoch checkpoints (the official figure's resolution), unsmoothed.
    Both with a rise of more than ``rel_tol`` of the initial loss. Also: the sign of ``J_12(0)`` and
    whether concept 2 (the larger ``a_p``) reaches 90% before concept 1.
    """
    per_epoch = int(traj.jac_steps[1]) if len(traj.jac_steps) > 1 else 1
    cl = traj.ood_centroid_loss
    step = detect_swing_by(cl, rel_tol=rel_tol, smooth=smooth)
    epoch = detect_swing_by(cl[:, ::per_epoch], rel_tol=rel_tol)
    lt = np.nan_to_num(learning_time(traj.ood_pred, np.asarray(mu, float), traj.t), nan=np.inf)
    return {"step": step, "epoch": epoch, "j12_0": traj.jac[:, 0, 0, 1].copy(),
            "concept2_first": lt[:, 1] < lt[:, 0], "per_epoch": per_epoch}

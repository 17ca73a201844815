"""Figures of chapter 18, each titled with the paper figure it reproduces."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import paper_figure
from .dynamics import direction_clusters, find_plateaus, neuron_angles
from .landscape import classify_neurons
from .train import Trajectory

__all__ = ["plot_fig3", "plot_loss_changes", "plot_losses"]


def _groups(traj: Trajectory, X, Y):
    labels = classify_neurons(traj.net, X, Y)
    groups = direction_clusters(traj.net.W, labels == "alive", tol_deg=2.0)
    return labels, groups


def plot_fig3(traj: Trajectory, X: np.ndarray, Y: np.ndarray, *, paper_ends=(42_000, 152_000)):
    """Fig. 3: (a) loss with plateau ends, (b) angles of non-dead neurons, (c) ||w_j||, (d) |h_j|.

    Neurons are coloured by the direction group they end in; dead neurons are left out of (b).
    """
    labels, groups = _groups(traj, X, Y)
    fig, axs = plt.subplots(1, 4, figsize=(17, 3.8))
    steps = traj.steps
    axs[0].plot(steps, traj.loss, color="k")
    for p in find_plateaus(traj)[:-1]:
        axs[0].axvline(p.end, ls=":", color="C3")
        axs[0].text(p.end, axs[0].get_ylim()[1], f" {p.end // 1000}k", va="top", color="C3")
    for e in paper_ends:
        axs[0].axvline(e, ls="--", color="0.6", lw=0.8)
    axs[0].set(xlabel="iteration", ylabel="loss", title="(a) loss (dotted: ours, dashed: paper)")
    if traj.W.shape[-1] == 2:
        ang = neuron_angles(traj.W)
        for gi, g in enumerate(groups):
            for j in g:
                axs[1].plot(steps, ang[:, j], color=f"C{gi}", lw=0.8,
                            label=f"group {gi + 1} ({len(g)})" if j == g[0] else None)
        axs[1].set(xlabel="iteration", ylabel="angle of $w_j$ (deg)", title="(b) directions")
        axs[1].legend(fontsize="small")
    wn = np.linalg.norm(traj.W, axis=-1)
    hn = np.linalg.norm(traj.H, axis=-1)
    for gi, g in enumerate(groups):
        for j in g:
            axs[2].plot(steps, wn[:, j], color=f"C{gi}", lw=0.8)
            axs[3].plot(steps, hn[:, j], color=f"C{gi}", lw=0.8)
    for ax, name in ((axs[2], r"$\|w_j\|$"), (axs[3], r"$|h_j|$")):
        ax.set(xlabel="iteration", ylabel=name, title=f"({'c' if ax is axs[2] else 'd'}) {name}")
    return paper_figure(fig, "Fig. 3", "saddle-to-saddle dynamics from a vanishing initialisation")


def plot_loss_changes(changes: np.ndarray, amplitude: float, *, ref: str = "Fig. 10"):
    """Fig. 10: histogram of loss changes under random perturbations of the final point."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(changes, bins=50, color="C0")
    ax.axvline(0, color="k", lw=0.8)
    ax.set(xlabel="loss change", ylabel="count",
           title=f"{len(changes)} perturbations, amplitude {amplitude:.2e}; min {changes.min():.2e}")
    return paper_figure(fig, ref, "no random perturbation lowers the loss at the final point")


def plot_losses(curves: dict[str, tuple[np.ndarray, np.ndarray]], *, ref: str, title: str,
                logy: bool = False):
    """Loss curves of several runs: ``{label: (steps, loss)}``."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for i, (lab, (s, l)) in enumerate(curves.items()):
        ax.plot(s, l, label=lab, color=f"C{i}")
    ax.set(xlabel="iteration", ylabel="loss")
    if logy:
        ax.set_yscale("log")
    ax.legend(fontsize="small")
    return paper_figure(fig, ref, title)

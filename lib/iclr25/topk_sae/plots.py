"""Figures of chapter 06, titled with the paper figure they reproduce."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import paper_figure

__all__ = ["plot_frontier", "plot_refinement", "plot_dead", "plot_scaling", "plot_law_residuals",
           "plot_learning_curves"]


def plot_frontier(table, *, title="NMSE vs L0: TopK against ReLU + L1"):
    """Fig. 2a analogue from a frame with columns ``model``, ``l0``, ``nmse``."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name, g in table.groupby("model"):
        g = g.sort_values("l0")
        ax.plot(g["l0"], g["nmse"], "o-", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("L0 (active latents per token)")
    ax.set_ylabel("normalised MSE")
    ax.legend()
    return paper_figure(fig, "Fig. 2a", title)


def plot_refinement(pairs: dict):
    """Fig. 6-style: refined vs original activation values per model (``{name: (orig, refined)}``)."""
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 3.8), squeeze=False)
    for ax, (name, (orig, ref)) in zip(axes[0], pairs.items()):
        lim = float(np.percentile(np.concatenate([orig, ref]), 99.5)) if len(orig) else 1.0
        ax.scatter(orig, ref, s=3, alpha=0.3)
        ax.plot([0, lim], [0, lim], "k--", lw=1)
        ax.set_xlim(0, lim)
        ax.set_ylim(0, lim)
        ax.set_xlabel("encoder activation")
        ax.set_ylabel("refined activation (least squares)")
        ax.set_title(name)
    return paper_figure(fig, "Fig. 6", "refining the activations on their own support")


def plot_dead(curves, *, x="tokens"):
    """Dead fraction over training, one panel per dictionary size (frame with columns
    ``n_latents``, ``variant``, ``tokens``, ``dead_fraction``)."""
    ns = sorted(curves["n_latents"].unique())
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 3.6), squeeze=False, sharey=True)
    for ax, n in zip(axes[0], ns):
        for name, g in curves[curves["n_latents"] == n].groupby("variant"):
            ax.plot(g[x], g["dead_fraction"], label=name)
        ax.set_title(f"n = {n}")
        ax.set_xlabel("training tokens")
    axes[0][0].set_ylabel("dead fraction")
    axes[0][-1].legend(fontsize="small")
    return paper_figure(fig, "Sec. 3.3 / Fig. 15", "dead latents: tied init and AuxK")


def plot_scaling(table, law=None):
    """Fig. 3/Fig. 5 analogue: NMSE against n for each k (frame ``n_latents``, ``k``, ``nmse``)."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for k, g in table.groupby("k"):
        g = g.sort_values("n_latents")
        line, = ax.plot(g["n_latents"], g["nmse"], "o", label=f"k = {k}")
        if law is not None:
            ns = np.geomspace(g["n_latents"].min(), g["n_latents"].max(), 50)
            ax.plot(ns, law(ns, k), "-", color=line.get_color(), lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("latents n")
    ax.set_ylabel("normalised MSE")
    ax.legend()
    return paper_figure(fig, "Fig. 5", "NMSE over n and k with the fitted joint law")


def plot_law_residuals(table, laws: dict):
    """The fitted laws' residuals ``log NMSE - log L(n, k)`` against n, one marker per k and one
    panel per law (``laws``: {name: JointLaw}); a law that fits leaves no trend in n or k."""
    fig, axes = plt.subplots(1, len(laws), figsize=(4.6 * len(laws), 3.6), squeeze=False,
                             sharey=True)
    for ax, (name, law) in zip(axes[0], laws.items()):
        for k, g in table.groupby("k"):
            g = g.sort_values("n_latents")
            r = law.log_residuals(g["n_latents"], g["k"], g["nmse"])
            ax.plot(g["n_latents"], r, "o-", label=f"k = {k}")
        ax.axhline(0, color="gray", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("latents n")
        ax.set_title(f"{name} (rmse {law.rmse_log:.3f})", fontsize="small")
    axes[0][0].set_ylabel("log NMSE - log fit")
    axes[0][-1].legend(fontsize="small")
    return paper_figure(fig, "Fig. 1b / Sec. 3.5", "residuals of the fitted joint law L(n, k)")


def plot_learning_curves(curves, k=None):
    """Held-out NMSE against training tokens, one line per n (at one ``k``; default: the k
    closest to 32), the convergence check behind the law (frame ``n_latents``, ``k``,
    ``tokens``, ``nmse``)."""
    ks = sorted(curves["k"].unique())
    k = min(ks, key=lambda v: abs(np.log(v / 32))) if k is None else k
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for n, g in curves[curves["k"] == k].groupby("n_latents"):
        ax.plot(g["tokens"], g["nmse"], "o-", label=f"n = {n}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training tokens")
    ax.set_ylabel("held-out normalised MSE")
    ax.legend(fontsize="small")
    return paper_figure(fig, "Sec. 3.1 (L(N): trained to convergence)",
                        f"held-out NMSE over training, k = {k}")

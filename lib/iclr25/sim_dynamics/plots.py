"""Figures of chapter 09 (house style from :mod:`iclr25.plotting`): concept-space paths and loss
curves (notebooks ``01-linear-theory``, ``02-swing-by``), Jacobian entries (``02-swing-by``) and
image grids (``03-diffusion-check``)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["concept_space", "loss_curves", "jacobian_entries", "image_grid"]


def concept_space(ax, preds, centroids, x_b, labels=None, title="OOD output in concept space"):
    """Paths of the OOD prediction (each (T, 2)) with the training clusters (circles) and the
    held-out composition (filled star), as in the paper's swing-by figure."""
    c = np.asarray(centroids)
    ax.scatter(c[:, 0], c[:, 1], s=250, facecolors="none", edgecolors="C0", label="train clusters")
    ax.scatter([x_b[0]], [x_b[1]], s=250, marker="*", color="C3", label="held-out composition")
    for i, p in enumerate(preds):
        p = np.asarray(p)
        ax.plot(p[:, 0], p[:, 1], lw=1.8, alpha=0.85, label=None if labels is None else labels[i])
        k = len(p) // 2
        ax.annotate("", xy=p[k + 1], xytext=p[k], arrowprops=dict(arrowstyle="-|>", lw=0, alpha=0.8))
    ax.set_xlabel("concept 1")
    ax.set_ylabel("concept 2")
    ax.set_title(title)
    ax.legend(fontsize="small", loc="lower right")
    return ax


def loss_curves(ax, t, losses, peaks=None, labels=None, title="OOD loss", log=True):
    """OOD loss curves ``losses`` (R, T) against ``t``; ``peaks`` marks swing-by maxima (index or -1)."""
    for i, L in enumerate(np.atleast_2d(losses)):
        line, = ax.plot(t, L, lw=1.5, label=None if labels is None else labels[i])
        if peaks is not None and peaks[i] >= 0:
            ax.plot(t[peaks[i]], L[peaks[i]], "v", color=line.get_color(), ms=8)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("t = lr x steps")
    ax.set_ylabel("OOD loss")
    ax.set_title(title)
    if labels is not None:
        ax.legend(fontsize="small")
    return ax


def jacobian_entries(ax, t, jac, title="Jacobian entries at the OOD point"):
    """Entries w_11, w_22, w_12, w_21 of the concept-space Jacobian ``jac`` (T, 2, 2) over time."""
    jac = np.asarray(jac)
    for (i, j), ls in zip([(0, 0), (1, 1), (0, 1), (1, 0)], ["-", "-", "--", ":"]):
        ax.plot(t, jac[:, i, j], ls, lw=1.8, label=f"$w_{{{i + 1}{j + 1}}}$")
    ax.set_xlabel("t = lr x steps")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return ax


def image_grid(images, rows_titles=None, figsize=None):
    """A grid of RGB images (K, n, 3, H, W): one row per read-out."""
    images = np.asarray(images)
    K, n = images.shape[:2]
    fig, axes = plt.subplots(K, n, figsize=figsize or (n * 0.8, K * 0.8), squeeze=False)
    for k in range(K):
        for i in range(n):
            axes[k, i].imshow(np.clip(images[k, i].transpose(1, 2, 0), 0, 1), interpolation="nearest")
            axes[k, i].set_xticks([])
            axes[k, i].set_yticks([])
        if rows_titles is not None:
            axes[k, 0].set_ylabel(rows_titles[k], rotation=0, ha="right", va="center", fontsize="small")
    return fig

"""Figures of chapter 11 (house style from :mod:`iclr25.plotting`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import paper_figure
from .task import max_depth as theorem_max_depth

__all__ = ["plot_lm_families", "plot_patching", "plot_lm_accuracy", "plot_heatmaps", "plot_hop_scores", "plot_attention"]


def plot_lm_accuracy(depths, acc, chance: float, n: int, name: str = "SmolLM2-135M"):
    """Zero-shot accuracy against D with the chance line (Fig. 2 in spirit). ``01-task-and-bound``."""
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ax.plot(depths, acc, "o-", label=name)
    ax.axhline(chance, color="grey", ls="--", label=f"chance ({chance:.0%})")
    ax.set(xlabel="retrieval steps D", ylabel="accuracy", ylim=(0, 1.02), xticks=list(depths))
    ax.legend()
    return paper_figure(fig, "Fig. 2", f"zero-shot 4-way multiple choice ({n} questions per D)")


def plot_heatmaps(acc: dict, layers, depths, chance: float):
    """Accuracy heatmaps over (layers t, depth D), one panel per curriculum, with the theorem's
    boundary D <= 3^t / 2 outlined (Fig. 4 in spirit). ``02-depth-vs-difficulty``.

    ``acc[mode]`` is a ``(len(layers), len(depths))`` array.
    """
    modes = list(acc)
    fig, axes = plt.subplots(1, len(modes), figsize=(4.2 * len(modes), 0.7 * len(layers) + 2.2),
                             squeeze=False)
    for ax, mode in zip(axes[0], modes):
        A = np.asarray(acc[mode])
        im = ax.imshow(A, vmin=0, vmax=1, cmap="viridis", origin="lower", aspect="auto")
        for i in range(A.shape[0]):
            for j in range(A.shape[1]):
                if np.isnan(A[i, j]):
                    ax.text(j, i, "not\ntrained", ha="center", va="center", fontsize=7)
                    continue
                ax.text(j, i, f"{A[i, j]:.2f}", ha="center", va="center",
                        color="white" if A[i, j] < 0.6 else "black", fontsize=9)
                if depths[j] > theorem_max_depth(layers[i]):
                    ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//",
                                               edgecolor="red", lw=0))
        ax.set_xticks(range(len(depths)), [str(d) for d in depths])
        ax.set_yticks(range(len(layers)), [str(t) for t in layers])
        ax.set(xlabel="retrieval steps D", ylabel="layers t", title=mode)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="accuracy")
    fig.suptitle("Fig. 4 (ours): accuracy over layers and depth; hatched: beyond Theorem 1's "
                 f"D <= 3^t/2 (chance {chance:.2f})", fontweight="bold")
    return fig


def plot_hop_scores(steps, scores, threshold: float, title: str = ""):
    """Each head's hop-k score over training, one panel per hop. ``03-head-emergence``.

    ``scores``: ``(n_checkpoints, layers, heads, hops)``.
    """
    scores = np.asarray(scores)
    _, L, H, K = scores.shape
    fig, axes = plt.subplots(1, K, figsize=(4.5 * K, 3.3), squeeze=False, sharey=True)
    for k, ax in enumerate(axes[0]):
        for l in range(L):
            for h in range(H):
                ax.plot(steps, scores[:, l, h, k], label=f"L{l}H{h}",
                        ls="-" if l == 0 else ("--" if l == 1 else ":"))
        ax.axhline(threshold, color="grey", lw=0.8)
        ax.set(xlabel="training step", title=f"hop {k + 1}", ylim=(0, 1.02))
    axes[0][0].set_ylabel("attention from query to the hop's fact")
    axes[0][-1].legend(fontsize=8)
    return paper_figure(fig, "Figs. 5/7", title or "retrieval heads emerge during training")


def plot_attention(A, tokens, title: str = ""):
    """Attention maps of one example, one panel per (layer, head). ``03-head-emergence``.

    ``A``: ``(layers, heads, T, T)``.
    """
    A = np.asarray(A)
    L, H, T, _ = A.shape
    fig, axes = plt.subplots(L, H, figsize=(3.2 * H, 3.0 * L), squeeze=False)
    for l in range(L):
        for h in range(H):
            ax = axes[l][h]
            ax.imshow(A[l, h], vmin=0, vmax=1, cmap="Blues")
            ax.set_xticks(range(T), tokens, rotation=90, fontsize=7)
            ax.set_yticks(range(T), tokens, fontsize=7)
            ax.set_title(f"layer {l} head {h}")
            ax.grid(False)
    return paper_figure(fig, "Fig. 5", title or "attention maps of the trained model")


def plot_lm_families(table, chance: float, name: str = "SmolLM2-135M"):
    """Zero-shot accuracy against D, one line per prompt family, with 95% Wilson intervals, and
    the families pooled (Fig. 2 in spirit). ``01-task-and-bound``.

    ``table``: a DataFrame with columns ``family, D, accuracy, lo, hi`` (``family == "all"``:
    pooled).
    """
    fig, ax = plt.subplots(figsize=(6.2, 3.6))
    fams = [f for f in dict.fromkeys(table["family"]) if f != "all"]
    for i, f in enumerate(fams):
        t = table[table["family"] == f]
        ax.plot(t["D"] + (i - len(fams) / 2) * 0.05, t["accuracy"], "o-", ms=3, lw=1, alpha=0.7,
                label=f)
    t = table[table["family"] == "all"]
    if len(t):
        ax.errorbar(t["D"], t["accuracy"], yerr=[t["accuracy"] - t["lo"], t["hi"] - t["accuracy"]],
                    fmt="s-", color="k", lw=2, capsize=3, label="all families (95% CI)")
    ax.axhline(chance, color="grey", ls="--", label=f"chance ({chance:.0%})")
    ax.set(xlabel="retrieval steps D", ylabel="accuracy", ylim=(0, 1.02),
           xticks=sorted(set(table["D"])))
    ax.legend(fontsize=7, ncol=2)
    return paper_figure(fig, "Fig. 2", f"{name}, zero-shot 4-way multiple choice per prompt family")


def plot_patching(table, title: str = ""):
    """Activation patching: for every head, the fraction of answers that move to the
    counterfactual answer when that head's output at the query is patched, hop heads highlighted.
    ``03-head-emergence``. ``table``: columns ``seed, head, identified, moved``.
    """
    fig, ax = plt.subplots(figsize=(6.2, 3.4))
    seeds = sorted(set(table["seed"]))
    heads = list(dict.fromkeys(table["head"]))
    w = 0.8 / max(len(seeds), 1)
    for i, s in enumerate(seeds):
        t = table[table["seed"] == s].set_index("head").reindex(heads)
        x = np.arange(len(heads)) + (i - (len(seeds) - 1) / 2) * w
        colors = ["C3" if ident else "C0" for ident in t["identified"]]
        ax.bar(x, t["moved"], width=w, color=colors, edgecolor="k", lw=0.3)
    ax.set_xticks(np.arange(len(heads)), heads, fontsize=8)
    ax.set(ylabel="answers moved by the patch", ylim=(0, 1.02), xlabel="patched head (one bar per seed)")
    ax.bar([], [], color="C3", label="identified chain heads")
    ax.bar([], [], color="C0", label="other heads")
    ax.legend(fontsize=8)
    return paper_figure(fig, "Figs. 5/7", title or "activation patching of single heads at the query")

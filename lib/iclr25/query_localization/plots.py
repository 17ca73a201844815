"""The chapter's figures (chapter 05), each titled with the paper figure it stands for."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import paper_figure

__all__ = ["plot_consistency", "plot_kn_heatmaps", "plot_delta_prob", "plot_synapses", "plot_editing"]


def plot_consistency(cs_by_rel: dict, static: float, otsu: float, layer_hist=None,
                     tau: float | None = None):
    """Violin/strip plot of the consistency scores per relation with the static and Otsu
    thresholds (the paper's Fig. 3 violins) and, when given, the cross-fact threshold ``tau``;
    and the KNs' layer histogram."""
    ncols = 2 if layer_hist is not None else 1
    fig, axes = plt.subplots(1, ncols, figsize=(5.5 * ncols, 3.8), squeeze=False)
    ax = axes[0, 0]
    names = list(cs_by_rel)
    data = [np.asarray(cs_by_rel[n], float) for n in names]
    parts = ax.violinplot([d if len(d) > 1 else np.r_[d, d] for d in data], showmedians=True)
    for i, d in enumerate(data):
        ax.scatter(np.full(len(d), i + 1) + np.random.default_rng(i).uniform(-0.08, 0.08, len(d)),
                   d, s=12, color="k", alpha=0.6, zorder=3)
    ax.axhline(static, color="C3", ls="--", label=f"static {static:.2f}")
    ax.axhline(otsu, color="C2", ls=":", label=f"Otsu {otsu:.2f}")
    if tau is not None:
        ax.axhline(tau, color="C1", ls="-.", label=f"cross-fact tau {tau:.2f}")
    ax.set_xticks(range(1, len(names) + 1), names)
    ax.set_ylabel("consistency score (mean pairwise Jaccard)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="upper right", fontsize="small")
    if layer_hist is not None:
        axes[0, 1].bar(np.arange(len(layer_hist)), layer_hist, color="C0")
        axes[0, 1].set_xlabel("layer")
        axes[0, 1].set_ylabel("knowledge neurons (all queries)")
    return paper_figure(fig, "Fig. 3", "consistency of KN sets across paraphrases")


def plot_kn_heatmaps(maps: list, titles: list):
    """Heatmaps of attribution (layers x units, pooled into bins) for the paraphrases of two
    facts (the paper's Fig. 1)."""
    fig, axes = plt.subplots(1, len(maps), figsize=(3.0 * len(maps), 3.2), squeeze=False)
    for ax, m, t in zip(axes[0], maps, titles):
        ax.imshow(m, aspect="auto", cmap="viridis", interpolation="nearest")
        ax.set_title(t, fontsize="small")
        ax.set_xlabel("unit bin")
        ax.set_ylabel("layer")
    return paper_figure(fig, "Fig. 1", "where the attribution sits, per paraphrase")


def plot_delta_prob(table, group_col: str = "class"):
    """Bars of mean Delta Prob (suppress and enhance) for own, neighbour and random KN sets,
    split by consistency class (the paper's Fig. 2-1). ``table``: a DataFrame with columns
    ``op``, ``set``, ``class``, ``dprob``."""
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, op in zip(axes, ["suppress", "enhance"]):
        sub = table[table["op"] == op]
        sns.barplot(data=sub, x="set", y="dprob", hue=group_col, ax=ax, errorbar=("ci", 95))
        ax.axhline(0, color="k", lw=0.8)
        ax.set_title(op)
        ax.set_ylabel("Delta Prob (relative)")
        ax.set_xlabel("KN set used")
    return paper_figure(fig, "Fig. 2-1", "a query's own KNs vs its neighbours' KNs")


def plot_synapses(table):
    """Change of KN activations and of the answer probability when the attention to the
    subject (knowledge synapses) or to control columns is scaled (the paper's Figs. 2-2, 2-3).
    ``table``: columns ``columns``, ``kn_change``, ``dprob``."""
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    sns.boxplot(data=table, x="columns", y="kn_change", ax=axes[0])
    axes[0].set_ylabel("relative change of own KN activations")
    sns.boxplot(data=table, x="columns", y="dprob", ax=axes[1])
    axes[1].set_ylabel("Delta Prob")
    for ax in axes:
        ax.set_xlabel("attention columns scaled")
    return paper_figure(fig, "Figs. 2-2, 2-3", "scaling attention to the subject vs control columns")


def plot_editing(table):
    """Grouped bars of Rel / Gen / Loc / Avg per method (the paper's Tables 2-3 as a figure).
    ``table``: columns ``method``, ``metric``, ``value``."""
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(8, 3.6))
    sns.barplot(data=table, x="metric", y="value", hue="method", ax=ax, errorbar=("ci", 95))
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (higher is better)")
    return paper_figure(fig, "Tables 2-3", "erasing a fact through its knowledge neurons")

"""The chapter's figures (chapter 13), each titled with the paper figure it stands for."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import paper_figure

__all__ = ["plot_layer_profile", "plot_census", "plot_weight_outliers", "plot_sinks",
           "plot_head_correlation", "plot_training", "plot_variant_profiles"]


def plot_layer_profile(tables: Mapping[str, "object"], *, paper_ref: str = "Fig. 10",
                       title: str = "top-3 and median |activation| per layer"):
    """Top-1/2/3 and median magnitudes per layer (log scale), one panel per table (a site or a
    model): ``tables`` maps a label to :meth:`ActivationStats.table` output (chapter 13)."""
    fig, axes = plt.subplots(1, len(tables), figsize=(5.2 * len(tables), 3.6), squeeze=False)
    for ax, (label, t) in zip(axes[0], tables.items()):
        for col, style in (("top1", "-o"), ("top2", "-s"), ("top3", "-^"), ("median", "--")):
            if col in t:
                ax.semilogy(t.index, t[col], style, ms=3, label=col)
        ax.set(xlabel="layer", ylabel="|activation|", title=label)
        ax.legend(fontsize="small")
    return paper_figure(fig, paper_ref, title)


def plot_census(shares: Mapping[str, Mapping[str, float]], *, paper_ref: str = "Figs. 3-6",
                title: str = "which tokens hold the outliers"):
    """Grouped bars: for each label (e.g. "largest activation", "outlier tokens"), the share of
    each token class (chapter 13)."""
    labels = list(shares)
    classes = list(next(iter(shares.values())))
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    width = 0.8 / len(labels)
    for i, lab in enumerate(labels):
        ax.bar(np.arange(len(classes)) + i * width, [shares[lab][c] for c in classes], width,
               label=lab)
    ax.set_xticks(np.arange(len(classes)) + 0.4 - width / 2, classes)
    ax.set(ylabel="share", ylim=(0, 1.05))
    ax.legend(fontsize="small")
    return paper_figure(fig, paper_ref, title)


def plot_weight_outliers(top_over_mean: Sequence[float], top_feature: Sequence[int],
                         outlier_dim: int, *, paper_ref: str = "Fig. 7",
                         title: str = "weight outliers of down_proj per layer"):
    """Largest ``|W|`` of each ``down_proj`` over its mean, marked where it writes the
    activation-outlier dimension (chapter 13)."""
    fig, ax = plt.subplots(figsize=(7, 3.4))
    layers = np.arange(len(top_over_mean))
    hit = np.asarray(top_feature) == outlier_dim
    ax.bar(layers[~hit], np.asarray(top_over_mean)[~hit], color="0.7", label="writes another dim")
    ax.bar(layers[hit], np.asarray(top_over_mean)[hit], color="C3",
           label=f"writes dim {outlier_dim}")
    ax.set(xlabel="layer", ylabel="max |W| / mean |W|")
    ax.legend(fontsize="small")
    return paper_figure(fig, paper_ref, title)


def plot_sinks(share: Mapping[int, np.ndarray], ratio: Sequence[float], *, paper_ref: str = "Fig. 9",
               title: str = "attention on the first token and the activation spike"):
    """Mean attention share on position 0 per layer beside the max/median ratio (chapter 13)."""
    layers = sorted(share)
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.plot(layers, [share[l].mean() for l in layers], "-o", ms=3, color="C0",
            label="attention on token 0")
    ax.set(xlabel="layer", ylabel="attention share", ylim=(0, 1.02))
    ax2 = ax.twinx()
    ax2.semilogy(layers, ratio, "--", color="C3", label="max / median |activation|")
    ax2.set_ylabel("max / median", color="C3")
    ax2.grid(False)
    fig.legend(loc="lower right", fontsize="small")
    return paper_figure(fig, paper_ref, title)


def plot_head_correlation(corr_sink: np.ndarray, corr_prev: np.ndarray, *, paper_ref: str = "Sec. 4",
                          title: str = "sink mass vs head-output norm, per head"):
    """Histograms of the per-head correlations with the sink mass and with the control
    (previous-token mass) (chapter 13)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    bins = np.linspace(-1, 1, 21)
    ax.hist(corr_sink, bins, alpha=0.7, label="attention on the sink (token 0)")
    ax.hist(corr_prev, bins, alpha=0.5, label="control: attention on the previous token")
    ax.axvline(0, color="k", lw=0.8)
    ax.set(xlabel="Pearson correlation with ||head output||", ylabel="heads")
    ax.legend(fontsize="small")
    return paper_figure(fig, paper_ref, title)


def plot_training(histories: Mapping[str, dict], *, paper_ref: str = "Fig. 11",
                  title: str = "training loss of the attention variants"):
    """Training-loss curves (a running mean over 10 logged steps), one per variant."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for name, h in histories.items():
        loss = np.asarray(h["loss"])
        w = min(10, len(loss))
        smooth = np.convolve(loss, np.ones(w) / w, mode="valid")
        ax.plot(np.asarray(h["step"])[w - 1:], smooth, label=name)
    ax.set(xlabel="step", ylabel="training loss (nats)")
    ax.legend(fontsize="small")
    return paper_figure(fig, paper_ref, title)


def plot_variant_profiles(summaries: Mapping[str, dict], *, paper_ref: str = "Fig. 10",
                          title: str = "max/median |activation| and sink share per layer"):
    """Two panels: max/median per layer and attention share on position 0 per layer, one line
    per variant (chapter 13)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, s in summaries.items():
        a.semilogy(s["layers"], s["max_over_median_per_layer"], "-o", ms=3, label=name)
        b.plot(s["layers"], s["sink_share_per_layer"], "-o", ms=3, label=name)
    a.set(xlabel="layer", ylabel="max / median |activation|")
    b.set(xlabel="layer", ylabel="attention on position 0", ylim=(0, 1.02))
    b.legend(fontsize="small")
    return paper_figure(fig, paper_ref, title)

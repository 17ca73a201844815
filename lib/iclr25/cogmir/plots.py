"""Figures of chapter 03 (CogMir), titled with the paper figure they stand for."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from iclr25.plotting import paper_figure

__all__ = ["plot_herd", "plot_vs_control", "plot_chain", "plot_streak", "plot_ratings"]


def _err(rate, lo, hi):
    """Error-bar lengths, clipped at 0 (float rounding at a rate of 0 or 1)."""
    rate, lo, hi = (np.asarray(x, dtype=float) for x in (rate, lo, hi))
    return [np.clip(rate - lo, 0, None), np.clip(hi - rate, 0, None)]


def plot_herd(rates: pd.DataFrame, control: pd.DataFrame, authority: pd.DataFrame | None = None):
    """Herd rate vs group size N, one panel per knowledge condition, one line per cue
    position, the no-cue control dashed; ``rates``/``control``/``authority`` come from
    :func:`~iclr25.cogmir.analysis.rate_table` with ``by=(condition, known, target)`` and an
    ``n_others`` column (chapter 03)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, known in zip(axes, (True, False)):
        for target, colour in ((0, "C0"), (1, "C1")):
            r = rates[(rates.known == known) & (rates.target == target)].sort_values("n_others")
            x = r.n_others.to_numpy()
            ax.errorbar(x, r.rate, yerr=_err(r.rate, r.lo, r.hi), marker="o", capsize=3,
                        color=colour, label=f"herd, cued option shown {'first' if target == 0 else 'second'}")
            c = control[(control.known == known) & (control.target == target)]
            if len(c):
                ax.axhline(float(c.rate.iloc[0]), color=colour, ls="--", lw=1,
                           label=f"no-cue control ({'first' if target == 0 else 'second'})")
            if authority is not None:
                a = authority[(authority.known == known) & (authority.target == target)]
                if len(a):
                    ax.errorbar([x.max() * 2.2], a.rate, yerr=_err(a.rate, a.lo, a.hi),
                                marker="s", color=colour, capsize=3, ls="none")
        ax.set_xscale("log")
        ticks = sorted(rates.n_others.unique()) + ([int(rates.n_others.max() * 2.2)]
                                                   if authority is not None else [])
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks[:-1]] + (["authority"] if authority is not None
                                                            else [str(ticks[-1])]))
        ax.set_xlabel("other participants N (one broadcast line)")
        ax.set_title("known questions (pretested)" if known else "unknown questions")
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("share choosing the cued option")
    axes[1].legend(fontsize=8, loc="lower right")
    return paper_figure(fig, "Fig. 3-4", "herd and authority rates with 95% Wilson intervals")


def plot_vs_control(table: pd.DataFrame, title: str, paper_ref: str, ax=None):
    """Bars of treatment vs control rate per cue position with Wilson intervals (chapter 03);
    ``table`` from :func:`~iclr25.cogmir.analysis.versus_control` plus a ``protocol`` column."""
    fig, ax = (plt.subplots(figsize=(8, 3.6)) if ax is None else (ax.figure, ax))
    labels = [f"{p}\ncue {'first' if c == 'A' else 'second'}" for p, c in zip(table.protocol,
                                                                              table["cue on"])]
    x = np.arange(len(table))
    for off, col, name in ((-0.18, "treatment", "with the cue"), (0.18, "control", "control")):
        lo, hi = table[f"{col}_lo"], table[f"{col}_hi"]
        ax.bar(x + off, table[col], width=0.36, label=name,
               yerr=_err(table[col], lo, hi), capsize=3)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("share choosing the cued option")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    return paper_figure(fig, paper_ref, title)


def plot_chain(metrics: pd.DataFrame, null: float):
    """Similarity to the original and length ratio by chain position (chapter 03)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for i, g in metrics.groupby("narrative"):
        axes[0].plot(g.position, g.similarity, color="grey", alpha=0.35, lw=1)
        axes[1].plot(g.position, g.length_ratio, color="grey", alpha=0.35, lw=1)
    m = metrics.groupby("position")[["similarity", "length_ratio"]].mean()
    axes[0].plot(m.index, m.similarity, marker="o", color="C0", lw=2, label="mean")
    axes[0].axhline(null, color="C3", ls="--", label="shuffled-sentence null")
    axes[1].plot(m.index, m.length_ratio, marker="o", color="C0", lw=2, label="mean")
    axes[1].axhline(1.0, color="k", lw=0.8)
    axes[0].set(xlabel="chain position", ylabel="MiniLM cosine to the original", ylim=(0, 1.02))
    axes[1].set(xlabel="chain position", ylabel="length / original length (words)")
    axes[0].legend(fontsize=8)
    for ax in axes:
        ax.set_xticks(sorted(metrics.position.unique()))
    return paper_figure(fig, "Rumor Chain (Sec. 4)", "distortion along the chain")


def plot_streak(rates: pd.DataFrame):
    """Gambler's fallacy: share choosing the "due" outcome vs streak length, one line per cue
    position (chapter 03); ``rates`` from ``rate_table(by=("streak", "target"))``."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for target, colour in ((0, "C0"), (1, "C1")):
        r = rates[rates.target == target].sort_values("streak")
        ax.errorbar(r.streak, r.rate, yerr=_err(r.rate, r.lo, r.hi), marker="o",
                    capsize=3, color=colour,
                    label=f"due outcome shown {'first' if target == 0 else 'second'}")
    ax.set(xlabel="streak length (0 = no history, the control)",
           ylabel="share choosing the due outcome", ylim=(-0.02, 1.02))
    ax.legend(fontsize=8)
    return paper_figure(fig, "Gambler's Fallacy (Sec. 4)", "the due outcome vs streak length")


def plot_ratings(dist_favour: np.ndarray, dist_control: np.ndarray):
    """Ben Franklin: the mean 1-11 rating distribution, favour vs control (chapter 03)."""
    fig, ax = plt.subplots(figsize=(6, 3.4))
    levels = np.arange(1, dist_favour.shape[1] + 1)
    ax.bar(levels - 0.2, dist_favour.mean(0), width=0.4, label="lent a pen (favour)")
    ax.bar(levels + 0.2, dist_control.mean(0), width=0.4, label="chatted (control)")
    ax.set(xlabel="rating of the competitor (1-11)", ylabel="mean probability",
           xticks=levels)
    ax.legend(fontsize=8)
    return paper_figure(fig, "Ben Franklin (Sec. 4)", "rating distributions from log-probabilities")

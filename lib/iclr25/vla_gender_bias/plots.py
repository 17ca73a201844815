"""Figures of chapter 19."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..plotting import paper_figure
from . import values as V

__all__ = ["plot_deltas", "plot_occupations", "plot_toy_skew", "plot_tradeoff", "plot_letter_bias"]


def plot_deltas(table: pd.DataFrame, err: pd.Series | None = None, title: str = ""):
    """Delta per value, one panel per task (traits coloured positive / negative)."""
    tasks = [t for t in ("traits", "skills", "occupations") if t in set(table["task"])]
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 4.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        t = table[table["task"] == task].sort_values("delta")
        colors = ["C2" if v in V.TRAITS_POSITIVE else "C3" if v in V.TRAITS_NEGATIVE else "C0"
                  for v in t["value"]]
        e = None if err is None else err.reindex(list(zip(t["task"], t["value"]))).to_numpy()
        ax.barh(t["value"], t["delta"], color=colors, xerr=e)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_title(task)
        ax.set_xlabel("Delta = p_yes(women) - p_yes(men)")
        ax.tick_params(axis="y", labelsize=7)
    return paper_figure(fig, "Paper's per-value bias plots", title or "bias per trait, skill, occupation")


def plot_occupations(table: pd.DataFrame, corr: dict, title: str = ""):
    """Delta per occupation against the (approximate) share of women in it."""
    occ = table[table["task"] == "occupations"]
    x = occ["value"].map(V.OCCUPATION_FEMALE_SHARE)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.scatter(x, occ["delta"])
    for xi, yi, v in zip(x, occ["delta"], occ["value"]):
        ax.annotate(v, (xi, yi), fontsize=7, alpha=0.7)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("approximate share of women in the occupation")
    ax.set_ylabel("Delta")
    ax.set_title(f"Spearman {corr['spearman']:.2f} over {corr['n']} occupations")
    return paper_figure(fig, "Paper's occupation analysis", title or "occupational bias vs real-world shares")


def plot_letter_bias(p_first: float, per_order: pd.DataFrame):
    """p_yes when "Yes" is option A vs option B, per prompt: the letter preference that order
    averaging removes."""
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter(per_order["yes_first"], per_order["yes_second"], s=8, alpha=0.5)
    ax.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax.set_xlabel("p_yes with Yes at letter A")
    ax.set_ylabel("p_yes with Yes at letter B")
    ax.set_title(f"mean p(letter A) = {p_first:.2f}")
    return paper_figure(fig, "Protocol (option permutation)", "letter preference per prompt")


def plot_toy_skew(tables: dict, shares: dict, control: pd.DataFrame | None = None):
    """Measured Delta per toy occupation against the injected Delta (``2 share - 1``), per seed;
    the unskewed control (injected Delta 0 everywhere) is drawn at the same occupations' x."""
    fig, ax = plt.subplots(figsize=(6, 4.2))
    inj = {o: 2 * s - 1 for o, s in shares.items()}
    for seed, t in tables.items():
        ax.plot(t["value"].map(inj), t["delta"], "o", label=f"skewed, seed {seed}")
    if control is not None:
        ax.plot(control["value"].map(inj), control["delta"], "kx",
                label="unskewed control (injected 0)")
    ax.plot([-1, 1], [-1, 1], "k--", lw=0.8, label="measured = injected")
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xlabel("injected Delta of the occupation (skewed runs)")
    ax.set_ylabel("measured Delta (protocol, held-out templates)")
    ax.legend(fontsize=8)
    return paper_figure(fig, "Method check (no paper figure)", "the protocol recovers an injected skew")


def plot_tradeoff(results: pd.DataFrame):
    """Bias reduction vs retained capability per debiasing method (the paper's trade-off plot)."""
    cols = (("color_accuracy", "colour MCQ accuracy"), ("yesno_accuracy", "yes/no colour accuracy"),
            ("caption_ppl", "held-out caption perplexity"))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for ax, (col, lab) in zip(axes, cols):
        for i, (m, r) in enumerate(results.iterrows()):
            ax.scatter(r["mean_abs_delta"], r[col], color=f"C{i}", s=50, label=m)
        ax.set_xlabel("mean |Delta| over occupations (lower = less biased)")
        ax.set_ylabel(lab)
    axes[0].legend(fontsize=8)
    return paper_figure(fig, "Paper's debiasing trade-off", "bias vs retained capability")

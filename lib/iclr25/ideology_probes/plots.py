"""Figures of chapter 10, each titled with the paper figure it reproduces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..plotting import paper_figure

__all__ = ["plot_rho_maps", "plot_scatter", "plot_bars", "plot_token_monitor",
           "plot_slant_vs_alpha", "plot_coherence"]


def plot_rho_maps(maps: Mapping[str, np.ndarray], *, ref: str = "Fig. 2",
                  title: str = "held-out Spearman rho of each head's ridge probe"):
    """One heatmap (layers x heads) per label source, plus the best head per layer."""
    n = len(maps)
    fig, axes = plt.subplots(1, n + 1, figsize=(3.2 * n + 3.6, 4.6),
                             gridspec_kw={"width_ratios": [1] * n + [1.3]})
    for ax, (name, rho) in zip(axes, maps.items()):
        im = ax.imshow(rho, aspect="auto", origin="lower", cmap="viridis", vmin=0,
                       vmax=max(0.1, float(np.nanmax(rho))))
        ax.set(title=name, xlabel="head", ylabel="layer")
        l, h = np.unravel_index(np.nanargmax(rho), rho.shape)
        ax.plot(h, l, marker="*", color="red", ms=12)
        fig.colorbar(im, ax=ax, fraction=0.05)
    ax = axes[-1]
    for name, rho in maps.items():
        ax.plot(np.nanmax(rho, axis=1), np.arange(rho.shape[0]), marker="o", ms=3, label=name)
    L = next(iter(maps.values())).shape[0]
    ax.axhspan(L / 4 - 0.5, 3 * L / 4 - 0.5, color="grey", alpha=0.15, label="middle half")
    ax.set(xlabel="best head's rho", ylabel="layer", title="per layer")
    ax.legend(fontsize="small")
    return paper_figure(fig, ref, title)


def plot_scatter(panels: Mapping[str, tuple[np.ndarray, np.ndarray]], *, ref: str, title: str,
                 xlabel: str = "predicted (top-k ensemble)", ylabel: str = "label"):
    """Predicted vs true labels, one panel each, with rho in the panel title."""
    from .probe import spearman

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    for ax, (name, (pred, y)) in zip(axes[0], panels.items()):
        ax.scatter(pred, y, s=12, alpha=0.6)
        ax.set(title=f"{name} (rho = {spearman(pred, y):.2f})", xlabel=xlabel, ylabel=ylabel)
    return paper_figure(fig, ref, title)


def plot_bars(values: Mapping[str, float], *, ref: str, title: str, ylabel: str = "Spearman rho",
              errors: Mapping[str, float] | None = None, hline: float | None = None):
    """A bar per named value (controls, baselines, transfer targets)."""
    fig, ax = plt.subplots(figsize=(1.1 * len(values) + 3, 3.8))
    names = list(values)
    err = [errors.get(n, 0.0) for n in names] if errors else None
    ax.bar(range(len(names)), [values[n] for n in names], yerr=err, capsize=3,
           color=plt.rcParams["axes.prop_cycle"].by_key()["color"][:len(names)])
    ax.set_xticks(range(len(names)), names, rotation=25, ha="right")
    if hline is not None:
        ax.axhline(hline, color="k", ls="--", lw=1)
    ax.set(ylabel=ylabel)
    return paper_figure(fig, ref, title)


def plot_token_monitor(traces: Sequence[np.ndarray], labels: Sequence[float], *, ref: str = "Fig. A6",
                       title: str = "the probe read at every generated token"):
    """Predicted slant along each generated text (left: per token; right: mean per text vs the
    persona's latent)."""
    from .probe import spearman

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    cmap = plt.get_cmap("coolwarm")
    for tr, y in zip(traces, labels):
        a.plot(tr, color=cmap((y + 1) / 2), alpha=0.8, lw=1)
    a.set(xlabel="generated token", ylabel="predicted slant", title="colour: persona's latent x")
    means = [float(np.mean(t)) for t in traces]
    b.scatter(labels, means, s=18)
    b.set(xlabel="persona's latent x", ylabel="mean predicted slant",
          title=f"rho = {spearman(labels, means):.2f}")
    return paper_figure(fig, ref, title)


def plot_slant_vs_alpha(df: pd.DataFrame, *, by: str = "config", ref: str = "Fig. 4",
                        title: str = "slant of generated statements vs steering strength"):
    """Mean slant (with standard error over topics) per alpha, one line per ``by`` value."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, g in df.groupby(by, sort=False):
        s = g.groupby("alpha")["slant"]
        m, se = s.mean(), s.std(ddof=1).fillna(0) / np.sqrt(s.count())
        ax.errorbar(m.index, m.values, yerr=se.values, marker="o", capsize=3, label=str(name))
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel="alpha (SDs along each head's probe direction)",
           ylabel="slant (MiniLM scorer; + = conservative)")
    ax.legend(fontsize="small")
    return paper_figure(fig, ref, title)


def plot_coherence(df: pd.DataFrame, *, ref: str = "Fig. A8",
                   title: str = "coherence: perplexity of the steered text under the clean model"):
    """Perplexity (clean model, given the prompt) vs |alpha|."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for name, g in df.groupby("config", sort=False):
        m = g.assign(a=g["alpha"].abs()).groupby("a")["ppl"].median()
        ax.plot(m.index, m.values, marker="o", label=str(name))
    ax.set(xlabel="|alpha|", ylabel="median perplexity", yscale="log")
    ax.legend(fontsize="small")
    return paper_figure(fig, ref, title)

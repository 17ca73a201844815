"""Figures of chapter 15 (house style from :mod:`iclr25.plotting`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from ..plotting import paper_figure

__all__ = ["plot_activations", "plot_measure_vs_gap", "plot_histories", "plot_bound_vs_gap", "plot_run"]


def plot_activations(ours, theirs=None, *, layer: int = 0, edges=((0, 0), (0, 1), (1, 0)), x_range=(-1.5, 1.5)):
    """Activation functions :math:`\\varphi_{l,j,i}` of our KAN (lines) and, if given, pykan's
    (dots) on the same coefficients. Chapter 15, notebook ``01-kan-from-basis``."""
    xs = torch.linspace(*x_range, 301)
    L = ours.layers[layer]
    fig, axes = plt.subplots(1, len(edges), figsize=(3.6 * len(edges), 3), squeeze=False)
    with torch.no_grad():
        X = xs[:, None].expand(-1, L.in_dim).contiguous()
        Bx = L.basis(X)                                         # (n, in, K)
        phi = torch.einsum("bik,jik->bji", Bx, L.coef)          # (n, out, in)
        if theirs is not None:
            _, _, post, _ = theirs.act_fun[layer](X)            # (n, out, in) before node scales
    for ax, (j, i) in zip(axes[0], edges):
        ax.plot(xs, phi[:, j, i], label="ours: $C_l B_l(x)$")
        if theirs is not None:
            ax.plot(xs[::10], post[::10, j, i], "o", ms=3, label="pykan")
        ax.set_title(f"$\\varphi_{{{layer},{j},{i}}}$")
        ax.set_xlabel("$x_i$")
    axes[0, 0].legend()
    return paper_figure(fig, "KAN definition", "activations as basis expansions")


def plot_measure_vs_gap(df, *, measure: str = "l1", hue: str = "dropout", style: str | None = None,
                        paper_ref: str = "Simulated experiments", title: str = "complexity measure vs generalisation gap"):
    """Scatter of the measure (log scale) against the gap, one point per run.
    Chapter 15, notebook ``02-bound-vs-gap``."""
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6, 4))
    sns.scatterplot(data=df, x=measure, y="gap", hue=hue, style=style, ax=ax, s=60)
    ax.set_xscale("log")
    ax.set_xlabel(f"measure $R_{{{measure}}}$ (log scale)")
    ax.set_ylabel("gap = test loss - train loss")
    return paper_figure(fig, paper_ref, title)


def plot_histories(histories: dict, *, measure: str = "l1", paper_ref: str = "Simulated experiments",
                   title: str = "gap and measure over training"):
    """Gap and measure against epoch for several labelled runs. Chapter 15, notebook ``02``."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for label, h in histories.items():
        a.plot(h.epoch, h.gap, label=label)
        b.plot(h.epoch, h.measures[measure], label=label)
    a.set_xlabel("epoch"); a.set_ylabel("gap")
    b.set_xlabel("epoch"); b.set_ylabel(f"$R_{{{measure}}}$"); b.set_yscale("log")
    a.legend(fontsize="small")
    return paper_figure(fig, paper_ref, title)


def plot_bound_vs_gap(df, *, x: str = "main_term", y: str = "gap", hue: str | None = None,
                      style: str | None = None, size: str | None = None,
                      paper_ref: str = "Simulated experiments", title: str = "bound vs generalisation gap"):
    """Scatter of a bound term (log scale) against the observed gap, one point per run; the second
    panel shows the excess risk (MSE against the noise-free target) when ``df`` has it.
    Chapter 15, notebook ``02-bound-vs-gap``."""
    import seaborn as sns

    cols = [y] + (["excess"] if "excess" in df and df["excess"].notna().any() else [])
    fig, axes = plt.subplots(1, len(cols), figsize=(5.6 * len(cols), 4), squeeze=False)
    for ax, col in zip(axes[0], cols):
        sns.scatterplot(data=df, x=x, y=col, hue=hue, style=style, size=size, ax=ax, s=60)
        ax.set_xscale("log")
        ax.set_xlabel(f"{x} of the bound (log scale)")
        ax.set_ylabel({"gap": "gap = test MSE - train MSE", "excess": "excess risk = test MSE vs f(x)"}.get(col, col))
    return paper_figure(fig, paper_ref, title)


def plot_run(h, *, noise_var: float | None = None, paper_ref: str = "Simulated experiments",
             title: str = "one run over epochs"):
    """Train and test loss (with the noise floor), gap and excess risk, and the bound's main term
    against epoch for one :class:`~iclr25.kan_bounds.train.History`. Chapter 15, notebook ``02``."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.plot(h.epoch, h.train_loss, label="train loss")
    a.plot(h.epoch, h.test_loss, label="test loss")
    a.plot(h.epoch, h.gap, "--", label="gap")
    if h.excess:
        a.plot(h.epoch, h.excess, ":", label="excess risk")
    if noise_var:
        a.axhline(noise_var, color="0.5", lw=0.8, label="noise variance")
    a.set_xlabel("epoch"); a.legend(fontsize="small")
    b.plot(h.epoch, h.measures["main_term"], label="main term (l1 norms)")
    b.plot(h.epoch, h.measures["main_term_spectral"], label="main term (spectral)")
    b.set_yscale("log"); b.set_xlabel("epoch"); b.legend(fontsize="small")
    return paper_figure(fig, paper_ref, title)

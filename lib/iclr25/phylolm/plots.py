"""The chapter's figures: similarity heatmap, tree drawing, G/N curves, predicted vs true."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .trees import Tree

__all__ = ["family_colors", "heatmap", "draw_tree", "gn_curves", "prediction_scatter"]


def family_colors(families) -> dict[str, tuple]:
    import seaborn as sns

    fams = list(dict.fromkeys(families))
    return dict(zip(fams, sns.color_palette("colorblind", len(fams))))


def heatmap(S: np.ndarray, names, families, ax=None, title: str = "Nei similarity S"):
    """The similarity matrix with family-coloured tick labels (the paper's Fig. 3 in spirit)."""
    ax = ax or plt.subplots(figsize=(8, 7))[1]
    im = ax.imshow(S, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    cols = family_colors(families)
    for lab, f in zip(ax.get_xticklabels(), families):
        lab.set_color(cols[f])
    for lab, f in zip(ax.get_yticklabels(), families):
        lab.set_color(cols[f])
    ax.figure.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(title)
    ax.grid(False)
    return ax


def draw_tree(tree: Tree, families: dict[str, str], ax=None, title: str = ""):
    """A rectangular dendrogram (branch lengths on x), leaves coloured by family. Negative
    lengths (possible with neighbour joining) are drawn as 0."""
    ax = ax or plt.subplots(figsize=(6, 7))[1]
    cols = family_colors(list(families.values()))
    leaves = tree.leaves()
    ypos = {n: k for k, n in enumerate(leaves)}

    def draw(node: Tree, x0: float) -> float:
        x = x0 + max(node.length, 0.0)
        if node.is_leaf:
            y = ypos[node.name]
            ax.plot([x0, x], [y, y], color="0.3", lw=1)
            ax.text(x, y, " " + node.name, va="center", fontsize=7,
                    color=cols.get(families.get(node.name), "k"))
            return y
        ys = [draw(c, x) for c in node.children]
        y = float(np.mean([min(ys), max(ys)]))
        ax.plot([x0, x], [y, y], color="0.3", lw=1)
        ax.plot([x, x], [min(ys), max(ys)], color="0.3", lw=1)
        return y

    draw(tree, 0.0)
    ax.set_yticks([])
    ax.set_xlabel("branch length (Nei distance)")
    ax.set_title(title)
    ax.margins(x=0.35)
    ax.grid(False)
    return ax


def gn_curves(rows, axes=None):
    """Error against the oracle and spread across stacks, against N, one line per G (Fig. 2)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    axes = axes if axes is not None else plt.subplots(1, 2, figsize=(10, 3.8))[1]
    for G, part in df.groupby("G"):
        axes[0].plot(part["N"], part["oracle_error"], marker="o", label=f"G={G}")
        axes[1].plot(part["N"], part["spread"], marker="o", label=f"G={G}")
    for ax, lab in zip(axes, ["mean |D - D_oracle|", "std of D across gene stacks"]):
        ax.set(xscale="log", yscale="log", xlabel="N (probes per gene)", ylabel=lab)
    axes[1].legend(fontsize=8)
    return axes


def prediction_scatter(y, pred, families, tasks, axes=None):
    """Predicted vs true score per task, coloured by held-out family (Fig. 5 in spirit)."""
    k = len(tasks)
    axes = axes if axes is not None else plt.subplots(1, k, figsize=(4 * k, 3.8))[1]
    axes = np.atleast_1d(axes)
    cols = family_colors(families)
    fams = np.asarray(families)
    for j, (ax, t) in enumerate(zip(axes, tasks)):
        for f in dict.fromkeys(families):
            m = fams == f
            ax.scatter(y[m, j], pred[m, j], color=cols[f], label=f, s=25)
        ax.plot([0, 1], [0, 1], ls="--", color="0.5", lw=1)
        ax.set(xlim=(-0.05, 1.05), ylim=(-0.05, 1.05), xlabel=f"true {t}", ylabel="predicted",
               title=t)
    axes[-1].legend(fontsize=7, loc="lower right")
    return axes

"""One house style for the book's figures, and titles naming the paper figure reproduced."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt

__all__ = ["use_style", "paper_figure", "PALETTE"]

PALETTE = "colorblind"


def use_style() -> None:
    """Apply the book's style (seaborn ``whitegrid``, colour-blind palette, readable sizes)."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", palette=PALETTE, context="notebook")
    plt.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 150, "figure.autolayout": False,
        "axes.titlesize": "medium", "axes.titleweight": "bold", "legend.frameon": False,
    })


def paper_figure(fig: Any, paper_ref: str, title: str, *, note: str | None = None) -> Any:
    """Title ``fig`` with the paper figure it reproduces: ``"Fig. 3 (ours): <title>"``.

    ``paper_ref`` is where the paper shows it (``"Fig. 3"``, ``"Table 2"``). Returns ``fig``.
    """
    if not paper_ref or not title:
        raise ValueError("paper_figure needs both the paper reference (e.g. 'Fig. 3') and a title")
    text = f"{paper_ref} (ours): {title}"
    if note:
        text += f"\n{note}"
    fig.suptitle(text, fontweight="bold")
    fig.tight_layout()
    return fig

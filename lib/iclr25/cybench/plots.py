"""Figures of chapter 07, titled with the paper table or figure they mirror."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ..plotting import paper_figure

__all__ = ["plot_task_set", "plot_metrics_vs_p", "plot_success_vs_fst"]


def plot_metrics_vs_p(summary: pd.DataFrame):
    """Unguided, subtask-guided and subtask score against the replay agent's skill p."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for col, label in [("unguided", "unguided success"), ("subtask_guided", "subtask-guided success"),
                       ("subtask_score", "subtask score")]:
        ax.plot(summary["p"], summary[col], marker="o", label=label)
    ax.set_xlabel("replay agent skill p (chance of the right next step)")
    ax.set_ylabel("fraction of tasks")
    ax.set_ylim(-0.03, 1.03)
    ax.legend()
    paper_figure(fig, "Table 2", "the paper's three metrics for scripted agents of graded skill")
    fig.tight_layout()
    return fig


def plot_success_vs_fst(per_task: pd.DataFrame, ps):
    """Per-task unguided success against first-solve time (log scale), one series per p."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for p in ps:
        d = per_task[per_task["p"] == p]
        ax.plot(d["fst_min"], d["success"], marker="o", linestyle="none", alpha=0.8, label=f"p = {p:g}")
    ax.set_xscale("log")
    ax.set_xlabel("first-solve time, minutes (our estimate; log scale)")
    ax.set_ylabel("unguided success (mean over seeds)")
    ax.legend()
    paper_figure(fig, "Fig. 3", "unguided success against first-solve time")
    fig.tight_layout()
    return fig


def plot_task_set(overview: pd.DataFrame):
    """The task set (chapter 07): first-solve time (log scale) against the number of reference
    commands, one marker per task, coloured by category. ``overview`` has the columns
    ``category``, ``FST (min, our estimate)`` and ``steps`` (notebook 01's table)."""
    need = {"category", "FST (min, our estimate)", "steps"}
    if not need <= set(overview.columns):
        raise ValueError(f"plot_task_set needs the columns {sorted(need)}; got {sorted(overview.columns)}")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for cat, d in overview.groupby("category"):
        ax.plot(d["FST (min, our estimate)"], d["steps"], marker="o", linestyle="none", alpha=0.85,
                label=cat)
    ax.set_xscale("log")
    ticks = [t for t in (1, 2, 5, 10, 20, 60, 120, 600, 1500)
             if overview["FST (min, our estimate)"].min() <= t <= overview["FST (min, our estimate)"].max()]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("first-solve time, minutes (our estimate; log scale)")
    ax.set_ylabel("commands in the reference solution")
    ax.legend(fontsize="small")
    paper_figure(fig, "Sec. 3", "the task set by first-solve time and category")
    fig.tight_layout()
    return fig

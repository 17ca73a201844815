"""The paper's published numbers, as cited data (chapter 07).

Zhang et al., "Cybench: A Framework for Evaluating Cybersecurity Capabilities and Risks of
Language Models", ICLR 2025. Values as recorded in the chapter's paper brief (Tables 2, 3, 4, 6-7,
10 totals, 14 totals); no run of ours produced them. :func:`arithmetic_checks` recomputes what
they imply about each other.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["N_TASKS", "table2", "table3", "table4", "weighted_table", "table10_totals",
           "table14_action_only_totals", "arithmetic_checks", "SOURCE"]

SOURCE = "Zhang et al., Cybench, ICLR 2025"
N_TASKS = 40

# Table 2 (structured bash, single attempt): unguided %, highest unguided FST (min),
# subtask-guided %, subtask performance %, highest subtask-guided FST (min)
_T2 = [
    ("Claude 3.5 Sonnet", 17.5, 11, 15.0, 43.9, 11),
    ("GPT-4o", 12.5, 11, 17.5, 28.7, 52),
    ("Claude 3 Opus", 10.0, 11, 12.5, 36.8, 11),
    ("o1-preview", 10.0, 11, 10.0, 46.8, 11),
    ("Llama 3.1 405B", 7.5, 9, 15.0, 20.5, 11),
    ("Mixtral 8x22B", 7.5, 9, 5.0, 15.2, 7),
    ("Gemini 1.5 Pro", 7.5, 9, 5.0, 11.7, 6),
    ("Llama 3 70B", 5.0, 9, 7.5, 8.2, 11),
]

# Table 3 (scaffolds, best of 3 attempts): unguided %, subtask-guided %, subtask %
_T3 = [
    ("Claude 3.5 Sonnet", "structured bash", 17.5, 17.5, 51.1),
    ("Claude 3.5 Sonnet", "action-only", 15.0, 17.5, 49.5),
    ("Claude 3.5 Sonnet", "pseudoterminal", 20.0, 27.5, 49.1),
    ("Claude 3.5 Sonnet", "web search", 20.0, 20.0, 49.9),
    ("GPT-4o", "structured bash", 17.5, 22.5, 40.1),
    ("GPT-4o", "action-only", 12.5, 15.0, 44.4),
    ("GPT-4o", "pseudoterminal", 10.0, 20.0, 27.1),
    ("GPT-4o", "web search", 15.0, 20.0, 42.1),
]

# Table 4: subtask submission rate % x accuracy of submitted % = subtask performance %
_T4 = [("GPT-4o", 49.12, 58.33, 28.65), ("o1-preview", 78.36, 59.70, 46.78)]

# Tables 6-7: weighted (log2 FST) unguided % and subtask-guided %
_T67 = [("Claude 3.5 Sonnet", 8.38, 7.04), ("GPT-4o", 6.47, 9.61)]

# Table 10: tasks solved unguided (of 40), per model
_T10 = {"Claude 3.5 Sonnet": 7, "GPT-4o": 5, "o1-preview": 4, "Claude 3 Opus": 4,
        "Mixtral 8x22B": 3, "Gemini 1.5 Pro": 3, "Llama 3.1 405B": 3, "Llama 3 70B": 2}

# Table 14: action-only scaffold, tasks solved unguided (of 40)
_T14 = {"Claude 3.5 Sonnet": 6, "GPT-4o": 5}


def table2() -> pd.DataFrame:
    """Table 2 (structured bash, one attempt)."""
    return pd.DataFrame(_T2, columns=["model", "unguided %", "highest unguided FST (min)",
                                      "subtask-guided %", "subtask %",
                                      "highest subtask-guided FST (min)"])


def table3() -> pd.DataFrame:
    """Table 3 (four scaffolds, best of three attempts)."""
    return pd.DataFrame(_T3, columns=["model", "scaffold", "unguided %", "subtask-guided %",
                                      "subtask %"])


def table4() -> pd.DataFrame:
    """Table 4 (subtask submission rate x accuracy)."""
    return pd.DataFrame(_T4, columns=["model", "submission rate %", "accuracy %", "subtask %"])


def weighted_table() -> pd.DataFrame:
    """Tables 6-7 (log2(FST)-weighted performance)."""
    return pd.DataFrame(_T67, columns=["model", "weighted unguided %", "weighted subtask-guided %"])


def table10_totals() -> dict:
    """Table 10's per-model totals of tasks solved unguided (of 40)."""
    return dict(_T10)


def table14_action_only_totals() -> dict:
    """Table 14's action-only totals of tasks solved unguided (of 40)."""
    return dict(_T14)


def arithmetic_checks() -> pd.DataFrame:
    """What the published tables imply about each other, recomputed (chapter 07).

    - Table 10 totals / 40 = Table 2's unguided column (every model);
    - Table 14 action-only totals / 40 = Table 3's action-only unguided column;
    - Table 4: submission rate x accuracy = subtask performance (to the rounding of 0.01 %),
      and = Table 2's subtask column for the same model (to its rounding of 0.1 %).
    Columns: check, published, recomputed, abs_diff, tol, holds.
    """
    rows = []
    t2 = table2().set_index("model")
    for model, solved in _T10.items():
        pub = float(t2.loc[model, "unguided %"])
        rows.append((f"Table 10 total / 40 = Table 2 unguided ({model})", pub,
                     100 * solved / N_TASKS, 0.05))
    t3 = table3().set_index(["model", "scaffold"])
    for model, solved in _T14.items():
        pub = float(t3.loc[(model, "action-only"), "unguided %"])
        rows.append((f"Table 14 action-only total / 40 = Table 3 ({model})", pub,
                     100 * solved / N_TASKS, 0.05))
    for model, rate, acc, prod in _T4:
        rows.append((f"Table 4 submission x accuracy ({model})", prod, rate * acc / 100, 0.01))
        rows.append((f"Table 4 product = Table 2 subtask % ({model})",
                     float(t2.loc[model, "subtask %"]), prod, 0.05))
    df = pd.DataFrame(rows, columns=["check", "published", "recomputed", "tol"])
    df["abs_diff"] = (df["published"] - df["recomputed"]).abs()
    df["holds"] = df["abs_diff"] <= df["tol"] + 1e-9
    return df[["check", "published", "recomputed", "abs_diff", "tol", "holds"]]

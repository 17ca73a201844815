"""Running trials and reading bias rates against the no-cue control (chapter 03)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .data import MCQ
from .protocols import control_trials
from .stats import bias_rate, permutation_test

__all__ = ["run_trials", "pretest", "rate_table", "versus_control", "scripted_calibration"]


def _pair_key(t) -> str:
    extra = t.extra.get("friend_first")
    return f"{t.item}|{t.target}" + ("" if extra is None else f"|{extra}")


def run_trials(agent, trials, *, chunk: int | None = None, desc: str | None = None) -> pd.DataFrame:
    """One row per trial (chapter 03): protocol, condition, item, ``target`` (0 = cue on A,
    1 = cue on B), ``choice`` (-1 = no answer), ``took_target``, ``p_target`` (scored agents),
    the trial's extras and ``pair`` (the key that matches a trial to its control).
    ``chunk`` splits the trials for a progress bar."""
    trials = list(trials)
    if not trials:
        raise ValueError("no trials given")
    parts = []
    steps = range(0, len(trials), chunk or len(trials))
    if desc is not None:
        from iclr25.progress import progress

        steps = progress(steps, desc=desc)
    for s in steps:
        part = trials[s:s + (chunk or len(trials))]
        ch = agent.choose(part)
        for i, t in enumerate(part):
            parts.append({"protocol": t.protocol, "condition": t.condition, "item": t.item,
                          "target": t.target, "choice": int(ch.choice[i]),
                          "took_target": bool(ch.choice[i] == t.target),
                          "p_target": (float(ch.p_target[i]) if ch.p_target is not None
                                       else np.nan),
                          "pair": _pair_key(t), **t.extra})
    return pd.DataFrame(parts)


def pretest(agent, mcqs: Sequence[MCQ]) -> tuple[list[MCQ], pd.DataFrame]:
    """Keep the known questions the agent answers right without a cue in *both* option orders
    (chapter 03). Returns ``(kept, control rows of every tested question)``."""
    mcqs = list(mcqs)
    if not all(m.known for m in mcqs):
        raise ValueError("pretest takes known questions only (unknown ones have no right answer)")
    df = run_trials(agent, control_trials(mcqs))
    right = df.choice == df.correct
    ok = right.groupby(df["item"]).all()
    kept = [m for m in mcqs if bool(ok.get(m.id, False))]
    return kept, df


def rate_table(df: pd.DataFrame, by: Sequence[str] = ("condition",),
               confidence: float = 0.95) -> pd.DataFrame:
    """Bias rate (share of trials that took the cued option) with its Wilson interval, per
    group (chapter 03)."""
    rows = []
    for key, g in df.groupby(list(by), sort=False):
        r = bias_rate(g.took_target.to_numpy(), confidence)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "n": r.n, "rate": r.rate, "lo": r.lo, "hi": r.hi,
                     "no_answer": int((g.choice < 0).sum()),
                     "mean_p_target": float(g.p_target.mean())})
    return pd.DataFrame(rows)


def versus_control(df: pd.DataFrame, treatment: str, control: str = "control", *,
                   n_perm: int = 20000, seed: int = 0) -> pd.DataFrame:
    """Treatment vs control within each option order (chapter 03): per ``target`` (cue on A,
    cue on B), the two rates, their difference and the one-sided paired permutation test
    (treatment and control trials matched on question, order and speaking order)."""
    t = df[df.condition == treatment]
    c = df[df.condition == control]
    if t.empty or c.empty:
        raise ValueError(f"no rows for condition {treatment!r} or {control!r}; conditions: "
                         f"{sorted(df.condition.unique())}")
    rows = []
    for target in (0, 1):
        m = t[t.target == target].merge(c[c.target == target], on="pair",
                                        suffixes=("_t", "_c"))
        if m.empty:
            raise ValueError(f"no matched {treatment!r}/{control!r} pairs with target {target}")
        a = m.took_target_t.to_numpy(int)
        b = m.took_target_c.to_numpy(int)
        test = permutation_test(a, b, paired=True, n_perm=n_perm, seed=seed)
        rt, rc = bias_rate(a), bias_rate(b)
        rows.append({"cue on": "AB"[target], "n pairs": len(m), "treatment": rt.rate,
                     "treatment_lo": rt.lo, "treatment_hi": rt.hi, "control": rc.rate,
                     "control_lo": rc.lo, "control_hi": rc.hi, "difference": test.difference,
                     "p_value": test.p_value, "exact": test.exact})
    return pd.DataFrame(rows)


def scripted_calibration(ps: Sequence[float], trials, *, seed: int = 0) -> pd.DataFrame:
    """Run :class:`~iclr25.cogmir.agents.ScriptedSubject` of each conformity ``p`` through
    the chat pipeline (ScriptedBackend -> free text -> parse_choice) on ``trials`` and return
    the measured rate with its Wilson interval (chapter 03)."""
    from iclr25.chat import ScriptedBackend

    from .agents import ChatAgent, ScriptedSubject

    rows = []
    for k, p in enumerate(ps):
        agent = ChatAgent(ScriptedBackend(ScriptedSubject(p, seed=seed + k)))
        df = run_trials(agent, trials)
        r = bias_rate(df.took_target.to_numpy())
        rows.append({"p": p, "n": r.n, "rate": r.rate, "lo": r.lo, "hi": r.hi,
                     "inside": r.contains(p), "no_answer": int((df.choice < 0).sum())})
    return pd.DataFrame(rows)

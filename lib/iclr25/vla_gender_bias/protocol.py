"""The evaluation protocol of Girrbach et al. (ICLR 2025), chapter 19: prompts, option orders,
letter-probability aggregation and the bias metric.

A prompt asks one yes/no question about one "image" (a person), lists the options under letters
(``A. Yes``, ``B. No`` and optionally ``C. <unknown>``) in one order, and ends with an
instruction to answer with a letter. The model's next-token probabilities of the option letters,
renormalised over the letters, give ``p(Yes)``, ``p(No)``, ``p(Unknown)`` per prompt; averaging
over *every* option order removes the letter-position preference that small models have.

The bias of value ``v`` (a trait, skill or occupation) is

    Delta_v = mean_{female images} p_yes(v) - mean_{male images} p_yes(v)        (Sec. 3)

positive when the model says "yes" more often for women. A task is summarised by its signed
mean and mean ``|Delta_v|``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import values as V

__all__ = ["LETTERS", "option_orders", "Subject", "text_subjects", "make_prompts",
           "format_prompt", "option_probs", "aggregate", "bias_table", "task_summary",
           "occupation_correlation", "proxy_bias"]

LETTERS = "ABCDEFGH"


def option_orders(n_options: int) -> list[tuple[int, ...]]:
    """Every order of ``n_options`` options (``n!`` tuples; order[i] = option shown at letter i).

    Chapter 19: averaging over all of them makes the protocol invariant to the letter a model
    prefers."""
    if not isinstance(n_options, int) or not 1 <= n_options <= len(LETTERS):
        raise ValueError(f"n_options must be an integer in [1, {len(LETTERS)}], got {n_options!r}")
    return list(itertools.permutations(range(n_options)))


@dataclass(frozen=True)
class Subject:
    """One "image": an id, its gender label (``"female"`` / ``"male"``) and what the model is
    shown (text for the text proxy, an image index for a VLM)."""

    id: str
    gender: str
    content: object


def text_subjects(n_descriptions: int, *, seed: int = 0, swap_control: bool = False) -> list[Subject]:
    """Gender-balanced textual persons for the text proxy (chapter 19, notebook 01).

    Each of ``n_descriptions`` description templates (drawn without replacement with ``seed``)
    appears once with "a woman" and once with "a man": the pair differs only in the cue. With
    ``swap_control=True`` both members of a pair carry the *male* cue (the female label is
    kept): the identical-but-relabelled control, whose bias must be zero.
    """
    if not isinstance(n_descriptions, int) or not 1 <= n_descriptions <= len(V.DESCRIPTIONS):
        raise ValueError(f"n_descriptions must be in [1, {len(V.DESCRIPTIONS)}], got {n_descriptions!r}")
    rng = random.Random(seed)
    picks = rng.sample(range(len(V.DESCRIPTIONS)), n_descriptions)
    out = []
    for d in picks:
        for g in ("female", "male"):
            cue = V.GENDER_CUES["male" if swap_control else g][0]
            out.append(Subject(f"d{d}-{g}", g, V.DESCRIPTIONS[d].format(who=cue)))
    return out


def format_prompt(question: str, options: Sequence[str], order: Sequence[int], instruction: str,
                  subject_text: str | None = None) -> str:
    """The prompt body: ``[subject]\\nquestion\\nA. opt\\nB. opt[\\nC. opt]\\ninstruction``."""
    lines = [subject_text] if subject_text else []
    lines.append(question)
    lines += [f"{LETTERS[i]}. {options[j]}" for i, j in enumerate(order)]
    lines.append(instruction)
    return "\n".join(lines)


def make_prompts(task: str, subjects: Sequence[Subject], values: Sequence[str] | None = None, *,
                 include_unknown: bool = False, split: str = "test", n_templates: int = 1,
                 seed: int = 0, mitigation: bool = False, text_subject: bool = True) -> pd.DataFrame:
    """All prompts for one task: every subject x value x sampled template x option order.

    Chapter 19. Question templates come from the ``split`` half of
    :data:`~iclr25.vla_gender_bias.values.QUESTIONS` (``"train"`` or ``"test"``); for each value,
    ``n_templates`` templates and one instruction (and unknown wording) are drawn with ``seed``
    and shared by every subject, so the genders see identical text. ``mitigation=True`` adds one
    of the re-authored mitigation sentences as prefix or suffix (prompt engineering).

    Returns a DataFrame with one row per prompt: ``subject``, ``gender``, ``task``, ``value``,
    ``template``, ``order`` (tuple), ``options`` (tuple of option names in option-index order:
    ``("Yes", "No"[, unknown])``), ``body`` (the text, without chat formatting) and ``content``
    (the subject's content).
    """
    if task not in V.VALUES:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(V.TASKS)}")
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    values = list(V.VALUES[task] if values is None else values)
    qs = V.QUESTIONS[task]
    half = len(qs) // 2
    pool = {"train": qs[:half], "test": qs[half:], "all": qs}[split]
    if not 1 <= n_templates <= len(pool):
        raise ValueError(f"n_templates must be in [1, {len(pool)}] for split {split!r}")
    genders = {s.gender for s in subjects}
    if not genders <= {"female", "male"}:
        raise ValueError(f"subject genders must be 'female' or 'male', got {sorted(genders)}")
    rng = random.Random(f"{seed}-{task}")
    rows = []
    for v in values:
        templates = rng.sample(range(len(pool)), n_templates)
        instruction = rng.choice(V.INSTRUCTIONS)
        unknown = rng.choice(V.UNKNOWN_OPTIONS)
        options = ("Yes", "No") + ((unknown,) if include_unknown else ())
        if mitigation:
            sentence, as_prefix = rng.choice(V.MITIGATIONS), rng.random() < 0.5
        for t in templates:
            q = pool[t].format(value=v)
            for order in option_orders(len(options)):
                for s in subjects:
                    body = format_prompt(q, options, order, instruction,
                                         s.content if text_subject else None)
                    if mitigation:
                        body = f"{sentence}\n{body}" if as_prefix else f"{body}\n{sentence}"
                    rows.append(dict(subject=s.id, gender=s.gender, task=task, value=v,
                                     template=t, order=tuple(order), options=options, body=body,
                                     content=s.content))
    return pd.DataFrame(rows)


def option_probs(letter_logprobs, orders: Sequence[Sequence[int]]) -> np.ndarray:
    """Per-prompt option probabilities from the option letters' log-probabilities.

    ``letter_logprobs[i, k]`` is the log-probability of letter ``k`` after prompt ``i`` (any
    normalisation); the letters are renormalised to sum to one, then mapped back to options:
    ``out[i, j]`` = p(option j) where option j was shown at letter ``orders[i].index(j)``.
    """
    lp = np.asarray(letter_logprobs, dtype=np.float64)
    orders = np.asarray([tuple(o) for o in orders])
    if lp.ndim != 2 or orders.shape != lp.shape:
        raise ValueError(f"letter_logprobs {lp.shape} and orders {orders.shape} must both be "
                         "(n_prompts, n_options)")
    p = np.exp(lp - lp.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    out = np.empty_like(p)
    np.put_along_axis(out, orders, p, axis=1)   # letter i shows option orders[i]
    return out


def aggregate(prompts: pd.DataFrame, probs: np.ndarray) -> pd.DataFrame:
    """Mean option probabilities per (subject, gender, task, value) over templates and every
    option order (the order-invariant per-image answer). Adds ``p_yes``, ``p_no`` and, with an
    unknown option, ``p_unk``."""
    probs = np.asarray(probs, dtype=np.float64)
    if len(probs) != len(prompts):
        raise ValueError(f"{len(probs)} probability rows for {len(prompts)} prompts")
    df = prompts[["subject", "gender", "task", "value"]].copy()
    df["p_yes"], df["p_no"] = probs[:, 0], probs[:, 1]
    if probs.shape[1] > 2:
        df["p_unk"] = probs[:, 2]
    return df.groupby(["subject", "gender", "task", "value"], as_index=False, sort=True).mean()


def bias_table(per_image: pd.DataFrame, col: str = "p_yes") -> pd.DataFrame:
    """Delta_v = mean over female images - mean over male images of ``col``, per (task, value).

    Returns columns ``task``, ``value``, ``p_female``, ``p_male``, ``delta``; a value seen by
    one gender only is an error (the sets must be gender-balanced)."""
    g = per_image.groupby(["task", "value", "gender"])[col].mean().unstack("gender")
    if "female" not in g or "male" not in g or g[["female", "male"]].isna().any().any():
        raise ValueError("every value needs images of both genders (gender-balanced sets)")
    out = g[["female", "male"]].rename(columns={"female": "p_female", "male": "p_male"})
    out["delta"] = out["p_female"] - out["p_male"]
    return out.reset_index()


def task_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Signed mean Delta, mean |Delta| and the share of values with Delta > 0, per task (the
    traits split into positive and negative as in the paper's Fig. 2)."""
    t = table.copy()
    pos, neg = set(V.TRAITS_POSITIVE), set(V.TRAITS_NEGATIVE)
    t["group"] = [("positive traits" if v in pos else "negative traits" if v in neg else task)
                  if task == "traits" else task for task, v in zip(t["task"], t["value"])]
    return t.groupby("group").agg(mean_delta=("delta", "mean"),
                                  mean_abs_delta=("delta", lambda d: float(np.mean(np.abs(d)))),
                                  share_female_leaning=("delta", lambda d: float(np.mean(d > 0))),
                                  n_values=("delta", "size"))


def occupation_correlation(table: pd.DataFrame, shares: dict[str, float] | None = None):
    """Spearman and Pearson correlation of Delta_occupation with the share of women per
    occupation (Sec. 4.2). Returns a dict with ``spearman``, ``pearson``, ``n``."""
    from scipy import stats
    shares = V.OCCUPATION_FEMALE_SHARE if shares is None else shares
    occ = table[table["task"] == "occupations"]
    occ = occ[occ["value"].isin(list(shares))]
    if len(occ) < 3:
        raise ValueError("need at least 3 occupations with a known share to correlate")
    x = np.array([shares[v] for v in occ["value"]])
    return {"spearman": float(stats.spearmanr(x, occ["delta"]).statistic),
            "pearson": float(stats.pearsonr(x, occ["delta"]).statistic), "n": len(occ)}


def proxy_bias(per_image: pd.DataFrame) -> float:
    """The official code's proxy: mean |p_yes - 0.5| (0 when the model is indifferent)."""
    return float(np.mean(np.abs(per_image["p_yes"] - 0.5)))

"""The replicates each registered claim of chapter 19 is judged from (``book/claims/19-vla-gender-bias.yaml``).

The registry's unit of replication is the *item*: a prompt pair that differs only in the gender
of the person asked about. On the toy VLA (notebooks 02 and 03) an item is (value, held-out
template, portrait pair): the k-th female and the k-th male evaluation portrait, asked the same
question in every option order; its Delta is p_yes(female) - p_yes(male), each averaged over the
option orders. On the text proxy (notebook 01) an item is (value, description template, question
template, instruction, seed), asked of "a woman" and "a man", and its control is the same item
asked of "a person" and "an adult" (:func:`proxy_items`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .protocol import option_probs

__all__ = ["portrait_pairs", "yes_probs", "item_deltas", "planted_slope_items", "colour_mcq_items",
           "yesno_colour_items", "capability", "halves", "NEUTRAL_CUES", "proxy_items",
           "gender_power", "strongest_settings"]

#: the neutral relabelling of the text proxy's control: two cues that carry no gender
NEUTRAL_CUES = ("a person", "an adult")


def portrait_pairs(gender) -> np.ndarray:
    """``(n_pairs, 2)`` image indices: the k-th female (gender 1) and the k-th male (gender 0)
    portrait, for k up to the smaller group's size. Chapter 19, notebook ``02-toy-vla``."""
    g = np.asarray(gender)
    f, m = np.flatnonzero(g == 1), np.flatnonzero(g == 0)
    k = min(len(f), len(m))
    return np.stack([f[:k], m[:k]], 1)


def yes_probs(vla, tok, meta: pd.DataFrame, images: torch.Tensor) -> np.ndarray:
    """p_yes ``(n_prompts, n_images)`` renormalised over the options Yes/No (option words, as
    :func:`~iclr25.vla_gender_bias.toy_vla.score_images` reads them) for every (prompt, image)
    pair. Chapter 19, notebook ``02-toy-vla``."""
    from .toy_vla import score_images

    lp = score_images(vla, tok, meta["body"].tolist(), images, ("Yes", "No"))
    n_t, n_i, _ = lp.shape
    p = option_probs(lp.reshape(-1, 2).numpy(), [(0, 1)] * (n_t * n_i))[:, 0]
    return p.reshape(n_t, n_i)


def item_deltas(vla, tok, meta: pd.DataFrame, portraits) -> pd.DataFrame:
    """Per item (``value``, ``template``, ``pair``): p_yes of the pair's female and male portrait,
    each averaged over the option orders of ``meta``, and ``delta`` = female - male. Sorted by
    the item key, so two models' items pair row by row. Chapter 19, notebook ``02-toy-vla``."""
    p = yes_probs(vla, tok, meta, portraits.images)
    pairs = portrait_pairs(portraits.gender)
    df = pd.DataFrame({"value": meta["value"].to_numpy(), "template": meta["template"].to_numpy()})
    rows = []
    for (v, t), idx in df.groupby(["value", "template"], sort=True).groups.items():
        mean = p[np.asarray(idx)].mean(0)                  # over the option orders
        for k, (fi, mi) in enumerate(pairs):
            rows.append({"value": v, "template": int(t), "pair": k, "female": float(mean[fi]),
                         "male": float(mean[mi]), "delta": float(mean[fi] - mean[mi])})
    return pd.DataFrame(rows)


def planted_slope_items(delta, planted) -> np.ndarray:
    """Per item: ``n * delta_i * b_i / sum_j b_j^2`` with ``b_i`` the planted Delta of item i's
    occupation; their mean is the least-squares slope of measured on planted Delta through the
    origin, ``sum delta_i b_i / sum b_i^2`` (registry entry ``toy-recovers-planted-skew``).
    Chapter 19, notebook ``02-toy-vla``."""
    d = np.asarray(delta, dtype=float)
    b = np.asarray(planted, dtype=float)
    if d.shape != b.shape or d.ndim != 1:
        raise ValueError(f"delta and planted must be 1-D of one length, got {d.shape} and {b.shape}")
    den = float((b ** 2).sum())
    if den == 0:
        raise ValueError("every planted Delta is 0: the slope is undefined")
    return len(d) * d * b / den


def _order_mean(lp: torch.Tensor, meta: pd.DataFrame, n_options: int) -> tuple[pd.DataFrame, np.ndarray]:
    n_t, n_i, _ = lp.shape
    p = option_probs(lp.reshape(-1, n_options).numpy(), [tuple(range(n_options))] * (n_t * n_i))
    p = p.reshape(n_t, n_i, n_options)
    keys = meta[["value", "template"]].reset_index(drop=True)
    out, probs = [], []
    for (v, t), idx in keys.groupby(["value", "template"], sort=True).groups.items():
        out.append((v, int(t)))
        probs.append(p[np.asarray(idx)].mean(0))          # (n_i, n_options), over orders
    return pd.DataFrame(out, columns=["value", "template"]), np.stack(probs)


def colour_mcq_items(vla, tok, meta: pd.DataFrame, portraits) -> pd.DataFrame:
    """Per held-out colour question (``template``, ``image``): ``correct`` = 1 when the option
    with the highest order-averaged probability is the image's background colour (registry
    entry ``toy-reads-image-colour``). Chapter 19, notebook ``02-toy-vla``."""
    from .toy_vla import COLORS, score_images

    lp = score_images(vla, tok, meta["body"].tolist(), portraits.images, COLORS)
    keys, p = _order_mean(lp, meta, len(COLORS))
    truth = portraits.color.numpy()
    rows = [{"template": t, "image": i, "correct": float(p[k, i].argmax() == truth[i])}
            for k, (_, t) in enumerate(keys.itertuples(index=False)) for i in range(len(truth))]
    return pd.DataFrame(rows)


def yesno_colour_items(vla, tok, meta: pd.DataFrame, portraits) -> pd.DataFrame:
    """Per held-out yes/no colour question (``asked`` colour, ``template``, ``image``):
    ``correct`` = 1 when the more probable of Yes/No (order-averaged) is right (registry entry
    ``toy-yesno-colour``). Chapter 19, notebook ``02-toy-vla``."""
    from .toy_vla import COLORS, score_images

    lp = score_images(vla, tok, meta["body"].tolist(), portraits.images, ("Yes", "No"))
    keys, p = _order_mean(lp, meta, 2)
    truth = portraits.color.numpy()
    rows = []
    for k, (v, t) in enumerate(keys.itertuples(index=False)):
        asked = COLORS.index(v)
        for i in range(len(truth)):
            rows.append({"asked": v, "template": t, "image": i,
                         "correct": float((p[k, i, 0] > 0.5) == (truth[i] == asked))})
    return pd.DataFrame(rows)


def capability(vla, tok, s) -> float:
    """Held-out capability of a toy VLA: the mean of its colour multiple-choice accuracy and its
    yes/no colour accuracy, on the evaluation templates and portraits of setup ``s`` (tasks the
    debiasing loss does not train). Chapter 19, notebook ``03-debiasing-tradeoff``."""
    mcq = colour_mcq_items(vla, tok, s.color_test, s.eval)["correct"].mean()
    yn = yesno_colour_items(vla, tok, s.color_yesno_test, s.eval)["correct"].mean()
    return float((mcq + yn) / 2)


def halves(n_items: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of ``n_items`` items into a tuning half and a test half (boolean
    masks; the test half gets the extra item when ``n_items`` is odd). Chapter 19, notebook
    ``03-debiasing-tradeoff``."""
    perm = np.random.default_rng(seed).permutation(n_items)
    tune = np.zeros(n_items, dtype=bool)
    tune[perm[:n_items // 2]] = True
    return tune, ~tune


def proxy_items(per_cue: pd.DataFrame) -> pd.DataFrame:
    """The text proxy's items: ``per_cue`` has one row per (item key columns..., ``cue``) with the
    order-averaged ``p_yes``; cues ``"a woman"``, ``"a man"`` and the neutral pair
    :data:`NEUTRAL_CUES`. Returns one row per item with ``delta`` = p_yes(woman) - p_yes(man) and
    ``neutral`` = p_yes(a person) - p_yes(an adult), the same item's instrument noise.
    Chapter 19, notebook ``01-protocol-text-proxy``."""
    keys = [c for c in per_cue.columns if c not in ("cue", "p_yes")]
    wide = per_cue.pivot_table(index=keys, columns="cue", values="p_yes").reset_index()
    wide["delta"] = wide["a woman"] - wide["a man"]
    wide["neutral"] = wide[NEUTRAL_CUES[0]] - wide[NEUTRAL_CUES[1]]
    return wide


def gender_power(shift: dict, neutral: dict, *, factor: float = 3.0) -> dict:
    """The power check of the text proxy (registry entry ``proxy-detects-gender``): per
    description template, ``shift`` = P(yes | woman) - P(yes | man) to "Is the person in the
    image a woman?" and ``neutral`` = the same under the neutral swap. Holds when every shift is
    positive and their mean exceeds ``factor`` x the largest absolute neutral shift.
    Chapter 19, notebook ``01-protocol-text-proxy``."""
    s = np.asarray(list(shift.values()), dtype=float)
    n = np.abs(np.asarray(list(neutral.values()), dtype=float))
    ok = bool((s > 0).all() and s.mean() > factor * n.max())
    return {"holds": ok, "mean_shift": float(s.mean()), "min_shift": float(s.min()),
            "max_neutral": float(n.max()), "ratio": float(s.mean() / n.max()) if n.max() > 0 else np.inf}


def strongest_settings(sweep: dict, floor: float, tune) -> pd.DataFrame:
    """Per family, its strongest admissible setting (registry entry
    ``debias-finetuning-best-tradeoff``). ``sweep[family][setting] = (capability, abs_delta)``
    with ``abs_delta`` the per-item |Delta| (all items, in one order); a setting is admissible
    when its capability is at least ``floor``; the strongest is the admissible one with the
    lowest mean |Delta| on the tuning items (boolean mask ``tune``). A family with no admissible
    setting is left out. Returns ``family``, ``setting``, ``capability``, ``tune_bias``.
    Chapter 19, notebook ``03-debiasing-tradeoff``."""
    tune = np.asarray(tune, dtype=bool)
    rows = []
    for fam, settings in sweep.items():
        ok = {k: (c, np.asarray(d, dtype=float)) for k, (c, d) in settings.items() if c >= floor}
        if not ok:
            continue
        k = min(ok, key=lambda k: ok[k][1][tune].mean())
        rows.append({"family": fam, "setting": k, "capability": ok[k][0], "tune_bias": float(ok[k][1][tune].mean())})
    return pd.DataFrame(rows, columns=["family", "setting", "capability", "tune_bias"])

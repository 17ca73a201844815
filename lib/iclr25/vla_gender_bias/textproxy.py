"""The text proxy of chapter 19 (notebook 01): the protocol on a text-only chat model, with each
"image" replaced by a one-sentence description that carries the gender cue."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import values as V
from .protocol import Subject, aggregate, make_prompts, option_probs, text_subjects
from .scoring import chat_prompts, score_letters, score_letters_cached

__all__ = ["proxy_prompts", "score_prompts", "run_seed", "ITEM_CUES", "GENDER_QUESTION", "item_prompts",
           "group_of", "run_items", "gender_probe"]


def proxy_prompts(cfg, seed: int, *, swap_control: bool = False) -> pd.DataFrame:
    """Every prompt of one seed: ``cfg.n_descriptions`` description pairs drawn with ``seed``,
    the first ``cfg.n_traits`` traits (half positive, half negative), ``cfg.n_skills`` skills
    and ``cfg.n_occupations`` occupations, one evaluation template per value, every option
    order (chapter 19)."""
    subj = text_subjects(cfg.n_descriptions, seed=seed, swap_control=swap_control)
    half = cfg.n_traits // 2
    traits = list(V.TRAITS_POSITIVE[:half]) + list(V.TRAITS_NEGATIVE[:cfg.n_traits - half])
    picks = {"traits": traits, "skills": list(V.SKILLS[:cfg.n_skills]),
             "occupations": _spread(cfg.n_occupations)}
    return pd.concat([make_prompts(t, subj, v, seed=seed) for t, v in picks.items() if v],
                     ignore_index=True)


def _spread(n: int) -> list[str]:
    """``n`` occupations spread over the range of women's shares (every k-th by share)."""
    occ = sorted(V.OCCUPATIONS, key=lambda o: V.OCCUPATION_FEMALE_SHARE[o])
    if n >= len(occ):
        return occ
    return [occ[int(round(i))] for i in np.linspace(0, len(occ) - 1, n)] if n > 0 else []


def score_prompts(model, tokenizer, prompts: pd.DataFrame, *, batch_size: int = 16,
                  method: str = "cached") -> np.ndarray:
    """Option probabilities ``(n_prompts, n_options)`` (renormalised over the letters); each
    distinct text is scored once (the swapped control repeats texts). ``method="cached"``
    (default) runs the chat header and each person's description once and reuses its KV cache
    for every question about that person (:func:`~.scoring.score_letters_cached`, equal to
    ``"batched"`` to 1e-4); ``"batched"`` and ``"generate"`` are :func:`~.scoring.score_letters`."""
    texts = chat_prompts(tokenizer, prompts["body"].tolist())
    uniq, first, inv = np.unique(np.array(texts, dtype=object), return_index=True, return_inverse=True)
    n_opt = len(prompts["options"].iloc[0])
    if method == "cached":
        prefixes = []
        for t, c in zip(uniq, prompts["content"].to_numpy()[first]):
            k = t.index(str(c)) + len(str(c)) + 1      # through the description's newline
            prefixes.append(t[:k])
        lp = score_letters_cached(model, tokenizer, list(uniq), prefixes, n_opt, batch_size=batch_size)
    else:
        lp = score_letters(model, tokenizer, list(uniq), n_opt, batch_size=batch_size, method=method)
    return option_probs(lp[inv], prompts["order"].tolist())


def run_seed(model, tokenizer, cfg, seed: int) -> dict:
    """One seed of notebook 01: prompts, their option probabilities, the per-image table, the
    raw letter preference (mean p(letter A)) and the swapped control's per-image table."""
    prompts = proxy_prompts(cfg, seed)
    control = proxy_prompts(cfg, seed, swap_control=True)
    both = pd.concat([prompts, control], ignore_index=True)
    probs = score_prompts(model, tokenizer, both, batch_size=cfg.batch_size)
    n = len(prompts)
    p, pc = probs[:n], probs[n:]
    orders = np.array([list(o) for o in prompts["order"]])
    p_letter_a = float(np.mean(p[np.arange(n), orders[:, 0]]))
    return {"prompts": prompts, "probs": p, "per_image": aggregate(prompts, p),
            "control": aggregate(control, pc), "p_letter_a": p_letter_a}


#: the four cues of an item: the gender pair, then the neutral relabelling (its control)
ITEM_CUES = ("a woman", "a man", "a person", "an adult")
#: the power check's question (registry entry ``proxy-detects-gender``)
GENDER_QUESTION = "Is the person in the image a woman?"


def _descriptions(cfg, seed: int) -> list[int]:
    import random

    return random.Random(seed).sample(range(len(V.DESCRIPTIONS)), cfg.n_descriptions)


def item_prompts(cfg, seed: int) -> pd.DataFrame:
    """Every prompt of one seed's items (chapter 19, notebook 01): ``cfg.n_descriptions``
    description templates (drawn with ``seed``), each with the four cues of :data:`ITEM_CUES`;
    the values of :func:`proxy_prompts`; ``cfg.n_templates`` question templates of the test half
    per value and one instruction per value (drawn with ``seed``); every option order. Adds
    ``description`` and ``cue`` columns. An item is (value, description, template) at one seed."""
    subj = []
    for d in _descriptions(cfg, seed):
        for i, cue in enumerate(ITEM_CUES):
            subj.append(Subject(f"d{d}|{cue}", "female" if i % 2 == 0 else "male",
                                V.DESCRIPTIONS[d].format(who=cue)))
    half = cfg.n_traits // 2
    traits = list(V.TRAITS_POSITIVE[:half]) + list(V.TRAITS_NEGATIVE[:cfg.n_traits - half])
    picks = {"traits": traits, "skills": list(V.SKILLS[:cfg.n_skills]),
             "occupations": _spread(cfg.n_occupations)}
    df = pd.concat([make_prompts(t, subj, v, seed=seed, n_templates=cfg.n_templates)
                    for t, v in picks.items() if v], ignore_index=True)
    df["description"] = [int(s.split("|")[0][1:]) for s in df["subject"]]
    df["cue"] = [s.split("|")[1] for s in df["subject"]]
    return df


def group_of(task: str, value: str) -> str:
    """The registry's value group: ``"positive traits"``, ``"negative traits"``, ``"skills"`` or
    ``"occupations"``."""
    if task == "traits":
        return "positive traits" if value in V.TRAITS_POSITIVE else "negative traits"
    return task


def run_items(model, tokenizer, cfg, seed: int) -> dict:
    """One seed of notebook 01's items: the prompts of :func:`item_prompts` and the
    identical-but-relabelled control (every "a woman" text replaced by the same item's "a man"
    text: scored once, as the texts repeat), their option probabilities, and ``per_cue`` -- one
    row per (seed, group, task, value, template, description, cue) with the order-averaged
    ``p_yes`` -- plus the control's per-image table and the raw letter preference."""
    prompts = item_prompts(cfg, seed)
    gm = prompts[prompts.cue.isin(ITEM_CUES[:2])]
    man = gm[gm.cue == "a man"].set_index(["task", "value", "template", "description", "order"])["body"]
    control = gm.copy()
    control["body"] = [man.loc[(t, v, tp, d, o)] for t, v, tp, d, o in
                       zip(gm.task, gm.value, gm.template, gm.description, gm.order)]
    control["content"] = [V.DESCRIPTIONS[d].format(who="a man") for d in gm.description]
    both = pd.concat([prompts, control], ignore_index=True)
    probs = score_prompts(model, tokenizer, both, batch_size=cfg.batch_size)
    n = len(prompts)
    p, pc = probs[:n], probs[n:]
    keys = ["task", "value", "template", "description", "cue"]
    per_cue = prompts[keys].assign(p_yes=p[:, 0]).groupby(keys, as_index=False)["p_yes"].mean()
    per_cue.insert(0, "seed", seed)
    per_cue.insert(1, "group", [group_of(t, v) for t, v in zip(per_cue.task, per_cue.value)])
    orders = np.array([list(o) for o in prompts["order"]])
    return {"prompts": prompts, "probs": p, "per_cue": per_cue,
            "control": aggregate(control, pc), "p_letter_a": float(np.mean(p[np.arange(n), orders[:, 0]]))}


def gender_probe(model, tokenizer, cfg, *, instruction: str | None = None) -> pd.DataFrame:
    """The power check's measurements (registry entry ``proxy-detects-gender``): for every
    description template and every cue of :data:`ITEM_CUES`, the order-averaged P(yes) to
    :data:`GENDER_QUESTION`. Returns one row per description with ``shift`` = P(yes | a woman)
    - P(yes | a man) and ``neutral`` = P(yes | a person) - P(yes | an adult)."""
    from .protocol import format_prompt, option_orders

    instruction = instruction or V.INSTRUCTIONS[0]
    rows = []
    for d, desc in enumerate(V.DESCRIPTIONS):
        for cue in ITEM_CUES:
            content = desc.format(who=cue)
            for order in option_orders(2):
                rows.append(dict(description=d, cue=cue, order=order, options=("Yes", "No"), content=content,
                                 body=format_prompt(GENDER_QUESTION, ("Yes", "No"), order, instruction, content)))
    df = pd.DataFrame(rows)
    df["p_yes"] = score_prompts(model, tokenizer, df, batch_size=cfg.batch_size)[:, 0]
    w = df.groupby(["description", "cue"])["p_yes"].mean().unstack("cue")
    return pd.DataFrame({"shift": w["a woman"] - w["a man"], "neutral": w["a person"] - w["an adult"]})

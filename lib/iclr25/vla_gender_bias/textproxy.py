"""The text proxy of chapter 19 (notebook 01): the protocol on a text-only chat model, with each
"image" replaced by a one-sentence description that carries the gender cue."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import values as V
from .protocol import aggregate, make_prompts, option_probs, text_subjects
from .scoring import chat_prompts, score_letters, score_letters_cached

__all__ = ["proxy_prompts", "score_prompts", "run_seed"]


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

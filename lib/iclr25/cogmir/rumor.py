"""The rumour chain (chapter 03): a story passed along a chain of agents, each retelling what
it was told "in your own words, as accurately as possible"; distortion is read as the MiniLM
similarity to the original and the length ratio by chain position, against a shuffled-sentence
null (texts built from sentences of *other* stories, as many as the original has).

Every hop is one batched call across narratives (``agent.reply`` on all of them at once).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .discriminators import similarity_to

__all__ = ["RETELL", "rumor_chain", "chain_metrics", "sentences", "shuffled_sentence_null"]

RETELL = ("Here is a short story someone told you:\n\n{story}\n\nRetell the story to the next "
          "person in your own words, as accurately as possible, in two or three sentences.")


def sentences(text: str) -> list[str]:
    """Split ``text`` after ``.``, ``!`` or ``?`` (chapter 03)."""
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def rumor_chain(agents, narratives: Sequence[str], hops: int) -> list[list[str]]:
    """Pass each narrative along ``hops`` agents (chapter 03). ``agents``: one agent used at
    every hop, or a list of ``hops`` agents (anything with ``reply(conversations)``, e.g.
    :class:`~iclr25.cogmir.agents.ChatAgent`). Returns ``chain`` with ``chain[0]`` the
    originals and ``chain[h]`` what the h-th agent said (a reply that comes back empty is
    passed on as empty)."""
    narratives = [str(n) for n in narratives]
    if not narratives:
        raise ValueError("no narratives given")
    if not isinstance(hops, int) or hops < 1:
        raise ValueError(f"hops must be a positive integer, got {hops!r}")
    if not isinstance(agents, (list, tuple)):
        agents = [agents] * hops
    if len(agents) != hops:
        raise ValueError(f"{len(agents)} agents for {hops} hops; give one agent or one per hop")
    chain = [narratives]
    for h in range(hops):
        convs = [[{"role": "user", "content": RETELL.format(story=t)}] for t in chain[-1]]
        replies = agents[h].reply(convs)
        chain.append([" ".join(r.split()) for r in replies])
    return chain


def _words(text: str) -> int:
    return len(text.split())


def chain_metrics(encoder, chain: list[list[str]]) -> pd.DataFrame:
    """One row per (narrative, position >= 1): MiniLM ``similarity`` to the original and
    ``length_ratio`` (words / the original's words) (chapter 03)."""
    originals = chain[0]
    rows = []
    for pos in range(1, len(chain)):
        sims = similarity_to(encoder, chain[pos], originals)
        for i, (t, o) in enumerate(zip(chain[pos], originals)):
            rows.append({"narrative": i, "position": pos, "similarity": float(sims[i]),
                         "length_ratio": _words(t) / max(1, _words(o)), "text": t})
    return pd.DataFrame(rows)


def shuffled_sentence_null(encoder, narratives: Sequence[str], pool: Sequence[str], *,
                           n_draws: int = 5, seed: int = 0) -> np.ndarray:
    """``(len(narratives),)`` mean similarity of each narrative to ``n_draws`` texts made of
    random sentences of the *other* stories in ``pool`` (as many sentences as it has): the
    similarity of an unrelated retelling in the same style (chapter 03)."""
    rng = np.random.default_rng(seed)
    out = np.zeros(len(narratives))
    for i, n in enumerate(narratives):
        others = [s for p in pool if p != n for s in sentences(p)]
        if not others:
            raise ValueError("the pool needs stories other than the narrative itself")
        k = max(1, len(sentences(n)))
        texts = [" ".join(rng.choice(others, size=k, replace=False)) for _ in range(n_draws)]
        out[i] = float(similarity_to(encoder, texts, [n] * n_draws).mean())
    return out

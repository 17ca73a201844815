"""A slant scorer for generated text: MiniLM sentence embeddings + ridge.

The paper rates the slant of steered generations on a 1-7 scale (who rated them was not read
from the paper or the code). We substitute an automatic scorer that is *validated before use*:
all-MiniLM-L6-v2 embeddings (:func:`iclr25.embed.minilm`) and a ridge regression trained on
templated statements with a known side (:func:`~iclr25.ideology_probes.data.labelled_statements`,
-1 liberal, +1 conservative), checked on held-out topics (leave-one-topic-out) before it scores
anything the model wrote.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .probe import spearman

__all__ = ["SlantScorer", "auc"]


def auc(score: np.ndarray, label: np.ndarray) -> float:
    """Area under the ROC curve of ``score`` for binary ``label`` (ties count one half)."""
    score, label = np.asarray(score, float), np.asarray(label) > 0
    pos, neg = score[label], score[~label]
    if not len(pos) or not len(neg):
        raise ValueError("auc needs both classes")
    return float(((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum())
                 / (len(pos) * len(neg)))


class SlantScorer:
    """MiniLM embeddings + ridge regression to a slant score (negative = liberal, positive =
    conservative). ``fit(texts, y)``, ``predict(texts)``, ``validate(table)``.

    Defined in chapter 10 (ideology probes). ``encoder`` is any object with
    ``encode(texts) -> (n, dim)`` (default: :func:`iclr25.embed.minilm`, loaded on first use).
    """

    def __init__(self, encoder=None, alpha: float = 1.0) -> None:
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha!r}")
        self._encoder = encoder
        self.alpha = float(alpha)

    @property
    def encoder(self):
        if self._encoder is None:
            from ..embed import minilm

            self._encoder = minilm()
        return self._encoder

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.encoder.encode(list(texts)), dtype=np.float64)

    def fit(self, texts: Sequence[str], y: Sequence[float]) -> "SlantScorer":
        from sklearn.linear_model import Ridge

        y = np.asarray(y, dtype=np.float64)
        if len(texts) != len(y) or len(y) < 2:
            raise ValueError(f"need one label per text and at least 2 texts, got {len(texts)} "
                             f"texts and {len(y)} labels")
        self.model_ = Ridge(alpha=self.alpha).fit(self._embed(texts), y)
        return self

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Slant of each text, ``(n,)``."""
        if not hasattr(self, "model_"):
            raise RuntimeError("this SlantScorer is not fitted yet: call fit(texts, y) first")
        texts = list(texts)
        if not texts:
            return np.zeros(0)
        return self.model_.predict(self._embed(texts))

    def validate(self, table: pd.DataFrame, by: str = "topic") -> dict:
        """Leave-one-``by``-out validation on a labelled table (columns ``text``, ``y``,
        ``by``): train on all other groups, score the held-out group. Returns the pooled
        held-out ``auc`` and ``spearman`` and the per-group AUCs. Embeds each text once."""
        for c in ("text", "y", by):
            if c not in table.columns:
                raise ValueError(f"the table needs columns text, y and {by!r}; missing {c!r}")
        from sklearn.linear_model import Ridge

        E = self._embed(table["text"])
        y = table["y"].to_numpy(float)
        g = table[by].to_numpy()
        pred = np.zeros(len(y))
        per = {}
        for v in pd.unique(g):
            te = g == v
            pred[te] = Ridge(alpha=self.alpha).fit(E[~te], y[~te]).predict(E[te])
            per[str(v)] = auc(pred[te], y[te])
        return {"auc": auc(pred, y), "spearman": spearman(pred, y), "per_group_auc": per,
                "pred": pred}

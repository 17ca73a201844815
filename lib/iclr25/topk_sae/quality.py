"""Feature-quality metrics of chapter 06 (``04-feature-quality``), after Gao et al. Sec. 4:

- **probe loss** (Sec. 4.2): for a binary property of tokens, the best cross-entropy of a 1-D
  logistic probe on a single latent (lower is better); the properties here are ones we can label
  from the token text (digits, capitalised words, punctuation, inside parentheses, ...), not the
  paper's 61 data sets;
- **N2G-style explanations** (Sec. 4.3), simplified to their first level: a latent's explanation
  is the set of tokens on which it fired in at least half of their training occurrences; we
  report the precision and recall of that explanation on held-out tokens;
- **ablation sparsity** (Sec. 4.5): remove one active latent's contribution from the residual
  stream at one token and look at the change of the logits there and at the next ``T`` tokens;
  subtract each position's median change (a constant shift of the logits changes no
  probability), and score the ``V * T`` numbers by ``(L1 / L2)^2 / (V T)``: the effective
  fraction of (token, vocabulary entry) pairs the ablation affects. Lower is sparser.
"""

from __future__ import annotations

import string

import numpy as np
import torch

__all__ = ["token_properties", "probe_loss", "probe_losses", "unigram_explanations",
           "effect_sparsity", "ablation_effects", "ablation_sparsity"]

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


def effect_sparsity(diff) -> float:
    """``(L1 / L2)^2 / (T V)`` of a (T, V) logit change after subtracting each row's median.

    1 / (T V) when one logit of one position moves; about 2 / pi for Gaussian noise; ``nan`` when
    nothing moves but a constant shift per position. Chapter 06 (Sec. 4.5).
    """
    d = torch.as_tensor(diff, dtype=torch.float64)
    if d.dim() != 2 or d.numel() == 0:
        raise ValueError(f"diff must be a non-empty (T, V) matrix; got shape {tuple(d.shape)}")
    d = d - d.median(dim=1, keepdim=True).values
    l2sq = float((d ** 2).sum())
    if l2sq == 0.0:
        return float("nan")
    return float(d.abs().sum()) ** 2 / l2sq / d.numel()


@torch.no_grad()
def ablation_effects(model, sae, context, layer: int, position: int, *, scale: float = 1.0,
                     n_future: int = 8, max_latents: int | None = None,
                     max_norm: float | None = None
                     ) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """The logit changes from ablating, one at a time, the latents active at one token.

    ``context`` is a 1-D sequence of token ids; ``layer`` the decoder layer whose output the SAE
    reads (trained on activations times ``scale``); ``position`` the token whose latents are
    ablated. The model runs once on a batch: row 0 clean, row ``j`` with latent ``j``'s
    contribution ``v_j W_dec[i_j] / scale`` subtracted from the layer's output at ``position``.
    The logits of positions ``position .. position + n_future - 1`` are compared (earlier ones
    cannot change: the model is causal).

    Returns ``(latents, activations, diffs)``: the ablated latents (at most ``max_latents``, the
    most active first), their activations, and the (m, T, V) logit changes. Nothing is ablated
    (m = 0) when the token's activation norm exceeds ``max_norm`` (the massive activations the
    autoencoder was not trained on). Chapter 06.
    """
    from .. import lm

    ids = torch.as_tensor(np.asarray(context), dtype=torch.long).reshape(-1)
    if not 0 <= position < len(ids):
        raise ValueError(f"position must be in [0, {len(ids)}); got {position}")
    if n_future < 1:
        raise ValueError(f"n_future must be >= 1; got {n_future}")
    end = min(len(ids), position + n_future)
    m = sae.k if max_latents is None else min(int(max_latents), sae.k)
    batch = ids[:end].unsqueeze(0).repeat(m + 1, 1)
    found = {}

    def hook(mod, args, out):
        h = out[0] if isinstance(out, (tuple, list)) else out
        x = h[0, position].float().unsqueeze(0) * scale
        idx, vals = sae.encode(x)
        keep = vals[0] > 0
        idx, vals = idx[0, keep][:m], vals[0, keep][:m]
        if max_norm is not None and float(h[0, position].float().norm()) > max_norm:
            idx, vals = idx[:0], vals[:0]
        found["idx"], found["vals"] = idx, vals
        new = h.clone()
        delta = (vals[:, None] * sae.W_dec[idx] / scale).to(h.dtype)
        new[1:1 + len(idx), position] -= delta
        if isinstance(out, tuple):
            return (new,) + tuple(out[1:])
        if isinstance(out, list):
            return [new] + list(out[1:])
        return new

    handle = lm.decoder_layers(model)[layer].register_forward_hook(hook)
    try:
        logits = model(input_ids=batch).logits[:, position:end].float()
    finally:
        handle.remove()
    n_found = len(found["idx"])
    diffs = logits[1:1 + n_found] - logits[:1]
    return found["idx"].numpy(), found["vals"].numpy(), diffs


def ablation_sparsity(model, sae, contexts, layer: int, positions, *, scale: float = 1.0,
                      n_future: int = 8, max_latents: int | None = None,
                      max_norm: float | None = None,
                      desc: str | None = "ablations") -> "pd.DataFrame":
    """:func:`effect_sparsity` of every single-latent ablation at every (context, position).

    ``contexts`` (C, L) token ids; ``positions`` the token positions to ablate at (the same in
    every context); ``max_norm``: tokens with a larger activation norm are skipped. One row per
    ablation: ``context``, ``position``, ``latent``, ``activation``, ``sparsity``. The paper's
    score of an autoencoder is the mean of ``sparsity``. Chapter 06.
    """
    import pandas as pd

    from ..progress import progress

    contexts = np.asarray(contexts)
    if contexts.ndim != 2:
        raise ValueError(f"contexts must be (C, L) token ids; got shape {contexts.shape}")
    rows = []
    jobs = [(c, p) for c in range(len(contexts)) for p in positions]
    for c, p in progress(jobs, desc=desc):
        lat, act, diffs = ablation_effects(model, sae, contexts[c], layer, int(p), scale=scale,
                                           n_future=n_future, max_latents=max_latents,
                                           max_norm=max_norm)
        for j in range(len(lat)):
            rows.append({"context": c, "position": int(p), "latent": int(lat[j]),
                         "activation": float(act[j]), "sparsity": effect_sparsity(diffs[j])})
    return pd.DataFrame(rows, columns=["context", "position", "latent", "activation", "sparsity"])

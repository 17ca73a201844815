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

__all__ = ["SparseCodes", "sparse_codes", "token_properties", "topic_properties", "probe_loss",
           "probe_losses", "unigram_explanations", "effect_sparsity", "ablation_effects",
           "ablation_sparsity", "cluster_bootstrap", "cluster_bootstrap_diff"]

_PUNCT = set(string.punctuation) | {"–", "—", "“", "”", "‘", "’"}


class SparseCodes:
    """A TopK code kept sparse: ``idx`` and ``vals`` (N, k) of ``n_latents`` latents (chapter 06).

    The dense (N, n) matrix is never formed: at the paper profile (50k tokens x 32k latents) it
    would take 6.5 GB in float32, where the sparse code takes N k (4 + 4) bytes. Columns are read
    one at a time (:meth:`column`), and the per-latent sums a probe needs come from scatter-adds
    (:meth:`column_sums`).
    """

    def __init__(self, idx, vals, n_latents: int) -> None:
        idx, vals = np.asarray(idx), np.asarray(vals, dtype=np.float32)
        if idx.shape != vals.shape or idx.ndim != 2:
            raise ValueError(f"idx and vals must be (N, k) of one shape; got {idx.shape}, {vals.shape}")
        if idx.size and (idx.min() < 0 or idx.max() >= n_latents):
            raise ValueError(f"latent indices must be in [0, {n_latents})")
        self.idx, self.vals, self.n_latents = idx.astype(np.int64), vals, int(n_latents)
        self.shape = (idx.shape[0], self.n_latents)
        self._where = None

    def __len__(self) -> int:
        return self.idx.shape[0]

    def _rows_of(self):
        if self._where is None:                      # CSC-like: for each latent, its (row, value)
            flat = self.idx.ravel()
            order = np.argsort(flat, kind="stable")
            bounds = np.searchsorted(flat[order], np.arange(self.n_latents + 1))
            rows = np.repeat(np.arange(len(self)), self.idx.shape[1])[order]
            self._where = (rows, self.vals.ravel()[order], bounds)
        return self._where

    def column(self, j: int) -> np.ndarray:
        """Latent ``j``'s activation on every row, (N,) float32 (zeros where it is not in the top k)."""
        rows, vals, b = self._rows_of()
        out = np.zeros(len(self), dtype=np.float32)
        np.add.at(out, rows[b[j]:b[j + 1]], vals[b[j]:b[j + 1]])
        return out

    def column_sums(self, weights=None, power: int = 1) -> np.ndarray:
        """``sum_i w_i z_ij^power`` for every latent j, (n,) float64 (``w = 1`` by default)."""
        v = self.vals.astype(np.float64) ** power
        if weights is not None:
            v = v * np.asarray(weights, dtype=np.float64)[:, None]
        return np.bincount(self.idx.ravel(), weights=v.ravel(), minlength=self.n_latents)

    def subset(self, rows) -> "SparseCodes":
        """The rows ``rows`` as a new :class:`SparseCodes`."""
        return SparseCodes(self.idx[rows], self.vals[rows], self.n_latents)

    def toarray(self) -> np.ndarray:
        """The dense (N, n) code (for tests and small cases only)."""
        out = np.zeros(self.shape, dtype=np.float32)
        np.add.at(out, (np.arange(len(self))[:, None], self.idx), self.vals)
        return out


@torch.no_grad()
def sparse_codes(sae, acts, *, k: int | None = None, batch_size: int = 4096) -> SparseCodes:
    """The TopK code of ``acts`` (N, d; array, memmap rows or tensor), batch by batch, kept
    sparse (:class:`SparseCodes`). Chapter 06."""
    idx, vals = [], []
    for s in range(0, len(acts), batch_size):
        x = torch.as_tensor(np.asarray(acts[s:s + batch_size], dtype=np.float32))
        i, v = sae.encode(x.to(sae.W_dec.device), k)
        idx.append(i.cpu().numpy())
        vals.append(v.cpu().numpy())
    return SparseCodes(np.concatenate(idx), np.concatenate(vals), sae.n_latents)


_MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december"}
_STOP = {"the", "a", "an", "of", "and", "or", "in", "on", "at", "to", "for", "by", "with",
         "from", "as", "is", "was", "are", "were", "be", "been", "that", "which", "it", "its",
         "this", "his", "her", "their", "he", "she", "they"}


def token_properties(token_strings: list[str], ctx_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Binary properties of each token (in stream order; ``ctx_ids`` marks context boundaries),
    labelled from the token text and its predecessor in the same context (chapter 06):

    ``digit``, ``capitalised``, ``punctuation``, ``space_prefixed``, ``year`` (a 4-digit number
    1000-2099), ``inside_parentheses``, ``all_caps`` (two or more letters, all upper case),
    ``word_continuation`` (no leading space, starts with a letter, after a token ending in a
    letter: the inside of a word split into pieces), ``comma``, ``period``, ``hyphen_or_dash``,
    ``sentence_start`` (after a token ending in ``.``, ``!`` or ``?``), ``after_article`` (after
    "the"/"a"/"an"), ``after_number`` (after a token holding a digit), ``proper_noun``
    (capitalised, space-prefixed, not at a sentence start), ``long_word`` (7+ letters),
    ``suffix_ing``, ``suffix_ed``, ``plural_s`` (4+ letters ending in a single s), ``month``
    (an English month name), ``stopword`` (a short list of function words).
    """
    if len(token_strings) != len(ctx_ids):
        raise ValueError("token_strings and ctx_ids must have the same length")
    s = [t if isinstance(t, str) else str(t) for t in token_strings]
    st = [t.strip() for t in s]
    low = [t.lower() for t in st]
    ctx_ids = np.asarray(ctx_ids)
    first = np.r_[True, ctx_ids[1:] != ctx_ids[:-1]]          # first token of its context here
    prev = [""] + st[:-1]
    prev = ["" if f else p for p, f in zip(prev, first)]
    arr = lambda f: np.array([bool(f(i)) for i in range(len(s))], dtype=bool)
    sent = arr(lambda i: prev[i][-1:] in (".", "!", "?"))
    cap = arr(lambda i: st[i][:1].isupper())
    props = {
        "digit": arr(lambda i: any(c.isdigit() for c in s[i])),
        "capitalised": cap,
        "punctuation": arr(lambda i: bool(st[i]) and all(c in _PUNCT for c in st[i])),
        "space_prefixed": arr(lambda i: s[i].startswith(" ")),
        "year": arr(lambda i: st[i].isdigit() and len(st[i]) == 4 and 1000 <= int(st[i]) < 2100),
        "all_caps": arr(lambda i: sum(c.isalpha() for c in st[i]) >= 2 and st[i].isupper()),
        "word_continuation": arr(lambda i: not s[i][:1].isspace() and s[i][:1].isalpha()
                                 and prev[i][-1:].isalpha()),
        "comma": arr(lambda i: st[i] == ","),
        "period": arr(lambda i: st[i] == "."),
        "hyphen_or_dash": arr(lambda i: st[i] in ("-", "–", "—")),
        "sentence_start": sent,
        "after_article": arr(lambda i: prev[i].lower() in ("the", "a", "an")),
        "after_number": arr(lambda i: any(c.isdigit() for c in prev[i])),
        "proper_noun": cap & ~sent & arr(lambda i: s[i].startswith(" ")),
        "long_word": arr(lambda i: st[i].isalpha() and len(st[i]) >= 7),
        "suffix_ing": arr(lambda i: low[i].isalpha() and low[i].endswith("ing") and len(low[i]) > 4),
        "suffix_ed": arr(lambda i: low[i].isalpha() and low[i].endswith("ed") and len(low[i]) > 3),
        "plural_s": arr(lambda i: low[i].isalpha() and len(low[i]) >= 4 and low[i].endswith("s")
                        and not low[i].endswith("ss")),
        "month": arr(lambda i: low[i] in _MONTHS),
        "stopword": arr(lambda i: low[i] in _STOP),
    }
    inside = np.zeros(len(s), dtype=bool)
    depth = 0
    for i, t in enumerate(s):
        if first[i]:
            depth = 0
        inside[i] = depth > 0
        depth = max(0, depth + t.count("(") - t.count(")"))
    props["inside_parentheses"] = inside
    return props


def topic_properties(topics) -> dict[str, np.ndarray]:
    """One binary property per topic label: ``"topic: <label>"`` is true on the tokens of
    articles with that label (the corpus's vital-article categories). Chapter 06."""
    topics = np.asarray(topics, dtype=object)
    return {f"topic: {t}": topics == t for t in sorted(set(topics.tolist()))}


def _bce(p, y):
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def _split(n: int, groups, seed: int):
    rng = np.random.default_rng(seed)
    if groups is None:
        perm = rng.permutation(n)
        return perm[: n // 2], perm[n // 2:]
    groups = np.asarray(groups)
    if len(groups) != n:
        raise ValueError(f"groups must have one entry per row ({n}); got {len(groups)}")
    g = rng.permutation(np.unique(groups))
    in_tr = np.isin(groups, g[: len(g) // 2])
    return np.nonzero(in_tr)[0], np.nonzero(~in_tr)[0]


def _abs_corr(codes, rows, y) -> np.ndarray:
    """|Pearson correlation| of every column of ``codes`` with ``y`` over ``rows``."""
    yc = y[rows] - y[rows].mean()
    if isinstance(codes, SparseCodes):
        sub = codes.subset(rows)
        m = len(rows)
        s1, s2 = sub.column_sums(), sub.column_sums(power=2)
        sxy = sub.column_sums(weights=yc)
        var = np.maximum(s2 - s1 ** 2 / m, 0.0)
    else:
        c = codes[rows] - codes[rows].mean(0)
        sxy, var = c.T @ yc, (c ** 2).sum(0)
    return np.abs(sxy) / (np.sqrt(var * (yc ** 2).sum()) + 1e-12)


def probe_loss(codes, y: np.ndarray, *, n_candidates: int = 8, seed: int = 0,
               groups=None) -> dict:
    """The best held-out cross-entropy of a 1-D logistic probe on one latent of ``codes`` (a
    dense (N, n) array or :class:`SparseCodes`) for labels ``y`` (N,) (Sec. 4.2).

    Candidates are the ``n_candidates`` latents most correlated with ``y`` on the training half;
    the other half scores them. ``groups`` (N,), e.g. the context of each token: the halves are
    split by group, so that no context is in both (labels that are constant within a context,
    like a topic, would otherwise leak). Returns ``loss``, ``latent``, ``baseline`` (the loss of
    predicting the training base rate). Dense and sparse codes give the same result. Chapter 06.
    """
    from sklearn.linear_model import LogisticRegression

    sparse = isinstance(codes, SparseCodes)
    if not sparse:
        codes = np.asarray(codes, dtype=np.float64)
        if codes.ndim != 2:
            raise ValueError(f"codes must be (N, n) or SparseCodes; got shape {codes.shape}")
    y = np.asarray(y, dtype=float)
    if y.ndim != 1 or len(codes) != len(y):
        raise ValueError(f"codes (N, n) and y (N,) must match; got {codes.shape}, {y.shape}")
    tr, te = _split(len(y), groups, seed)
    if len(tr) == 0 or len(te) == 0:
        raise ValueError("the probe needs rows (or groups) in both halves")
    base = _bce(np.full(len(te), y[tr].mean()), y[te])
    best = {"loss": base, "latent": -1, "baseline": base}
    if y[tr].min() == y[tr].max():
        return best
    corr = _abs_corr(codes, tr, y)
    for j in np.argsort(-corr, kind="stable")[:n_candidates]:
        x = (codes.column(int(j)) if sparse else codes[:, j]).astype(np.float64)[:, None]
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
    """First-level N2G explanations and their held-out precision and recall (codes dense or
    :class:`SparseCodes`).

    For each latent: the explanation is the set of token ids that occur at least ``min_count``
    times in training and on which the latent fires (> 0) at least ``min_rate`` of the time.
    On the test tokens, "predicted" = token in the set, "actual" = latent fires. Latents that never
    fire on the test tokens are skipped. Chapter 06."""
    col = lambda c, j: c.column(int(j)) if isinstance(c, SparseCodes) else np.asarray(c)[:, j]
    out = []
    for j in latents:
        fire_tr = col(codes_train, j) > 0
        fire_te = col(codes_test, j) > 0
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


def cluster_bootstrap(values, clusters, *, n_boot: int = 2000, level: float = 0.95,
                      seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``values`` and its percentile bootstrap interval, resampling whole ``clusters``
    (e.g. the context each ablation was made in: ablations in one context are not independent).
    Returns ``(mean, low, high)``. Chapter 06 (ablation sparsity)."""
    values, clusters = np.asarray(values, dtype=float), np.asarray(clusters)
    if values.shape != clusters.shape or values.size == 0:
        raise ValueError("values and clusters must be non-empty and of one shape")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    ids, inv = np.unique(clusters, return_inverse=True)
    sums = np.bincount(inv, weights=values)
    counts = np.bincount(inv).astype(float)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(ids), size=(n_boot, len(ids)))
    boot = sums[pick].sum(1) / counts[pick].sum(1)
    a = (1 - level) / 2
    return float(values.mean()), float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


def cluster_bootstrap_diff(a, clusters_a, b, clusters_b, *, n_boot: int = 2000,
                           level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """``mean(a) - mean(b)`` and its bootstrap interval when ``a`` and ``b`` were measured in the
    same clusters (the same contexts): each draw resamples the clusters once and recomputes both
    means on it. Returns ``(difference, low, high)``. Chapter 06."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ca, cb = np.asarray(clusters_a), np.asarray(clusters_b)
    if a.shape != ca.shape or b.shape != cb.shape or a.size == 0 or b.size == 0:
        raise ValueError("a, b and their clusters must be non-empty and match in shape")
    ids = np.unique(np.concatenate([ca, cb]))
    ia, ib = np.searchsorted(ids, ca), np.searchsorted(ids, cb)
    sa, na = np.bincount(ia, a, len(ids)), np.bincount(ia, minlength=len(ids)).astype(float)
    sb, nb = np.bincount(ib, b, len(ids)), np.bincount(ib, minlength=len(ids)).astype(float)
    pick = np.random.default_rng(seed).integers(0, len(ids), size=(n_boot, len(ids)))
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = sa[pick].sum(1) / na[pick].sum(1) - sb[pick].sum(1) / nb[pick].sum(1)
    boot = boot[np.isfinite(boot)]
    q = (1 - level) / 2
    return float(a.mean() - b.mean()), float(np.quantile(boot, q)), float(np.quantile(boot, 1 - q))

"""Boolean predicates on item features, and rules (AND of predicates) printed as readable text.

The paper fixes a library of predicates ("price <= 120", "stars >= 4") before learning; a rule is a
conjunction of predicates, a preference type an OR of rules (our reading: a weighted sum of rule
indicators inside a logit). Introduced in ``01-logic-logit/01-consider-then-choose``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["Predicate", "PredicateLibrary", "Rule", "jaccard"]

Rule = frozenset  # a rule is a frozenset of predicate indices into a PredicateLibrary

_OPS = {"<=": "≤", ">=": "≥", "==": "="}
_PARSE_OPS = {"<=": "<=", "≤": "<=", ">=": ">=", "≥": ">=", "==": "==", "=": "=="}


@dataclass(frozen=True)
class Predicate:
    """``feature op value`` with ``op`` one of ``<=``, ``>=``, ``==``."""

    feature: str
    op: str
    value: float

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"unknown predicate operator {self.op!r}; valid: {', '.join(_OPS)}")

    def evaluate(self, col: np.ndarray) -> np.ndarray:
        if self.op == "<=":
            return col <= self.value
        if self.op == ">=":
            return col >= self.value
        return np.isclose(col, self.value)

    def __str__(self) -> str:
        return f"{self.feature} {_OPS[self.op]} {self.value:.4g}"


def jaccard(a: Iterable[int], b: Iterable[int]) -> float:
    """Jaccard similarity of two predicate sets, ``|a & b| / |a | b|`` (1 for two empty sets)."""
    a, b = set(a), set(b)
    return 1.0 if not a | b else len(a & b) / len(a | b)


class PredicateLibrary:
    """A fixed list of predicates over named features (chapter 01, ``01-consider-then-choose``).

    Build with :meth:`from_thresholds` (explicit thresholds) or :meth:`from_data` (quantile bins);
    :meth:`evaluate` gives the Boolean tensor ``[n_obs, max_items, M]``; :meth:`parse` and
    :meth:`rule_str` convert rules to and from text such as ``"price <= 120 AND stars >= 4"``.
    """

    def __init__(self, feature_names: Sequence[str], predicates: Sequence[Predicate]):
        self.feature_names = tuple(feature_names)
        unknown = sorted({p.feature for p in predicates} - set(self.feature_names))
        if unknown:
            raise ValueError(f"predicates on unknown feature(s) {unknown}; "
                             f"valid: {', '.join(self.feature_names)}")
        if not predicates:
            raise ValueError("a predicate library needs at least one predicate")
        self.predicates = tuple(predicates)

    def __len__(self) -> int:
        return len(self.predicates)

    def __repr__(self) -> str:
        return f"PredicateLibrary({len(self)} predicates over {len(self.feature_names)} features)"

    @classmethod
    def from_thresholds(cls, feature_names: Sequence[str],
                        thresholds: Mapping[str, Sequence[float]],
                        binary: Sequence[str] = ()) -> "PredicateLibrary":
        """``f <= t`` and ``f >= t`` for each threshold ``t`` of feature ``f`` (the smallest
        ``>=`` and largest ``<=`` are skipped: always true on a grid), and ``f = 1`` / ``f = 0``
        for each binary feature."""
        preds: list[Predicate] = []
        for f in feature_names:
            if f in binary:
                preds += [Predicate(f, "==", 1.0), Predicate(f, "==", 0.0)]
            elif f in thresholds:
                ts = sorted(float(t) for t in thresholds[f])
                preds += [Predicate(f, "<=", t) for t in ts[:-1]]
                preds += [Predicate(f, ">=", t) for t in ts[1:]]
        bad = sorted((set(thresholds) | set(binary)) - set(feature_names))
        if bad:
            raise ValueError(f"thresholds for unknown feature(s) {bad}; valid: {', '.join(feature_names)}")
        return cls(feature_names, preds)

    @classmethod
    def from_data(cls, data, n_bins: int = 4, features: Sequence[str] | None = None,
                  binary_negations: bool = True) -> "PredicateLibrary":
        """Quantile predicates from the offered items of ``data``: 0/1 features give ``f = 1`` and
        ``f = 0`` (only ``f = 1`` with ``binary_negations=False``, e.g. for one indicator per
        product among many); a feature with at most ``n_bins + 1`` distinct values gets a
        threshold at each; others get ``n_bins`` quantile thresholds (values taken from the data).
        Predicates that are always or never true on ``data`` are dropped."""
        if n_bins < 1:
            raise ValueError(f"n_bins must be >= 1, got {n_bins}")
        names = data.feature_names if features is None else tuple(features)
        thresholds, binary = {}, []
        for f in names:
            vals = data.feature(f)[data.mask]
            uniq = np.unique(vals)
            if set(uniq.tolist()) <= {0.0, 1.0}:
                binary.append(f)
            elif len(uniq) <= n_bins + 1:
                thresholds[f] = uniq
            else:
                qs = np.quantile(vals, np.linspace(0, 1, n_bins + 2)[1:-1], method="nearest")
                thresholds[f] = np.unique(np.concatenate([[uniq[0]], qs, [uniq[-1]]]))
        lib = cls.from_thresholds(data.feature_names, thresholds, binary)
        P = lib.evaluate(data)[data.mask]
        frac = P.mean(0)
        keep = [p for p, fr in zip(lib.predicates, frac) if 0 < fr < 1
                and (binary_negations or not (p.op == "==" and p.value == 0.0 and p.feature in binary))]
        return cls(data.feature_names, keep)

    def evaluate(self, data) -> np.ndarray:
        """Boolean tensor ``[n_obs, max_items, M]``: predicate ``m`` on each offered item (False on
        padding slots)."""
        missing = [f for f in self.feature_names if f not in data.feature_names]
        if missing:
            raise ValueError(f"the data lack feature(s) {missing} used by the predicate library")
        cols = {f: data.feature(f) for f in {p.feature for p in self.predicates}}
        P = np.stack([p.evaluate(cols[p.feature]) for p in self.predicates], axis=-1)
        return P & data.mask[..., None]

    def rule_str(self, rule: Iterable[int]) -> str:
        """``"price ≤ 100 AND stars ≥ 4"`` (predicates in library order; ``TRUE`` if empty)."""
        idx = sorted(rule)
        return " AND ".join(str(self.predicates[i]) for i in idx) if idx else "TRUE"

    def parse(self, text: str) -> frozenset:
        """The predicate-index set of a rule written as ``"price <= 100 AND stars >= 4"``."""
        out = set()
        for part in re.split(r"\s+AND\s+", text.strip(), flags=re.IGNORECASE):
            m = re.fullmatch(r"\s*([A-Za-z_][\w.]*)\s*(<=|>=|==|=|≤|≥)\s*([-+0-9.eE]+)\s*", part)
            if not m:
                raise ValueError(f"cannot parse predicate {part!r} (expected 'feature <= value', "
                                 "'feature >= value' or 'feature = value')")
            f, op, v = m.group(1), _PARSE_OPS[m.group(2)], float(m.group(3))
            hits = [i for i, p in enumerate(self.predicates)        # printed values have 4 digits
                    if p.feature == f and p.op == op
                    and (np.isclose(p.value, v) or float(f"{p.value:.4g}") == float(f"{v:.4g}"))]
            if not hits:
                raise ValueError(f"predicate {part.strip()!r} is not in the library; valid: "
                                 + ", ".join(str(p) for p in self.predicates))
            out.add(hits[0])
        return frozenset(out)

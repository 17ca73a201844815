"""Feature types, actionability rules and the inverse-MAD cost (chapter 14, notebook 02).

Every non-categorical value is min-max normalised to [0, 1] with known bounds; categorical and
ordinal features are one-hot; a mixed feature is a continuous value with special codes. The
:class:`DataHandler` maps a raw ``pandas.DataFrame`` to

* the *encoded* matrix the classifier reads (normalised values and one-hot blocks), and
* the *SPN* matrix the sum-product network reads (one column per variable: a normalised value
  or a category index; a mixed feature gives two columns, its code and its value; the target is
  the last column).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

__all__ = ["Contiguous", "Binary", "Categorical", "Mixed", "DataHandler", "MONOTONE"]

MONOTONE = (None, "increasing", "decreasing")
MAD_FLOOR = 1e-4


def _check_monotone(name: str, monotone: Any) -> None:
    if monotone not in MONOTONE:
        raise ValueError(f"feature {name!r}: monotone must be one of {MONOTONE}, got {monotone!r}")


@dataclass
class Contiguous:
    """A continuous or (``discrete=True``) integer feature with ``bounds`` (lo, hi) in raw units
    (``None``: the training range). Introduced in notebook 14/02."""

    name: str
    bounds: tuple[float, float] | None = None
    discrete: bool = False
    monotone: str | None = None
    mutable: bool = True

    def __post_init__(self) -> None:
        _check_monotone(self.name, self.monotone)


@dataclass
class Binary:
    """A two-valued feature; ``values`` are the raw (off, on) values (``None``: sorted unique)."""

    name: str
    values: tuple[Any, Any] | None = None
    monotone: str | None = None
    mutable: bool = True

    def __post_init__(self) -> None:
        _check_monotone(self.name, self.monotone)


@dataclass
class Categorical:
    """A categorical feature; ``ordered=True`` makes it ordinal (``values`` in increasing order),
    and only an ordinal feature may be monotone."""

    name: str
    values: Sequence[Any] | None = None
    ordered: bool = False
    monotone: str | None = None
    mutable: bool = True

    def __post_init__(self) -> None:
        _check_monotone(self.name, self.monotone)
        if self.monotone is not None and not self.ordered:
            raise ValueError(f"feature {self.name!r}: monotone needs ordered=True")


@dataclass
class Mixed:
    """A continuous value with special categorical ``codes`` (e.g. -1 = "not applicable").

    Encoded as one normalised value (0 when a code is active) plus a one-hot over
    ``codes + ["<value>"]``."""

    name: str
    codes: Sequence[Any] = field(default_factory=list)
    bounds: tuple[float, float] | None = None
    discrete: bool = False
    mutable: bool = True
    monotone: str | None = None

    def __post_init__(self) -> None:
        _check_monotone(self.name, self.monotone)
        if self.monotone is not None:
            raise ValueError(f"feature {self.name!r}: monotone mixed features are not supported")
        if not len(self.codes):
            raise ValueError(f"mixed feature {self.name!r} needs at least one special code")


FEATURE_TYPES = (Contiguous, Binary, Categorical, Mixed)


class DataHandler:
    """Feature specs fitted to training data: bounds, categories, MADs, encodings.

    Parameters
    ----------
    X : DataFrame of raw features; y : 0/1 labels (the SPN's last variable).
    specs : one spec per column of ``X`` (any column without a spec is an error).
    causal_inc : pairs (cause, effect): when the cause increases the effect must increase.
    greater_than : pairs (a, b): raw value of contiguous a >= raw value of contiguous b.

    Introduced in notebook 14/02.
    """

    def __init__(self, X: pd.DataFrame, y: Sequence[int], specs: Sequence[Any], *,
                 causal_inc: Sequence[tuple[str, str]] = (),
                 greater_than: Sequence[tuple[str, str]] = ()) -> None:
        if not isinstance(X, pd.DataFrame):
            raise TypeError("X must be a pandas DataFrame of raw features")
        y = np.asarray(y)
        if y.shape != (len(X),):
            raise ValueError(f"y must have shape ({len(X)},), got {y.shape}")
        if not set(np.unique(y)) <= {0, 1}:
            raise ValueError("y must hold 0/1 labels")
        for s in specs:
            if not isinstance(s, FEATURE_TYPES):
                raise TypeError(f"{s!r} is not a feature spec; use one of "
                                f"{[t.__name__ for t in FEATURE_TYPES]}")
        names = [s.name for s in specs]
        missing = sorted(set(X.columns) - set(names))
        extra = sorted(set(names) - set(X.columns))
        if missing or extra:
            raise ValueError(f"specs and columns differ: columns without a spec {missing}, "
                             f"specs without a column {extra}; columns are {list(X.columns)}")
        self.specs = list(specs)
        self.names = names
        self.by_name = {s.name: s for s in specs}
        for a, b in list(causal_inc) + list(greater_than):
            for n in (a, b):
                if n not in self.by_name:
                    raise ValueError(f"rule names unknown feature {n!r}; features: {names}")
        for a, b in greater_than:
            if not (isinstance(self.by_name[a], Contiguous) and isinstance(self.by_name[b], Contiguous)):
                raise ValueError("greater_than rules relate two Contiguous features")
        for c, e in causal_inc:
            if isinstance(self.by_name[c], (Mixed,)) or isinstance(self.by_name[e], (Mixed, Binary)):
                raise ValueError("causal_inc: causes must be Contiguous, Binary or ordinal; "
                                 "effects Contiguous or ordinal")
            for n in (c, e):
                s = self.by_name[n]
                if isinstance(s, Categorical) and not s.ordered:
                    raise ValueError(f"causal_inc: categorical {n!r} must be ordered")
        self.causal_inc = [tuple(p) for p in causal_inc]
        self.greater_than = [tuple(p) for p in greater_than]
        X = X[names]
        self._fit(X)
        E = self.encode(X)
        self.mad = self._mads(E)

    # ---------------------------------------------------------------- fitting
    def _fit(self, X: pd.DataFrame) -> None:
        self.info: dict[str, dict] = {}
        col = 0
        spn_col = 0
        for s in self.specs:
            v = X[s.name]
            if isinstance(s, Contiguous):
                lo, hi = s.bounds if s.bounds is not None else (float(v.min()), float(v.max()))
                if not hi > lo:
                    raise ValueError(f"feature {s.name!r}: bounds must satisfy lo < hi, got {(lo, hi)}")
                self.info[s.name] = dict(kind="cont", lo=float(lo), hi=float(hi), cols=[col],
                                         spn=[spn_col])
                col += 1
                spn_col += 1
            elif isinstance(s, Binary):
                vals = tuple(s.values) if s.values is not None else tuple(sorted(pd.unique(v)))
                if len(vals) != 2:
                    raise ValueError(f"binary feature {s.name!r} needs two values, got {vals}")
                self.info[s.name] = dict(kind="bin", values=list(vals), cols=[col], spn=[spn_col])
                col += 1
                spn_col += 1
            elif isinstance(s, Categorical):
                vals = list(s.values) if s.values is not None else sorted(pd.unique(v))
                unknown = set(pd.unique(v)) - set(vals)
                if unknown:
                    raise ValueError(f"feature {s.name!r}: values {sorted(map(str, unknown))} not in "
                                     f"its declared values {vals}")
                self.info[s.name] = dict(kind="cat", values=vals, cols=list(range(col, col + len(vals))),
                                         spn=[spn_col])
                col += len(vals)
                spn_col += 1
            else:  # Mixed
                codes = list(s.codes)
                cont = v[~v.isin(codes)].astype(float)
                lo, hi = s.bounds if s.bounds is not None else (float(cont.min()), float(cont.max()))
                self.info[s.name] = dict(kind="mixed", lo=float(lo), hi=float(hi), codes=codes,
                                         cols=list(range(col, col + len(codes) + 2)),
                                         spn=[spn_col, spn_col + 1])
                col += len(codes) + 2
                spn_col += 2
        self.n_encoded = col
        self.n_spn = spn_col + 1  # + target

    def _mads(self, E: np.ndarray) -> np.ndarray:
        """Inverse-MAD weights per encoded column: MAD of the normalised values for continuous
        columns (fallback 1.48 std, then 1), 1.48 std for one-hot / binary columns; floor 1e-4."""
        mad = np.ones(E.shape[1])
        for s in self.specs:
            info = self.info[s.name]
            for j, c in enumerate(info["cols"]):
                x = E[:, c]
                is_value = info["kind"] == "cont" or (info["kind"] == "mixed" and j == 0)
                if is_value:
                    m = float(np.median(np.abs(x - np.median(x))))
                    if m <= 0:
                        m = 1.48 * float(np.std(x))
                    if m <= 0:
                        m = 1.0
                else:
                    m = 1.48 * float(np.std(x))
                mad[c] = max(m, MAD_FLOOR)
        return mad

    # ---------------------------------------------------------------- encodings
    def _norm(self, info: dict, v: np.ndarray) -> np.ndarray:
        return (np.asarray(v, dtype=float) - info["lo"]) / (info["hi"] - info["lo"])

    def _denorm(self, info: dict, z: np.ndarray, discrete: bool) -> np.ndarray:
        v = np.asarray(z, dtype=float) * (info["hi"] - info["lo"]) + info["lo"]
        return np.round(v) if discrete else v

    def _check_frame(self, X: pd.DataFrame) -> pd.DataFrame:
        if not isinstance(X, pd.DataFrame):
            raise TypeError("expected a pandas DataFrame of raw features")
        missing = [n for n in self.names if n not in X.columns]
        if missing:
            raise ValueError(f"columns {missing} are missing; expected {self.names}")
        return X[self.names]

    def encode(self, X: pd.DataFrame) -> np.ndarray:
        """Raw frame -> encoded matrix (normalised values, one-hot blocks) for the classifier."""
        X = self._check_frame(X)
        E = np.zeros((len(X), self.n_encoded))
        for s in self.specs:
            info, v = self.info[s.name], X[s.name].to_numpy()
            c = info["cols"]
            if info["kind"] == "cont":
                E[:, c[0]] = self._norm(info, v.astype(float))
            elif info["kind"] == "bin":
                bad = ~pd.Series(v).isin(info["values"]).to_numpy()
                if bad.any():
                    raise ValueError(f"feature {s.name!r}: values {sorted(set(map(str, v[bad])))} not "
                                     f"in {info['values']}")
                E[:, c[0]] = (v == info["values"][1]).astype(float)
            elif info["kind"] == "cat":
                idx = self._cat_index(s.name, info["values"], v)
                E[np.arange(len(X)), np.asarray(c)[idx]] = 1.0
            else:
                codes = info["codes"]
                is_code = pd.Series(v).isin(codes).to_numpy()
                vals = np.where(is_code, info["lo"], pd.to_numeric(pd.Series(v), errors="coerce"))
                E[:, c[0]] = np.where(is_code, 0.0, self._norm(info, vals.astype(float)))
                k = np.array([codes.index(x) if ic else len(codes) for x, ic in zip(v, is_code)])
                E[np.arange(len(X)), np.asarray(c[1:])[k]] = 1.0
        return E

    @staticmethod
    def _cat_index(name: str, values: list, v: np.ndarray) -> np.ndarray:
        lookup = {x: i for i, x in enumerate(values)}
        try:
            return np.array([lookup[x] for x in v], dtype=int)
        except KeyError as e:
            raise ValueError(f"feature {name!r}: value {e.args[0]!r} not in {values}") from None

    def decode(self, E: np.ndarray) -> pd.DataFrame:
        """Encoded matrix -> raw frame (one-hot argmax, denormalised values, discrete rounded)."""
        E = np.atleast_2d(np.asarray(E, dtype=float))
        if E.shape[1] != self.n_encoded:
            raise ValueError(f"encoded rows must have {self.n_encoded} columns, got {E.shape[1]}")
        out = {}
        for s in self.specs:
            info = self.info[s.name]
            c = info["cols"]
            if info["kind"] == "cont":
                out[s.name] = self._denorm(info, E[:, c[0]], s.discrete)
            elif info["kind"] == "bin":
                out[s.name] = np.where(E[:, c[0]] > 0.5, info["values"][1], info["values"][0])
            elif info["kind"] == "cat":
                out[s.name] = [info["values"][i] for i in E[:, c].argmax(axis=1)]
            else:
                k = E[:, c[1:]].argmax(axis=1)
                vals = self._denorm(info, E[:, c[0]], s.discrete)
                out[s.name] = [info["codes"][i] if i < len(info["codes"]) else vals[r]
                               for r, i in enumerate(k)]
        return pd.DataFrame(out, columns=self.names)

    def spn_matrix(self, X: pd.DataFrame, y: Sequence[int] | int) -> np.ndarray:
        """Raw frame and labels -> SPN matrix (normalised values / category indices; target last)."""
        X = self._check_frame(X)
        E = self.encode(X)
        S = np.zeros((len(X), self.n_spn))
        for s in self.specs:
            info = self.info[s.name]
            c, k = info["cols"], info["spn"]
            if info["kind"] in ("cont", "bin"):
                S[:, k[0]] = E[:, c[0]]
            elif info["kind"] == "cat":
                S[:, k[0]] = E[:, c].argmax(axis=1)
            else:
                S[:, k[0]] = E[:, c[1:]].argmax(axis=1)
                S[:, k[1]] = E[:, c[0]]
        S[:, -1] = np.broadcast_to(np.asarray(y), (len(X),))
        return S

    def spn_types(self) -> list[tuple[str, Any]]:
        """Per SPN variable: ("cont", n_levels or None) or ("cat", n_values); target last."""
        out: list[tuple[str, Any]] = []
        for s in self.specs:
            info = self.info[s.name]
            if info["kind"] == "cont":
                out.append(("cont", int(round(info["hi"] - info["lo"])) + 1 if s.discrete else None))
            elif info["kind"] == "bin":
                out.append(("cat", 2))
            elif info["kind"] == "cat":
                out.append(("cat", len(info["values"])))
            else:
                out.append(("cat", len(info["codes"]) + 1))
                out.append(("cont", int(round(info["hi"] - info["lo"])) + 1 if s.discrete else None))
        out.append(("cat", 2))
        return out

    # ---------------------------------------------------------------- cost and rules
    def distance(self, E0: np.ndarray, E: np.ndarray) -> np.ndarray:
        """Inverse-MAD L1 distance between encoded rows (the MIO's objective)."""
        E0, E = np.atleast_2d(E0), np.atleast_2d(E)
        return (np.abs(E - E0) / self.mad).sum(axis=1)

    def changed(self, x0: pd.DataFrame, X: pd.DataFrame, tol: float = 1e-6) -> np.ndarray:
        """Boolean matrix (rows of X, features): which features differ from the factual x0."""
        x0 = self._check_frame(x0).iloc[0]
        X = self._check_frame(X)
        out = np.zeros((len(X), len(self.names)), dtype=bool)
        for j, n in enumerate(self.names):
            a = X[n].to_numpy()
            if self.info[n]["kind"] == "cont":
                out[:, j] = np.abs(a.astype(float) - float(x0[n])) > tol * (
                    self.info[n]["hi"] - self.info[n]["lo"])
            else:
                out[:, j] = np.array([not _same(v, x0[n]) for v in a])
        return out

    def actionable(self, x0: pd.DataFrame, X: pd.DataFrame, tol: float = 1e-6) -> np.ndarray:
        """Whether each row of X respects immutability, monotonicity, causal-increase and
        greater-than rules relative to the factual x0."""
        x0r = self._check_frame(x0).iloc[0]
        X = self._check_frame(X)
        ch = self.changed(x0, X, tol)
        ok = np.ones(len(X), dtype=bool)

        def delta(n: str) -> np.ndarray:
            info = self.info[n]
            if info["kind"] == "cont":
                return (X[n].to_numpy().astype(float) - float(x0r[n])) / (info["hi"] - info["lo"])
            if info["kind"] == "bin":
                return (X[n].to_numpy() == info["values"][1]).astype(float) - float(
                    x0r[n] == info["values"][1])
            vals = info["values"]
            return np.array([vals.index(v) for v in X[n]]) - float(vals.index(x0r[n]))

        for j, s in enumerate(self.specs):
            if not s.mutable:
                ok &= ~ch[:, j]
            elif s.monotone == "increasing":
                ok &= delta(s.name) >= -tol
            elif s.monotone == "decreasing":
                ok &= delta(s.name) <= tol
        for c, e in self.causal_inc:
            ok &= ~((delta(c) > tol) & ~(delta(e) > tol))
        for a, b in self.greater_than:
            ok &= X[a].to_numpy().astype(float) >= X[b].to_numpy().astype(float) - tol
        return ok


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(np.isclose(float(a), float(b)))
    except (TypeError, ValueError):
        return a == b

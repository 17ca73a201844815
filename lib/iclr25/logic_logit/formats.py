"""Choice data in the two table layouts the field uses, into :class:`ChoiceData` (chapter 01).

- **wide**: one row per choice situation, one column per (attribute, alternative), a column naming
  the chosen alternative, optional availability columns (Biogeme's and xlogit's wide input,
  SwissMetro's own layout);
- **long**: one row per (situation, alternative) with a 0/1 chosen column (xlogit's, choice-learn's
  and R mlogit's long input). Offer sets may differ in size; they are padded.

Introduced with the chapter notebook ``01-logic-logit/03-real-choices`` (a user's own data).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .data import ChoiceData

__all__ = ["from_wide", "from_long"]


def _need(df, cols, what):
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise KeyError(f"{what}: no column {', '.join(map(repr, missing))} in the frame; it has "
                       f"{', '.join(map(str, df.columns))}")


def from_wide(df, alternatives: Sequence[str], attributes: Mapping[str, Mapping[str, str]], choice: str,
              availability: Mapping[str, str] | None = None) -> ChoiceData:
    """One row per choice situation into :class:`ChoiceData` with one slot per alternative.

    Parameters
    ----------
    alternatives
        The alternatives' labels, in slot order (``item_names``).
    attributes
        ``{feature: {alternative: column}}``; an alternative without a column for a feature gets
        0 there (e.g. a cost that only the car has, or an alternative-specific constant).
    choice
        The column holding the chosen alternative's label (one of ``alternatives``).
    availability
        ``{alternative: column}`` of truthy values where the alternative was offered (default: all
        offered). The chosen alternative must be offered.
    """
    alternatives = [str(a) for a in alternatives]
    if not alternatives or len(set(alternatives)) != len(alternatives):
        raise ValueError(f"alternatives must be distinct labels; got {alternatives}")
    if not attributes:
        raise ValueError("attributes is empty: give {feature: {alternative: column}}")
    cols = [c for m in attributes.values() for c in m.values()] + [choice]
    cols += list((availability or {}).values())
    _need(df, cols, "from_wide")
    for feat, m in attributes.items():
        bad = [a for a in m if str(a) not in alternatives]
        if bad:
            raise ValueError(f"attributes[{feat!r}] names unknown alternatives {bad}; valid: "
                             f"{', '.join(alternatives)}")
    n, J, d = len(df), len(alternatives), len(attributes)
    X = np.zeros((n, J, d))
    for k, (feat, m) in enumerate(attributes.items()):
        for a, col in m.items():
            X[:, alternatives.index(str(a)), k] = df[col].to_numpy(dtype=float)
    mask = np.ones((n, J), bool)
    for a, col in (availability or {}).items():
        if str(a) not in alternatives:
            raise ValueError(f"availability names unknown alternative {a!r}; valid: {', '.join(alternatives)}")
        mask[:, alternatives.index(str(a))] = df[col].to_numpy().astype(bool)
    labels = df[choice].astype(str).to_numpy()
    unknown = sorted(set(labels) - set(alternatives))
    if unknown:
        raise ValueError(f"column {choice!r} holds labels that are not alternatives: {unknown[:5]}; "
                         f"valid: {', '.join(alternatives)}")
    chosen = np.array([alternatives.index(x) for x in labels], dtype=np.int64)
    return ChoiceData(X, mask, chosen, tuple(attributes), tuple(alternatives),
                      meta={"format": "wide"})


def from_long(df, obs: str, alt: str, chosen: str, features: Sequence[str],
              alternatives: Sequence[str] | None = None) -> ChoiceData:
    """One row per (situation, alternative) into :class:`ChoiceData`.

    Parameters
    ----------
    obs, alt
        The columns identifying the choice situation and the alternative.
    chosen
        A 0/1 (or boolean) column: exactly one row of each situation is 1.
    features
        The item-feature columns.
    alternatives
        When given, slots are fixed alternatives in this order (``item_names``) and a situation
        offers the alternatives it has rows for. Otherwise slots follow the rows' order within
        each situation (offer sets such as search results) and are padded to the largest one.
    """
    features = list(features)
    _need(df, [obs, alt, chosen, *features], "from_long")
    if not features:
        raise ValueError("features is empty: name the item-feature columns")
    ids, first = np.unique(df[obs].to_numpy(), return_index=True)
    order = ids[np.argsort(first)]                  # situations in order of first appearance
    pos = {v: i for i, v in enumerate(order)}
    rows = df[obs].map(pos).to_numpy()
    F = df[features].to_numpy(dtype=float)
    y = df[chosen].to_numpy().astype(float)
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError(f"column {chosen!r} must be 0/1 (or boolean)")
    n = len(order)
    if alternatives is not None:
        alternatives = [str(a) for a in alternatives]
        labels = df[alt].astype(str).to_numpy()
        unknown = sorted(set(labels) - set(alternatives))
        if unknown:
            raise ValueError(f"column {alt!r} has alternatives {unknown[:5]} not in alternatives; "
                             f"valid: {', '.join(alternatives)}")
        slot = np.array([alternatives.index(x) for x in labels])
        J = len(alternatives)
    else:
        slot = np.zeros(len(df), np.int64)
        seen = np.zeros(n, np.int64)
        for r, i in enumerate(rows):
            slot[r], seen[i] = seen[i], seen[i] + 1
        J = int(seen.max()) if n else 0
    dup = np.zeros((n, J), np.int64)
    np.add.at(dup, (rows, slot), 1)
    if (dup > 1).any():
        i, j = np.argwhere(dup > 1)[0]
        raise ValueError(f"situation {order[i].item() if hasattr(order[i], 'item') else order[i]!r} "
                         f"has slot {j} twice (a repeated alternative)")
    X = np.zeros((n, J, len(features)))
    mask = np.zeros((n, J), bool)
    X[rows, slot], mask[rows, slot] = F, True
    picks = np.zeros(n)
    np.add.at(picks, rows, y)
    if (picks != 1).any():
        i = int(np.flatnonzero(picks != 1)[0])
        oid = order[i].item() if hasattr(order[i], "item") else order[i]
        raise ValueError(f"situation {oid!r} has {int(picks[i])} chosen rows; exactly one is "
                         "expected")
    choice = np.zeros(n, np.int64)
    hit = y == 1
    choice[rows[hit]] = slot[hit]
    return ChoiceData(X, mask, choice, tuple(features),
                      tuple(alternatives) if alternatives is not None else None,
                      meta={"format": "long", "obs_ids": order})

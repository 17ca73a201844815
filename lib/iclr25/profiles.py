"""The three scales every notebook runs at, and per-chapter config dataclasses.

``smoke``
    CI: a notebook runs in about 15 s (never more than 45 s).
``book``
    the rendered book: 1-2 min a notebook on 2 cores (never more than 5).
``paper``
    the paper's own scale (GPU or hours).

A notebook's parameters cell says ``profile = None``, which means ``$ICLR25_PROFILE``, else
``book``. Each chapter module turns a profile name into its own frozen config dataclass with
:func:`make_config`; explicit parameters (papermill's ``-p``) override the profile's values.

Example
-------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Cfg:
...     n_steps: int
...     lr: float = 1e-3
>>> TABLE = {"smoke": {"n_steps": 10}, "book": {"n_steps": 100}, "paper": {"n_steps": 1000}}
>>> make_config(Cfg, TABLE, "smoke", lr=None).n_steps   # None means "the profile's value"
10
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, TypeVar

__all__ = ["PROFILES", "DEFAULT_PROFILE", "ENV_VAR", "resolve", "make_config", "ProfileError"]

PROFILES: tuple[str, ...] = ("smoke", "book", "paper")
DEFAULT_PROFILE = "book"
ENV_VAR = "ICLR25_PROFILE"

T = TypeVar("T")


class ProfileError(ValueError):
    """An unknown profile or parameter name (the message lists the valid ones)."""


def resolve(profile: str | None = None) -> str:
    """The profile to use: ``profile`` if given, else ``$ICLR25_PROFILE``, else ``"book"``.

    Raises :class:`ProfileError` naming the valid profiles when the name is unknown.
    """
    name = profile if profile is not None else (os.environ.get(ENV_VAR) or DEFAULT_PROFILE)
    name = str(name).strip().lower()
    if name not in PROFILES:
        raise ProfileError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}")
    return name


def make_config(cls: type[T], table: Mapping[str, Mapping[str, Any]], profile: str | None = None,
                **overrides: Any) -> T:
    """Build ``cls`` (a dataclass) from ``table[profile]`` updated with ``overrides``.

    Overrides whose value is ``None`` are ignored (a notebook knob left at ``None`` keeps the
    profile's value). An override that is not a field of ``cls`` raises :class:`ProfileError`
    listing the valid names.
    """
    name = resolve(profile)
    missing = [p for p in PROFILES if p not in table]
    if missing:
        raise ProfileError(f"{cls.__name__}: the profile table lacks {', '.join(missing)}")
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ProfileError(
            f"unknown parameter(s) {', '.join(unknown)} for {cls.__name__}; "
            f"valid: {', '.join(sorted(fields))}")
    values = dict(table[name])
    values.update({k: v for k, v in overrides.items() if v is not None})
    # coerce numbers given as floats or strings from the command line (6e5 -> 600000)
    for f in dataclasses.fields(cls):
        if f.name in values and f.type in ("int", int) and isinstance(values[f.name], float):
            if not float(values[f.name]).is_integer():
                raise ProfileError(f"{cls.__name__}.{f.name} must be an integer, got {values[f.name]}")
            values[f.name] = int(values[f.name])
    return cls(**values)

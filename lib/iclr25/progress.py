"""Progress bars for slow loops, which the HTML build switches off.

Plain-text tqdm (never the widget flavour: widget bars put CDN scripts and a stale "0%" into the
rendered book). Set ``ICLR25_PROGRESS=0`` to silence every bar; ``make book`` does.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable, TypeVar

from tqdm.std import tqdm

__all__ = ["progress", "enabled"]

T = TypeVar("T")


def enabled() -> bool:
    """Whether bars are shown (``$ICLR25_PROGRESS`` is not ``0``/``false``/``off``)."""
    return os.environ.get("ICLR25_PROGRESS", "1").strip().lower() not in {"0", "false", "off", "no"}


def progress(iterable: Iterable[T] | None = None, *, desc: str | None = None,
             total: int | None = None, **kwargs) -> tqdm:
    """A ``tqdm`` bar over ``iterable`` (or a manual bar with ``total``), disabled when
    :func:`enabled` is false."""
    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("mininterval", 0.5)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(iterable, desc=desc, total=total, disable=not enabled(), **kwargs)

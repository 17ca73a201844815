"""Does a fresh clone reproduce the committed book? Re-run notebooks in an empty environment.

The committed results (``results/``, :mod:`iclr25.ledger`) are what a new user should get from
``make book`` on a fresh clone. A developer's machine holds caches a fresh clone does not have:
the dequantized models under ``~/.cache/iclr25``, trained zoos and adapters under ``runs/``,
matplotlib's and numba's caches under ``$HOME``. A result that depends on any of them (built by
older code, or built differently on a first run than on a warm one) is not reproducible, and
re-running it on the developer's machine would not show it.

:func:`fresh_environment` makes an empty ``HOME``, ``ICLR25_CACHE`` and ``ICLR25_RUNS_DIR`` for the
kernels; :func:`run_fresh` executes a notebook at the book profile there (through
:func:`iclr25.batch.run_notebook`), with a per-cell time limit from the notebook's recorded time
(:func:`cell_timeout`) and one re-run when a cell times out (a loaded machine is not a failed
result); :func:`differences` compares the re-run with the committed result: verdicts that moved,
numbers beyond their stated ``tol`` and, listed apart, numbers without a ``tol`` that moved.

``iclr25 reproduce`` (``make reproduce``) runs this over the book or named notebooks, in the
book's order so that a notebook finds what an earlier one of its chapter saved (``runs/``), and
``iclr25 verify-results`` (CI, ``make verify``) runs its pick the same way.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

__all__ = ["fresh_environment", "cell_timeout", "run_fresh", "differences", "Outcome",
           "FLOOR_S", "FACTOR"]

#: a cell may always run this long, whatever the notebook's recorded time
FLOOR_S = 600.0
#: ... and this many times the notebook's whole recorded book-profile time
FACTOR = 5.0


def fresh_environment(base: str | os.PathLike | None = None) -> dict[str, str]:
    """Environment variables that give a kernel nothing a fresh clone would not have: an empty
    ``HOME`` (matplotlib's font cache, ``~/.cache``, ``~/.config``), ``ICLR25_CACHE`` (the
    dequantized models, activation caches) and ``ICLR25_RUNS_DIR`` (what notebooks save for
    later ones of their chapter), all under ``base`` (default: a new temporary folder). One
    environment serves a whole sequence of notebooks, as one ``make book`` does."""
    base = Path(base) if base is not None else Path(tempfile.mkdtemp(prefix="iclr25-fresh-"))
    env = {"HOME": base / "home", "ICLR25_CACHE": base / "cache", "ICLR25_RUNS_DIR": base / "runs",
           "MPLCONFIGDIR": base / "home" / ".config" / "matplotlib"}
    for p in env.values():
        p.mkdir(parents=True, exist_ok=True)
    return {k: str(v) for k, v in env.items()}


def cell_timeout(recorded_s: float | None, factor: float = FACTOR, floor: float = FLOOR_S) -> int:
    """Seconds one cell may run: ``factor`` times the notebook's recorded book-profile time
    (``elapsed_s`` of its committed result), never less than ``floor``. Generous on purpose: a
    loaded laptop runs a notebook several times slower, and a time-out says nothing about the
    result.

    >>> cell_timeout(145.9), cell_timeout(None), cell_timeout(10.0, floor=60)
    (730, 600, 60)
    """
    return math.ceil(max(float(floor), float(factor) * float(recorded_s or 0.0)))


def _timed_out(error: str | None) -> bool:
    return bool(error) and "timeout" in error.split(":", 1)[0].lower()


@dataclass
class Outcome:
    """One notebook re-run in a fresh environment and compared with its committed result."""

    notebook: str
    ok: bool                         # ran to the end (after at most one re-run on a time-out)
    error: str | None
    duration_s: float
    committed_s: float | None
    attempts: int
    verdicts: list[str] = field(default_factory=list)     # verdicts that moved (or claims gone)
    beyond_tol: list[str] = field(default_factory=list)   # numbers beyond their tol
    untoleranced: list[str] = field(default_factory=list) # numbers without a tol that moved
    result_file: Path | None = None

    @property
    def reproduced(self) -> bool:
        """Ran, every verdict as committed, every number within its tolerance."""
        return self.ok and not self.verdicts and not self.beyond_tol

    def to_dict(self) -> dict:
        return {"notebook": self.notebook, "ok": self.ok, "error": self.error,
                "duration_s": self.duration_s, "committed_s": self.committed_s,
                "attempts": self.attempts, "reproduced": self.reproduced,
                "verdicts": self.verdicts, "beyond_tol": self.beyond_tol,
                "untoleranced": self.untoleranced,
                "result_file": str(self.result_file) if self.result_file else None}


def differences(committed: Mapping, rerun: Mapping) -> tuple[list[str], list[str], list[str]]:
    """``(verdicts, beyond_tol, untoleranced)``: what ``rerun`` changes of ``committed``
    (:func:`iclr25.ledger.compare`, split into moved verdicts and numbers beyond their tol, and
    :func:`iclr25.ledger.moved_untoleranced`)."""
    from . import ledger

    moved = ledger.compare(committed, rerun)
    tol = [m for m in moved if m.startswith(("moved beyond tol", "not comparable"))]
    return [m for m in moved if m not in tol], tol, ledger.moved_untoleranced(committed, rerun)


def run_fresh(ident: str, env: Mapping[str, str], out_dir: str | os.PathLike,
              committed: Mapping | None = None, *, factor: float = FACTOR,
              floor: float = FLOOR_S) -> Outcome:
    """Execute ``ident`` (``chapter/notebook``) at the book profile with the kernel environment
    ``env`` (:func:`fresh_environment`) into ``out_dir``, and compare it with ``committed`` (its
    committed result; None: nothing to compare). A cell that times out (:func:`cell_timeout` of
    the committed time) gets the whole notebook re-run once before it counts as failed."""
    from . import batch, ledger

    committed_s = (committed or {}).get("elapsed_s")
    timeout = cell_timeout(committed_s, factor, floor)
    chapter, notebook = ident.split("/", 1)
    attempts, total = 0, 0.0
    while True:
        attempts += 1
        folder = Path(out_dir) / (f"attempt-{attempts}" if attempts > 1 else "")
        res = batch.run_notebook(ident, profile=ledger.LEDGER_PROFILE, out_dir=folder,
                                 timeout=timeout, env=env)
        total += res.duration_s
        if res.ok or not _timed_out(res.error) or attempts >= 2:
            break
    saved = res.out_dir / chapter / f"{notebook}.json"
    out = Outcome(ident, res.ok, res.error, round(total, 1), committed_s, attempts,
                  result_file=saved if saved.is_file() else None)
    if not saved.is_file():
        out.verdicts.append("the re-run saved no result")
    elif committed is not None:
        out.verdicts, out.beyond_tol, out.untoleranced = differences(
            committed, json.loads(saved.read_text()))
    return out

"""A paper's claims as checks that can fail, saved for the scorecard.

A notebook states each claim of the paper it reproduces: the claim in words, its ``kind``, where
the paper makes it (``"Table 2"``, ``"Fig. 3"``), the paper's number, ours (from this run, never
typed in), whether it holds, and whether it *must* hold at the profile being run. A claim that
cannot hold at small scale is recorded with ``must_hold=False`` and the reason in ``note`` --
never dropped.

``kind`` is required:

- ``"finding"``: a result of the paper that could have come out otherwise in our run -- a
  comparison against a baseline a researcher of the field would call fair, a rate, a sign, a
  shape, a number within a tolerance. The scorecard counts findings.
- ``"check"``: a property guaranteed by construction, an identity, or an implementation agreement
  (fast path = reference). It belongs in the unit tests; where it also helps the reader it stays
  in the notebook, shown apart and never counted as a reproduction.

The notebook ends with :meth:`Claims.save` (JSON under ``results/<chapter>/<notebook>.json``) and
:meth:`Claims.assert_all`, which raises :class:`ClaimFailed` listing the must-hold claims that
failed, so a wrong result fails the notebook (and CI).

Result file schema (``"schema": 2``; schema 1, without ``kind``, is still read, its claims as
``kind: "unclassified"``)::

    {
      "schema": 2,
      "chapter": "18-relu-landscape",        # notebooks/<chapter>/
      "notebook": "01-saddle-to-saddle",     # file stem
      "profile": "smoke" | "book" | "paper",
      "parameters": {...},                   # the notebook's knobs as run
      "metrics": {"final_loss": 0.0279, ...},# scalars a sweep collects
      "created": "2026-11-30T12:00:00+00:00",
      "elapsed_s": 83.2,                     # seconds from the kernel's start to the save
      "inputs": {"digest": str, "files": {path: sha256}},   # see iclr25.ledger; null outside the repo
      "claims": [
        {"claim": str, "kind": "finding" | "check", "source": str,
         "paper": str | number | null, "ours": str | number | null,
         "holds": bool, "must_hold": bool, "note": str,
         "tol": number | null}               # how far "ours" may move between runs (absolute)
      ]
    }

Book-profile results are committed under ``results/`` (the ledger, :mod:`iclr25.ledger`): the
book's scorecard and the README read them, and ``iclr25 check-results`` fails when one is stale.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import numbers
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from . import paths, profiles

__all__ = ["Claim", "Claims", "ClaimFailed", "load_results", "upgrade", "SCHEMA", "KINDS"]

SCHEMA = 2
#: the kinds of claim (see the module docstring); schema-1 results read as "unclassified"
KINDS = ("finding", "check")
UNCLASSIFIED = "unclassified"


class ClaimFailed(AssertionError):
    """Raised by :meth:`Claims.assert_all` when a claim that must hold does not."""


def _plain(x: Any) -> Any:
    """JSON-friendly version of numpy scalars/arrays and other simple values."""
    if x is None or isinstance(x, (str, bool)):
        return x
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        x = x.item()
    if isinstance(x, bool):
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    if hasattr(x, "tolist"):
        return _plain(x.tolist())
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    return str(x)


@dataclass
class Claim:
    """One checked claim (see the module docstring for the fields)."""

    claim: str
    kind: str
    source: str
    paper: Any
    ours: Any
    holds: bool
    must_hold: bool = True
    note: str = ""
    tol: float | None = None

    @property
    def status(self) -> str:
        """``"held"``, ``"FAILED"`` (must hold and did not) or ``"not held"`` (recorded, not
        required at this profile)."""
        return "held" if self.holds else ("FAILED" if self.must_hold else "not held")


@dataclass
class Claims:
    """The claims of one notebook run.

    Parameters
    ----------
    chapter, notebook:
        ``"18-relu-landscape"``, ``"01-saddle-to-saddle"``: where the result file goes.
    profile:
        The profile being run (``None``: resolved as in :func:`iclr25.profiles.resolve`).
    parameters:
        The notebook's knobs, saved beside the claims.
    """

    chapter: str
    notebook: str
    profile: str | None = None
    parameters: dict = field(default_factory=dict)
    items: list[Claim] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.profile = profiles.resolve(self.profile)

    def check(self, claim: str, *, kind: str | None = None, source: str, paper: Any, ours: Any,
              holds: bool, must_hold: bool | Iterable[str] = True, note: str = "",
              tol: float | None = None) -> Claim:
        """Record one claim.

        ``kind`` (required): ``"finding"``, a result of the paper that could have come out
        otherwise in this run, or ``"check"``, a property that holds by construction, an identity
        or fast path = reference (see the module docstring). ``must_hold`` is a bool or the profiles in which the claim must hold, e.g.
        ``("book", "paper")`` for a claim that needs the book's scale. ``holds`` must be
        computed from this run's numbers. ``tol``: how far ``ours`` (a number or a list of
        numbers) may move when the same profile is re-run (absolute, elementwise); CI re-runs
        book notebooks and fails beyond it (:func:`iclr25.ledger.compare`).
        """
        if kind not in KINDS:
            raise ValueError(
                f"kind must be one of {', '.join(map(repr, KINDS))} for claim {claim!r}, got {kind!r}: "
                "'finding' = a result of the paper that could have come out otherwise in this run "
                "(against a fair baseline, a rate, a sign, a number within a tolerance); 'check' = "
                "true by construction, an identity, or fast path = reference")
        if tol is not None and not (isinstance(tol, numbers.Real) and float(tol) >= 0):
            raise ValueError(f"tol must be a non-negative number or None, got {tol!r}")
        if not isinstance(must_hold, bool):
            wanted = tuple(must_hold)
            bad = [p for p in wanted if p not in profiles.PROFILES]
            if bad:
                raise profiles.ProfileError(
                    f"unknown profile(s) {bad} in must_hold; valid: {', '.join(profiles.PROFILES)}")
            must_hold = self.profile in wanted
        item = Claim(claim=claim, kind=kind, source=source, paper=_plain(paper), ours=_plain(ours),
                     holds=bool(holds), must_hold=bool(must_hold), note=note,
                     tol=None if tol is None else float(tol))
        self.items = [c for c in self.items if c.claim != claim] + [item]
        return item

    def metric(self, name: str, value: Any) -> None:
        """Record a scalar metric (collected by ``iclr25 sweep``)."""
        self.metrics[name] = _plain(value)

    @property
    def failed(self) -> list[Claim]:
        """Must-hold claims that did not hold."""
        return [c for c in self.items if c.must_hold and not c.holds]

    def table(self):
        """The claims as a ``pandas.DataFrame`` (paper vs ours), for display."""
        import pandas as pd

        rows = [{"claim": c.claim, "kind": c.kind, "source": c.source, "paper": c.paper,
                 "ours": c.ours,
                 "holds": "yes" if c.holds else "no",
                 "must hold": "yes" if c.must_hold else "no", "status": c.status,
                 "note": c.note} for c in self.items]
        return pd.DataFrame(rows, columns=["claim", "kind", "source", "paper", "ours", "holds",
                                           "must hold", "status", "note"])

    def _repr_html_(self) -> str:
        """The table, a failed must-hold row marked (red, status ``FAILED``) and a banner above
        it when any failed, so the rendered page shows what the last cell will raise about."""
        html = self.table().to_html(index=False, escape=True)
        for c in self.failed:
            cell = f"<td>{_html_escape(c.claim)}</td>"
            html = html.replace("<tr>\n      " + cell,
                                '<tr class="iclr25-claim-failed" style="background:#fdd">\n      '
                                + cell, 1)
        if self.failed:
            html = (f'<p class="iclr25-claims-failed"><strong>{len(self.failed)} claim(s) that must '
                    f"hold at profile {self.profile!r} failed</strong> (rows marked FAILED); the "
                    "notebook's last cell raises.</p>\n" + html)
        return html

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA, "chapter": self.chapter, "notebook": self.notebook,
            "profile": self.profile, "parameters": _plain(self.parameters),
            "metrics": _plain(self.metrics),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "elapsed_s": _elapsed(),
            "inputs": _inputs(self.chapter, self.notebook),
            "claims": [asdict(c) for c in self.items],
        }

    def save(self, directory: str | Path | None = None) -> Path:
        """Write ``<directory>/<chapter>/<notebook>.json`` (default directory:
        :func:`iclr25.paths.results_dir`) and return its path."""
        base = Path(directory) if directory is not None else paths.results_dir()
        out = base / self.chapter / f"{self.notebook}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return out

    def assert_all(self) -> None:
        """Raise :class:`ClaimFailed` listing every must-hold claim that failed."""
        if not self.items:
            raise ClaimFailed(f"{self.chapter}/{self.notebook}: no claims were recorded")
        failed = self.failed
        if failed:
            lines = "\n".join(f"  - {c.claim} ({c.source}): paper {c.paper}, ours {c.ours}"
                              for c in failed)
            raise ClaimFailed(
                f"{len(failed)} claim(s) that must hold at profile {self.profile!r} failed:\n{lines}")


def _html_escape(text: str) -> str:
    import html

    return html.escape(str(text), quote=False)


def _elapsed() -> float | None:
    """Seconds since this process (the notebook's kernel) started; None when unknown."""
    try:
        import psutil

        return round(time.time() - psutil.Process(os.getpid()).create_time(), 1)
    except Exception:  # noqa: BLE001 - a missing psutil only loses the timing
        return None


def _inputs(chapter: str, notebook: str) -> dict | None:
    """The ledger's input hashes of ``notebooks/<chapter>/<notebook>.ipynb``
    (:func:`iclr25.ledger.inputs_record`); None when that notebook is not in a checkout."""
    from . import ledger

    try:
        return ledger.inputs_record(chapter, notebook)
    except (FileNotFoundError, SyntaxError, ValueError):
        return None


def upgrade(data: dict) -> dict:
    """A result dict in the current schema: a schema-1 file's claims get
    ``kind: "unclassified"`` (they were written before claims had a kind)."""
    schema = data.get("schema")
    if schema == SCHEMA:
        return data
    if schema == 1:
        claims = [{**c, "kind": c.get("kind") or UNCLASSIFIED} for c in data.get("claims", [])]
        return {**data, "schema": SCHEMA, "claims": claims}
    raise ValueError(f"schema {schema!r}, expected {SCHEMA} (or 1)")


def load_results(directory: str | Path | None = None) -> list[dict]:
    """All result files under ``directory`` (default: ``results/``), sorted by chapter and
    notebook, in the current schema (:func:`upgrade`)."""
    base = Path(directory) if directory is not None else paths.results_dir()
    out = []
    for p in sorted(base.glob("*/*.json")):
        if not p.parent.name[:2].isdigit():  # results/robustness/, results/bench/ ...
            continue
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: not a valid claims file ({e})") from e
        try:
            out.append(upgrade(data))
        except ValueError as e:
            raise ValueError(f"{p}: {e}") from e
    return out

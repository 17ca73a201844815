"""Pre-registered claims: each chapter's registry, the verdict rule, and the amendment guard.

A chapter's registry ``book/claims/NN-slug.yaml`` lists the paper's claims *before* the runs that
judge them. A notebook hands over measurements (replicates of our statistic and of its control);
the registry's rule, not the notebook, turns them into a verdict:

``reproduced``
    the 95% interval of the effect (ours minus control, paired where the replicates pair) lies
    beyond the registered margin in the paper's direction (or inside the tolerance, for a
    ``within`` claim);
``not reproduced``
    it lies on the other side (or wholly outside the tolerance);
``inconclusive``
    it straddles the margin: our run cannot tell (one replicate always is: an interval needs
    several);
``out of reach``
    the entry is testable only at the ``paper`` profile, for the reason it states.

A registry file::

    chapter: 18-relu-landscape
    registered: 2026-12-07
    claims:
      - id: escape-neurons
        notebook: 01-saddle-to-saddle
        claim: Escape neurons appear at every saddle the flow visits.
        source: Thm. 2
        paper: "all saddles"
        kind: finding                  # finding | check
        statistic: fraction of saddles with an escape neuron, per training seed
        control: {kind: chance, describe: "a random neuron's rate", value: 0.25}
        direction: greater             # greater | less | within
        margin: 0.0                    # greater/less: the effect must clear it
        tolerance: null                # within: |effect| <= tolerance
        replication: {unit: seeds, n: 3}
        interval: t                    # t | bootstrap (percentile, 2000 draws)
        profile: book                  # book | paper
        reason: null                   # why a paper-profile entry is out of reach at book scale
        registered: 2026-12-07
        amendments: []
        supersedes: "the claim's words in results written before the registry (migration)"
        note: null

Changing an entry's test after a result was seen is an **amendment**, appended to its
``amendments`` list (``date``, ``field``, ``old``, ``new``, ``why``), never an edit in place:
:func:`unamended_changes` compares a registry with its last committed version and names every
guarded field that changed without one; ``iclr25 check-results`` fails on it
(:func:`iclr25.ledger.check`). Each judged result records :func:`entry_hash` of the entry it was
judged by, so a result judged by an entry that changed since is stale.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["Entry", "Judgement", "load", "load_file", "registry_file", "entry_hash", "judge",
           "interval", "unamended_changes", "committed_version", "check_registries", "Registry",
           "Finding", "RegisteredCheck", "Summary",
           "VERDICTS", "DIRECTIONS", "GUARDED", "RegistryError"]

REGISTRY_DIR = Path("book") / "claims"
KINDS = ("finding", "check")
DIRECTIONS = ("greater", "less", "within")
INTERVALS = ("t", "bootstrap")
UNITS = ("seeds", "splits", "bootstrap", "items", "none")
PROFILES = ("book", "paper")
VERDICTS = ("reproduced", "not reproduced", "inconclusive", "out of reach")
#: the fields of an entry that decide its verdict: changing one needs an amendment
GUARDED = ("kind", "statistic", "control", "direction", "margin", "tolerance", "replication",
           "interval", "profile", "level")
LEVEL = 0.95
N_BOOT = 2000


class RegistryError(ValueError):
    """A malformed registry, an unknown claim id, or measurements its entry cannot judge."""


@dataclass(frozen=True)
class Entry:
    """One registered claim (see the module docstring for the fields)."""

    id: str
    notebook: str
    claim: str
    source: str
    paper: Any
    kind: str
    statistic: str
    registered: str
    control: Mapping[str, Any] | None = None
    direction: str = "greater"
    margin: float = 0.0
    tolerance: float | None = None
    replication: Mapping[str, Any] | None = None
    interval: str = "t"
    level: float = LEVEL
    profile: str = "book"
    reason: str | None = None
    amendments: tuple = ()
    supersedes: str | None = None   # the claim's text in results written before the registry
    note: str | None = None         # what a reader needs to read the test (not part of it)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "") -> "Entry":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise RegistryError(f"{where}: unknown field(s) {', '.join(unknown)}; valid: "
                                f"{', '.join(sorted(known))}")
        missing = [k for k in ("id", "notebook", "claim", "source", "paper", "kind", "statistic",
                               "registered") if k not in d]
        if missing:
            raise RegistryError(f"{where}: entry {d.get('id', '?')!r} lacks {', '.join(missing)}")
        e = cls(**{**d, "registered": str(d["registered"]),
                   "amendments": tuple(d.get("amendments") or ())})
        e.validate(where)
        return e

    def validate(self, where: str = "") -> None:
        at = f"{where}: {self.id}"
        if self.kind not in KINDS:
            raise RegistryError(f"{at}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.profile not in PROFILES:
            raise RegistryError(f"{at}: profile must be one of {', '.join(PROFILES)}")
        if self.profile == "paper" and not self.reason:
            raise RegistryError(f"{at}: a paper-profile entry states why it is out of reach (reason)")
        if self.kind == "check":
            return
        if self.direction not in DIRECTIONS:
            raise RegistryError(f"{at}: direction must be one of {', '.join(DIRECTIONS)}")
        if self.direction == "within" and not (self.tolerance is not None and self.tolerance >= 0):
            raise RegistryError(f"{at}: a 'within' finding needs a non-negative tolerance")
        if not self.control or "kind" not in self.control:
            raise RegistryError(f"{at}: a finding names its control (control: {{kind: ..., "
                                "describe: ...}}): chance, baseline, random, cross-item or null")
        rep = self.replication or {}
        if rep.get("unit") not in UNITS or int(rep.get("n", 0)) < 1:
            raise RegistryError(f"{at}: replication needs a unit ({', '.join(UNITS)}) and n >= 1")
        if self.interval not in INTERVALS:
            raise RegistryError(f"{at}: interval must be one of {', '.join(INTERVALS)}")

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["control"] = dict(self.control) if self.control else None
        out["replication"] = dict(self.replication) if self.replication else None
        out["amendments"] = [dict(a) for a in self.amendments]
        return out


def entry_hash(entry: Entry) -> str:
    """SHA-256 (16 hex digits) of everything that decides the entry's verdict, its amendments
    included: a result records it, and is stale once the entry changes."""
    d = entry.as_dict()
    body = {k: d[k] for k in ("id", "notebook", "kind", *GUARDED, "amendments")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _root() -> Path:
    from . import paths

    return paths.repo_root()


def registry_file(chapter: str, root: Path | None = None) -> Path:
    """``<root>/book/claims/<chapter>.yaml``."""
    return (root or _root()) / REGISTRY_DIR / f"{chapter}.yaml"


def _parse(text: str, where: str) -> dict[str, Entry]:
    import yaml

    data = yaml.safe_load(text) or {}
    items = data.get("claims") or []
    out: dict[str, Entry] = {}
    for d in items:
        e = Entry.from_dict(d, where)
        if e.id in out:
            raise RegistryError(f"{where}: claim id {e.id!r} registered twice")
        out[e.id] = e
    return out


def load_file(path: str | Path) -> dict[str, Entry]:
    """The entries of one registry file, by id."""
    path = Path(path)
    return _parse(path.read_text(), str(path))


def load(chapter: str, root: Path | None = None) -> dict[str, Entry]:
    """The registry of ``chapter`` (``"18-relu-landscape"``), by id; a missing file is a
    FileNotFoundError naming where it should be."""
    f = registry_file(chapter, root)
    if not f.is_file():
        raise FileNotFoundError(f"chapter {chapter} has no claims registry {f}")
    return load_file(f)


# ---------------------------------------------------------------------------------------------
# the verdict rule


def _as_array(x: Any) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise RegistryError(f"measurements must be finite numbers, got {x!r}")
    return a


def interval(ours: Any, control: Any = 0.0, *, method: str = "t", level: float = LEVEL,
             paired: bool | None = None, seed: int = 0) -> tuple[float, float, float, bool]:
    """``(effect, low, high, paired)``: the mean effect ``ours - control`` and its ``level``
    interval over the replicates. ``control`` is a number (a chance level, a closed form) or
    replicates; replicates of the same length pair (``paired=None``: whenever they can), and the
    interval is then over the per-replicate differences. ``method``: ``"t"`` (Student t) or
    ``"bootstrap"`` (percentile, :data:`N_BOOT` draws, seeded). One replicate gives an infinite
    interval: nothing can be concluded from it.

    >>> e, lo, hi, p = interval([0.9, 0.8, 1.0], 0.5)
    >>> round(e, 2), round(lo, 3), round(hi, 3), p
    (0.4, 0.152, 0.648, False)
    """
    from scipy import stats

    a = _as_array(ours)
    c = _as_array(control)
    can_pair = c.size == a.size and c.size > 1
    if paired and not can_pair:
        raise RegistryError(f"paired replicates need equal lengths > 1, got {a.size} and {c.size}")
    paired = can_pair if paired is None else bool(paired)
    if c.size == 1:
        diffs, other = a - c[0], None
    elif paired:
        diffs, other = a - c, None
    else:
        diffs, other = a, c
    effect = float(diffs.mean() - (other.mean() if other is not None else 0.0))
    n = diffs.size
    if n < 2:
        return effect, -math.inf, math.inf, paired
    if method == "t":
        var = diffs.var(ddof=1) / n + (other.var(ddof=1) / other.size if other is not None else 0.0)
        se = math.sqrt(var)
        dof = n - 1 if other is None else min(n, other.size) - 1  # conservative Welch
        q = float(stats.t.ppf(0.5 + level / 2, dof))
        return effect, effect - q * se, effect + q * se, paired
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        boot = diffs[rng.integers(0, n, (N_BOOT, n))].mean(axis=1)
        if other is not None:
            boot = boot - other[rng.integers(0, other.size, (N_BOOT, other.size))].mean(axis=1)
        lo, hi = np.quantile(boot, [0.5 - level / 2, 0.5 + level / 2])
        return effect, float(lo), float(hi), paired
    raise RegistryError(f"unknown interval method {method!r}; valid: {', '.join(INTERVALS)}")


@dataclass
class Judgement:
    """The verdict of one finding, with what it was judged from."""

    id: str
    verdict: str
    ours: list
    control: list | float | None
    effect: float | None
    low: float | None
    high: float | None
    paired: bool
    entry_hash: str
    note: str = ""

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _verdict(entry: Entry, lo: float, hi: float) -> str:
    if entry.direction == "greater":
        return ("reproduced" if lo > entry.margin else
                "not reproduced" if hi < entry.margin else "inconclusive")
    if entry.direction == "less":
        return ("reproduced" if hi < -entry.margin else
                "not reproduced" if lo > -entry.margin else "inconclusive")
    tol = float(entry.tolerance)
    if -tol <= lo and hi <= tol:
        return "reproduced"
    if hi < -tol or lo > tol:
        return "not reproduced"
    return "inconclusive"


def judge(entry: Entry, ours: Any = None, control: Any = None, *, profile: str = "book",
          paired: bool | None = None) -> Judgement:
    """The registry's verdict on ``entry`` from replicates ``ours`` against ``control`` (a
    number or replicates; default: the control's registered ``value``). A ``paper``-profile
    entry run below the paper profile is ``out of reach``, whatever was measured."""
    h = entry_hash(entry)
    if entry.kind != "finding":
        raise RegistryError(f"{entry.id} is a check, not a finding: record it with claims.check")
    if entry.profile == "paper" and profile != "paper":
        return Judgement(entry.id, "out of reach", [] if ours is None else _as_array(ours).tolist(),
                         None, None, None, None, False, h, note=str(entry.reason))
    if ours is None:
        raise RegistryError(f"{entry.id}: no measurements (ours=...) to judge")
    if control is None:
        control = (entry.control or {}).get("value")
        if control is None:
            raise RegistryError(f"{entry.id}: the registry gives no control value; pass "
                                "control=<replicates or number> measured in this run")
    effect, lo, hi, was_paired = interval(ours, control, method=entry.interval,
                                          level=entry.level, paired=paired)
    c = _as_array(control)
    return Judgement(entry.id, _verdict(entry, lo, hi), _as_array(ours).tolist(),
                     float(c[0]) if c.size == 1 else c.tolist(), effect, lo, hi, was_paired, h)


# ---------------------------------------------------------------------------------------------
# amendments


def committed_version(path: Path, root: Path | None = None, rev: str = "HEAD") -> str | None:
    """The text of ``path`` at git revision ``rev`` (None when it is not committed there or git is
    unavailable)."""
    root = root or _root()
    try:
        rel = Path(path).resolve().relative_to(root.resolve()).as_posix()
        out = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=root, capture_output=True,
                             text=True)
    except (OSError, ValueError):
        return None
    return out.stdout if out.returncode == 0 else None


def unamended_changes(old: Mapping[str, Entry], new: Mapping[str, Entry]) -> list[str]:
    """Guarded fields (:data:`GUARDED`) of entries present in both ``old`` and ``new`` that
    changed without an amendment naming the field; and entries that were removed. A new entry
    is no change (it is registered now, before its run)."""
    problems = []
    for cid, o in old.items():
        n = new.get(cid)
        if n is None:
            problems.append(f"{cid}: removed from the registry (a claim is amended, never dropped)")
            continue
        od, nd = o.as_dict(), n.as_dict()
        changed = [k for k in GUARDED if od.get(k) != nd.get(k)]
        if not changed:
            continue
        added = list(n.amendments[len(o.amendments):]) if tuple(n.amendments[:len(o.amendments)]) \
            == tuple(o.amendments) else None
        if added is None:
            problems.append(f"{cid}: earlier amendments were edited (they are appended, never changed)")
            continue
        covered = {str(a.get("field")) for a in added if a.get("date") and a.get("why")}
        for k in changed:
            if k not in covered:
                problems.append(f"{cid}: {k} changed from {od.get(k)!r} to {nd.get(k)!r} without an "
                                "amendment (append {date, field, old, new, why} to its amendments)")
    return problems


def check_registries(root: Path | None = None, rev: str = "HEAD") -> list[str]:
    """Every registry under ``book/claims/``: it parses, and against its version at ``rev`` no
    guarded field changed without an amendment (:func:`unamended_changes`)."""
    root = root or _root()
    out = []
    for f in sorted((root / REGISTRY_DIR).glob("*.yaml")):
        try:
            new = load_file(f)
        except (RegistryError, ValueError) as e:
            out.append(f"{f.name}: {e}")
            continue
        text = committed_version(f, root, rev)
        if text is None:
            continue
        try:
            old = _parse(text, f"{f.name}@{rev}")
        except (RegistryError, ValueError):
            continue
        out += [f"{f.name}: {p}" for p in unamended_changes(old, new)]
    return out


def today() -> str:
    return _dt.date.today().isoformat()


# ---------------------------------------------------------------------------------------------
# the notebook's side: measurements in, verdicts out


def _claim_base():
    from .claims import Claim

    return Claim


@dataclass
class Finding(_claim_base()):
    """A judged finding as a result file records it: the fields of :class:`iclr25.claims.Claim`
    (``holds`` is ``verdict == "reproduced"``; ``must_hold`` is always False: a verdict never
    fails a notebook) and the judgement."""

    must_hold: bool = False
    id: str = ""
    verdict: str = ""
    control: Any = None
    effect: float | None = None
    low: float | None = None
    high: float | None = None
    paired: bool = False
    level: float = LEVEL
    entry_hash: str = ""

    @property
    def status(self) -> str:
        return self.verdict


@dataclass
class RegisteredCheck(_claim_base()):
    """A registered check as a result file records it (a failed check fails the notebook)."""

    id: str = ""
    verdict: str = ""
    entry_hash: str = ""


def _fmt(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "n/a" if x is None else ("-inf" if x < 0 else "inf")
    return f"{x:.3g}"


class Registry:
    """The registered claims of one notebook run, judged from its measurements.

    ``Registry(claims)`` binds the chapter's registry (``book/claims/<chapter>.yaml``) to a
    :class:`iclr25.claims.Claims`; :meth:`finding` and :meth:`check` record into it, :meth:`save`
    saves it once every entry of this notebook has been recorded, and :meth:`summary` writes the
    notebook's closing summary from the verdicts. The notebook supplies measurements, never a
    threshold, a control rule or a verdict. A notebook names it ``claims``::

        claims = Registry(Claims("18-relu-landscape", "01-saddle-to-saddle", profile))
        claims.finding("escape-neurons", ours=per_seed_rate, control=random_neuron_rate)
        claims.check("balancedness-conserved", holds=drift < 1e-6, ours=drift)
        claims.table()                       # paper vs ours, intervals, controls, verdicts
        claims.save(); claims.assert_all()   # a failed check raises; a verdict never does
        claims.summary()                     # the closing summary, generated
    """

    def __init__(self, claims, root: Path | None = None):
        self.claims = claims
        self.entries = {k: e for k, e in load(claims.chapter, root).items()
                        if e.notebook == claims.notebook}
        self.judged: dict[str, Judgement] = {}
        self.checked: dict[str, bool] = {}

    def _entry(self, cid: str) -> Entry:
        if cid not in self.entries:
            raise RegistryError(f"{cid!r} is not registered for {self.claims.chapter}/"
                                f"{self.claims.notebook}; registered here: "
                                f"{', '.join(self.entries) or '(none)'}")
        return self.entries[cid]

    def finding(self, cid: str, ours: Any = None, control: Any = None, *,
                paired: bool | None = None, tol: float | None = None) -> Judgement:
        """Judge finding ``cid`` from ``ours`` (replicates of the registered statistic) against
        ``control`` (replicates or a number; default: the registered control value) and record
        it. Returns the :class:`Judgement` (its ``verdict``, ``effect``, ``low``, ``high``).

        ``tol``: how far each replicate may move when the same profile is re-run (absolute;
        ``make verify`` fails beyond it; the verdict may never move). Fewer replicates than the
        entry registers (seeds or splits, at the book profile) is said in the note."""
        e = self._entry(cid)
        j = judge(e, ours, control, profile=self.claims.profile, paired=paired)
        rep = e.replication or {}
        want = int(rep.get("n", 0)) if rep.get("unit") in ("seeds", "splits") else 0
        if j.verdict != "out of reach" and self.claims.profile != "smoke" and len(j.ours) < want:
            j.note = (j.note + "; " if j.note else "") + \
                f"under-replicated: {len(j.ours)} of the {want} {rep.get('unit')} registered"
        self.judged[cid] = j
        item = Finding(claim=e.claim, kind="finding", source=e.source, paper=e.paper,
                       ours=j.ours, holds=j.verdict == "reproduced", note=j.note or j.verdict,
                       tol=None if tol is None else float(tol),
                       id=cid, verdict=j.verdict, control=j.control, effect=j.effect, low=j.low,
                       high=j.high, paired=j.paired, level=e.level, entry_hash=j.entry_hash)
        self.claims.items = [c for c in self.claims.items if c.claim != e.claim] + [item]
        return j

    def check(self, cid: str, holds: bool, ours: Any = None, *, tol: float | None = None) -> bool:
        """Record check ``cid`` (true by construction: an identity, fast path = reference); a
        check that fails makes :meth:`iclr25.claims.Claims.assert_all` raise (it is a bug)."""
        e = self._entry(cid)
        if e.kind != "check":
            raise RegistryError(f"{cid} is a finding: hand its measurements to finding()")
        from .claims import _plain

        holds = bool(holds)
        self.checked[cid] = holds
        item = RegisteredCheck(claim=e.claim, kind="check", source=e.source, paper=e.paper,
                               ours=_plain(ours), holds=holds, id=cid,
                               tol=None if tol is None else float(tol),
                               verdict="held" if holds else "failed", entry_hash=entry_hash(e))
        self.claims.items = [c for c in self.claims.items if c.claim != e.claim] + [item]
        return holds

    @property
    def profile(self) -> str:
        """The profile being run."""
        return self.claims.profile

    def metric(self, name: str, value: Any) -> None:
        """Record a scalar metric (collected by ``iclr25 sweep``): :meth:`iclr25.claims.Claims.metric`."""
        self.claims.metric(name, value)

    def missing(self) -> list[str]:
        """Ids registered for this notebook and not yet recorded."""
        return [k for k in self.entries if k not in self.judged and k not in self.checked]

    def save(self, directory: str | Path | None = None) -> Path:
        """Save the notebook's claims (:meth:`iclr25.claims.Claims.save`) once every registered
        entry of this notebook has been recorded: a registered claim never silently vanishes."""
        gone = self.missing()
        if gone:
            raise RegistryError(f"registered but not recorded by this notebook: {', '.join(gone)}")
        return self.claims.save(directory)

    def assert_all(self) -> None:
        """Raise :class:`iclr25.claims.ClaimFailed` when a registered check failed (a bug); a
        finding's verdict, whatever it is, never fails the notebook."""
        self.claims.assert_all()

    def table(self):
        """The judged claims as a ``pandas.DataFrame``: the claim, where the paper makes it, the
        paper's number, ours (effect and interval, or the check's value), the control and the
        verdict."""
        import pandas as pd

        rows = []
        for cid, e in self.entries.items():
            if cid in self.judged:
                j = self.judged[cid]
                ours = ("n/a" if j.effect is None else
                        f"{_fmt(j.effect)} [{_fmt(j.low)}, {_fmt(j.high)}] (n={len(j.ours)})")
                ctrl = (e.control or {}).get("describe") or (e.control or {}).get("kind")
                rows.append({"id": cid, "claim": e.claim, "source": e.source, "paper": e.paper,
                             "ours: effect [95% CI]": ours, "control": ctrl,
                             "verdict": j.verdict})
            elif cid in self.checked:
                item = next(c for c in self.claims.items if getattr(c, "id", None) == cid)
                rows.append({"id": cid, "claim": e.claim, "source": e.source, "paper": e.paper,
                             "ours: effect [95% CI]": item.ours, "control": "(check)",
                             "verdict": "check held" if self.checked[cid] else "CHECK FAILED"})
        return pd.DataFrame(rows, columns=["id", "claim", "source", "paper",
                                           "ours: effect [95% CI]", "control", "verdict"])

    def _repr_html_(self) -> str:
        """The table; a failed check's row is marked (red) with a banner above, so the rendered
        page shows what the notebook's last cell raises about."""
        import html as _html

        out = self.table().to_html(index=False, escape=True)
        failed = [c for c, ok in self.checked.items() if not ok]
        for cid in failed:
            cell = f"<td>{_html.escape(cid, quote=False)}</td>"
            out = out.replace("<tr>\n      " + cell, '<tr class="iclr25-claim-failed" '
                              'style="background:#fdd">\n      ' + cell, 1)
        if failed:
            out = (f'<p class="iclr25-claims-failed"><strong>{len(failed)} check(s) FAILED</strong> '
                   "(a bug: rows marked); the notebook's last cell raises.</p>\n" + out)
        return out

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for j in self.judged.values():
            out[j.verdict] += 1
        return out

    def summary(self) -> "Summary":
        """The closing summary, generated from the verdicts (Markdown, shown as such when it is a
        cell's value): the counts, then one line per finding with its effect, interval and
        control, then the checks."""
        c = self.counts()
        lines = [f"**{len(self.judged)} registered finding(s)** of the paper judged here: "
                 + ", ".join(f"{n} {v}" for v, n in c.items() if n) + "."]
        for cid, j in self.judged.items():
            e = self.entries[cid]
            if j.verdict == "out of reach":
                lines.append(f"- *{e.claim}* ({e.source}): out of reach at this profile ({j.note}).")
                continue
            ctrl = (e.control or {}).get("describe") or (e.control or {}).get("kind")
            lines.append(f"- *{e.claim}* ({e.source}): **{j.verdict}**; effect {_fmt(j.effect)} "
                         f"[{_fmt(j.low)}, {_fmt(j.high)}] against {ctrl}"
                         + (" (paired)" if j.paired else "") + (f"; {j.note}" if j.note else "")
                         + ".")
        if self.checked:
            ok = sum(self.checked.values())
            lines.append(f"\nChecks (true by construction, not counted): {ok} of {len(self.checked)} held.")
        return Summary("\n".join(lines))


class Summary(str):
    """A generated summary: a string that a notebook shows as Markdown."""

    def _repr_markdown_(self) -> str:
        return str(self)

"""Seed robustness: does each finding come out the same in every seed, or only in the one the
book runs?

``iclr25 robustness [CHAPTER...] --seeds 0,1,2 --profile smoke`` runs every notebook of the
chapters over the seeds (through :func:`iclr25.batch.sweep`: a local process pool, or a Dask
cluster) and writes, per notebook, ``results/robustness/<chapter>/<notebook>.json``::

    {
      "schema": 2, "chapter": ..., "notebook": ..., "profile": "smoke", "seeds": [0, 1, 2],
      "created": "2026-12-01T23:00:00+00:00",
      "inputs": {"digest": str, ...},            # iclr25.ledger.inputs_record when it ran
      "runs": {"0": "ok", "1": "ok", "2": "NameError: ..."},
      "claims": [{"id": str, "claim": str, "kind": "finding" | "check", "source": str,
                  "entry_hash": str,              # the registry entry the seeds were judged by
                  "held": 2, "n": 3, "held_in": [0, 2],          # reproduced (a check: held)
                  "verdicts": {"0": "reproduced", "1": "inconclusive", "2": null}}]
    }

Claims are keyed by their registry ``id`` (the claim's words for a result written before the
registry). A seed whose run saved no result counts as not holding every claim (``n`` is the
number of seeds). A record is *stale* (:func:`stale`) once the notebook's inputs or a registry
entry it recorded changed, or it names an id the registry no longer has: the chapter page refuses
it and ``iclr25 check-results`` names it. ``make robustness`` runs it for the whole book; it is not
part of CI.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import paths

__all__ = ["FOLDER", "aggregate", "run", "load", "write", "stale"]

FOLDER = "robustness"


def aggregate(per_seed: Mapping[Any, Mapping | None]) -> list[dict]:
    """Per claim (in the order first seen, keyed by registry ``id``, else its words), in how many
    of the seeds it held (a finding: was reproduced) and each seed's verdict.

    ``per_seed`` maps each seed to the result dict its run saved (schema of
    :mod:`iclr25.claims`), or None when the run saved none. Returns ``[{"id", "claim", "kind",
    "source", "entry_hash", "held", "n", "held_in", "verdicts"}]`` with ``n = len(per_seed)``.
    """
    order: list[str] = []
    info: dict[str, dict] = {}
    for seed, result in per_seed.items():
        for c in (result or {}).get("claims", []):
            key = c.get("id") or c.get("claim")
            if key not in info:
                order.append(key)
                info[key] = {"id": c.get("id"), "claim": c.get("claim"),
                             "kind": c.get("kind") or "unclassified", "source": c.get("source"),
                             "entry_hash": c.get("entry_hash"), "held_in": [],
                             "verdicts": {str(s): None for s in per_seed}}
            if c.get("holds"):
                info[key]["held_in"].append(seed)
            info[key]["verdicts"][str(seed)] = c.get("verdict") or ("held" if c.get("holds") else "not held")
    n = len(per_seed)
    return [{**info[k], "held": len(info[k]["held_in"]), "n": n} for k in order]


def stale(record: Mapping, root: Path | None = None) -> list[str]:
    """Why a robustness record no longer describes the book (empty when it does): the notebook's
    inputs changed since it ran, a claim it recorded has no registry id or its entry changed, or
    the registry has an entry for the notebook that the record lacks."""
    from . import ledger, registry

    chapter, notebook = record.get("chapter"), record.get("notebook")
    out = []
    try:
        now = ledger.inputs_record(chapter, notebook, root)
    except (FileNotFoundError, SyntaxError, ValueError):
        return [f"{chapter}/{notebook} is no longer in the book"]
    then = record.get("inputs") or {}
    if (then.get("digest") if isinstance(then, Mapping) else None) != now.get("digest"):
        out.append("the notebook's inputs changed since the robustness run" if then
                   else "no input hashes recorded (written before the registry)")
    try:
        entries = {k: e for k, e in registry.load(chapter, root).items() if e.notebook == notebook}
    except FileNotFoundError:
        entries = {}
    seen = set()
    for c in record.get("claims", []):
        cid = c.get("id")
        if not cid:
            out.append(f"claim without a registry id: {c.get('claim')}")
            break
        seen.add(cid)
        e = entries.get(cid)
        if e is None:
            out.append(f"{cid} is not in the registry")
        elif c.get("entry_hash") != registry.entry_hash(e):
            out.append(f"{cid}: its registry entry changed since")
    missing = sorted(set(entries) - seen)
    if missing and not out:
        out.append("registered but not in the record: " + ", ".join(missing))
    return out


def write(chapter: str, notebook: str, profile: str, seeds: Sequence[Any],
          per_seed: Mapping[Any, Mapping | None], runs: Mapping[Any, str],
          directory: Path | None = None) -> Path:
    """Write the robustness file of one notebook (see the module docstring); returns its path."""
    base = (directory or paths.repo_root() / "results") / FOLDER
    out = base / chapter / f"{notebook}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    from . import ledger

    try:
        inputs = ledger.inputs_record(chapter, notebook)
    except (FileNotFoundError, SyntaxError, ValueError):
        inputs = None
    out.write_text(json.dumps({
        "schema": 2, "chapter": chapter, "notebook": notebook, "profile": profile, "inputs": inputs,
        "seeds": list(seeds),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "runs": {str(k): v for k, v in runs.items()},
        "claims": aggregate(per_seed),
    }, indent=2, default=str) + "\n")
    return out


def run(notebooks: Sequence[str], seeds: Sequence[Any], profile: str = "smoke",
        workers: int | None = None, scheduler: Any = None, directory: Path | None = None,
        progress: bool = False, echo=print) -> list[Path]:
    """Sweep each notebook (``"chapter/notebook"``) over ``seeds`` at ``profile`` and write its
    robustness file; returns the files written."""
    from . import batch

    written = []
    for i, ident in enumerate(notebooks, 1):
        chapter, notebook = ident.split("/", 1)
        echo(f"[{i}/{len(notebooks)}] {ident}: seeds {', '.join(map(str, seeds))} at {profile}")
        table = batch.sweep(ident, {"seed": list(seeds)}, profile=profile, workers=workers,
                            scheduler=scheduler, progress=progress)
        sweep_dir = Path(table.attrs["out_dir"])
        per_seed, runs = {}, {}
        for seed, run_name, ok, error in zip(table["seed"], table["run"], table["ok"], table["error"]):
            f = sweep_dir / run_name / chapter / f"{notebook}.json"
            per_seed[seed] = json.loads(f.read_text()) if f.is_file() else None
            runs[seed] = "ok" if ok else (str(error).strip().splitlines() or ["failed"])[0]
        path = write(chapter, notebook, profile, seeds, per_seed, runs, directory)
        weak = [c for c in json.loads(path.read_text())["claims"]
                if c["kind"] == "finding" and 0 < c["held"] < c["n"]]
        for c in weak:
            echo(f"    finding reproduced in {c['held']} of {c['n']} seeds: {c['id'] or c['claim']}")
        written.append(path)
    return written


def load(folder: Path | None = None) -> dict:
    """``{(chapter, notebook, claim): "k / n"}`` of every robustness file under ``folder``
    (default ``results/robustness``), plus ``"_meta"``: the oldest file's ``created``, the profiles
    and the seeds. Empty when there is none."""
    folder = folder or paths.repo_root() / "results" / FOLDER
    out: dict = {}
    created, profiles, seeds = [], set(), set()
    for f in sorted(folder.glob("*/*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(f.read_text())
        except ValueError:
            continue
        created.append(str(data.get("created", "")))
        profiles.add(str(data.get("profile")))
        seeds.add(", ".join(map(str, data.get("seeds", []))))
        if stale(data):
            continue
        for c in data.get("claims", []):
            out[(data.get("chapter"), data.get("notebook"), c.get("claim"))] = f"{c['held']} / {c['n']}"
    if out:
        out["_meta"] = {"created": min(created), "profile": ", ".join(sorted(profiles)),
                        "seeds": "; ".join(sorted(seeds))}
    return out

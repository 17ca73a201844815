"""Seed robustness: does each finding hold in every seed, or only in the one the book runs?

``iclr25 robustness [CHAPTER...] --seeds 0,1,2 --profile smoke`` runs every notebook of the
chapters over the seeds (through :func:`iclr25.batch.sweep`: a local process pool, or a Dask
cluster) and writes, per notebook, ``results/robustness/<chapter>/<notebook>.json``::

    {
      "schema": 1, "chapter": ..., "notebook": ..., "profile": "smoke", "seeds": [0, 1, 2],
      "created": "2026-12-01T23:00:00+00:00",
      "runs": {"0": "ok", "1": "ok", "2": "NameError: ..."},
      "claims": [{"claim": str, "kind": "finding" | "check", "source": str, "must_hold": bool,
                  "held": 2, "n": 3, "held_in": [0, 2]}]
    }

A seed whose run saved no result counts as not holding every claim (``n`` is the number of
seeds). The scorecard page shows ``held / n`` beside each finding when these files exist, with
when and at which profile they were made. ``make robustness`` runs it for the whole book; it is
not part of CI.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import paths

__all__ = ["FOLDER", "aggregate", "run", "load", "write"]

FOLDER = "robustness"


def aggregate(per_seed: Mapping[Any, Mapping | None]) -> list[dict]:
    """Per claim (in the order first seen), in how many of the seeds it held.

    ``per_seed`` maps each seed to the result dict its run saved (schema of
    :mod:`iclr25.claims`), or None when the run saved none. Returns ``[{"claim", "kind",
    "source", "must_hold", "held", "n", "held_in"}]`` with ``n = len(per_seed)``.
    """
    order: list[str] = []
    info: dict[str, dict] = {}
    for seed, result in per_seed.items():
        for c in (result or {}).get("claims", []):
            text = c.get("claim")
            if text not in info:
                order.append(text)
                info[text] = {"claim": text, "kind": c.get("kind") or "unclassified",
                              "source": c.get("source"), "must_hold": bool(c.get("must_hold")),
                              "held_in": []}
            if c.get("holds"):
                info[text]["held_in"].append(seed)
            info[text]["must_hold"] = info[text]["must_hold"] or bool(c.get("must_hold"))
    n = len(per_seed)
    return [{**info[t], "held": len(info[t]["held_in"]), "n": n} for t in order]


def write(chapter: str, notebook: str, profile: str, seeds: Sequence[Any],
          per_seed: Mapping[Any, Mapping | None], runs: Mapping[Any, str],
          directory: Path | None = None) -> Path:
    """Write the robustness file of one notebook (see the module docstring); returns its path."""
    base = (directory or paths.repo_root() / "results") / FOLDER
    out = base / chapter / f"{notebook}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "schema": 1, "chapter": chapter, "notebook": notebook, "profile": profile,
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
                if c["kind"] == "finding" and c["must_hold"] and c["held"] < c["n"]]
        for c in weak:
            echo(f"    must-hold finding held in {c['held']} of {c['n']} seeds: {c['claim']}")
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
        for c in data.get("claims", []):
            out[(data.get("chapter"), data.get("notebook"), c.get("claim"))] = f"{c['held']} / {c['n']}"
    if out:
        out["_meta"] = {"created": min(created), "profile": ", ".join(sorted(profiles)),
                        "seeds": "; ".join(sorted(seeds))}
    return out

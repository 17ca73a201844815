"""The benchmark harness (part of the shared core): every ``benchmarks/bench_*.py`` times through it.

One :class:`Comparison` is one question ("how fast is our X against the peer a user would pick
instead, on the same inputs?") and one JSON record under ``results/bench/<id>.json``. Every
contender is timed the same way (``warmup`` untimed calls, then ``repeat`` timed ones; median and
min are kept, with the peak resident memory during its calls), and every contender that computes
the same thing as ours must agree with ours: ``distance(ours_output, its_output) <= tol``, or the
run raises :class:`Disagreement` and no record is written. A speed-up is only worth printing when
both sides computed the same answer.

Roles
-----
``ours``
    the implementation the chapter ships (exactly one per comparison);
``baseline``
    a peer or a reference computing the same thing. The **headline ratio** is against the
    *strongest* (fastest) baseline: ``min(baseline medians) / ours median``;
``variant``
    a row that computes something else, or the same thing by another route (a closed form, a
    shortcut, ours without one ingredient). It gets its own ratio against the strongest baseline
    but never the headline, so a speed-up is credited to what caused it.

Example::

    from iclr25 import bench

    cmp = bench.Comparison("06-topk-step", "TopK SAE training step", chapter="06-topk-sae",
                           target=2.0, tol=1e-4, settings={"d": 576, "n": 16384, "k": 32})
    cmp.add("ours", lambda: step_ours(x))
    cmp.add("sae-lens", lambda: step_peer(x), role="baseline", peer="sae-lens")
    record = cmp.run(distance=bench.max_abs_diff)    # prints the table, writes the JSON

:func:`machine` describes where it ran (CPU model, cores, threads, load); :func:`load_records`
reads every record back (the book's Performance page uses it).
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import re
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import paths

__all__ = ["Comparison", "Contender", "Disagreement", "Timing", "bench_dir", "load_records",
           "machine", "max_abs_diff", "rel_diff", "time_call", "SCHEMA", "ROLES"]

SCHEMA = 1
ROLES = ("ours", "baseline", "variant")


class Disagreement(AssertionError):
    """Two contenders of one comparison returned outputs further apart than the tolerance."""


def bench_dir() -> Path:
    """Where records go: ``$ICLR25_BENCH_DIR``, else ``<results>/bench``."""
    env = os.environ.get("ICLR25_BENCH_DIR")
    return Path(env) if env else paths.results_dir() / "bench"


# ----------------------------------------------------------------------------------------------
# distances


def _as_arrays(a, b):
    import numpy as np

    def arr(x):
        if hasattr(x, "detach"):
            x = x.detach().cpu().numpy()
        return np.asarray(x, dtype=float)

    return arr(a), arr(b)


def max_abs_diff(a, b) -> float:
    """``max |a - b|`` over arrays, tensors, numbers or (nested) tuples/lists of them."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        if len(a) != len(b):
            return math.inf
        return max((max_abs_diff(x, y) for x, y in zip(a, b)), default=0.0)
    x, y = _as_arrays(a, b)
    if x.shape != y.shape:
        return math.inf
    return float(abs(x - y).max()) if x.size else 0.0


def rel_diff(a, b) -> float:
    """``max |a - b| / max(|a|, tiny)``: a relative distance for outputs of any scale."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        if len(a) != len(b):
            return math.inf
        return max((rel_diff(x, y) for x, y in zip(a, b)), default=0.0)
    x, y = _as_arrays(a, b)
    if x.shape != y.shape:
        return math.inf
    if not x.size:
        return 0.0
    return float(abs(x - y).max() / max(abs(x).max(), 1e-300))


# ----------------------------------------------------------------------------------------------
# timing


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: the process's peak so far
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(kb) * (1 if sys.platform == "darwin" else 1024)


class _PeakRSS:
    """Samples the resident set size every ``interval`` s in a thread while the block runs."""

    def __init__(self, interval: float = 0.002):
        self.interval, self.peak, self.start = interval, 0, 0
        self._stop = threading.Event()

    def _loop(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            self._stop.wait(self.interval)

    def __enter__(self):
        self.start = self.peak = _rss_bytes()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss_bytes())
        return False


@dataclass
class Timing:
    """Seconds of each timed call of one contender, and its memory."""

    times: list[float]
    peak_rss_mb: float        # the process's resident memory at its peak during the calls
    extra_rss_mb: float       # that peak minus the resident memory just before the first call

    @property
    def median(self) -> float:
        return float(statistics.median(self.times))

    @property
    def min(self) -> float:
        return float(min(self.times))


def time_call(fn: Callable[[], Any], *, repeat: int = 5, warmup: int = 1) -> tuple[Timing, Any]:
    """Call ``fn()`` ``warmup`` times untimed, then ``repeat`` times timed; return the
    :class:`Timing` and the last call's output."""
    repeat, warmup = int(repeat), int(warmup)
    if repeat < 1 or warmup < 0:
        raise ValueError(f"need repeat >= 1 and warmup >= 0; got repeat={repeat}, warmup={warmup}")
    out = None
    with _PeakRSS() as mem:
        for _ in range(warmup):
            out = fn()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
    mb = 1 / 2**20
    return Timing(times, mem.peak * mb, (mem.peak - mem.start) * mb), out


# ----------------------------------------------------------------------------------------------
# the machine


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """The machine a benchmark runs on: CPU model, cores, threads torch/numba use, load, versions."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    if "torch" in sys.modules:
        info["torch_threads"] = sys.modules["torch"].get_num_threads()
    for env in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        if os.environ.get(env):
            info[env] = os.environ[env]
    versions = {}
    for dist in ("numpy", "torch", "numba", "scipy"):
        v = _version(dist)
        if v:
            versions[dist] = v
    info["versions"] = versions
    return info


def _version(dist: str | None) -> str | None:
    if not dist:
        return None
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# ----------------------------------------------------------------------------------------------
# one comparison


@dataclass
class Contender:
    name: str
    fn: Callable[[], Any]
    role: str = "ours"
    peer: str | None = None       # the distribution it comes from (its version is recorded)
    what: str = ""                # one line: what this row computes, how it differs
    agree: bool = True            # compared with ours (False: a row computing something else)
    tol: float | None = None      # overrides the comparison's tolerance for this row
    work: float | None = None     # units of work per call (tokens, samples): adds a throughput
    repeat: int | None = None     # overrides the comparison's repeat (a slow reference loop)
    warmup: int | None = None
    result: Callable[[], Any] | None = None     # the compared output, read after the timed calls
    metrics: Callable[[Any], dict] | None = None  # extra numbers for the row, from the output


_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass
class Comparison:
    """One benchmark question, its contenders, and its JSON record (see the module docstring).

    ``target`` is the headline ratio the chapter aims at (ours at least ``target`` times faster
    than the strongest baseline); ``settings`` are the shared inputs every contender ran with
    (sizes, optimiser, threads), recorded as given; ``unit`` names ``work`` (e.g. ``"tok"``).
    """

    id: str
    title: str
    chapter: str
    target: float | None = None
    tol: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    repeat: int = 5
    warmup: int = 1
    unit: str = ""
    notes: str = ""
    contenders: list[Contender] = field(default_factory=list)

    def __post_init__(self):
        if not _ID.match(self.id):
            raise ValueError(f"a comparison id is lower-case letters, digits, '.', '_' or '-' "
                             f"(it names results/bench/<id>.json); got {self.id!r}")

    def add(self, name: str, fn: Callable[[], Any], *, role: str = "ours", peer: str | None = None,
            what: str = "", agree: bool = True, tol: float | None = None,
            work: float | None = None, repeat: int | None = None, warmup: int | None = None,
            result: Callable[[], Any] | None = None,
            metrics: Callable[[Any], dict] | None = None) -> "Comparison":
        """Add a contender: ``fn()`` is timed and its output compared with ours (see roles).

        ``work``: units of work one call does (tokens, candidates); when every contender gives
        it, ratios compare time per unit. ``result()``, when given, is called once after the
        timed calls and its value is what is compared (e.g. a trainer's held-out error after its
        steps, when ``fn`` is one step); ``metrics(output)`` returns extra numbers recorded in the
        row (CPU seconds, validity). ``repeat``/``warmup`` override the comparison's for this
        row (a slow reference loop)."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}; got {role!r}")
        if role == "ours" and any(c.role == "ours" for c in self.contenders):
            raise ValueError("a comparison has exactly one contender with role 'ours'")
        if any(c.name == name for c in self.contenders):
            raise ValueError(f"contender {name!r} is already in comparison {self.id!r}")
        if role == "baseline" and not agree:
            raise ValueError(f"baseline {name!r} must agree with ours (a row that computes "
                             "something else is a 'variant')")
        self.contenders.append(Contender(name, fn, role, peer, what, agree, tol, work, repeat,
                                         warmup, result, metrics))
        return self

    def skip(self, name: str, reason: str, *, role: str = "baseline", peer: str | None = None):
        """Record a contender that could not run here (a peer not installed), with the reason."""
        self._skipped = getattr(self, "_skipped", []) + [
            {"name": name, "role": role, "peer": peer, "reason": reason}]
        return self

    def run(self, distance: Callable[[Any, Any], float] | None = max_abs_diff, *,
            save: bool = True, echo: bool = True) -> dict[str, Any]:
        """Time every contender, assert agreement with ours, print the table, write the record.

        ``distance(ours_output, other_output)`` must be ``<= tol`` for every contender with
        ``agree=True``; otherwise :class:`Disagreement` is raised (naming both contenders, the
        distance and the tolerance) before anything is written. ``distance=None`` compares
        nothing (only for comparisons whose rows all say ``agree=False``).
        """
        ours = [c for c in self.contenders if c.role == "ours"]
        if len(ours) != 1:
            raise ValueError(f"comparison {self.id!r} needs exactly one 'ours' contender")
        if not any(c.role == "baseline" for c in self.contenders):
            raise ValueError(f"comparison {self.id!r} needs at least one 'baseline' contender")
        rows, outputs = [], {}
        for c in self.contenders:
            if echo:
                print(f"  [{self.id}] timing {c.name} ...", flush=True)
            rep = self.repeat if c.repeat is None else c.repeat
            wu = self.warmup if c.warmup is None else c.warmup
            timing, outputs[c.name] = time_call(c.fn, repeat=rep, warmup=wu)
            if c.result is not None:
                outputs[c.name] = c.result()
            rows.append({"name": c.name, "role": c.role, "peer": c.peer,
                         "version": _version(c.peer), "what": c.what,
                         "repeat": rep, "warmup": wu, "median_s": timing.median, "min_s": timing.min, "times_s": timing.times,
                         "peak_rss_mb": round(timing.peak_rss_mb, 1),
                         "extra_rss_mb": round(timing.extra_rss_mb, 1),
                         "throughput": (c.work / timing.median) if c.work else None,
                         "metrics": (c.metrics(outputs[c.name]) if c.metrics else {})})
        ref = ours[0]
        for c, row in zip(self.contenders, rows):
            if c is ref or not c.agree:
                row["distance"] = None
                continue
            if distance is None:
                raise ValueError(f"contender {c.name!r} must agree with ours: pass a distance")
            tol = self.tol if c.tol is None else c.tol
            d = float(distance(outputs[ref.name], outputs[c.name]))
            row["distance"], row["tol"] = d, tol
            if not d <= tol:        # also catches NaN
                raise Disagreement(
                    f"[{self.id}] {c.name!r} and {ref.name!r} disagree: distance {d:.3g} > tol "
                    f"{tol:.3g}; no speed-up is reported for outputs that differ")
        # when every contender says how much work a call does, compare time per unit of work (a
        # slow reference loop may then run on fewer items than ours)
        per_work = all(c.work for c in self.contenders)
        for c, r in zip(self.contenders, rows):
            r["cost_s"] = r["median_s"] / c.work if per_work else r["median_s"]
        base = [r for r in rows if r["role"] == "baseline"]
        strongest = min(base, key=lambda r: r["cost_s"])
        for r in rows:
            r["ratio_vs_strongest"] = strongest["cost_s"] / r["cost_s"]
        ours_row = next(r for r in rows if r["role"] == "ours")
        record = {
            "schema": SCHEMA, "id": self.id, "title": self.title, "chapter": self.chapter,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "settings": self.settings, "repeat": self.repeat,
            "warmup": self.warmup, "tol": self.tol, "unit": self.unit, "notes": self.notes,
            "ratio_per": ("unit of work" if per_work else "call"),
            "strongest_baseline": strongest["name"],
            "headline": ours_row["ratio_vs_strongest"], "target": self.target,
            "meets_target": (None if self.target is None
                             else bool(ours_row["ratio_vs_strongest"] >= self.target)),
            "rows": rows, "skipped": getattr(self, "_skipped", []),
        }
        if echo:
            print(format_record(record), flush=True)
        if save:
            out = bench_dir() / f"{self.id}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(record, indent=1, default=_jsonable) + "\n")
            record["path"] = str(out)
        return record


def _jsonable(x):
    if hasattr(x, "item"):
        return x.item()
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def format_record(record: dict[str, Any]) -> str:
    """The record as the text table a benchmark prints."""
    unit = record.get("unit") or ""
    lines = [f"== {record['id']}: {record['title']}"]
    if record.get("settings"):
        lines.append("   settings: " + ", ".join(f"{k}={v}" for k, v in record["settings"].items()))
    head = f"   {'contender':28s} {'role':9s} {'median':>10s} {'min':>10s} {'vs best base':>12s}"
    head += f" {'peak MB':>8s} {'agree':>10s}" + (f" {unit + '/s':>10s}" if unit else "")
    lines.append(head)
    for r in record["rows"]:
        name = r["name"] + (f" ({r['version']})" if r.get("version") else "")
        agree = "-" if r.get("distance") is None else f"{r['distance']:.1e}"
        line = (f"   {name[:28]:28s} {r['role']:9s} {r['median_s'] * 1e3:8.2f}ms "
                f"{r['min_s'] * 1e3:8.2f}ms {r['ratio_vs_strongest']:11.2f}x "
                f"{r['peak_rss_mb']:8.0f} {agree:>10s}")
        if unit:
            line += f" {r['throughput']:10.1f}" if r.get("throughput") else f" {'':10s}"
        lines.append(line)
        if r.get("what"):
            lines.append(f"      {r['what']}")
        if r.get("metrics"):
            lines.append("      " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                              for k, v in r["metrics"].items()))
    for s in record.get("skipped", []):
        lines.append(f"   {s['name']:28s} skipped: {s['reason']}")
    tgt = record.get("target")
    verdict = "" if tgt is None else (f" (target >= {tgt:g}x: "
                                      f"{'met' if record['meets_target'] else 'NOT met'})")
    lines.append(f"   headline: ours {record['headline']:.2f}x vs the strongest baseline "
                 f"({record['strongest_baseline']}){verdict}")
    return "\n".join(lines)


def load_records(folder: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Every ``<id>.json`` record in ``folder`` (default :func:`bench_dir`), sorted by chapter, id."""
    folder = Path(folder) if folder is not None else bench_dir()
    out = []
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            rec = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(rec, dict) and rec.get("schema") == SCHEMA and "rows" in rec:
            out.append(rec)
    return sorted(out, key=lambda r: (r.get("chapter", ""), r.get("id", "")))


def record_dict(t: Timing) -> dict[str, Any]:  # pragma: no cover - convenience for scripts
    return {"median": t.median, "min": t.min, **asdict(t)}

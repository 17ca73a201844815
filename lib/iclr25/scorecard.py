"""The scorecard: the papers' registered claims, chapter by chapter, by verdict.

The denominator is each chapter's registry (``book/claims/NN-slug.yaml``, :mod:`iclr25.registry`),
written from the paper before the runs: every registered *finding* is counted once, as
**reproduced**, **not reproduced**, **inconclusive** (its interval contains the control),
**out of reach** (testable only at the paper's scale, for a stated reason) or **not yet judged**
(no current result records it: its notebook has not been run against the registry, or the entry
changed since). *Checks* (true by construction, identities, fast path = reference) are counted
apart, and amendments (a registered test changed after the fact, dated and explained) are counted
and listed. A result's finding is matched to its entry by ``id`` and by the hash of the entry it
was judged by, so a verdict judged by an entry that changed since is never counted.

Pure functions from the result dicts of :func:`iclr25.claims.load_results` (and the registries) to
tables, shared by ``iclr25 scorecard``, the README and the book's pages:

>>> from iclr25.claims import load_results                     # doctest: +SKIP
>>> results = load_results()                                   # doctest: +SKIP
>>> chapter_summary(results)   # per chapter: registered findings by verdict, checks, amendments
>>> scorecard_table(results)   # one row per recorded claim: kind, paper vs ours, control, verdict
>>> print(render(results, "markdown"))
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping

__all__ = ["scorecard_table", "chapter_summary", "totals", "headline", "render", "markdown_table",
           "readme_block", "update_readme", "registry_table", "verdict_of", "format_ours",
           "load_registries", "README_BEGIN", "README_END", "TABLE_COLUMNS", "SUMMARY_COLUMNS",
           "VERDICT_COLUMNS", "FORMATS", "UNJUDGED"]

#: a registered finding that no current result records
UNJUDGED = "not yet judged"
VERDICT_COLUMNS = ["reproduced", "not reproduced", "inconclusive", "out of reach", UNJUDGED]
TABLE_COLUMNS = ["chapter", "notebook", "id", "claim", "kind", "source", "paper", "ours", "control",
                 "verdict", "note", "profile"]
SUMMARY_COLUMNS = ["chapter", "notebooks", "findings", *VERDICT_COLUMNS, "checks held", "checks",
                   "amendments", "profile"]
FORMATS = ("text", "markdown", "csv")


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    x = float(x)
    if not math.isfinite(x):
        return "-inf" if x < 0 else "inf"
    return f"{x:.3g}"


def verdict_of(c: Mapping[str, Any]) -> str:
    """A recorded claim's verdict: a registered finding's (``reproduced``, ...), ``held`` or
    ``failed`` for a check, and for a finding recorded before the registry (no ``verdict``)
    :data:`UNJUDGED`."""
    if c.get("verdict"):
        return str(c["verdict"])
    if c.get("kind") == "check":
        return "held" if c.get("holds") else "failed"
    return UNJUDGED


def format_ours(c: Mapping[str, Any]) -> Any:
    """A registered finding's effect and 95% interval over its replicates (``0.12 [0.05, 0.2]
    (n=3)``); any other claim's ``ours`` as recorded."""
    if c.get("kind") == "finding" and c.get("verdict"):
        if c.get("effect") is None:
            return "n/a"
        n = len(c.get("ours") or []) if isinstance(c.get("ours"), list) else 1
        return f"{_fmt(c.get('effect'))} [{_fmt(c.get('low'))}, {_fmt(c.get('high'))}] (n={n})"
    return c.get("ours")


def _control(c: Mapping[str, Any]) -> Any:
    ctrl = c.get("control")
    if isinstance(ctrl, list):
        return f"{len(ctrl)} replicates, mean {_fmt(sum(ctrl) / len(ctrl))}" if ctrl else ""
    return ctrl


def scorecard_table(results: Iterable[Mapping[str, Any]]):
    """One row per recorded claim of every result: ``chapter, notebook, id, claim, kind, source,
    paper, ours, control, verdict, note, profile`` (``ours``: a registered finding's effect and
    interval, :func:`format_ours`; ``verdict``: :func:`verdict_of`), in the order of ``results``."""
    import pandas as pd

    rows = []
    for r in results:
        for c in r.get("claims", []):
            rows.append({"chapter": r.get("chapter"), "notebook": r.get("notebook"),
                         "id": c.get("id") or "", "claim": c.get("claim"),
                         "kind": c.get("kind") or "unclassified", "source": c.get("source"),
                         "paper": c.get("paper"), "ours": format_ours(c), "control": _control(c),
                         "verdict": verdict_of(c), "note": c.get("note") or "",
                         "profile": r.get("profile")})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS).astype({"paper": object, "ours": object,
                                                            "control": object})


def load_registries(chapters: Iterable[str], root=None) -> dict[str, dict]:
    """``{chapter: {id: Entry}}`` for those of ``chapters`` that have a registry."""
    from . import registry

    out = {}
    for ch in chapters:
        try:
            out[ch] = registry.load(ch, root)
        except FileNotFoundError:
            continue
    return out


def _judged(results: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping]:
    """``{(chapter, notebook, id): claim}`` of every registered claim recorded in ``results``."""
    out = {}
    for r in results:
        for c in r.get("claims", []):
            if c.get("id"):
                out[(r.get("chapter"), r.get("notebook"), c["id"])] = c
    return out


def registry_table(chapter: str, entries: Mapping[str, Any], results: Iterable[Mapping[str, Any]]):
    """One row per registered entry of ``chapter``: ``notebook, id, claim, kind, source, paper,
    ours, control, verdict, amendments`` -- its verdict from the result that recorded it with
    the entry's current hash, else :data:`UNJUDGED` (a check: ``not yet run``)."""
    import pandas as pd

    from . import registry

    judged = _judged(results)
    rows = []
    for cid, e in entries.items():
        c = judged.get((chapter, e.notebook, cid))
        current = c is not None and c.get("entry_hash") == registry.entry_hash(e)
        ctrl = (e.control or {}).get("describe") or (e.control or {}).get("kind") or ""
        if e.kind == "check":
            verdict = verdict_of(c) if current else "not yet run"
            ctrl = "(check)"
        else:
            verdict = verdict_of(c) if current else UNJUDGED
        rows.append({"notebook": e.notebook, "id": cid, "claim": e.claim, "kind": e.kind,
                     "source": e.source, "paper": e.paper,
                     "ours": format_ours(c) if current else "", "control": ctrl,
                     "verdict": verdict, "amendments": len(e.amendments)})
    return pd.DataFrame(rows, columns=["notebook", "id", "claim", "kind", "source", "paper", "ours",
                                       "control", "verdict", "amendments"]).astype(
        {"paper": object, "ours": object})


def chapter_summary(results: Iterable[Mapping[str, Any]], registries: Mapping | None = None):
    """One row per chapter: ``chapter, notebooks, findings, reproduced, not reproduced,
    inconclusive, out of reach, not yet judged, checks held, checks, amendments, profile``.

    A chapter with a registry (``registries``, default: :func:`load_registries` of the results'
    chapters) counts its *registered* findings and checks (:func:`registry_table`); one without
    counts what its results recorded. ``profile`` lists the profiles its notebooks ran at."""
    import pandas as pd

    results = list(results)
    chapters = sorted({str(r.get("chapter")) for r in results})
    if registries is None:
        registries = load_registries(chapters)
    rows = []
    for ch in sorted(set(chapters) | set(registries)):
        mine = [r for r in results if str(r.get("chapter")) == ch]
        row = {"chapter": ch, "notebooks": len({r.get("notebook") for r in mine}),
               **{k: 0 for k in SUMMARY_COLUMNS[2:-1]},
               "profile": ", ".join(sorted({str(r.get("profile")) for r in mine}))}
        if ch in registries:
            table = registry_table(ch, registries[ch], mine)
            verdicts = table["verdict"][table["kind"] == "finding"].tolist()
            checks = table["verdict"][table["kind"] == "check"].tolist()
            row["amendments"] = int(table["amendments"].sum())
        else:
            verdicts = [verdict_of(c) for r in mine for c in r.get("claims", [])
                        if c.get("kind") == "finding"]
            checks = [verdict_of(c) for r in mine for c in r.get("claims", [])
                      if c.get("kind") == "check"]
        row["findings"] = len(verdicts)
        for v in verdicts:
            row[v if v in VERDICT_COLUMNS else UNJUDGED] += 1
        row["checks"] = len(checks)
        row["checks held"] = sum(v == "held" for v in checks)
        rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def totals(results: Iterable[Mapping[str, Any]], registries: Mapping | None = None) -> dict[str, int]:
    """The summary's columns summed over chapters (plus ``chapters``)."""
    summary = chapter_summary(results, registries)
    out = {k: int(summary[k].sum()) for k in SUMMARY_COLUMNS[1:-1]}
    out["chapters"] = len(summary)
    return out


def headline(results: Iterable[Mapping[str, Any]], registries: Mapping | None = None) -> str:
    """``"60 registered findings across 10 chapter(s): 21 reproduced, 9 not reproduced, 20
    inconclusive, 4 out of reach, 6 not yet judged; 50 of 50 checks held; 3 amendment(s)"``."""
    t = totals(results, registries)
    return (f"{t['findings']} registered findings across {t['chapters']} chapter(s): "
            + ", ".join(f"{t[v]} {v}" for v in VERDICT_COLUMNS)
            + f"; {t['checks held']} of {t['checks']} checks held; {t['amendments']} amendment(s)")


# ---------------------------------------------------------------------------------------------
# rendering


def _cell(x: Any) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral):
        return f"{float(x):.6g}"
    return str(x)


def _display(df):
    return df.apply(lambda col: col.map(_cell)).astype(str) if len(df) else df.astype(str)


def markdown_table(df) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    cols = list(df.columns)
    lines = ["| " + " | ".join(esc(str(c)) for c in cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in _display(df).iterrows():
        lines.append("| " + " | ".join(esc(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def _text_table(df) -> str:
    shown = _display(df)
    cols = [str(c) for c in df.columns]
    cells = [[str(v).replace("\n", " ") for v in row] for row in shown.itertuples(index=False)]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def render(results: list[Mapping[str, Any]], fmt: str = "text",
           registries: Mapping | None = None) -> str:
    """The scorecard as ``text`` (for a terminal), ``markdown`` or ``csv`` (the claims table):
    the headline, per chapter its counts by verdict, its findings, then its checks apart."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    table = scorecard_table(results)
    if fmt == "csv":
        return table.to_csv(index=False)
    summary = chapter_summary(results, registries)
    head = headline(results, registries)
    cols = ["notebook", "claim", "source", "paper", "ours", "control", "verdict", "note"]

    def counts(s) -> str:
        return (f"{s['findings']} findings: " + ", ".join(f"{s[v]} {v}" for v in VERDICT_COLUMNS if s[v])
                + f"; checks {s['checks held']}/{s['checks']}")

    out = []
    if fmt == "markdown":
        out += [f"**{head}**", "", markdown_table(summary)]
        for _, s in summary.iterrows():
            rows = table[table["chapter"] == s["chapter"]]
            out += ["", f"### {s['chapter']}: {counts(s)}", ""]
            if len(rows[rows["kind"] == "finding"]):
                out += [markdown_table(rows[rows["kind"] == "finding"][cols])]
            other = rows[rows["kind"] != "finding"]
            if len(other):
                out += ["", f"Checks ({s['checks held']}/{s['checks']} held; true by construction, "
                            "not counted):", "", markdown_table(other[["kind"] + cols])]
        return "\n".join(out) + "\n"
    out += [f"Scorecard: {head}", ""]
    for _, s in summary.iterrows():
        rows = table[table["chapter"] == s["chapter"]]
        out.append(f"{s['chapter']}: {counts(s)} ({s['notebooks']} notebook(s), profile "
                   f"{s['profile']})")
        for label, part in (("findings", rows[rows["kind"] == "finding"]),
                            ("checks and unclassified", rows[rows["kind"] != "finding"])):
            if len(part):
                out.append(f"  {label}:")
                shown = part[cols] if label == "findings" else part[["kind"] + cols]
                out += ["    " + line for line in _text_table(shown).splitlines()]
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# the README's results table (from the committed ledger)

README_BEGIN = "<!-- results:begin (written by `iclr25 scorecard --update-readme`; do not edit) -->"
README_END = "<!-- results:end -->"


def readme_block(results: list[Mapping[str, Any]], registries: Mapping | None = None) -> str:
    """The README's table of the committed book-profile results between the markers: per
    chapter, notebooks, registered findings by verdict, checks held / registered, amendments,
    and the total."""
    summary = chapter_summary(results, registries)
    heads = ["chapter", "notebooks", "findings", *VERDICT_COLUMNS, "checks held", "amendments",
             "profile"]
    lines = [README_BEGIN, "", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]

    def cells(s) -> list[str]:
        return [str(s["notebooks"]), str(s["findings"]), *(str(s[v]) for v in VERDICT_COLUMNS),
                f"{s['checks held']} / {s['checks']}", str(s["amendments"])]

    for _, s in summary.iterrows():
        lines.append(f"| {s['chapter']} | " + " | ".join(cells(s)) + f" | {s['profile']} |")
    t = totals(results, registries)
    lines += ["| **all** | " + " | ".join(cells(t)) + " | |", ""]
    timed = [(float(r["elapsed_s"]), f"{r.get('chapter')}/{r.get('notebook')}") for r in results
             if isinstance(r.get("elapsed_s"), (int, float))]
    if timed:
        timed.sort()
        lines += [f"Execution at these results' profile: {len(timed)} notebooks, "
                  f"{sum(t for t, _ in timed):,.0f} s in all, median {timed[len(timed) // 2][0]:.0f} s, "
                  f"longest {timed[-1][1]} ({timed[-1][0]:.0f} s); each from its kernel's start to "
                  "its results being saved.", ""]
    lines.append(README_END)
    return "\n".join(lines)


def update_readme(text: str, results: list[Mapping[str, Any]], registries: Mapping | None = None) -> str:
    """``text`` (the README) with the block between the markers replaced by :func:`readme_block`;
    ``ValueError`` when the markers are missing."""
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError("the README has no results block (the markers README_BEGIN ... README_END)")
    return text[:start] + readme_block(results, registries) + text[end + len(README_END):]

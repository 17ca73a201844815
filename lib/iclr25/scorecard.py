"""The scorecard: which of the papers' claims held in our runs, chapter by chapter.

Pure functions from the result dicts of :func:`iclr25.claims.load_results` to tables, shared by
``iclr25 scorecard`` and the book's scorecard page:

>>> from iclr25.claims import load_results                     # doctest: +SKIP
>>> results = load_results()                                   # doctest: +SKIP
>>> chapter_summary(results)   # chapter, notebooks, claims held, claims recorded, profile
>>> scorecard_table(results)   # one row per claim: paper vs ours, holds, must hold, note
>>> print(render(results, "markdown"))
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping

__all__ = ["scorecard_table", "chapter_summary", "render", "markdown_table", "readme_block",
           "update_readme", "README_BEGIN", "README_END", "TABLE_COLUMNS", "SUMMARY_COLUMNS",
           "FORMATS"]

TABLE_COLUMNS = ["chapter", "notebook", "claim", "source", "paper", "ours", "holds", "must hold",
                 "note", "profile"]
SUMMARY_COLUMNS = ["chapter", "notebooks", "claims held", "claims recorded", "profile"]
FORMATS = ("text", "markdown", "csv")


def scorecard_table(results: Iterable[Mapping[str, Any]]):
    """One row per claim of every result: ``chapter, notebook, claim, source, paper, ours,
    holds, must hold, note, profile`` (``holds`` and ``must hold`` are booleans), in the order of
    ``results`` (``load_results`` sorts them by chapter and notebook)."""
    import pandas as pd

    rows = []
    for r in results:
        for c in r.get("claims", []):
            rows.append({"chapter": r.get("chapter"), "notebook": r.get("notebook"),
                         "claim": c.get("claim"), "source": c.get("source"), "paper": c.get("paper"),
                         "ours": c.get("ours"), "holds": bool(c.get("holds")),
                         "must hold": bool(c.get("must_hold")), "note": c.get("note") or "",
                         "profile": r.get("profile")})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS).astype({"paper": object, "ours": object})


def chapter_summary(results: Iterable[Mapping[str, Any]]):
    """One row per chapter: ``chapter, notebooks, claims held, claims recorded, profile``
    (``profile`` lists the profiles its notebooks ran at, e.g. ``"smoke"`` or ``"book, smoke"``)."""
    import pandas as pd

    by: dict[str, dict] = {}
    for r in results:
        ch = by.setdefault(r.get("chapter"), {"notebooks": set(), "held": 0, "recorded": 0,
                                              "profiles": set()})
        ch["notebooks"].add(r.get("notebook"))
        ch["profiles"].add(str(r.get("profile")))
        claims = r.get("claims", [])
        ch["recorded"] += len(claims)
        ch["held"] += sum(bool(c.get("holds")) for c in claims)
    rows = [{"chapter": name, "notebooks": len(v["notebooks"]), "claims held": v["held"],
             "claims recorded": v["recorded"], "profile": ", ".join(sorted(v["profiles"]))}
            for name, v in sorted(by.items(), key=lambda kv: str(kv[0]))]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


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


def render(results: list[Mapping[str, Any]], fmt: str = "text") -> str:
    """The scorecard as ``text`` (for a terminal), ``markdown`` or ``csv`` (the claims table)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    table = scorecard_table(results)
    if fmt == "csv":
        return table.to_csv(index=False)
    summary = chapter_summary(results)
    held, recorded = int(summary["claims held"].sum()), int(summary["claims recorded"].sum())
    head = f"{held} of {recorded} claims held across {len(summary)} chapter(s)"
    claim_cols = ["notebook", "claim", "source", "paper", "ours", "holds", "must hold", "note"]
    out = []
    if fmt == "markdown":
        out += [f"**{head}**", "", markdown_table(summary)]
        for _, s in summary.iterrows():
            rows = table[table["chapter"] == s["chapter"]][claim_cols]
            out += ["", f"### {s['chapter']}: {s['claims held']}/{s['claims recorded']} claims held",
                    "", markdown_table(rows)]
        return "\n".join(out) + "\n"
    out += [f"Scorecard: {head}", ""]
    for _, s in summary.iterrows():
        rows = table[table["chapter"] == s["chapter"]][claim_cols]
        out.append(f"{s['chapter']}: {s['claims held']}/{s['claims recorded']} claims held "
                   f"({s['notebooks']} notebook(s), profile {s['profile']})")
        if len(rows):
            out += ["  " + line for line in _text_table(rows).splitlines()]
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# the README's results table (from the committed ledger)

README_BEGIN = "<!-- results:begin (written by `iclr25 scorecard --update-readme`; do not edit) -->"
README_END = "<!-- results:end -->"


def readme_block(results: list[Mapping[str, Any]]) -> str:
    """The README's table of the committed book-profile results: per chapter, notebooks, claims
    held / recorded, must-hold claims that failed, and the total, between the markers."""
    summary = chapter_summary(results)
    failed = {}
    for r in results:
        failed[r.get("chapter")] = failed.get(r.get("chapter"), 0) + sum(
            bool(c.get("must_hold")) and not c.get("holds") for c in r.get("claims", []))
    lines = [README_BEGIN, "",
             "| chapter | notebooks | claims held / recorded | must-hold failed | profile |",
             "|---|---|---|---|---|"]
    for _, s in summary.iterrows():
        lines.append(f"| {s['chapter']} | {s['notebooks']} | {s['claims held']} / "
                     f"{s['claims recorded']} | {failed.get(s['chapter'], 0)} | {s['profile']} |")
    held, rec = int(summary["claims held"].sum()), int(summary["claims recorded"].sum())
    lines += [f"| **all** | {int(summary['notebooks'].sum())} | {held} / {rec} | "
              f"{sum(failed.values())} | |", "", README_END]
    return "\n".join(lines)


def update_readme(text: str, results: list[Mapping[str, Any]]) -> str:
    """``text`` (the README) with the block between the markers replaced by :func:`readme_block`;
    ``ValueError`` when the markers are missing."""
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError("the README has no results block (the markers README_BEGIN ... README_END)")
    return text[:start] + readme_block(results) + text[end + len(README_END):]

"""The scorecard: which of the papers' claims held in our runs, chapter by chapter.

Only *findings* count as reproductions (results that could have come out otherwise); *checks*
(true by construction, identities, fast path = reference) are shown apart. See
:mod:`iclr25.claims` for the two kinds.

Pure functions from the result dicts of :func:`iclr25.claims.load_results` to tables, shared by
``iclr25 scorecard`` and the book's scorecard page:

>>> from iclr25.claims import load_results                     # doctest: +SKIP
>>> results = load_results()                                   # doctest: +SKIP
>>> chapter_summary(results)   # per chapter: findings held / recorded, must-hold ones, checks
>>> scorecard_table(results)   # one row per claim: kind, paper vs ours, holds, must hold, note
>>> print(render(results, "markdown"))
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping

__all__ = ["scorecard_table", "chapter_summary", "totals", "headline", "render", "markdown_table",
           "readme_block", "update_readme", "README_BEGIN", "README_END", "TABLE_COLUMNS",
           "SUMMARY_COLUMNS", "FORMATS"]

TABLE_COLUMNS = ["chapter", "notebook", "claim", "kind", "source", "paper", "ours", "holds",
                 "must hold", "note", "profile"]
SUMMARY_COLUMNS = ["chapter", "notebooks", "findings held", "findings", "must-hold findings held",
                   "must-hold findings", "checks held", "checks", "profile"]
FORMATS = ("text", "markdown", "csv")


def scorecard_table(results: Iterable[Mapping[str, Any]]):
    """One row per claim of every result: ``chapter, notebook, claim, kind, source, paper, ours,
    holds, must hold, note, profile`` (``holds`` and ``must hold`` are booleans; ``kind`` is
    ``finding``, ``check`` or, for a schema-1 file, ``unclassified``), in the order of ``results``
    (``load_results`` sorts them by chapter and notebook)."""
    import pandas as pd

    rows = []
    for r in results:
        for c in r.get("claims", []):
            rows.append({"chapter": r.get("chapter"), "notebook": r.get("notebook"),
                         "claim": c.get("claim"), "kind": c.get("kind") or "unclassified",
                         "source": c.get("source"), "paper": c.get("paper"),
                         "ours": c.get("ours"), "holds": bool(c.get("holds")),
                         "must hold": bool(c.get("must_hold")), "note": c.get("note") or "",
                         "profile": r.get("profile")})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS).astype({"paper": object, "ours": object})


def chapter_summary(results: Iterable[Mapping[str, Any]]):
    """One row per chapter: ``chapter, notebooks, findings held, findings, must-hold findings
    held, must-hold findings, checks held, checks, profile``. Only findings count as
    reproductions; checks (true by construction) are counted apart; unclassified claims (schema 1)
    are in neither. ``profile`` lists the profiles its notebooks ran at."""
    import pandas as pd

    by: dict[str, dict] = {}
    for r in results:
        ch = by.setdefault(r.get("chapter"), {"notebooks": set(), "profiles": set(),
                                              **{k: 0 for k in SUMMARY_COLUMNS[2:-1]}})
        ch["notebooks"].add(r.get("notebook"))
        ch["profiles"].add(str(r.get("profile")))
        for c in r.get("claims", []):
            held = bool(c.get("holds"))
            if c.get("kind") == "finding":
                ch["findings"] += 1
                ch["findings held"] += held
                if c.get("must_hold"):
                    ch["must-hold findings"] += 1
                    ch["must-hold findings held"] += held
            elif c.get("kind") == "check":
                ch["checks"] += 1
                ch["checks held"] += held
    rows = [{"chapter": name, "notebooks": len(v["notebooks"]),
             **{k: v[k] for k in SUMMARY_COLUMNS[2:-1]},
             "profile": ", ".join(sorted(v["profiles"]))}
            for name, v in sorted(by.items(), key=lambda kv: str(kv[0]))]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def totals(results: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The summary's columns summed over chapters (plus ``chapters``)."""
    summary = chapter_summary(results)
    out = {k: int(summary[k].sum()) for k in SUMMARY_COLUMNS[1:-1]}
    out["chapters"] = len(summary)
    return out


def headline(results: Iterable[Mapping[str, Any]]) -> str:
    """``"41 of 60 findings held (must hold: 30 of 30); 50 of 50 checks held, across 10 chapter(s)"``."""
    t = totals(results)
    return (f"{t['findings held']} of {t['findings']} findings held (must hold: "
            f"{t['must-hold findings held']} of {t['must-hold findings']}); {t['checks held']} of "
            f"{t['checks']} checks held, across {t['chapters']} chapter(s)")


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
    """The scorecard as ``text`` (for a terminal), ``markdown`` or ``csv`` (the claims table):
    per chapter, its findings (the reproduction), then its checks apart."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    table = scorecard_table(results)
    if fmt == "csv":
        return table.to_csv(index=False)
    summary = chapter_summary(results)
    head = headline(results)
    cols = ["notebook", "claim", "source", "paper", "ours", "holds", "must hold", "note"]
    out = []
    if fmt == "markdown":
        out += [f"**{head}**", "", markdown_table(summary)]
        for _, s in summary.iterrows():
            rows = table[table["chapter"] == s["chapter"]]
            out += ["", f"### {s['chapter']}: {s['findings held']}/{s['findings']} findings held",
                    "", markdown_table(rows[rows["kind"] == "finding"][cols])]
            other = rows[rows["kind"] != "finding"]
            if len(other):
                out += ["", f"Checks ({s['checks held']}/{s['checks']} held; true by construction, "
                            "not counted):", "", markdown_table(other[["kind"] + cols])]
        return "\n".join(out) + "\n"
    out += [f"Scorecard: {head}", ""]
    for _, s in summary.iterrows():
        rows = table[table["chapter"] == s["chapter"]]
        out.append(f"{s['chapter']}: {s['findings held']}/{s['findings']} findings held, must hold "
                   f"{s['must-hold findings held']}/{s['must-hold findings']}; checks "
                   f"{s['checks held']}/{s['checks']} ({s['notebooks']} notebook(s), profile "
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


def readme_block(results: list[Mapping[str, Any]]) -> str:
    """The README's table of the committed book-profile results: per chapter, notebooks, findings
    held / recorded, must-hold findings held / recorded, checks held / recorded, and the total,
    between the markers."""
    summary = chapter_summary(results)
    lines = [README_BEGIN, "",
             "| chapter | notebooks | findings held | must-hold findings held | checks held | profile |",
             "|---|---|---|---|---|---|"]
    for _, s in summary.iterrows():
        lines.append(f"| {s['chapter']} | {s['notebooks']} | {s['findings held']} / {s['findings']} | "
                     f"{s['must-hold findings held']} / {s['must-hold findings']} | "
                     f"{s['checks held']} / {s['checks']} | {s['profile']} |")
    t = totals(results)
    lines += [f"| **all** | {t['notebooks']} | {t['findings held']} / {t['findings']} | "
              f"{t['must-hold findings held']} / {t['must-hold findings']} | "
              f"{t['checks held']} / {t['checks']} | |", ""]
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


def update_readme(text: str, results: list[Mapping[str, Any]]) -> str:
    """``text`` (the README) with the block between the markers replaced by :func:`readme_block`;
    ``ValueError`` when the markers are missing."""
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError("the README has no results block (the markers README_BEGIN ... README_END)")
    return text[:start] + readme_block(results) + text[end + len(README_END):]

"""Sphinx extension for the book (enabled in ``_config.yml``).

- serves MathJax from the PyPI package ``django-static-mathjax`` (no CDN: the book reads offline);
- ``{iclr25-scorecard}``: the claims of every chapter, paper vs ours, from the committed
  book-profile results (``results/``, the ledger of :mod:`iclr25.ledger`), each notebook's ledger
  status, and what failed in this build;
- ``{iclr25-chapters}``: the chapter table with its registered findings by verdict, from the same
  results;
- ``{iclr25-registry} CHAPTER``: on a chapter page, "what held": its registry (``book/claims/``),
  each entry with the paper's number, ours (effect and 95% interval), the control, the verdict of
  the committed result that judged it and its amendments -- generated, never hand-written;
- ``{iclr25-robustness} CHAPTER``: on a chapter page, its findings that held in fewer than all
  seeds of the last ``iclr25 robustness`` run;
- in a ``book``-profile build with the execution cache (``make book``), a notebook whose committed
  result is stale (an ``iclr25`` module it imports changed, say) is dropped from the cache and
  re-read, so it executes again even though its code cells did not change;
- at the end of a build, a summary of every notebook: how it was executed, its time, whether it
  failed, and the checks that failed (also written to ``<outdir>/../execution.txt``).

Pages using these directives are read after every notebook has executed (so they see this
build's results) and are re-read on every build.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from . import claims, ledger, paths, profiles, robustness, scorecard
from .chapters import CHAPTERS

_RESULT_PAGES: set[str] = set()
_DIRECTIVES = ("iclr25-scorecard", "iclr25-chapters", "iclr25-robustness", "iclr25-performance",
               "iclr25-times", "iclr25-registry")


def _mathjax_dir() -> Path:
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("MathJax is served locally from the package django-static-mathjax; "
                           "install it (pip install django-static-mathjax)")
    return Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax"


class _ResultsDirective(SphinxDirective):
    has_content = False
    optional_arguments = 0

    def _parse(self, text: str) -> list[nodes.Node]:
        container = nodes.container(classes=["iclr25-results"])
        self.state.nested_parse(StringList(text.splitlines(), source="iclr25"), self.content_offset,
                                container)
        return [container]

    def _results(self) -> list[dict]:
        """The committed book-profile results (the ledger), which this page shows whatever the
        profile of the build."""
        _RESULT_PAGES.add(self.env.docname)
        return _load(_ledger_dir())

    def _build_results(self) -> list[dict] | None:
        """This build's results when they are not the ledger (a smoke build), else None."""
        here = paths.results_dir()
        if here.resolve() == _ledger_dir().resolve():
            return None
        return _load(here)


def _ledger_dir() -> Path:
    return paths.repo_root() / "results"


def _load(folder: Path) -> list[dict]:
    try:
        return claims.load_results(folder) if folder.is_dir() else []
    except (FileNotFoundError, ValueError):
        return []


def _failed_executions(env) -> list[tuple[str, str]]:
    """``(docname, error)`` of every notebook whose execution failed in this build."""
    out = []
    for docname in sorted(env.found_docs):
        data = _exec_data(env, docname)
        if data and not data.get("succeeded", True):
            out.append((docname, str(data.get("error") or "error")))
    return out


def _exec_data(env, docname: str) -> dict | None:
    try:
        from myst_nb.sphinx_ import NbMetadataCollector
    except ImportError:  # pragma: no cover - myst-nb is how the book executes notebooks
        return None
    data = NbMetadataCollector.get_exec_data(env, docname)
    return dict(data) if data else None


class ScorecardDirective(_ResultsDirective):
    """The scorecard page: the committed book-profile results, findings (what counts as a
    reproduction) per chapter with their paper sources linked, the checks apart and collapsed,
    each notebook's ledger status, a robustness column when ``iclr25 robustness`` has been run,
    and what failed in this build."""

    def run(self):
        results = self._results()
        out = []
        failed_exec = _failed_executions(self.env)
        if failed_exec:
            out += ["```{admonition} Notebooks that failed in this build", ":class: error", ""]
            out += [f"- {{doc}}`/{d}`: {err} (its page shows its output up to the failure)"
                    for d, err in failed_exec]
            out += ["```", ""]
        build = self._build_results()
        if build:
            profs = ", ".join(sorted({str(r.get("profile")) for r in build}))
            bad = sum(len(ledger.failed_claims(r)) for r in build)
            out += [f"*This build ran at profile {profs}:* {scorecard.headline(build)}; {bad} "
                    "check(s) failed. The tables below are the committed book-profile "
                    "results.", ""]
        if not results:
            return self._parse("\n".join(out + [
                "*No committed results yet: build the book (`make book`) to fill this page.*"]))
        problems = {p.notebook: p for p in ledger.check(_ledger_dir())}
        robust = robustness.load(_ledger_dir() / robustness.FOLDER)
        table = scorecard.scorecard_table(results)
        summary = scorecard.chapter_summary(results)
        created = sorted(str(r.get("created", "")) for r in results)
        out += [f"**{scorecard.headline(results)}**, profile {ledger.LEDGER_PROFILE} (the committed "
                f"results, run between {created[0][:10]} and {created[-1][:10]}). The count is "
                "the chapters' registries (`book/claims/`), written from the papers before the "
                "runs: each registered finding is judged against its control with a 95% interval "
                "over seeds, splits or items, as reproduced, not reproduced, inconclusive (the "
                "interval contains the control) or out of reach (testable only at the paper's "
                "scale); *not yet judged* means no current result records it. Checks hold by "
                "construction (an identity, fast path = reference) and are listed apart.", "",
                scorecard.markdown_table(summary), ""]
        if robust:
            out += [_robustness_line(robust), ""]
        if problems:
            out += ["```{admonition} Results not current", ":class: warning", "",
                    "These notebooks' committed results do not match the current sources "
                    "(`iclr25 check-results`):", ""]
            out += [f"- {p}" for p in problems.values()]
            out += ["```", ""]
        urls = _paper_urls(self.env)
        table["source"] = [_link(src, urls.get(ch)) for src, ch in zip(table["source"], table["chapter"])]
        table["seeds"] = [robust.get((ch, nb, claim), "") for ch, nb, claim in
                          zip(table["chapter"], table["notebook"], table["claim"])]
        cols = ["notebook", "claim", "source", "paper", "ours", "control", "verdict"]
        cols += ["seeds"] if robust else []
        cols += ["note"]
        for _, s in summary.iterrows():
            rows = table[table["chapter"] == s["chapter"]]
            findings, checks = rows[rows["kind"] == "finding"], rows[rows["kind"] != "finding"]
            out += [f"**{s['chapter']}**: {s['findings']} registered findings: "
                    + ", ".join(f"{s[v]} {v}" for v in scorecard.VERDICT_COLUMNS if s[v])
                    + f" (profile {s['profile']}; {s['amendments']} amendment(s))", ""]
            if len(findings):
                out += [scorecard.markdown_table(findings[cols]), ""]
            if len(checks):
                out += [f"```{{admonition}} {s['chapter']}: {s['checks held']} of {s['checks']} "
                        "checks held (true by construction; not counted)", ":class: dropdown", "",
                        scorecard.markdown_table(checks[["kind"] + [c for c in cols if c != "seeds"]]),
                        "```", ""]
        return self._parse("\n".join(out))


def _robustness_line(robust: dict) -> str:
    meta = robust.get("_meta", {})
    return (f"*Seeds*: the column gives, per finding, in how many seeds it held in the robustness "
            f"run of {meta.get('created', '?')[:10]} (profile {meta.get('profile', '?')}, seeds "
            f"{meta.get('seeds', '?')}; `iclr25 robustness`), not in the book run.")


def _paper_urls(env) -> dict[str, str]:
    """``{chapter slug: the paper's arXiv or OpenReview page}``, from each chapter page's first
    citation and the ``note`` of its BibTeX entry."""
    srcdir = Path(env.srcdir)
    bib = "\n".join(p.read_text(errors="ignore") for p in _bib_files(env.config, srcdir))
    out = {}
    for c in CHAPTERS:
        page = srcdir / "book" / "chapters" / f"{c.slug}.md"
        if page.exists():
            m = re.search(r"\{cite[a-z:]*\}`([^`,]+)", page.read_text(errors="ignore"))
            url = bib_url(bib, m.group(1)) if m else ""
            if url:
                out[c.slug] = url
    return out


def bib_url(bib: str, key: str) -> str:
    """The paper's page for BibTeX entry ``key``: its ``url`` field, else an ``arXiv:ID`` or
    ``OpenReview ID`` in its ``note``; ``""`` when there is none."""
    m = re.search(r"@\w+\s*\{\s*" + re.escape(key) + r"\s*,(.*?)\n\}", bib, flags=re.S)
    if not m:
        return ""
    body = m.group(1)
    url = re.search(r"\burl\s*=\s*[{\"]([^}\"]+)", body)
    if url:
        return url.group(1).strip()
    arxiv = re.search(r"arXiv:\s*(\d{4}\.\d{4,5})", body)
    if arxiv:
        return f"https://arxiv.org/abs/{arxiv.group(1)}"
    orv = re.search(r"OpenReview\s+([A-Za-z0-9_-]{6,})", body)
    return f"https://openreview.net/forum?id={orv.group(1)}" if orv else ""


def _link(source: str, url: str | None) -> str:
    text = str(source or "")
    return f"[{text}]({url})" if url and text else text


class ChaptersDirective(_ResultsDirective):
    """The landing page's table: one row per paper, linked when its chapter is in this build, with
    the citation (from the chapter page's first ``{cite}`` key and ``book/references.bib``), what our
    findings reproduce (their paper sources) and their registered findings by verdict, from the
    committed results."""

    def run(self):
        results = self._results()
        summary = scorecard.chapter_summary(results)
        held = {r["chapter"]: " / ".join(str(r[v]) for v in scorecard.VERDICT_COLUMNS) + f" of {r['findings']}"
                for _, r in summary.iterrows()}
        sources: dict[str, list[str]] = {}
        for r in results:
            for c in r.get("claims", []):
                if c.get("kind") != "finding":
                    continue
                for s in paper_refs(str(c.get("source") or "")):
                    if s not in sources.setdefault(r.get("chapter"), []):
                        sources[r.get("chapter")].append(s)
        srcdir = Path(self.env.srcdir)
        bib = "\n".join(p.read_text(errors="ignore") for p in _bib_files(self.env.config, srcdir))
        lines = ["| # | chapter | paper | reproduces | findings: reproduced / not reproduced / "
                 "inconclusive / out of reach / not yet judged |",
                 "|---|---|---|---|---|"]
        for c in CHAPTERS:
            docname = f"book/chapters/{c.slug}"
            page = srcdir / f"{docname}.md"
            built = docname in self.env.found_docs
            link = f"[{c.title}](chapters/{c.slug}.md)" if built else f"{c.title} (to come)"
            cite = ""
            if built and page.exists():
                m = re.search(r"\{cite[a-z:]*\}`([^`,]+)", page.read_text(errors="ignore"))
                cite = bib_citation(bib, m.group(1)) if m else ""
            refs = sorted(sources.get(c.slug, []), key=_ref_order)
            what = ", ".join(refs[:10]) + (", ..." if len(refs) > 10 else "") if refs else "-"
            lines.append(f"| {c.number} | {link} | {cite or '-'} | {_md_escape(what)} | "
                         f"{held.get(c.slug, '-')} |")
        return self._parse("\n".join(lines))


class RobustnessDirective(_ResultsDirective):
    """``{iclr25-robustness} CHAPTER``: for a chapter page, the findings that held in fewer than
    all seeds of the last ``iclr25 robustness`` run (from ``results/robustness/``)."""

    required_arguments = 1

    def run(self):
        _RESULT_PAGES.add(self.env.docname)
        chapter = self.arguments[0]
        folder = _ledger_dir() / robustness.FOLDER / chapter
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if not files:
            return self._parse(f"*No robustness run for {chapter} yet "
                               f"(`iclr25 robustness {chapter.split('-')[0]}`).*")
        import json

        data = [json.loads(f.read_text()) for f in files]
        refused = [(d.get("notebook"), robustness.stale(d)) for d in data]
        refused = [(nb, why) for nb, why in refused if why]
        if refused:
            data = [d for d in data if d.get("notebook") not in {nb for nb, _ in refused}]
        note = ("" if not refused else " Refused as stale (re-run `iclr25 robustness " + chapter.split("-")[0]
                + "`): " + "; ".join(f"{nb} ({why[0]})" for nb, why in refused) + ".")
        if not data:
            return self._parse(f"*No current robustness record for {chapter}.*{note}")
        in_book = [n for n in ledger.book_notebooks() if n.split("/")[0] == chapter]
        covered = "" if len(data) >= len(in_book) else (
            f"; it covered {len(data)} of the chapter's {len(in_book)} notebooks: "
            + ", ".join(d["notebook"] for d in data))
        meta = (f"the robustness run of {min(d.get('created', '') for d in data)[:10]} (profile "
                f"{', '.join(sorted({str(d.get('profile')) for d in data}))}, seeds "
                f"{', '.join(map(str, data[0].get('seeds', [])))}{covered})")
        found = [(d["notebook"], c) for d in data for c in d.get("claims", [])
                 if c.get("kind") == "finding"]
        weak = [(nb, c) for nb, c in found if c["held"] < c["n"]]
        if not weak:
            return self._parse(f"In {meta}, every one of the {len(found)} findings it recorded "
                               f"held in every seed.{note}")
        lines = [f"In {meta}, {len(weak)} of the {len(found)} findings it recorded held in "
                 "fewer than all seeds:", "", "| notebook | finding | held in seeds |", "|---|---|---|"]
        lines += [f"| {nb} | {_md_escape(str(c['claim']))} | {c['held']} of {c['n']} |" for nb, c in weak]
        lines += ["", note.strip()] if note else []
        return self._parse("\n".join(lines))


class RegistryDirective(_ResultsDirective):
    """``{iclr25-registry} CHAPTER``: the chapter's "what held", generated: its registered
    findings counted by verdict, then one row per registry entry (the claim, where the paper
    makes it, the paper's number, ours as effect [95% interval], the control, the verdict of the
    committed result that judged it with the entry's current hash, amendments), checks apart, and
    each amendment with its date and reason."""

    required_arguments = 1

    def run(self):
        from . import registry

        chapter = self.arguments[0]
        try:
            entries = registry.load(chapter, paths.repo_root())
        except FileNotFoundError:
            return self._parse(f"*{chapter} has no claims registry (`book/claims/{chapter}.yaml`) yet.*")
        results = [r for r in self._results() if r.get("chapter") == chapter]
        table = scorecard.registry_table(chapter, entries, results)
        s = scorecard.chapter_summary(results, {chapter: entries}).iloc[0]
        urls = _paper_urls(self.env)
        table["source"] = [_link(src, urls.get(chapter)) for src in table["source"]]
        findings, checks = table[table["kind"] == "finding"], table[table["kind"] == "check"]
        out = [f"**{s['findings']} registered findings** (`book/claims/{chapter}.yaml`, written from "
               "the paper before the runs), judged in the committed book-profile results: "
               + ", ".join(f"{s[v]} {v}" for v in scorecard.VERDICT_COLUMNS if s[v])
               + f"; {s['checks held']} of {s['checks']} checks held; {s['amendments']} "
               "amendment(s). *Ours* is the effect (ours minus the control) with its 95% interval "
               "over the replicates.", ""]
        cols = ["notebook", "claim", "source", "paper", "ours", "control", "verdict"]
        if len(findings):
            out += [scorecard.markdown_table(findings[cols]), ""]
        if len(checks):
            out += [f"```{{admonition}} {s['checks held']} of {s['checks']} checks held (true by "
                    "construction; not counted)", ":class: dropdown", "",
                    scorecard.markdown_table(checks[["notebook", "claim", "source", "verdict"]]),
                    "```", ""]
        amended = [(cid, a) for cid, e in entries.items() for a in e.amendments]
        if amended:
            out += ["Amendments (a registered test changed after registration; dated and explained):", ""]
            out += [f"- `{cid}` ({a.get('date')}): {a.get('field')} "
                    f"{_md_escape(str(a.get('old')))} -> {_md_escape(str(a.get('new')))}; "
                    f"{_md_escape(str(a.get('why')))}" for cid, a in amended]
        return self._parse("\n".join(out))


class TimesDirective(_ResultsDirective):
    """``{iclr25-times} CHAPTER``: each notebook's measured run time in the book profile, from the
    committed results (kernel start to results saved), so a page never quotes a stale time."""

    required_arguments = 1

    def run(self):
        chapter = self.arguments[0]
        rows = [r for r in self._results() if r.get("chapter") == chapter
                and isinstance(r.get("elapsed_s"), (int, float))]
        if not rows:
            return self._parse(f"*No committed book-profile results for {chapter} yet.*")
        rows.sort(key=lambda r: r.get("notebook", ""))
        parts = [f"{r['notebook']} {r['elapsed_s']:.0f} s" for r in rows]
        created = max(str(r.get("created", ""))[:10] for r in rows)
        return self._parse(f"Measured in the `book` profile (the committed results of {created}, "
                           f"2 cores): " + "; ".join(parts) + ".")


class PerformanceDirective(_ResultsDirective):
    """``{iclr25-performance}``: one table and one bar chart of every benchmark's headline ratio
    (ours against the strongest baseline it ran) from the last ``make bench``
    (``results/bench/*.json``, :mod:`iclr25.bench`), with the machine, date and peer versions."""

    def run(self):
        from . import bench

        _RESULT_PAGES.add(self.env.docname)
        recs = bench.load_records(_ledger_dir() / "bench")
        if not recs:
            return self._parse("*No benchmark results yet: `make bench` writes them to "
                               "`results/bench/` (each benchmark through `iclr25.bench`), and this "
                               "page shows them.*")
        out = []
        machines = {}
        for r in recs:
            m = r.get("machine", {})
            key = (m.get("cpu"), m.get("cores"), m.get("torch_threads"))
            machines.setdefault(key, []).append(r)
        for (cpu, cores, threads), rs in machines.items():
            dates = sorted(r.get("date", "")[:10] for r in rs)
            span = dates[0] + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
            load = [r["machine"]["load_avg_1m"] for r in rs
                    if r["machine"].get("load_avg_1m") is not None]
            vers = ", ".join(f"{k} {v}" for k, v in rs[0]["machine"].get("versions", {}).items())
            line = (f"Measured on **{cpu}**, {cores} cores, torch threads {threads}, {span}: "
                    f"{len(rs)} comparisons")
            if load:
                line += f", 1-minute load average at their start {min(load):.1f} to {max(load):.1f}"
            out.append(line + (f" ({vers})." if vers else "."))
        out += ["", "| chapter | comparison | ratio | target | strongest baseline | ours | "
                "agreement (tol) | variants |", "|---|---|---|---|---|---|---|---|"]
        for r in recs:
            rows = {x["name"]: x for x in r["rows"]}
            ours = next(x for x in r["rows"] if x["role"] == "ours")
            base = rows[r["strongest_baseline"]]
            peer = base["name"] + (f" ({base['peer']} {base['version']})" if base.get("version") else "")
            agree = [x["distance"] for x in r["rows"] if x.get("distance") is not None]
            tgt = "" if r.get("target") is None else (
                f"{r['target']:g}x ({'met' if r.get('meets_target') else '**not met**'})")
            var = "; ".join(f"{x['name']}: {x['ratio_vs_strongest']:.2g}x" for x in r["rows"]
                            if x["role"] == "variant")
            out.append(f"| {r['chapter']} | {_md_escape(r['title'])} | **{r['headline']:.2f}x** | "
                       f"{tgt} | {_md_escape(peer)} | {_md_escape(ours['name'])} | "
                       f"{max(agree):.1e} ({r.get('tol', 0):g}) | {_md_escape(var)} |")
        out += ["", "Ratio: the strongest baseline's median time over ours (per unit of work when "
                "the contenders ran different amounts); above 1, ours is faster. Agreement: the "
                "largest distance between our output and a contender's; a benchmark whose outputs "
                "disagree beyond its tolerance fails and writes no record."]
        nodes_ = self._parse("\n".join(out))
        nodes_.append(nodes.raw("", _ratio_chart_svg(recs), format="html"))
        return nodes_


def _ratio_chart_svg(recs) -> str:
    """A horizontal bar chart (inline SVG) of each comparison's headline ratio, target marked."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["id"] for r in recs]
    vals = [max(r["headline"], 1e-3) for r in recs]
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(recs) + 1.2))
    y = list(range(len(recs)))[::-1]
    colors = ["#4c72b0" if (r.get("target") is None or r.get("meets_target")) else "#c44e52" for r in recs]
    ax.barh(y, vals, color=colors)
    for yi, r in zip(y, recs):
        if r.get("target") is not None:
            ax.plot([r["target"]] * 2, [yi - 0.4, yi + 0.4], color="black", lw=1.5)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("speed-up over the strongest baseline (log scale; black tick: target)")
    ax.set_title("Benchmarks: ours vs the strongest baseline (red: target not met)", fontsize=9)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return '<div class="iclr25-performance-chart">' + svg[svg.index("<svg"):] + "</div>"


_REF = re.compile(r"\b(Figs?|Fig|Tables?|Tab|Thm|Theorem|Sec|Eq|Alg|Algorithm|Cor|Corollary|Lemma|Prop)"
                  r"\.?\s*([A-Z]?\d+(?:\.\d+)*)")
_KIND = {"Figs": "Fig.", "Fig": "Fig.", "Tables": "Table", "Table": "Table", "Tab": "Table", "Thm": "Thm",
         "Theorem": "Thm", "Sec": "Sec.", "Eq": "Eq.", "Alg": "Alg.", "Algorithm": "Alg.", "Cor": "Cor.",
         "Corollary": "Cor.", "Lemma": "Lemma", "Prop": "Prop."}


def paper_refs(source: str) -> list[str]:
    """The paper's figures, tables, theorems ... a claim's ``source`` names, normalised
    (``"Fig. 3a; Thm 4.2 (ours)"`` -> ``["Fig. 3", "Thm 4.2"]``); free text is left out."""
    return [f"{_KIND[k]} {n}" for k, n in _REF.findall(source)]


def _ref_order(ref: str):
    kind, num = ref.split(" ", 1)
    order = ["Fig.", "Table", "Thm", "Cor.", "Lemma", "Prop.", "Alg.", "Eq.", "Sec."]
    parts = [int(x) if x.isdigit() else 0 for x in re.sub(r"[A-Z]", "", num).split(".")]
    return (order.index(kind) if kind in order else len(order), parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _bib_files(config, srcdir: Path) -> list[Path]:
    files = getattr(config, "bibtex_bibfiles", None) or []
    return [srcdir / f for f in files if (srcdir / f).exists()]


def bib_citation(bib: str, key: str) -> str:
    """``"Wu, Simsek & Ged (2025), *Loss Landscape of ...*"`` for ``key`` in the BibTeX text
    ``bib`` (braces dropped, at most three surnames then "et al."); ``""`` when the key is absent."""
    m = re.search(r"@\w+\s*\{\s*" + re.escape(key) + r"\s*,(.*?)\n\}", bib, flags=re.S)
    if not m:
        return ""
    body = m.group(1) + "\n"

    def field(name: str) -> str:
        f = re.search(rf"\b{name}\s*=\s*[{{\"](.*?)[}}\"]\s*,?\s*\n", body, flags=re.S | re.I)
        return re.sub(r"\s+", " ", re.sub(r"\\[a-z]+\s*|[{}\\]", "", f.group(1))).strip() if f else ""

    names = [a.strip() for a in field("author").split(" and ") if a.strip()]
    surnames = [a.split(",")[0].strip() if "," in a else a.split()[-1] for a in names]
    if len(surnames) > 3:
        who = f"{surnames[0]} et al."
    elif len(surnames) > 1:
        who = ", ".join(surnames[:-1]) + " & " + surnames[-1]
    else:
        who = "".join(surnames)
    title = field("title")
    return f"{who} ({field('year')}), *{title}*" if title else f"{who} ({field('year')})"


def _read_results_last(app, env, docnames):
    """Read pages that show results after all notebooks (which write them) have executed."""
    late = [d for d in docnames if d in _RESULT_PAGES or _uses_directive(app, d)]
    for d in late:
        docnames.remove(d)
    docnames.extend(late)


def _uses_directive(app, docname: str) -> bool:
    for suffix in (".md", ".rst"):
        p = Path(app.srcdir) / f"{docname}{suffix}"
        if p.exists():
            text = p.read_text(errors="ignore")
            return any(d in text for d in _DIRECTIVES)
    return False


def _always_outdated(app, env, added, changed, removed):
    """Results change with every build: re-read the pages that show them; in a book build from
    the cache, also the notebooks whose committed result is stale (:func:`_stale_notebooks`)."""
    pages = [d for d in env.found_docs if _uses_directive(app, d) and d not in added | changed]
    stale = [d for d in _stale_notebooks(app, env) if d in env.found_docs and d not in added | changed]
    return pages + stale


def _stale_notebooks(app, env) -> list[str]:
    """Docnames of notebooks whose ledger entry is stale, missing or from another profile, in a
    ``book``-profile build that executes from the cache into the ledger (``make book``); their
    cache records are removed so that they execute again."""
    if app.config.nb_execution_mode != "cache" or profiles.resolve(None) != ledger.LEDGER_PROFILE:
        return []
    if paths.results_dir().resolve() != _ledger_dir().resolve():
        return []
    redo = [p.notebook for p in ledger.check(_ledger_dir())
            if p.kind in ("stale", "missing", "profile", "unreadable")]
    if not redo:
        return []
    # myst-nb's own choice: the configured path, else <outdir>/../.jupyter_cache
    cache_path = (getattr(getattr(env, "mystnb_config", None), "execution_cache_path", None)
                  or app.config.nb_execution_cache_path
                  or str(Path(app.outdir).parent / ".jupyter_cache"))
    root = paths.repo_root()
    targets = {str((root / "notebooks" / f"{n}.ipynb").resolve()) for n in redo}
    try:
        from jupyter_cache import get_cache

        cache = get_cache(cache_path)
        for rec in cache.list_cache_records():
            if str(Path(rec.uri).resolve()) in targets:
                cache.remove_cache(rec.pk)
    except Exception as e:  # noqa: BLE001 - no cache yet: everything executes anyway
        print(f"iclr25: could not prune the execution cache {cache_path}: {e}")
    print(f"iclr25: {len(redo)} notebook(s) with a stale or missing book result execute again: "
          + ", ".join(redo))
    return [f"notebooks/{n}" for n in redo]


def _summary(app, exception):
    """Print (and write to ``<outdir>/../execution.txt``) one line per notebook of this build:
    how it ran, its time, and what failed."""
    if app.builder.format != "html":
        return
    rows = []
    results_dir = paths.results_dir()
    for docname in sorted(app.env.found_docs):
        data = _exec_data(app.env, docname)
        if data is None:
            continue
        runtime = data.get("runtime")
        failed = []
        ident = docname.removeprefix("notebooks/")
        f = results_dir / f"{ident}.json"
        if f.is_file():
            try:
                import json

                failed = [c.get("claim", "?") for c in ledger.failed_claims(json.loads(f.read_text()))]
            except ValueError:
                pass
        ok = data.get("succeeded", True)
        status = "ok" if ok else f"FAILED ({data.get('error')})"
        rows.append((ident, str(data.get("method")), runtime, status, failed))
    if not rows:
        return
    width = max(len(r[0]) for r in rows)
    lines = [f"{'notebook':<{width}}  {'method':<6}  {'time (s)':>8}  status"]
    for ident, method, runtime, status, failed in rows:
        t = f"{runtime:8.1f}" if isinstance(runtime, (int, float)) else f"{'-':>8}"
        lines.append(f"{ident:<{width}}  {method:<6}  {t}  {status}")
        lines += [f"{'':<{width}}    failed claim: {c}" for c in failed]
    total = sum(r[2] for r in rows if isinstance(r[2], (int, float)))
    n_failed = sum(not r[3].startswith("ok") for r in rows)
    lines.append(f"{len(rows)} notebook(s), {total:.0f} s of execution (the cached ones: their time "
                 f"when they ran), {n_failed} failed; profile {profiles.resolve(None)}")
    text = "\n".join(lines)
    print("\n" + text)
    try:
        (Path(app.outdir).parent / "execution.txt").write_text(text + "\n")
    except OSError:
        pass


def _offline_mathjax(app, config):
    config.mathjax_path = "mathjax/tex-chtml.js"  # relative to _static/
    # the theme's colour-mode script logs a console error when no default mode is given
    config.html_context = {"default_mode": "auto", **(config.html_context or {})}


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        import shutil

        shutil.copytree(_mathjax_dir() / "es5", Path(app.outdir) / "_static" / "mathjax",
                        dirs_exist_ok=True, ignore=shutil.ignore_patterns("sre", "*.map"))


def _is_remote_or_thebe(f) -> bool:
    name = str(getattr(f, "filename", None) or f or "")
    body = str(getattr(f, "attributes", {}).get("body", ""))
    return (name.startswith(("http:", "https:", "//")) or "thebe" in name
            or "THEBE_JS_URL" in body)


def _drop_remote_scripts(app, pagename, templatename, context, doctree):
    """The book reads offline: no script or style from another host. jupyter-book always loads
    sphinx-thebe, which points at a CDN (and declares its URL twice, a console error); the book
    has no live kernels, so its files go too."""
    for key in ("script_files", "css_files"):
        files = context.get(key)
        if files:
            context[key] = [f for f in files if not _is_remote_or_thebe(f)]


def setup(app):
    # MathJax on every page: toc titles with math appear in every page's sidebar
    app.set_html_assets_policy("always")
    app.add_directive("iclr25-scorecard", ScorecardDirective)
    app.add_directive("iclr25-chapters", ChaptersDirective)
    app.add_directive("iclr25-robustness", RobustnessDirective)
    app.add_directive("iclr25-performance", PerformanceDirective)
    app.add_directive("iclr25-times", TimesDirective)
    app.add_directive("iclr25-registry", RegistryDirective)
    app.connect("config-inited", _offline_mathjax)
    app.connect("build-finished", _copy_mathjax)
    app.connect("html-page-context", _drop_remote_scripts, priority=900)
    app.connect("env-before-read-docs", _read_results_last)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("build-finished", _summary)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}

"""Sphinx extension for the book (enabled in ``_config.yml``).

- serves MathJax from the PyPI package ``django-static-mathjax`` (no CDN: the book reads offline);
- ``{iclr25-scorecard}``: the claims of every chapter, paper vs ours, from ``results/``;
- ``{iclr25-chapters}``: the chapter table with claims held / recorded, from ``results/``.

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

from . import claims, scorecard
from .chapters import CHAPTERS

_RESULT_PAGES: set[str] = set()
_DIRECTIVES = ("iclr25-scorecard", "iclr25-chapters")


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
        _RESULT_PAGES.add(self.env.docname)
        try:
            return claims.load_results()
        except FileNotFoundError:
            return []


class ScorecardDirective(_ResultsDirective):
    def run(self):
        results = self._results()
        if not results:
            return self._parse("*No results yet: build the book (`make book`) to fill this page.*")
        table = scorecard.scorecard_table(results)
        summary = scorecard.chapter_summary(results)
        held, rec = int(summary["claims held"].sum()), int(summary["claims recorded"].sum())
        out = [f"**{held} of {rec} claims held** across {len(summary)} chapter(s) in this build.", "",
               scorecard.markdown_table(summary), ""]
        cols = ["notebook", "claim", "source", "paper", "ours", "holds", "must hold", "note"]
        for _, s in summary.iterrows():
            rows = table[table["chapter"] == s["chapter"]][cols]
            out += [f"**{s['chapter']}**: {s['claims held']} of {s['claims recorded']} claims held "
                    f"(profile {s['profile']})", "", scorecard.markdown_table(rows), ""]
        return self._parse("\n".join(out))


class ChaptersDirective(_ResultsDirective):
    """The landing page's table: one row per paper, linked when its chapter is in this build, with
    the citation (from the chapter page's first ``{cite}`` key and ``book/references.bib``), what our
    claims reproduce (their paper sources) and how many held, both from this build's results."""

    def run(self):
        results = self._results()
        summary = scorecard.chapter_summary(results)
        held = {r["chapter"]: f"{r['claims held']} / {r['claims recorded']}" for _, r in summary.iterrows()}
        sources: dict[str, list[str]] = {}
        for r in results:
            for c in r.get("claims", []):
                for s in paper_refs(str(c.get("source") or "")):
                    if s not in sources.setdefault(r.get("chapter"), []):
                        sources[r.get("chapter")].append(s)
        srcdir = Path(self.env.srcdir)
        bib = "\n".join(p.read_text(errors="ignore") for p in _bib_files(self.env.config, srcdir))
        lines = ["| # | chapter | paper | reproduces | claims held / recorded |", "|---|---|---|---|---|"]
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
    """Results change with every build: re-read the pages that show them."""
    return [d for d in env.found_docs if _uses_directive(app, d) and d not in added | changed]


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
    app.connect("config-inited", _offline_mathjax)
    app.connect("build-finished", _copy_mathjax)
    app.connect("html-page-context", _drop_remote_scripts, priority=900)
    app.connect("env-before-read-docs", _read_results_last)
    app.connect("env-get-outdated", _always_outdated)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}

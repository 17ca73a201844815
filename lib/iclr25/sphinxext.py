"""Sphinx extension for the book (enabled in ``_config.yml``).

- serves MathJax from the PyPI package ``django-static-mathjax`` (no CDN: the book reads offline);
- ``{iclr25-scorecard}``: the claims of every chapter, paper vs ours, from ``results/``;
- ``{iclr25-chapters}``: the chapter table with claims held / recorded, from ``results/``.

Pages using these directives are read after every notebook has executed (so they see this
build's results) and are re-read on every build.
"""

from __future__ import annotations

import importlib.util
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
    def run(self):
        summary = scorecard.chapter_summary(self._results())
        held = {r["chapter"]: f"{r['claims held']} / {r['claims recorded']}" for _, r in summary.iterrows()}
        lines = ["| # | chapter | paper | claims held / recorded |", "|---|---|---|---|"]
        for c in CHAPTERS:
            page = Path(self.env.srcdir) / "book" / "chapters" / f"{c.slug}.md"
            link = f"[{c.slug}](chapters/{c.slug}.md)" if page.exists() else f"{c.slug} (to come)"
            lines.append(f"| {c.number} | {link} | {c.title} | {held.get(c.slug, '-')} |")
        return self._parse("\n".join(lines))


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


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        import shutil

        shutil.copytree(_mathjax_dir() / "es5", Path(app.outdir) / "_static" / "mathjax",
                        dirs_exist_ok=True, ignore=shutil.ignore_patterns("sre", "*.map"))


def _drop_remote_scripts(app, pagename, templatename, context, doctree):
    """The book reads offline: no script from another host (sphinx-thebe adds one from a CDN)."""
    for key in ("script_files", "css_files"):
        files = context.get(key)
        if files:
            context[key] = [f for f in files if not str(getattr(f, "filename", f)).startswith(("http:", "https:", "//"))]


def setup(app):
    app.add_directive("iclr25-scorecard", ScorecardDirective)
    app.add_directive("iclr25-chapters", ChaptersDirective)
    app.connect("config-inited", _offline_mathjax)
    app.connect("build-finished", _copy_mathjax)
    app.connect("html-page-context", _drop_remote_scripts, priority=900)
    app.connect("env-before-read-docs", _read_results_last)
    app.connect("env-get-outdated", _always_outdated)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}

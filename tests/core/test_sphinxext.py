"""The book's Sphinx extension: citations for the landing table, offline assets."""

from types import SimpleNamespace

from iclr25.sphinxext import _is_remote_or_thebe, bib_citation

BIB = r"""@inproceedings{a2025,
  title     = {Loss of {ReLU} Nets},
  author    = {Wu, Frank and Simsek, Berfin and Ged, Fran{\c{c}}ois},
  year      = {2025}
}
@article{b2024,
  author = {Ada Lovelace and Bob Babbage and Carl Gauss and Dan Euler},
  title = "Four authors",
  year = {2024},
}
"""


def test_bib_citation_formats_surnames_year_title():
    assert bib_citation(BIB, "a2025") == "Wu, Simsek & Ged (2025), *Loss of ReLU Nets*"
    assert bib_citation(BIB, "b2024") == "Lovelace et al. (2024), *Four authors*"
    assert bib_citation(BIB, "missing") == ""


def test_remote_and_thebe_assets_are_dropped():
    js = lambda filename, body="": SimpleNamespace(filename=filename, attributes={"body": body})  # noqa: E731
    assert _is_remote_or_thebe(js("https://cdn.example/x.js"))
    assert _is_remote_or_thebe(js("_static/sphinx-thebe.js"))
    assert _is_remote_or_thebe(js(None, 'const THEBE_JS_URL = "https://unpkg.com/thebe"'))
    assert not _is_remote_or_thebe(js("_static/pydata-sphinx-theme.js"))
    assert not _is_remote_or_thebe(js(None, "var DOCUMENTATION_OPTIONS = {}"))


def test_paper_refs_keep_only_the_papers_figures_tables_and_theorems():
    from iclr25.sphinxext import _ref_order, paper_refs

    assert paper_refs("Fig. 3a; Thm 4.2 (ours), Sec. 4.1, Figs 2, Table 1") == \
        ["Fig. 3", "Thm 4.2", "Sec. 4.1", "Fig. 2", "Table 1"]
    assert paper_refs("ours (random-target sweep)") == []
    assert sorted(["Sec. 5", "Fig. 12", "Fig. 3", "Table 2", "Thm 1"], key=_ref_order) == \
        ["Fig. 3", "Fig. 12", "Table 2", "Thm 1", "Sec. 5"]

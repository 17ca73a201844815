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

"""The results ledger: input hashes, staleness, the CI comparison and the CI pick."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from iclr25 import ledger, paths
from iclr25.claims import Claims


def _notebook(path: Path, *codes: str) -> None:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# title"}]
    cells += [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
               "source": c} for c in codes]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


@pytest.fixture()
def book(tmp_path):
    """A tiny book: package iclr25 with a core module, a chapter subpackage importing it
    relatively and lazily, two notebooks (one uses the chapter, one only the core)."""
    pkg = tmp_path / "lib" / "iclr25"
    (pkg / "chap").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""pkg"""\n')
    (pkg / "core.py").write_text("X = 1\n")
    (pkg / "tinygpt.py").write_text("def f():\n    return 2\n")
    (pkg / "unused.py").write_text("Y = 3\n")
    (pkg / "chap" / "__init__.py").write_text("from .model import g\n")
    (pkg / "chap" / "model.py").write_text(
        "from ..core import X\n\ndef g():\n    from iclr25 import tinygpt  # lazy\n    return tinygpt.f()\n")
    (tmp_path / "constraints.txt").write_text("numpy==2.0\n")
    (tmp_path / "pyproject.toml").write_text("")
    _notebook(tmp_path / "notebooks" / "01-a" / "01-uses-chap.ipynb",
              "profile = None", "%matplotlib inline\nimport iclr25.chap as c\nfrom iclr25.core import X")
    _notebook(tmp_path / "notebooks" / "01-a" / "02-core-only.ipynb", "from iclr25 import core")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: notebooks/01-a/01-uses-chap\n"
        "  - file: notebooks/01-a/02-core-only\n")
    return tmp_path


def _commit_result(root: Path, ident: str, pkg: Path, *, holds=True, profile="book", ours=1,
                   tol=None) -> Path:
    chapter, notebook = ident.split("/")
    data = {"schema": 1, "chapter": chapter, "notebook": notebook, "profile": profile,
            "claims": [{"claim": "c", "source": "Fig. 1", "paper": 1, "ours": ours, "holds": holds,
                        "must_hold": True, "note": "", "tol": tol}],
            "inputs": ledger.inputs_record(chapter, notebook, root, pkg)}
    out = root / "results" / chapter / f"{notebook}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data))
    return out


def test_module_deps_follow_relative_lazy_and_parent_imports(book):
    pkg = book / "lib" / "iclr25"
    deps = ledger.module_deps({"iclr25.chap"}, pkg)
    assert sorted(deps) == ["iclr25", "iclr25.chap", "iclr25.chap.model", "iclr25.core",
                            "iclr25.tinygpt"]
    nb = book / "notebooks" / "01-a" / "01-uses-chap.ipynb"
    assert ledger.notebook_imports(nb) == {"iclr25.chap", "iclr25.core", "iclr25.core.X"}
    files = [p.relative_to(book).as_posix() for p in ledger.input_files("01-a", "02-core-only", book, pkg)]
    assert files == ["notebooks/01-a/02-core-only.ipynb", "lib/iclr25/__init__.py",
                     "lib/iclr25/core.py", "constraints.txt"]


def test_notebook_hash_ignores_outputs_but_not_sources(book):
    nb = book / "notebooks" / "01-a" / "02-core-only.ipynb"
    pkg = book / "lib" / "iclr25"
    before = ledger.inputs_record("01-a", "02-core-only", book, pkg)
    data = json.loads(nb.read_text())
    data["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hi"}]
    data["cells"][1]["execution_count"] = 7
    data["metadata"]["kernelspec"] = {"name": "python3"}
    nb.write_text(json.dumps(data))
    assert ledger.inputs_record("01-a", "02-core-only", book, pkg) == before
    data["cells"][1]["source"] = "from iclr25 import core  # edited"
    nb.write_text(json.dumps(data))
    assert ledger.inputs_record("01-a", "02-core-only", book, pkg)["digest"] != before["digest"]


def test_check_names_exactly_the_notebooks_an_edit_makes_stale(book):
    pkg = book / "lib" / "iclr25"
    for ident in ("01-a/01-uses-chap", "01-a/02-core-only"):
        _commit_result(book, ident, pkg)
    assert ledger.check(root=book, package_dir=pkg) == []
    with open(pkg / "tinygpt.py", "a") as f:
        f.write("# a change\n")
    problems = ledger.check(root=book, package_dir=pkg)
    assert [(p.notebook, p.kind, p.changed) for p in problems] == \
        [("01-a/01-uses-chap", "stale", ["lib/iclr25/tinygpt.py"])]
    assert "lib/iclr25/tinygpt.py" in str(problems[0])
    # re-running it (here: re-recording its inputs) makes the ledger current again
    _commit_result(book, "01-a/01-uses-chap", pkg)
    assert ledger.check(root=book, package_dir=pkg) == []
    # the pinned environment is an input of every notebook
    (book / "constraints.txt").write_text("numpy==2.1\n")
    assert {p.notebook for p in ledger.check(root=book, package_dir=pkg)} == \
        {"01-a/01-uses-chap", "01-a/02-core-only"}


def test_check_reports_missing_profile_failed_and_orphan(book):
    pkg = book / "lib" / "iclr25"
    _commit_result(book, "01-a/01-uses-chap", pkg, holds=False)
    _commit_result(book, "01-a/02-core-only", pkg, profile="smoke")
    orphan = book / "results" / "01-a" / "03-gone.json"
    orphan.write_text("{}")
    kinds = {p.notebook: p.kind for p in ledger.check(root=book, package_dir=pkg)}
    assert kinds == {"01-a/01-uses-chap": "failed", "01-a/02-core-only": "profile",
                     "01-a/03-gone": "orphan"}
    orphan.unlink()
    (book / "results" / "01-a" / "02-core-only.json").unlink()
    kinds = {p.notebook: p.kind for p in ledger.check(root=book, package_dir=pkg)}
    assert kinds["01-a/02-core-only"] == "missing"


def test_check_reports_a_tolerance_ci_cannot_compare(book):
    """A tol on a descriptive ours ("0.06 vs 0.08") would make CI's comparison fail however well
    the re-run reproduces it: the ledger check names it before CI does."""
    pkg = book / "lib" / "iclr25"
    _commit_result(book, "01-a/01-uses-chap", pkg, ours="0.062 vs 0.083", tol=0.1)
    _commit_result(book, "01-a/02-core-only", pkg, ours=[0.062, 0.083], tol=0.1)
    problems = ledger.check(root=book, package_dir=pkg)
    assert [(p.notebook, p.kind) for p in problems] == [("01-a/01-uses-chap", "untestable")]
    _commit_result(book, "01-a/01-uses-chap", pkg, ours="0.062 vs 0.083", tol=None)
    assert ledger.check(root=book, package_dir=pkg) == []


def test_as_numbers_flattens_numbers_and_refuses_anything_else():
    assert ledger.as_numbers(3) == [3.0]
    assert ledger.as_numbers([0.5, [1, 2.5]]) == [0.5, 1.0, 2.5]
    for x in ("0.5", True, None, [0.5, "a"], {"a": 1}):
        assert ledger.as_numbers(x) is None
    assert ledger.untestable_claims(_result(("a", True, "1.00 -> 0.00", 0.2), ("b", True, 0.3, 0.1),
                                            ("c", True, "text", None))) == \
        [{"claim": "a", "holds": True, "ours": "1.00 -> 0.00", "tol": 0.2}]


def test_the_real_ledger_goes_stale_on_a_tinygpt_edit(tmp_path):
    """Against the committed results: current as committed; after an edit to tinygpt.py, stale for
    exactly the book notebooks that import it (directly or through a chapter module)."""
    root = paths.repo_root()
    for name in ("lib", "notebooks", "results"):
        shutil.copytree(root / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    # the registries judge the results: a result judged by an entry that is not there is stale
    shutil.copytree(root / "book" / "claims", tmp_path / "book" / "claims")
    for name in ("constraints.txt", "_toc.yml", "pyproject.toml"):
        shutil.copy(root / name, tmp_path / name)
    pkg = tmp_path / "lib" / "iclr25"
    assert [str(p) for p in ledger.check(root=tmp_path, package_dir=pkg)] == []
    users = {ident for ident in ledger.book_notebooks(tmp_path)
             if "lib/iclr25/tinygpt.py" in ledger.input_hashes(*ident.split("/"), tmp_path, pkg)}
    assert "11-retrieval-problem/03-head-emergence" in users
    with open(pkg / "tinygpt.py", "a") as f:
        f.write("\n# an edit\n")
    problems = ledger.check(root=tmp_path, package_dir=pkg)
    assert {p.notebook for p in problems} == users
    assert all(p.kind == "stale" and p.changed == ["lib/iclr25/tinygpt.py"] for p in problems)


def _result(*claims):
    return {"claims": [dict(zip(("claim", "holds", "ours", "tol"), c)) for c in claims]}


def test_compare_fails_on_a_flipped_finding():
    committed = _result(("a", True, 0.9, None), ("b", False, 0.1, None))
    assert ledger.compare(committed, _result(("a", True, 0.8, None), ("b", False, 0.2, None))) == []
    flipped = ledger.compare(committed, _result(("a", False, 0.4, None), ("b", False, 0.1, None)))
    assert len(flipped) == 1 and flipped[0].startswith("held, now does not: a")
    # a verdict that moves the other way is a change too: a fresh clone must get the committed book
    up = ledger.compare(committed, _result(("a", True, 0.9, None), ("b", True, 0.9, None)))
    assert len(up) == 1 and up[0].startswith("did not hold, now holds: b")
    gone = ledger.compare(committed, _result(("b", False, 0.1, None)))
    assert gone == ["claim no longer recorded: a"]


def test_compare_holds_numbers_to_their_stated_tolerance():
    committed = _result(("acc", True, [0.99, 0.98], 0.02), ("n", True, 5, 0))
    assert ledger.compare(committed, _result(("acc", True, [0.975, 1.0], None), ("n", True, 5, None))) == []
    moved = ledger.compare(committed, _result(("acc", True, [0.96, 0.98], None), ("n", True, 6, None)))
    assert [m.split(":")[0] for m in moved] == ["moved beyond tol 0.02", "moved beyond tol 0"]
    odd = ledger.compare(committed, _result(("acc", True, "n/a", None), ("n", True, 5, None)))
    assert len(odd) == 1 and odd[0].startswith("not comparable within tol 0.02")


def test_claims_record_a_tolerance_and_reject_a_bad_one():
    c = Claims("01-a", "01-x", "smoke")
    assert c.check("x", kind="finding", source="Fig. 1", paper=1, ours=1.0, holds=True, tol=0.5).tol == 0.5
    with pytest.raises(ValueError, match="tol must be a non-negative number"):
        c.check("y", kind="finding", source="Fig. 1", paper=1, ours=1.0, holds=True, tol=-1)


def test_rotation_walks_through_every_notebook():
    items = [f"c/{i}" for i in range(7)]
    day = dt.date(2026, 12, 1)
    picks = [ledger.rotation(items, 2, day + dt.timedelta(days=d)) for d in range(7)]
    assert all(len(p) == 2 and len(set(p)) == 2 for p in picks)
    assert set().union(*picks) == set(items)
    assert ledger.rotation(items, 2, day) == ledger.rotation(items, 2, day)
    for n, k in ((6, 2), (31, 31), (5, 5)):  # k and n not coprime: every start still comes round
        items = [f"c/{i}" for i in range(n)]
        starts = {ledger.rotation(items, k, day + dt.timedelta(days=d))[0] for d in range(n)}
        assert starts == set(items)
    assert ledger.rotation([], 2, day) == []


def test_pick_for_ci_takes_the_last_results_commit_within_budget(book):
    pkg = book / "lib" / "iclr25"
    git = lambda *a: subprocess.run(["git", *a], cwd=book, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "0")
    day = dt.date(2026, 12, 1)
    # no commit touched results/: two by rotation
    picked, why = ledger.pick_for_ci(book, day=day)
    assert sorted(picked) == ["01-a/01-uses-chap", "01-a/02-core-only"] and "rotation" in why
    for ident, secs in (("01-a/01-uses-chap", 600.0), ("01-a/02-core-only", 500.0)):
        f = _commit_result(book, ident, pkg)
        f.write_text(json.dumps({**json.loads(f.read_text()), "elapsed_s": secs}))
    git("add", "results")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "results")
    assert ledger.changed_in_last_results_commit(book) == ["01-a/01-uses-chap", "01-a/02-core-only"]
    # a later commit of robustness files only does not count as a change of the ledger
    (book / "results" / "robustness" / "01-a").mkdir(parents=True)
    (book / "results" / "robustness" / "01-a" / "01-uses-chap.json").write_text("{}")
    git("add", "results")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "robustness")
    assert ledger.changed_in_last_results_commit(book) == ["01-a/01-uses-chap", "01-a/02-core-only"]
    picked, why = ledger.pick_for_ci(book, budget_s=900, day=day)
    assert len(picked) == 1 and "changed in the last commit" in why and "1 of 2 fit" in why
    picked, _ = ledger.pick_for_ci(book, budget_s=2000, day=day)
    assert sorted(picked) == ["01-a/01-uses-chap", "01-a/02-core-only"]


def test_pins_below_the_marker_are_inputs_only_of_notebooks_that_name_them(book):
    """A benchmark peer's pin below the marker leaves every result current; a tool's pin there
    is an input of exactly the notebooks whose code (or the iclr25 modules it imports) names it;
    the text above the marker is an input of every notebook."""
    pkg = book / "lib" / "iclr25"
    (pkg / "chap" / "tool.py").write_text(
        '"""Plain code, not trl (a docstring that mentions a package does not name it)."""\n'
        'import importlib.util\n\ndef where():\n    return importlib.util.find_spec("sandbox_bin")\n')
    (pkg / "chap" / "__init__.py").write_text("from .model import g\nfrom . import tool\n")
    for ident in ("01-a/01-uses-chap", "01-a/02-core-only"):
        _commit_result(book, ident, pkg)
    before = (book / "constraints.txt").read_text()
    # the marker and a bench-only pin: nothing goes stale, the hash is the old file's
    (book / "constraints.txt").write_text(before + ledger.CONSTRAINTS_MARKER + "\ntrl==0.20.0\n")
    assert ledger.check(root=book, package_dir=pkg) == []
    assert ledger.split_constraints((book / "constraints.txt").read_text()) == (before, ["trl==0.20.0"])
    # a pin the chapter names (as "sandbox_bin"; the pin spells it "Sandbox-Bin")
    with open(book / "constraints.txt", "a") as f:
        f.write("Sandbox-Bin==1.0\n")
    assert [(p.notebook, p.changed) for p in ledger.check(root=book, package_dir=pkg)] == \
        [("01-a/01-uses-chap", ["constraints.txt"])]
    _commit_result(book, "01-a/01-uses-chap", pkg)
    # above the marker: every notebook
    (book / "constraints.txt").write_text("numpy==2.1\n" + ledger.CONSTRAINTS_MARKER
                                          + "\ntrl==0.20.0\nSandbox-Bin==1.0\n")
    assert {p.notebook for p in ledger.check(root=book, package_dir=pkg)} == \
        {"01-a/01-uses-chap", "01-a/02-core-only"}


def test_pin_name_normalises_requirement_lines():
    assert ledger.pin_name("Scikit_Bio==0.6.2") == "scikit_bio"
    assert ledger.pin_name("dask[distributed]==2024.1 ; python_version>'3'") == "dask"
    assert ledger.pin_name("inspect-ai>=0.3") == "inspect_ai"


def test_moved_untoleranced_lists_numbers_without_a_tol_that_moved():
    committed = _result(("a", True, 0.25, None), ("b", True, [1, 2], None), ("c", True, 0.5, 0.1),
                        ("d", True, "x", None), ("e", True, float("nan"), None))
    same = _result(("a", True, 0.25 + 1e-12, None), ("b", True, [1, 2], None), ("c", True, 0.55, None),
                   ("d", True, "x", None), ("e", True, float("nan"), None))
    assert ledger.moved_untoleranced(committed, same) == []
    moved = ledger.moved_untoleranced(committed, _result(
        ("a", True, 0.26, None), ("b", True, [1, 3], None), ("c", True, 0.9, None),
        ("d", True, "y", None), ("e", True, float("nan"), None)))
    assert [m.split(":")[0] for m in moved] == ["moved (no tol)", "moved (no tol)", "changed (no tol)"]
    assert [m.split(": ")[1].split(" (")[0] for m in moved] == ["a", "b", "d"]


def test_code_digest_follows_the_builders_and_their_imports(book):
    pkg = book / "lib" / "iclr25"
    d0 = ledger.code_digest("iclr25.chap", package_dir=pkg)
    assert d0 == ledger.code_digest("chap", package_dir=pkg)          # the prefix is optional
    assert ledger.code_digest("iclr25.core", package_dir=pkg) != d0
    (pkg / "unused.py").write_text("Y = 4\n")                          # not imported by chap
    assert ledger.code_digest("iclr25.chap", package_dir=pkg) == d0
    (pkg / "tinygpt.py").write_text("def f():\n    return 3\n")     # imported lazily by chap.model
    assert ledger.code_digest("iclr25.chap", package_dir=pkg) != d0


def test_artifact_path_is_keyed_by_config_and_code(tmp_path, monkeypatch):
    from iclr25 import ledger as real
    p = paths.artifact_path(tmp_path, "zoo-book", "cfg1", ["iclr25.phylolm.study"])
    assert p.parent == tmp_path and p.name.startswith("zoo-book-cfg1-")
    assert p == paths.artifact_path(tmp_path, "zoo-book", "cfg1", ["iclr25.phylolm.study"])
    assert p != paths.artifact_path(tmp_path, "zoo-book", "cfg2", ["iclr25.phylolm.study"])
    assert paths.artifact_path(tmp_path, "a", "k", ["iclr25.profiles"], suffix=".pt").suffix == ".pt"
    monkeypatch.setattr(real, "_file_hash", lambda path: "edited")    # any code change moves it
    assert p != paths.artifact_path(tmp_path, "zoo-book", "cfg1", ["iclr25.phylolm.study"])


def test_every_cache_of_the_book_is_keyed_by_code(tmp_path, monkeypatch):
    """The chapters' caches (runs/ and the cache folder) change their path when the code that
    builds them changes: a fresh clone never gets an entry a warm machine would reuse."""
    from iclr25 import ledger as real
    from iclr25.phylolm import configs as pconf, study
    from iclr25.topk_sae import acts

    monkeypatch.setenv("ICLR25_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ICLR25_CACHE", str(tmp_path / "cache"))
    cfg = pconf.zoo_config("smoke")
    from iclr25.refat import configs as rconf, pipeline

    spec, sft = acts.ActsSpec(n_tokens=1000), rconf.training("smoke").sft

    def where():
        return [study.zoo_folder(cfg, "smoke"), acts.default_cache_folder(spec),
                pipeline.cache_path(sft)]

    before = where()
    assert all(str(tmp_path) in str(p) for p in before)
    monkeypatch.setattr(real, "_file_hash", lambda path: "edited")
    assert all(a != b for a, b in zip(before, where()))


def test_bookkeeping_modules_are_not_inputs_and_do_not_stale_a_result(book):
    """ledger and paths locate files and keep the books: they are not inputs of a result, and a
    result recorded when they were (an older ledger) stays current after they change."""
    pkg = book / "lib" / "iclr25"
    (pkg / "paths.py").write_text("ROOT = '.'\n")
    (pkg / "core.py").write_text("from . import paths\nX = 1\n")
    ident = "01-a/02-core-only"
    f = _commit_result(book, ident, pkg)
    assert "lib/iclr25/paths.py" not in json.loads(f.read_text())["inputs"]["files"]
    data = json.loads(f.read_text())                      # as an older ledger recorded it
    data["inputs"]["files"]["lib/iclr25/paths.py"] = "an older hash"
    f.write_text(json.dumps(data))
    (pkg / "paths.py").write_text("ROOT = '..'\n")
    assert ledger.check(root=book, package_dir=pkg, notebooks=[ident]) == []
    (pkg / "core.py").write_text("from . import paths\nX = 2\n")   # a real input still counts
    assert [p.kind for p in ledger.check(root=book, package_dir=pkg, notebooks=[ident])] == ["stale"]

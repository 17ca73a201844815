"""environment.yml tells conda users to install exactly the Makefile's --no-deps packages."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _nodeps() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^NODEPS := (.*?)(?<!\\)\n", text, flags=re.S | re.M)
    return set(m.group(1).replace("\\\n", " ").split())


def test_environment_yml_lists_the_makefiles_nodeps_packages():
    env = (ROOT / "environment.yml").read_text()
    listed = set(re.findall(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9_.]*", env))
    assert _nodeps() and _nodeps() == listed


def test_every_nodeps_package_is_pinned_in_constraints():
    pins = {ln.split("==")[0].lower().replace("_", "-"): ln.split("==")[1]
            for ln in (ROOT / "constraints.txt").read_text().split() if "==" in ln}
    for pkg in _nodeps():
        name, version = pkg.split("==")
        assert pins.get(name.lower().replace("_", "-")) == version, pkg


def test_no_package_make_install_installs_sits_below_the_ledger_marker_unnamed():
    """Pins below ledger.CONSTRAINTS_MARKER are inputs only of notebooks whose code names the
    package. That is honest only for packages the book's environment does not install (benchmark
    peers) or that the library names where it uses them: every package in the closure of
    `make install` (iclr25 with the dev extra, plus the --no-deps packages) that is pinned below
    the marker must be named by some module of lib/iclr25."""
    import ast
    import importlib.metadata as md

    from packaging.requirements import Requirement

    from iclr25 import ledger

    _, below = ledger.split_constraints((ROOT / "constraints.txt").read_text())
    below_names = {ledger.pin_name(ln) for ln in below}
    todo = [Requirement(r) for r in md.requires("iclr25") or []]
    todo = [r for r in todo if r.marker is None or r.marker.evaluate({"extra": "dev"})]
    todo += [Requirement(p) for p in _nodeps()]
    closure: set[str] = set()
    while todo:
        req = todo.pop()
        name = ledger.pin_name(req.name)
        if name in closure:
            continue
        closure.add(name)
        try:
            reqs = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r)
    named: set[str] = set()
    for path in (ROOT / "lib" / "iclr25").rglob("*.py"):
        named |= ledger._names_in(ast.parse(path.read_text()))
    unnamed = sorted((closure & below_names) - named)
    assert not unnamed, (f"{unnamed} are installed by `make install` but pinned below the ledger "
                         "marker in constraints.txt and named by no iclr25 module: move them above it")

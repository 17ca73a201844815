"""The conda environment (environment.yml + `make conda-extras`) installs what `make install` does,
and the environment these tests run in holds that set at its pins."""

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _make_variables(text: str) -> dict[str, str]:
    """``NAME := value`` and ``NAME ?= value`` of the Makefile (continuation lines joined)."""
    text = text.replace("\\\n", " ")
    return {m.group(1): " ".join(m.group(2).split())
            for m in re.finditer(r"^([A-Z_]+) *[:?]?= *(.*)$", text, flags=re.M)}


def _expand(text: str, variables: dict[str, str]) -> str:
    for _ in range(5):
        text = re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m.group(1), m.group(0)), text)
    return text


def _recipe(text: str, target: str) -> list[str]:
    """The recipe lines of ``target`` (continuations joined, comments dropped)."""
    lines = text.replace("\\\n", " ").splitlines()
    start = next(i for i, ln in enumerate(lines) if re.match(rf"^{re.escape(target)}:", ln))
    out = []
    for ln in lines[start + 1:]:
        if not ln.startswith("\t"):
            break
        if not ln.strip().startswith("#"):
            out.append(ln.strip())
    return out


def _nodeps() -> set[str]:
    return set(_make_variables((ROOT / "Makefile").read_text())["NODEPS"].split())


def _make_install_set(text: str) -> set[str]:
    """What `make install` installs, as ``python==X``, ``pip==X``, ``-c FILE``, ``-e TARGET`` and
    ``--no-deps PKG==X`` items."""
    variables = _make_variables(text)
    out = {"python==" + re.search(r"python(3\.\d+)", variables["PYTHON"]).group(1)}
    for line in _recipe(text, "$(STAMP)"):
        words = shlex.split(_expand(line, variables))
        if "pip" not in " ".join(words) or "install" not in words:
            continue
        args = words[words.index("install") + 1:]
        no_deps = "--no-deps" in args
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-c", "-e"):
                out.add(f"{a} {args[i + 1]}")
                i += 2
                continue
            if not a.startswith("-"):
                out.add(f"--no-deps {a}" if no_deps else a)
            i += 1
    return out


def _conda_set(env: dict, makefile: str) -> set[str]:
    """What `conda env create -f environment.yml && make conda-extras` installs, in the same items."""
    out = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep["pip"]:
                flag, _, value = line.partition(" ")
                out.add(f"{flag} {value.strip()}")
        else:
            name, _, version = dep.partition("=")
            out.add(f"{name}=={version}")
    recipe = _recipe(makefile, "conda-extras")
    # conda-extras runs make install's own recipe in the conda environment: its extras are those
    assert any(re.fullmatch(r'\$\(MAKE\) install VENV="\$\$CONDA_PREFIX"', ln) for ln in recipe), recipe
    return out | {item for item in _make_install_set(makefile) if item.startswith("--no-deps ")}


def test_conda_installs_exactly_what_make_install_installs():
    makefile = (ROOT / "Makefile").read_text()
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    make_set = _make_install_set(makefile)
    assert {"python==3.11", "pip==25.3", "-c constraints.txt", "-e .[dev]"} <= make_set
    assert {f"--no-deps {p}" for p in _nodeps()} <= make_set and _nodeps()
    assert _conda_set(env, makefile) == make_set


def test_the_readme_conda_paragraph_is_the_one_command():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    command = f"conda env create -f environment.yml && conda run -n {env['name']} make conda-extras"
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    conda = [b for b in blocks if "conda" in b]
    assert conda == [command + "\n"], conda
    assert command in (ROOT / "environment.yml").read_text()
    assert re.search(r"^conda-extras:", (ROOT / "Makefile").read_text(), flags=re.M)
    assert "conda-extras" in re.search(r"^\.PHONY:.*?(?<!\\)\n", (ROOT / "Makefile").read_text(),
                                       flags=re.S | re.M).group(0)


def _install_closure() -> tuple[set[str], dict]:
    """The distributions `make install` installs (iclr25 with the dev extra and its dependencies,
    plus the --no-deps packages, whose own dependencies are not installed) and the
    requirement each was reached by."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    from iclr25 import ledger

    nodeps = {ledger.pin_name(Requirement(p).name) for p in _nodeps()}
    todo = [Requirement(r) for r in md.requires("iclr25") or []]
    todo = [r for r in todo if r.marker is None or r.marker.evaluate({"extra": "dev"})]
    todo += [Requirement(p) for p in _nodeps()]
    closure: dict[str, object] = {}
    while todo:
        req = todo.pop()
        name = ledger.pin_name(req.name)
        if name in closure:
            continue
        closure[name] = req
        if name in nodeps:
            continue
        try:
            reqs = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r)
    return set(closure), closure


def test_this_environment_holds_what_make_install_installs_at_its_pins():
    """Run in .venv (make test) or in the conda environment (make conda-extras runs this file):
    every distribution of `make install` is installed, at the version constraints.txt pins."""
    import importlib.metadata as md

    from packaging.specifiers import SpecifierSet

    from iclr25 import ledger

    pins = {ledger.pin_name(ln.split("==")[0]): ln.split("==")[1]
            for ln in (ROOT / "constraints.txt").read_text().split() if "==" in ln}
    names, _ = _install_closure()
    missing, wrong = [], []
    for name in sorted(names):
        try:
            version = md.version(name)
        except md.PackageNotFoundError:
            missing.append(name)
            continue
        if name in pins and not SpecifierSet(f"=={pins[name]}").contains(version, prereleases=True):
            wrong.append(f"{name} {version} (pinned {pins[name]})")
    assert not missing and not wrong, (f"not installed: {missing}; not at the pin: {wrong}; "
                                       "run make install (conda: make conda-extras)")


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

    from iclr25 import ledger

    _, below = ledger.split_constraints((ROOT / "constraints.txt").read_text())
    below_names = {ledger.pin_name(ln) for ln in below}
    closure, _ = _install_closure()
    named: set[str] = set()
    for path in (ROOT / "lib" / "iclr25").rglob("*.py"):
        named |= ledger._names_in(ast.parse(path.read_text()))
    unnamed = sorted((closure & below_names) - named)
    assert not unnamed, (f"{unnamed} are installed by `make install` but pinned below the ledger "
                         "marker in constraints.txt and named by no iclr25 module: move them above it")

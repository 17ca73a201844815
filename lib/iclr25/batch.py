"""Run any notebook of the book with a profile and parameters, and sweep it over a grid.

This is the library behind ``iclr25 run`` and ``iclr25 sweep`` (see :mod:`iclr25.cli`).

:func:`run_notebook` executes one notebook with papermill into its own run folder::

    ./runs/20261130-153000-18-relu-landscape-01-saddle-to-saddle/
        01-saddle-to-saddle.ipynb              # the executed notebook, outputs included
        18-relu-landscape/01-saddle-to-saddle.json   # the claims it saved
        run.json                                # notebook, profile, parameters, status, duration
        kernel.log                              # the kernel process's own log (not cell output)

The claims land in the run folder, not in ``results/``: the kernel is started with
``ICLR25_RESULTS_DIR`` (and ``ICLR25_PROFILE``) set to the run's values in *its own* environment
(this process's ``os.environ`` is never touched, so runs in threads of one process do not race).
``iclr25 scorecard --results runs/<run>`` reads such a folder like ``results/``.

:func:`sweep` runs the cartesian product of a grid of parameters, one run folder per point under
one sweep folder, over a local process pool or a Dask cluster, and collects one table row per run
(grid values, ok/error, duration, every metric, every claim's ``holds``) into ``sweep.csv``.

Notebooks follow the book's convention (BOOK.md, "A notebook"): a code cell tagged ``parameters``
that says ``profile = None``, ``seed = 0`` and the knobs, each with a comment. Parameter names,
values and profiles are checked against that cell *before* anything executes: a value must have
the type of the parameter's default (for a default of ``None``, "the profile's value", the type of
the chapter's config field of that name) and be one of the chapter's choices where it lists them
(``arch``: ``ARCHS``). A wrong one is a :class:`iclr25.profiles.ProfileError` naming the
parameter, the type it expects and the valid values.

Run folders go under ``./runs/`` -- the current directory's, where the user stands -- or
``$ICLR25_RUNS_DIR`` (:func:`default_runs_parent`); the notebooks keep their own caches under the
repository's ``runs/`` (:func:`iclr25.paths.runs_dir`).
"""

from __future__ import annotations

import ast
import datetime as _dt
import functools
import itertools
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from . import claims as _claims
from . import paths, profiles
from .profiles import ProfileError

__all__ = [
    "RunResult", "run_notebook", "sweep", "resolve_notebook", "notebook_id", "notebook_parameters",
    "list_notebooks", "parse_value", "parse_assignments", "parse_grid", "grid_points",
    "sweep_rows", "default_runs_parent",
]

RUN_FILE = "run.json"
KERNEL_LOG = "kernel.log"
SWEEP_TABLE = "sweep.csv"
SWEEP_FILE = "sweep.json"


# ---------------------------------------------------------------------------------------------
# parsing command-line values


def parse_value(text: str) -> Any:
    """A command-line value as a Python literal when it is one, else the string itself.

    >>> [parse_value(s) for s in ["3", "1e-3", "True", "None", "'abc'", "abc", "[1, 2]"]]
    [3, 0.001, True, None, 'abc', 'abc', [1, 2]]
    """
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _split_assignment(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise ValueError(f"expected NAME=VALUE, got {item!r}")
    return name, value


def parse_assignments(items: Iterable[str] | None) -> dict[str, Any]:
    """``["seed=3", "lr=1e-3"]`` -> ``{"seed": 3, "lr": 0.001}`` (values as in :func:`parse_value`)."""
    out: dict[str, Any] = {}
    for item in items or ():
        name, value = _split_assignment(item)
        out[name] = parse_value(value)
    return out


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and quotes: ``"1,(2,3),'a,b'"`` -> 3 pieces."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_grid(items: Iterable[str] | None) -> dict[str, list[Any]]:
    """``["seed=0,1,2", "lr=1e-3,2e-3"]`` -> ``{"seed": [0, 1, 2], "lr": [0.001, 0.002]}``.

    Values are split on commas outside brackets and quotes and parsed as in :func:`parse_value`;
    repeating a name extends its list.
    """
    out: dict[str, list[Any]] = {}
    for item in items or ():
        name, values = _split_assignment(item)
        pieces = [p for p in _split_top_level(values) if p.strip()]
        if not pieces:
            raise ValueError(f"--grid {name}= has no values")
        out.setdefault(name, []).extend(parse_value(p) for p in pieces)
    return out


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of ``grid`` as a list of dicts, the last name varying fastest."""
    names = list(grid)
    for name in names:
        if isinstance(grid[name], (str, bytes)) or not isinstance(grid[name], Iterable):
            raise ValueError(f"grid[{name!r}] must be a list of values, got {grid[name]!r}")
        if len(list(grid[name])) == 0:
            raise ValueError(f"grid[{name!r}] is empty")
    return [dict(zip(names, values)) for values in itertools.product(*(list(grid[n]) for n in names))]


# ---------------------------------------------------------------------------------------------
# finding notebooks and their parameters


def _chapters(nb_dir: Path) -> list[str]:
    if not nb_dir.is_dir():
        return []
    return sorted(p.name for p in nb_dir.iterdir()
                  if p.is_dir() and not p.name.startswith((".", "_")))


def _notebooks_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def resolve_notebook(notebook: str | os.PathLike) -> Path:
    """The ``.ipynb`` file named by ``notebook``: a path to a notebook, or
    ``"18-relu-landscape/01-saddle-to-saddle"`` relative to ``notebooks/`` (``.ipynb`` optional).

    Raises ``FileNotFoundError`` naming the chapters or notebooks that do exist.
    """
    given = Path(notebook)
    candidates = [given] if given.suffix == ".ipynb" else [given.with_name(given.name + ".ipynb"), given]
    for c in candidates:
        if c.is_file():
            return c.resolve()
    nb_dir = paths.notebooks_dir()
    for c in candidates:
        if not c.is_absolute() and (nb_dir / c).is_file():
            return (nb_dir / c).resolve()
    # a helpful message: what is there
    chapter = nb_dir / given.parent if len(given.parts) > 1 else None
    if chapter is not None and chapter.is_dir():
        names = [p.stem for p in _notebooks_in(chapter)]
        hint = f"notebooks in {given.parent}: {', '.join(names) or '(none)'}"
    else:
        hint = f"chapters in {nb_dir}: {', '.join(_chapters(nb_dir)) or '(none)'}"
    raise FileNotFoundError(f"no notebook {str(notebook)!r} (neither a file nor under {nb_dir}); {hint}")


def notebook_id(path: str | os.PathLike) -> str:
    """``"18-relu-landscape/01-saddle-to-saddle"`` for a notebook under ``notebooks/``, else the path."""
    path = Path(path).resolve()
    try:
        rel = path.relative_to(paths.notebooks_dir().resolve())
    except (ValueError, FileNotFoundError):
        return str(path)
    return rel.with_suffix("").as_posix()


def _slug(path: Path) -> str:
    """A folder-name-friendly name for a notebook: ``18-relu-landscape-01-saddle-to-saddle``."""
    ident = notebook_id(path)
    return ident.replace("/", "-") if not os.path.isabs(ident) else path.stem


def notebook_parameters(notebook: str | os.PathLike) -> dict[str, dict[str, str]]:
    """The notebook's ``parameters`` cell: ``{name: {"default": "1e-3", "help": "paper: 1e-4", ...}}``.

    ``default`` is the source text of the value, ``help`` the comment after it on the same line
    (both from :func:`papermill.inspect_notebook`). Empty when there is no parameters cell.
    """
    import papermill

    return dict(papermill.inspect_notebook(str(resolve_notebook(notebook))))


def list_notebooks(chapter: str | None = None) -> dict[str, dict[str, dict[str, dict[str, str]]]]:
    """``{chapter: {notebook: parameters}}`` for every chapter under ``notebooks/`` (or the one
    whose name is, or starts with, ``chapter``: ``"18"``, ``"18-relu-landscape"``).

    A notebook whose parameters cannot be read maps to ``{"error": {"default": <message>}}``.
    """
    nb_dir = paths.notebooks_dir()
    chapters = _chapters(nb_dir)
    if chapter is not None:
        want = chapter.strip("/")
        exact = [c for c in chapters if c == want]
        matches = exact or [c for c in chapters if c.startswith(want + "-") or c.startswith(want)]
        if len(matches) != 1:
            what = "matches several" if matches else "is not a chapter"
            raise FileNotFoundError(f"{chapter!r} {what}; chapters: {', '.join(matches or chapters) or '(none)'}")
        chapters = matches
    import papermill

    out: dict[str, dict] = {}
    for ch in chapters:
        out[ch] = {}
        for nb in _notebooks_in(nb_dir / ch):
            try:
                out[ch][nb.stem] = dict(papermill.inspect_notebook(str(nb)))
            except Exception as e:  # noqa: BLE001 - a half-written notebook must not hide the rest
                out[ch][nb.stem] = {"error": {"name": "error", "default": f"{type(e).__name__}: {e}",
                                              "help": ""}}
    return out


# ---------------------------------------------------------------------------------------------
# one run


@dataclass
class RunResult:
    """What one :func:`run_notebook` did.

    ``ok`` is whether the notebook ran to the end (a failed must-hold claim raises in the
    notebook's last cell, so it makes ``ok`` false); ``error`` is the exception, ``"Name: message"``.
    ``claims`` are the claim dicts the notebook saved (schema in :mod:`iclr25.claims`),
    ``metrics`` its metrics.
    """

    notebook: str
    out_dir: Path
    output_notebook: Path
    parameters: dict
    profile: str
    ok: bool
    error: str | None
    duration_s: float
    claims: list[dict] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)

    @property
    def held(self) -> int:
        return sum(bool(c.get("holds")) for c in self.claims)

    @property
    def recorded(self) -> int:
        return len(self.claims)

    @property
    def failed_claims(self) -> list[dict]:
        """The must-hold claims that did not hold."""
        return [c for c in self.claims if c.get("must_hold") and not c.get("holds")]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["out_dir"], d["output_notebook"] = str(self.out_dir), str(self.output_notebook)
        return d


def _timestamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def default_runs_parent() -> Path:
    """Where ``iclr25 run``/``sweep`` put a new run folder: ``$ICLR25_RUNS_DIR`` if set, else
    ``runs/`` under the *current directory* (where the user stands, not the repository's).

    The notebooks' own caches stay under :func:`iclr25.paths.runs_dir` (the repository's
    ``runs/``), which this does not change.
    """
    env = os.environ.get("ICLR25_RUNS_DIR")
    return Path(env) if env else Path.cwd() / "runs"


def new_run_dir(name: str, parent: str | os.PathLike | None = None) -> Path:
    """Create and return ``<parent>/<timestamp>-<name>`` (default parent:
    :func:`default_runs_parent`, i.e. ``$ICLR25_RUNS_DIR``, else ``./runs``), with ``-2``, ``-3``,
    ... appended when that folder exists (two runs in the same second)."""
    base = Path(parent) if parent is not None else default_runs_parent()
    base.mkdir(parents=True, exist_ok=True)
    stem = f"{_timestamp()}-{name}"
    for k in itertools.count(1):
        d = base / (stem if k == 1 else f"{stem}-{k}")
        try:
            d.mkdir()  # atomic: the first to create it owns it
            return d
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------------------------
# parameter values: the type each parameter expects, checked before anything runs


@dataclass(frozen=True)
class _Expected:
    """What a parameter accepts: ``kinds`` among int, float, bool, str, seq (a list: tuple, list, or
    ``"a,b"``), none; ``choices`` its valid strings (empty: any); ``source`` where this came from."""

    kinds: frozenset
    choices: tuple = ()
    source: str = ""


_SCALARS = {"int", "float", "bool", "str"}
_SEQUENCES = {"tuple", "list", "Sequence", "set", "frozenset", "Tuple", "List"}


def _annotation_kinds(node: ast.AST) -> tuple[set[str], list[str]] | None:
    """Kinds and ``Literal`` choices of a dataclass field's annotation; ``None``: cannot tell."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        try:
            return _annotation_kinds(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return None
    if isinstance(node, ast.Constant) and node.value is None:
        return {"none"}, []
    if isinstance(node, ast.Name):
        if node.id in _SCALARS:
            return {node.id}, []
        return ({"seq"}, []) if node.id in _SEQUENCES else None
    if isinstance(node, ast.Attribute):  # typing.Sequence
        return ({"seq"}, []) if node.attr in _SEQUENCES else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _annotation_kinds(node.left), _annotation_kinds(node.right)
        if left is None or right is None:
            return None
        return left[0] | right[0], left[1] + right[1]
    if isinstance(node, ast.Subscript):
        head = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head in _SEQUENCES:
            return {"seq"}, []
        if head == "Optional":
            inner = _annotation_kinds(args[0])
            return None if inner is None else (inner[0] | {"none"}, inner[1])
        if head == "Union":
            parts = [_annotation_kinds(a) for a in args]
            if any(p is None for p in parts):
                return None
            return set().union(*(p[0] for p in parts)), [c for p in parts for c in p[1]]
        if head == "Literal":
            values = [a.value for a in args if isinstance(a, ast.Constant)]
            kinds = {{bool: "bool", int: "int", float: "float", str: "str"}.get(type(v), "none")
                     for v in values}
            return kinds, [v for v in values if isinstance(v, str)]
    return None


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in node.decorator_list)


@functools.lru_cache(maxsize=None)
def _chapter_declarations(module: str) -> tuple[dict, dict]:
    """Read, without importing it, the chapter package ``iclr25.<module>``:
    ``({field: [(class, annotation kinds or None, Literal choices)]}, {CONSTANT: (strings)})`` --
    the fields of its dataclasses (the profile configs) and its module-level constants that are
    tuples, lists or sets of strings or dicts with string keys (``ARCHS``, ``PATHS``, ...)."""
    here = Path(__file__).resolve().parent
    folder = here / module
    files = sorted(folder.rglob("*.py")) if folder.is_dir() else [here / f"{module}.py"]
    fields: dict[str, list] = {}
    constants: dict[str, tuple] = {}
    for f in files:
        try:
            tree = ast.parse(f.read_text())
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _is_dataclass(node):
                for st in node.body:
                    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                        kinds = _annotation_kinds(st.annotation)
                        fields.setdefault(st.target.id, []).append(
                            (node.name, None if kinds is None else kinds[0],
                             [] if kinds is None else kinds[1]))
        for st in tree.body:  # module level only
            target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
                st.target if isinstance(st, ast.AnnAssign) else None
            value = getattr(st, "value", None)
            if not isinstance(target, ast.Name) or not target.id.isupper() or value is None:
                continue
            elts = value.keys if isinstance(value, ast.Dict) else \
                value.elts if isinstance(value, (ast.Tuple, ast.List, ast.Set)) else None
            if elts and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
                constants[target.id] = tuple(dict.fromkeys(
                    constants.get(target.id, ()) + tuple(e.value for e in elts)))
    return fields, constants


def _comment_choices(help_text: str) -> list[str]:
    """``"attribution: a (smoke) | b (book) | c"`` -> ``["a", "b", "c"]``: the alternatives a
    parameter's comment lists with ``|`` (before any ``;``), else ``[]``."""
    text = re.sub(r"\([^)]*\)", " ", help_text.split(";", 1)[0]).split(":")[-1]
    if "|" not in text:
        return []
    pieces = [p.strip().strip("'\"`") for p in text.split("|")]
    ok = all(re.fullmatch(r"[A-Za-z_][\w.-]*", p) for p in pieces)
    return pieces if ok and len(pieces) >= 2 else []


def _chapter_module(path: Path) -> str | None:
    from .chapters import CHAPTERS

    chapter = notebook_id(path).split("/", 1)[0]
    return next((c.module for c in CHAPTERS if c.slug == chapter), None)


def _expected(name: str, entry: Mapping[str, str], module: str | None) -> _Expected | None:
    """What parameter ``name`` of a notebook accepts: the type of its default (``seed = 0``: int);
    for a default of ``None`` (the profile's value) the type of the chapter's config dataclass
    field of that name. Choices: a field's ``Literal`` and the chapter's constant named after the
    parameter (``arch``: ``ARCHS``), widened by the alternatives its comment lists (``# a | b``).
    ``None`` when nothing can be told (no check)."""
    fields, constants = _chapter_declarations(module) if module else ({}, {})
    try:
        default = ast.literal_eval(str(entry.get("default", "")))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    choices: list[str] = []
    if default is not None:
        kind = "bool" if isinstance(default, bool) else "int" if isinstance(default, int) else \
            "float" if isinstance(default, float) else "str" if isinstance(default, str) else \
            "seq" if isinstance(default, (tuple, list)) else None
        if kind is None:
            return None
        kinds, source = {kind}, f"its default {entry['default']}"
    else:
        found = fields.get(name, [])
        if not found or any(k is None for _, k, _ in found):
            return None
        kinds = {"none"}.union(*(k for _, k, _ in found))
        choices = [c for _, _, cs in found for c in cs]
        source = f"iclr25.{module}'s " + " and ".join(sorted({f"{cls}.{name}" for cls, _, _ in found}))
    if kinds & {"str", "seq"}:  # choices are strings: arch -> ARCHS, family -> FAMILIES
        upper = name.upper()
        for const in dict.fromkeys((upper, upper + "S", upper + "ES", upper[:-1] + "IES")):
            choices += constants.get(const, ())
        if choices:  # a notebook may accept more than the module lists (cybench's backend "auto")
            choices += _comment_choices(str(entry.get("help", "")))
    return _Expected(frozenset(kinds), tuple(dict.fromkeys(choices)), source)


_KIND_TEXT = {"int": "int", "float": "float", "bool": "bool", "str": "str", "seq": "list",
              "none": "None"}
_VALID_TEXT = {"int": "a whole number, e.g. {name}=3", "float": "a number, e.g. {name}=0.001",
               "bool": "True or False", "str": "a string, e.g. {name}=abc",
               "seq": "a list, e.g. {name}=1,2,3 or {name}=[1,2,3]",
               "none": "None (the profile's value)"}


def _coerce(value: Any, kinds: frozenset) -> tuple[bool, Any]:
    """``(True, value as the notebook expects it)`` when ``value`` fits one of ``kinds``."""
    if value is None:
        return "none" in kinds, value
    if "bool" in kinds:
        if isinstance(value, bool):
            return True, value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return True, value.strip().lower() == "true"
    if "int" in kinds and not isinstance(value, bool):
        if isinstance(value, int):
            return True, value
        if isinstance(value, float) and value.is_integer() and "float" not in kinds:
            return True, int(value)  # 6e5 on the command line: 600000
    if "float" in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
        return True, value
    if "str" in kinds and isinstance(value, str):
        return True, value
    if "seq" in kinds and isinstance(value, (tuple, list, str, int, float)) \
            and not isinstance(value, bool):
        return True, value  # the config turns 3, "1,2" and [1, 2] into its tuple
    return False, value


def _bad_choices(value: Any, choices: Sequence[str]) -> list:
    """The parts of ``value`` (a string, ``"a,b"`` or a list) that are not among ``choices``."""
    if value is None or not choices:
        return []
    items = [p.strip() for p in value.split(",")] if isinstance(value, str) else \
        list(value) if isinstance(value, (tuple, list)) else [value]
    return [v for v in items if v not in choices]


def _check_parameters(path: Path, spec: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict:
    """Check ``parameters`` against the notebook's parameters cell ``spec``: unknown names, then
    each value against the type (and the chapter's choices) the parameter expects. Returns the
    values as the notebook expects them (``n_steps=6e5`` -> ``600000``); a wrong one raises
    :class:`~iclr25.profiles.ProfileError` naming the parameter, the expected type and the valid
    values."""
    unknown = sorted(set(parameters) - set(spec))
    if unknown:
        valid = ", ".join(spec) if spec else "(none: the notebook has no cell tagged 'parameters')"
        raise ProfileError(f"unknown parameter(s) {', '.join(unknown)} for {notebook_id(path)}; "
                           f"valid: {valid}")
    module = _chapter_module(path) if parameters else None
    out = dict(parameters)
    for name, value in parameters.items():
        exp = _expected(name, spec[name], module)
        if exp is None:
            continue
        ok, coerced = _coerce(value, exp.kinds)
        bad = _bad_choices(coerced, exp.choices) if ok else []
        if ok and not bad:
            out[name] = coerced
            continue
        kinds = sorted(exp.kinds - {"none"}, key=list(_KIND_TEXT).index)
        expected = " or ".join(_KIND_TEXT[k] for k in kinds) + (" or None" if "none" in exp.kinds else "")
        if exp.choices:
            valid = ", ".join(exp.choices) + (" (a comma-separated subset)" if "seq" in exp.kinds else "")
        else:
            valid = "; ".join(_VALID_TEXT[k].format(name=name) for k in kinds)
        if "none" in exp.kinds:
            valid += f"; or {_VALID_TEXT['none']}"
        got = f"{', '.join(map(repr, bad))} (not a valid choice)" if ok else \
            f"{value!r} ({type(value).__name__})"
        raise ProfileError(f"parameter {name} of {notebook_id(path)} expects {expected} "
                           f"(from {exp.source}), got {got}; valid: {valid}")
    return out


def _prepare(notebook, profile, parameters) -> tuple[Path, dict, str, dict]:
    """Resolve and validate: (path, parameters-cell spec, profile, parameters without profile)."""
    path = resolve_notebook(notebook)
    spec = notebook_parameters(path)
    params = dict(parameters or {})
    if "profile" in params:
        from_params = params.pop("profile")
        if profile is not None and from_params is not None and str(from_params) != str(profile):
            raise ProfileError(f"profile given twice: {profile!r} and parameter profile={from_params!r}")
        profile = profile if profile is not None else from_params
    profile = profiles.resolve(profile)
    params = _check_parameters(path, spec, params)
    return path, spec, profile, params


def _kernel_manager_class(env: Mapping[str, str], cwd: str | None, log=None):
    """A kernel-manager class whose kernels start with ``os.environ | env`` in ``cwd``, their
    process's stdout/stderr going to the file object ``log``.

    nbclient builds its kernel manager from a class (``kernel_manager_class``, which papermill
    passes through as an engine keyword); the environment a kernel gets is the ``env`` keyword
    of ``KernelManager.start_kernel``, which nbclient never sets. This subclass sets it. (What
    cells print reaches the notebook over ZMQ; the process's own streams carry only the kernel
    app's log, e.g. ipykernel's warning about unencrypted TCP, which would clutter a terminal.)
    """
    from jupyter_client import AsyncKernelManager

    extra, where = dict(env), cwd

    class RunKernelManager(AsyncKernelManager):
        async def _async_pre_start_kernel(self, **kw):
            kw["env"] = {**(kw.get("env") or os.environ), **extra}
            if where is not None:
                kw.setdefault("cwd", where)
            if log is not None:
                kw.setdefault("stdout", log)
                kw.setdefault("stderr", log)
            return await super()._async_pre_start_kernel(**kw)

        pre_start_kernel = _async_pre_start_kernel

    return RunKernelManager


def _execution_error(exc: BaseException) -> str:
    ename = getattr(exc, "ename", None)
    if ename:  # papermill.PapermillExecutionError
        where = f" (cell [{exc.exec_count}])" if getattr(exc, "exec_count", None) else ""
        return f"{ename}{where}: {exc.evalue}"
    return f"{type(exc).__name__}: {exc}"


def _collect_claims(out_dir: Path, since: float) -> tuple[list[dict], dict, str | None]:
    """The claims files the run saved under ``out_dir`` (files older than ``since`` are stale)."""
    try:
        results = _claims.load_results(out_dir)
    except ValueError as e:
        return [], {}, str(e)
    items: list[dict] = []
    metrics: dict = {}
    start = _dt.datetime.fromtimestamp(int(since), _dt.timezone.utc)
    for r in results:
        try:
            if _dt.datetime.fromisoformat(r.get("created", "")) < start:
                continue
        except ValueError:
            pass
        for c in r.get("claims", []):
            items.append({"chapter": r.get("chapter"), "notebook": r.get("notebook"), **c})
        metrics.update(r.get("metrics") or {})
    return items, metrics, None


def run_notebook(notebook: str | os.PathLike, profile: str | None = None,
                 parameters: Mapping[str, Any] | None = None,
                 out_dir: str | os.PathLike | None = None, progress: bool = False,
                 kernel: str | None = None, timeout: float | None = None,
                 env: Mapping[str, str] | None = None) -> RunResult:
    """Execute ``notebook`` with papermill at ``profile`` with ``parameters``.

    Parameters
    ----------
    notebook:
        ``"18-relu-landscape/01-saddle-to-saddle"`` (under ``notebooks/``, ``.ipynb`` optional)
        or a path to a ``.ipynb``.
    profile:
        ``smoke``, ``book`` or ``paper``; ``None``: ``$ICLR25_PROFILE``, else ``book``. Passed to
        the notebook as its ``profile`` parameter and as ``$ICLR25_PROFILE``.
    parameters:
        Values for names of the notebook's ``parameters`` cell.
    out_dir:
        The run folder (created if needed); default: a new ``runs/<timestamp>-<notebook>/`` under
        the current directory (or ``$ICLR25_RUNS_DIR``; :func:`default_runs_parent`).
    progress:
        Show papermill's progress bar (cells executed).
    kernel:
        Jupyter kernel name; default: the notebook's own, else ``python3``.
    timeout:
        Seconds a single cell may run (default: no limit).
    env:
        More environment variables for the kernel (e.g. an empty ``HOME`` and ``ICLR25_CACHE``,
        as :mod:`iclr25.reproduce` gives it); this process's environment is not touched.

    Unknown parameter names, values of the wrong type or not among the chapter's choices,
    unknown profiles and missing notebooks raise before anything runs
    (:class:`~iclr25.profiles.ProfileError`, ``FileNotFoundError``). A notebook that raises does not:
    the result says ``ok=False`` with the error, and the output notebook shows the traceback.
    """
    import nbformat
    import papermill

    path, _spec, profile, params = _prepare(notebook, profile, parameters)
    injected = dict(params)
    if "profile" in _spec:
        injected["profile"] = profile
    run_dir = Path(out_dir) if out_dir is not None else new_run_dir(_slug(path))
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir = run_dir.resolve()
    output = run_dir / path.name

    if kernel is None:
        meta = nbformat.read(path, as_version=4).metadata
        kernel = (meta.get("kernelspec") or {}).get("name") or "python3"
    env = {**(env or {}), "ICLR25_RESULTS_DIR": str(run_dir), "ICLR25_PROFILE": profile}

    t0 = time.time()
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    error = None
    kernel_log = run_dir / KERNEL_LOG
    with open(kernel_log, "ab") as log:
        try:
            papermill.execute_notebook(
                str(path), str(output), parameters=injected, kernel_name=kernel,
                progress_bar=progress, log_output=False, execution_timeout=timeout,
                # the kernel runs where the notebook lives, as in Jupyter, jupyter-book and nbval
                kernel_manager_class=_kernel_manager_class(env, cwd=str(path.parent), log=log),
            )
        except Exception as e:  # noqa: BLE001 - any failure of the run is reported, not raised
            error = _execution_error(e)
    duration = time.time() - t0
    if kernel_log.stat().st_size == 0:
        kernel_log.unlink()
    elif error is not None and "Kernel" in error.split(":", 1)[0]:  # DeadKernelError & co.
        error += f" (the kernel's own log: {kernel_log})"

    items, metrics, claims_error = _collect_claims(run_dir, t0)
    if claims_error and error is None:
        error = claims_error
    result = RunResult(notebook=notebook_id(path), out_dir=run_dir, output_notebook=output,
                       parameters=params, profile=profile, ok=error is None, error=error,
                       duration_s=round(duration, 3), claims=items, metrics=metrics)
    record = {
        "notebook": result.notebook, "input": str(path), "output_notebook": str(output),
        "profile": profile, "parameters": params, "kernel": kernel,
        "status": "ok" if result.ok else "failed", "error": error, "started": started,
        "kernel_log": str(kernel_log) if kernel_log.exists() else None,
        "duration_s": result.duration_s,
        "claims": {"held": result.held, "recorded": result.recorded,
                   "failed_must_hold": [c["claim"] for c in result.failed_claims]},
        "metrics": metrics,
    }
    (run_dir / RUN_FILE).write_text(json.dumps(record, indent=2, default=repr) + "\n")
    return result


# ---------------------------------------------------------------------------------------------
# sweeps


def _fmt_value(v: Any) -> str:
    s = v if isinstance(v, str) else repr(v)
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", s).strip("_") or "_"


def _point_dir_name(i: int, n: int, point: Mapping[str, Any]) -> str:
    name = "-".join([f"{i:0{len(str(max(n - 1, 0)))}d}", *(f"{k}={_fmt_value(v)}" for k, v in point.items())])
    return name[:120]


def _short(text: str, width: int = 40) -> str:
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[: width - 1].rsplit(" ", 1)[0] if " " in text[: width - 1] else text[: width - 1]
    return cut + "…"


def sweep_rows(points: Sequence[Mapping[str, Any]], results: Sequence[RunResult]):
    """The sweep table: one row per run with the grid values, ``ok``, ``error``, ``duration_s``,
    each metric, each claim's ``holds`` (column ``"claim: <short text>"``), ``held``, ``recorded``
    and ``run`` (the run folder's name)."""
    import pandas as pd

    reserved = {"ok", "error", "duration_s", "held", "recorded", "run"}
    grid_names = list(points[0]) if points else []
    claim_cols: dict[str, str] = {}  # claim text -> column
    rows = []
    for point, res in zip(points, results):
        row: dict[str, Any] = dict(point)
        row.update(ok=res.ok, error=res.error or "", duration_s=res.duration_s)
        for name, value in res.metrics.items():
            col = name if name not in reserved and name not in grid_names else f"metric: {name}"
            row[col] = value
        for c in res.claims:
            text = c.get("claim", "")
            if text not in claim_cols:
                col, k = f"claim: {_short(text)}", 2
                while col in claim_cols.values():
                    col, k = f"claim: {_short(text, 36)} ({k})", k + 1
                claim_cols[text] = col
            row[claim_cols[text]] = bool(c.get("holds"))
        row.update(held=res.held, recorded=res.recorded, run=Path(res.out_dir).name)
        rows.append(row)
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    tail = ["held", "recorded", "run"]
    columns = [c for c in columns if c not in tail] + tail
    return pd.DataFrame(rows, columns=columns if rows else grid_names + ["ok", "error", "duration_s"] + tail)


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int = 1) -> None:
        pass


def _run_task(task: dict) -> RunResult:
    """One sweep point (module level, so process pools and Dask workers can import it)."""
    return run_notebook(**task)


def _failed(task: dict, exc: BaseException) -> RunResult:
    out = Path(task["out_dir"])
    return RunResult(notebook=str(task["notebook"]), out_dir=out,
                     output_notebook=out / Path(task["notebook"]).name,
                     parameters=dict(task.get("parameters") or {}),
                     profile=str(task.get("profile")), ok=False, error=_execution_error(exc),
                     duration_s=0.0)


def _run_local(tasks: list[dict], workers: int, bar) -> list[RunResult]:
    if workers <= 1:
        out = []
        for t in tasks:
            try:
                out.append(_run_task(t))
            except Exception as e:  # noqa: BLE001
                out.append(_failed(t, e))
            bar.update()
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    results: list[RunResult | None] = [None] * len(tasks)
    # spawn, not fork: the parent may hold threads (event loops, Dask) that fork would copy broken
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        futures = {ex.submit(_run_task, t): i for i, t in enumerate(tasks)}
        for f in as_completed(futures):
            i = futures[f]
            try:
                results[i] = f.result()
            except Exception as e:  # noqa: BLE001 - a crashed worker is one failed row
                results[i] = _failed(tasks[i], e)
            bar.update()
    return results  # type: ignore[return-value]


def _run_dask(tasks: list[dict], scheduler, bar) -> list[RunResult]:
    from distributed import Client, as_completed

    own = not isinstance(scheduler, Client)
    client = Client(scheduler) if own else scheduler
    try:
        futures = client.map(_run_task, tasks, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[RunResult | None] = [None] * len(tasks)
        for f in as_completed(futures):
            i = index[f.key]
            try:
                results[i] = f.result()
            except Exception as e:  # noqa: BLE001
                results[i] = _failed(tasks[i], e)
            bar.update()
        return results  # type: ignore[return-value]
    finally:
        if own:
            client.close()


def sweep(notebook: str | os.PathLike, grid: Mapping[str, Sequence[Any]],
          profile: str | None = None, parameters: Mapping[str, Any] | None = None,
          workers: int | None = None, scheduler: Any = None,
          out_dir: str | os.PathLike | None = None, progress: bool = False,
          kernel: str | None = None, timeout: float | None = None):
    """Run ``notebook`` at every point of the cartesian product of ``grid`` and tabulate the runs.

    Parameters
    ----------
    grid:
        ``{"seed": [0, 1, 2], "lr": [1e-3, 2e-3]}``; a grid over ``profile`` is allowed.
    profile, parameters:
        As in :func:`run_notebook`, for every point (grid values override ``parameters``).
    workers:
        Local processes (default: ``min(points, os.cpu_count())``; 1 runs in this process).
    scheduler:
        A Dask scheduler address (``"tcp://host:8786"``) or a ``distributed.Client``: run there
        instead. Workers must be able to import ``iclr25`` and see the notebook and the sweep
        folder at the same paths (a shared file system).
    out_dir:
        The sweep folder; default: a new ``runs/<timestamp>-sweep-<notebook>/`` under the current
        directory (or ``$ICLR25_RUNS_DIR``). Point ``i`` runs
        in ``<sweep folder>/<i>-seed=0-lr=0.001/``.

    Returns the table of :func:`sweep_rows`, also written to ``<sweep folder>/sweep.csv``; its
    ``attrs["out_dir"]`` is the sweep folder. Every point is validated before any runs.
    """
    from .progress import progress as _bar

    points = grid_points(grid)
    fixed = dict(parameters or {})
    path = resolve_notebook(notebook)
    tasks = []
    for point in points:
        p = {**fixed, **point}
        prof = p.pop("profile", None)
        prof = prof if prof is not None else profile
        _, _, prof, p = _prepare(path, prof, p)  # raises before anything runs
        tasks.append({"notebook": str(path), "profile": prof, "parameters": p, "kernel": kernel,
                      "timeout": timeout})

    sweep_dir = Path(out_dir) if out_dir is not None else new_run_dir(f"sweep-{_slug(path)}")
    sweep_dir.mkdir(parents=True, exist_ok=True)
    sweep_dir = sweep_dir.resolve()
    for i, (task, point) in enumerate(zip(tasks, points)):
        task["out_dir"] = str(sweep_dir / _point_dir_name(i, len(points), point))
    (sweep_dir / SWEEP_FILE).write_text(json.dumps({
        "notebook": notebook_id(path), "input": str(path), "profile": profile,
        "parameters": fixed, "grid": {k: list(v) for k, v in grid.items()},
        "scheduler": None if scheduler is None else
        str(getattr(getattr(scheduler, "scheduler", None), "address", None) or scheduler),
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }, indent=2, default=repr) + "\n")

    with (_bar(total=len(tasks), desc="sweep") if progress else _NoBar()) as bar:
        if scheduler is not None:
            results = _run_dask(tasks, scheduler, bar)
        else:
            n = workers if workers is not None else min(len(tasks), os.cpu_count() or 1)
            results = _run_local(tasks, max(1, int(n)), bar)

    table = sweep_rows(points, results)
    table.to_csv(sweep_dir / SWEEP_TABLE, index=False)
    table.attrs["out_dir"] = str(sweep_dir)
    return table

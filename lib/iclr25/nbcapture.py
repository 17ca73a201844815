"""A pytest plugin for nbval: keep each notebook as nbval executed it, so CI executes it once.

``make test`` runs every notebook under nbval (``--nbval-lax``, the smoke profile): one pytest line
per notebook, a failing cell fails its notebook. With ``-p iclr25.nbcapture --nb-capture-dir DIR``
this plugin writes each notebook, with the outputs nbval received from the kernel (figures,
tables, printed text, errors), to ``DIR/<path relative to the rootdir>``. The strict render then
reads those executed notebooks without executing them again (``make render``: a copy of the book's
sources in which the notebooks are the executed ones, built with ``nb_execution_mode = "off"``).

At the end it prints one line per notebook: its wall time (first cell sent to last output) and
whether every cell passed; the same lines go to ``DIR/execution.txt``.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest

__all__ = ["pytest_addoption", "pytest_configure", "stage"]


def pytest_addoption(parser):
    parser.addoption("--nb-capture-dir", default=None,
                     help="write each notebook nbval executed, with its outputs, under this folder")


class _Capture:
    def __init__(self, out: Path, rootdir: Path):
        self.out, self.rootdir = out, rootdir
        self.books: dict[Path, dict] = {}     # notebook path -> {nb, start, end, failed, cells}

    def _entry(self, item):
        path = Path(str(item.parent.fspath))
        e = self.books.get(path)
        if e is None:
            nb = copy.deepcopy(item.parent.nb)
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            e = self.books[path] = {"nb": nb, "start": time.perf_counter(), "end": None,
                                    "failed": [], "count": 0,
                                    "code": [c for c in nb.cells if c.cell_type == "code"]}
        return e

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        is_cell = type(item).__name__ == "IPyNbCell"
        e = self._entry(item) if is_cell else None
        outcome = yield
        if not is_cell:
            return
        cell = e["code"][item.cell_num]
        e["count"] += 1
        cell.execution_count = e["count"]
        for out in getattr(item, "test_outputs", None) or []:
            out = copy.deepcopy(out)
            if out.get("output_type") == "execute_result":
                out["execution_count"] = e["count"]
            cell.outputs.append(out)
        if outcome.excinfo is not None and not issubclass(outcome.excinfo[0], pytest.skip.Exception):
            e["failed"].append(item.cell_num)
        e["end"] = time.perf_counter()

    def pytest_sessionfinish(self, session):
        import nbformat

        lines = []
        for path, e in sorted(self.books.items()):
            try:
                rel = path.resolve().relative_to(self.rootdir.resolve())
            except ValueError:
                rel = Path(path.name)
            dest = self.out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(e["nb"], str(dest))
            secs = (e["end"] or e["start"]) - e["start"]
            status = "ok" if not e["failed"] else "FAILED in cell(s) " + ", ".join(map(str, e["failed"]))
            lines.append(f"{secs:7.1f} s  {rel}  {status}")
        if lines:
            (self.out / "execution.txt").parent.mkdir(parents=True, exist_ok=True)
            (self.out / "execution.txt").write_text("\n".join(lines) + "\n")
        self.lines = lines

    def pytest_terminal_summary(self, terminalreporter):
        lines = getattr(self, "lines", [])
        if lines:
            terminalreporter.section("notebooks executed (wall time, outcome)")
            for line in lines:
                terminalreporter.write_line(line)
            total = sum(float(x.split()[0]) for x in lines)
            terminalreporter.write_line(f"{total:7.1f} s  in all, {len(lines)} notebooks "
                                        f"-> {self.out}")


def pytest_configure(config):
    out = config.getoption("--nb-capture-dir", default=None)
    if out:
        config.pluginmanager.register(_Capture(Path(out), Path(str(config.rootpath))),
                                      "iclr25-nbcapture")


def stage(executed: str | Path, dest: str | Path, root: str | Path | None = None) -> list[str]:
    """Copy the book's sources (``_config.yml``, ``_toc.yml``, ``book/``) into ``dest`` with the
    notebooks taken from ``executed`` (this plugin's output); return the notebooks staged.

    Every notebook under ``<root>/notebooks`` must have an executed copy: a missing one is an
    error naming it (the strict render must not show a notebook that nbval did not run)."""
    import shutil

    from . import paths

    root = Path(root) if root is not None else paths.repo_root()
    executed, dest = Path(executed), Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(root / name, dest / name)
    shutil.copytree(root / "book", dest / "book")
    staged, missing = [], []
    for nb in sorted((root / "notebooks").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        rel = nb.relative_to(root)
        src = executed / rel
        if not src.is_file():
            missing.append(str(rel))
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
        staged.append(str(rel))
    if missing:
        raise FileNotFoundError(f"no executed copy under {executed} of: {', '.join(missing)} "
                                "(run the notebooks under nbval first: make notebooks)")
    return staged


if __name__ == "__main__":  # python -m iclr25.nbcapture EXECUTED_DIR DEST
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: python -m iclr25.nbcapture EXECUTED_DIR DEST")
    n = stage(sys.argv[1], sys.argv[2])
    print(f"staged the book's sources with {len(n)} executed notebooks in {sys.argv[2]}")

"""`make test`'s pipeline on a one-notebook book: nbval executes the notebook once (one pytest line
for it), iclr25.nbcapture keeps the executed copy, and the strict render shows its outputs without
executing it again; the Performance page shows the bench records, or says there are none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from iclr25 import bench
from iclr25.nbcapture import stage

CONFIG = """\
title: mini
exclude_patterns: [_build, results]
sphinx:
  extra_extensions: [iclr25.sphinxext]
"""
TOC = """\
format: jb-book
root: book/intro
chapters:
  - file: notebooks/99-t/01-ok
  - file: book/performance
"""


def _book(root: Path, cell: str) -> None:
    (root / "book").mkdir(parents=True)
    (root / "_config.yml").write_text(CONFIG)
    (root / "_toc.yml").write_text(TOC)
    (root / "pyproject.toml").write_text("")
    (root / "book" / "intro.md").write_text("# Mini\n")
    (root / "book" / "performance.md").write_text("# Performance\n\n```{iclr25-performance}\n```\n")
    nb = new_notebook(cells=[new_markdown_cell("# ok"), new_code_cell(cell),
                             new_code_cell("import os\nprint('pid', os.getpid())")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (root / "notebooks" / "99-t").mkdir(parents=True)
    nbformat.write(nb, root / "notebooks" / "99-t" / "01-ok.ipynb")


def _env(root):
    env = {k: v for k, v in os.environ.items() if k not in ("ICLR25_RESULTS_DIR", "ICLR25_BENCH_DIR")}
    env.update(ICLR25_ROOT=str(root), ICLR25_PROGRESS="0", ICLR25_PROFILE="smoke")
    return env


def _nbval(root, executed):
    return subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
                           "-p", "iclr25.nbcapture", "--nb-capture-dir", str(executed),
                           "-p", "no:cacheprovider", "notebooks/"], cwd=root, env=_env(root),
                          capture_output=True, text=True, timeout=300)


def _render(root, executed):
    src = root / "_build_smoke" / "src"
    stage(executed, src, root=root)
    jb = Path(sys.executable).with_name("jupyter-book")
    subprocess.run([str(jb), "config", "sphinx", "."], cwd=src, env=_env(root), check=True,
                   capture_output=True)
    with open(src / "conf.py", "a") as f:
        f.write('\nnb_execution_mode = "off"\n')
    sb = Path(sys.executable).with_name("sphinx-build")
    out = root / "_build_smoke" / "html"
    proc = subprocess.run([str(sb), "-q", "-E", "-W", "-n", "--keep-going", "-b", "html", ".",
                           str(out)], cwd=src, env=_env(root), capture_output=True, text=True,
                          timeout=300)
    return proc, out


def test_notebook_executes_once_and_the_render_shows_its_outputs(tmp_path):
    root = tmp_path / "book"
    _book(root, "print('computed', 6 * 7)")
    executed = root / "_build_smoke" / "executed"
    proc = _nbval(root, executed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("notebooks/99-t/01-ok.ipynb")]
    assert len(lines) == 1 and ".." in lines[0]                      # one line per notebook
    assert "notebooks executed (wall time, outcome)" in proc.stdout
    nb = nbformat.read(executed / "notebooks" / "99-t" / "01-ok.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2]
    assert code[0].outputs[0]["text"] == "computed 42\n"
    pid = code[1].outputs[0]["text"]
    assert (executed / "execution.txt").read_text().strip().endswith("01-ok.ipynb  ok")

    rproc, out = _render(root, executed)
    assert rproc.returncode == 0, rproc.stdout + rproc.stderr
    page = (out / "notebooks" / "99-t" / "01-ok.html").read_text()
    assert "computed 42" in page and pid.strip() in page             # nbval's run, not a new one
    perf = (out / "book" / "performance.html").read_text()
    assert "No benchmark results yet" in perf


def test_a_failing_cell_fails_its_notebook_and_staging_needs_every_notebook(tmp_path):
    root = tmp_path / "book"
    _book(root, "raise RuntimeError('a must-hold claim failed')")
    executed = root / "_build_smoke" / "executed"
    proc = _nbval(root, executed)
    assert proc.returncode == 1
    assert "FAILED in cell(s) 0" in proc.stdout
    nb = nbformat.read(executed / "notebooks" / "99-t" / "01-ok.ipynb", as_version=4)
    assert nb.cells[1].outputs[0]["ename"] == "RuntimeError"
    with pytest.raises(FileNotFoundError, match="no executed copy .* of: notebooks/99-t/01-ok.ipynb"):
        stage(tmp_path / "empty", tmp_path / "src", root=root)


def test_performance_page_shows_the_records(tmp_path, monkeypatch):
    root = tmp_path / "book"
    _book(root, "print('x')")
    monkeypatch.setenv("ICLR25_BENCH_DIR", str(root / "results" / "bench"))
    cmp = bench.Comparison("99-demo", "a demo comparison", chapter="99-t", target=100.0, tol=0.0,
                           repeat=1, warmup=0)
    cmp.add("ours", lambda: sum(range(10)))
    cmp.add("peer loop", lambda: sum(i for i in range(10 ** 5) if i < 10), role="baseline")
    rec = cmp.run(echo=False)
    executed = root / "_build_smoke" / "executed"
    assert _nbval(root, executed).returncode == 0
    rproc, out = _render(root, executed)
    assert rproc.returncode == 0, rproc.stdout + rproc.stderr
    perf = (out / "book" / "performance.html").read_text()
    assert "a demo comparison" in perf and "peer loop" in perf
    assert f"{rec['headline']:.2f}x" in perf and "<svg" in perf
    assert rec["machine"]["cpu"] in perf
    assert ("<strong>not met</strong>" in perf) == (not rec["meets_target"])

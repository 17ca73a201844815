"""`make book`'s contract on a two-notebook book built with the real jupyter-book: a notebook that
fails does not stop the build; its page shows its output up to the failure and its claims table
with the failed row marked; the scorecard names it; the summary lists every notebook with its time;
the exit status is non-zero."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CONFIG = """\
title: mini
execute:
  execute_notebooks: cache
  timeout: 120
  allow_errors: false
  stderr_output: remove
exclude_patterns: [_build, results]
sphinx:
  extra_extensions: [iclr25.sphinxext]
  config:
    nb_execution_raise_on_error: false
    nb_execution_show_tb: true
"""

TOC = """\
format: jb-book
root: intro
chapters:
  - file: notebooks/99-t/01-ok
  - file: notebooks/99-t/02-fails
  - file: scorecard
"""


REGISTRY = textwrap.dedent("""\
    chapter: 99-t
    claims:
    """) + "".join(textwrap.dedent(f"""\
      - {{id: effect-{nb}, notebook: {nb}, claim: "the effect is there", source: Fig. 1, paper: 1,
         kind: finding, statistic: effect per seed, registered: 2026-12-07,
         control: {{kind: chance, describe: no effect, value: 0.5}}, direction: greater,
         replication: {{unit: seeds, n: 3}}}}
      - {{id: side-{nb}, notebook: {nb}, claim: "a side remark", source: Fig. 2, paper: 1,
         kind: check, statistic: identity, registered: 2026-12-07}}
    """) for nb in ("01-ok", "02-fails"))


def _nb(path: Path, holds: bool) -> None:
    nb = path.stem
    body = textwrap.dedent(f"""\
        from iclr25.claims import Claims
        from iclr25.registry import Registry
        claims = Registry(Claims("99-t", "{nb}", None))
        print("computed before the claims")
        claims.finding("effect-{nb}", ours=[0.9, 0.8, 1.0])
        claims.check("side-{nb}", holds={holds}, ours=1)
        claims""")
    nb = new_notebook(cells=[new_markdown_cell(f"# {path.stem}"), new_code_cell(body),
                             new_code_cell("claims.save()"), new_code_cell("claims.assert_all()"),
                             new_code_cell("print('after', 'the failure')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def test_a_failing_notebook_does_not_stop_the_book(tmp_path):
    root = tmp_path / "book"
    root.mkdir()
    (root / "_config.yml").write_text(CONFIG)
    (root / "_toc.yml").write_text(TOC)
    (root / "pyproject.toml").write_text("")
    (root / "constraints.txt").write_text("")
    (root / "intro.md").write_text("# Mini book\n\n```{iclr25-robustness} 99-t\n```\n\n"
                                   "```{iclr25-times} 99-t\n```\n")
    (root / "book" / "claims").mkdir(parents=True)
    (root / "book" / "claims" / "99-t.yaml").write_text(REGISTRY)
    (root / "scorecard.md").write_text("# Scorecard\n\n```{iclr25-scorecard}\n```\n\n"
                                       "```{iclr25-registry} 99-t\n```\n")
    _nb(root / "notebooks" / "99-t" / "01-ok.ipynb", holds=True)
    _nb(root / "notebooks" / "99-t" / "02-fails.ipynb", holds=False)
    from iclr25 import ledger, registry

    entries = registry.load("99-t", root)
    rob = root / "results" / "robustness" / "99-t" / "01-ok.json"
    rob.parent.mkdir(parents=True)
    rob.write_text(json.dumps({
        "chapter": "99-t", "notebook": "01-ok", "profile": "smoke", "seeds": [0, 1, 2],
        "created": "2026-12-02T00:00:00+00:00", "inputs": ledger.inputs_record("99-t", "01-ok", root),
        "claims": [{"id": cid, "claim": e.claim, "kind": e.kind, "entry_hash": registry.entry_hash(e),
                    "held": 2 if e.kind == "finding" else 3, "n": 3}
                   for cid, e in entries.items() if e.notebook == "01-ok"]}))
    env = {k: v for k, v in os.environ.items() if k not in ("ICLR25_RESULTS_DIR",)}
    env.update(ICLR25_ROOT=str(root), ICLR25_PROFILE="book", ICLR25_PROGRESS="0")
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(root), "-W", "-n", "--keep-going"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log

    html = root / "_build" / "html"
    ok = (html / "notebooks" / "99-t" / "01-ok.html").read_text()
    failed = (html / "notebooks" / "99-t" / "02-fails.html").read_text()
    assert "computed before the claims" in ok and "ClaimFailed" not in ok
    # the failing page: its output up to the failure, the claims table with the row marked,
    # the error, and nothing after it
    assert "computed before the claims" in failed
    assert "iclr25-claim-failed" in failed and "FAILED" in failed
    assert "ClaimFailed" in failed and "after the failure" not in failed
    intro = (html / "intro.html").read_text()
    assert "held in fewer than all seeds" in intro and "2 of 3" in intro
    assert "it covered 1 of the chapter\u2019s 2 notebooks: 01-ok" in intro  # smart quotes
    assert re.search(r"Measured in the .*book.* profile .*01-ok \d+ s; 02-fails \d+ s", intro), intro
    scorecard = (html / "scorecard.html").read_text()
    assert "Notebooks that failed in this build" in scorecard and "02-fails" in scorecard
    assert ("2 registered findings across 1 chapter(s): 2 reproduced, 0 not reproduced, "
            "0 inconclusive, 0 out of reach, 0 not yet judged; 1 of 2 checks held") in scorecard
    assert "1 of 2 checks held (true by construction; not counted)" in scorecard  # {iclr25-registry}

    summary = (root / "_build" / "execution.txt").read_text()
    lines = summary.splitlines()
    assert any(ln.startswith("99-t/01-ok") and ln.rstrip().endswith("ok") for ln in lines), summary
    assert any(ln.startswith("99-t/02-fails") and "FAILED" in ln for ln in lines), summary
    assert "failed claim: a side remark" in summary
    assert "2 notebook(s)" in summary and "1 failed" in summary
    assert "99-t/02-fails" in log  # printed at the end of the build too

    # a second build: the cached notebook whose committed result went stale executes again

    result = root / "results" / "99-t" / "01-ok.json"
    data = json.loads(result.read_text())
    data["inputs"]["files"]["constraints.txt"] = "an older hash"
    result.write_text(json.dumps(data))
    proc = subprocess.run([str(jb), "build", str(root), "-W", "-n", "--keep-going"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert "stale or missing book result execute again: 99-t/01-ok" in log, log
    assert json.loads(result.read_text())["inputs"]["files"]["constraints.txt"] != "an older hash"
    assert not (root / ".jupyter_cache").exists()  # the build's own cache, not one beside it

"""The ``iclr25`` command: run, sweep, list, scorecard, help, exit codes and what they print."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from iclr25.claims import Claims
from iclr25.cli import main
from iclr25.scorecard import chapter_summary, render, scorecard_table

BODY = textwrap.dedent("""\
    from iclr25.claims import Claims

    claims = Claims("99-test", "01-tiny", profile, {"seed": seed, "lr": lr})
    claims.metric("value", 10 * seed + 1000 * lr)
    claims.check("lr is below 0.01", kind="finding", source="Table 1", paper=0.01, ours=lr, holds=lr < 0.01)
    claims.check("seed is even", kind="finding", source="Fig. 2", paper=0, ours=seed % 2, holds=seed % 2 == 0,
                 must_hold=False, note="informative only")
    claims.save()
    claims.assert_all()
""")


@pytest.fixture
def book(tmp_path, monkeypatch):
    """A book root with notebooks/99-test/01-tiny.ipynb (parameters profile, seed, lr)."""
    root = tmp_path / "book"
    params = new_code_cell("profile = None  # smoke | book | paper\nseed = 0\nlr = 1e-3  # paper: 1e-4")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(BODY)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = root / "notebooks" / "99-test" / "01-tiny.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    (root / "notebooks" / "98-empty").mkdir()
    monkeypatch.setenv("ICLR25_ROOT", str(root))
    monkeypatch.setenv("ICLR25_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ICLR25_PROGRESS", "0")
    for var in ("ICLR25_RESULTS_DIR", "ICLR25_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    return root


def _results(directory: Path) -> Path:
    """Two chapters of saved claims under ``directory``."""
    a = Claims("18-relu-landscape", "01-saddle-to-saddle", "smoke", {"seed": 0})
    a.check("loss plateaus at saddles", kind="finding", source="Fig. 1", paper=3, ours=3, holds=True)
    a.check("escape neurons appear", kind="finding", source="Thm. 2", paper=0.5, ours=0.123456789, holds=False,
            must_hold=False, note="needs more steps | smoke scale")
    a.save(directory)
    b = Claims("06-topk-sae", "01-scaling", "book")
    b.check("MSE falls with k", kind="check", source="Table 2", paper=None, ours="yes", holds=True)
    b.save(directory)
    return directory


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("run", "sweep", "list", "scorecard"):
        assert word in out
    assert main(["sweep", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--grid NAME=V1,V2" in out and "--scheduler" in out and "tcp://" in out
    assert main([]) == 2 and "COMMAND" in capsys.readouterr().err


def test_python_dash_m_works():
    out = subprocess.run([sys.executable, "-m", "iclr25", "run", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("usage: iclr25 run") and "-p NAME=VALUE" in out


def test_list_shows_parameters_with_defaults_and_comments(book, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "98-empty\n  (no notebooks yet)" in out
    assert "99-test\n  99-test/01-tiny\n" in out
    assert "seed = 0\n" in out and "lr = 1e-3       # paper: 1e-4" in out
    assert main(["list", "99"]) == 0 and "98-empty" not in capsys.readouterr().out
    assert main(["list", "42-nope"]) == 2
    assert "chapters: 98-empty, 99-test" in capsys.readouterr().err


def test_run_prints_where_outputs_went_and_the_claims(book, capsys, tmp_path):
    assert main(["run", "99-test/01-tiny", "--profile", "smoke", "-p", "seed=1", "-p", "lr=2e-3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: 99-test/01-tiny (profile smoke, seed=1, lr=0.002)")
    assert "claims held:     1/2" in out and "failed must-hold" not in out
    run_dir = next((tmp_path / "runs").iterdir())
    assert str(run_dir) in out and str(run_dir / "01-tiny.ipynb") in out
    assert json.loads((run_dir / "99-test" / "01-tiny.json").read_text())["metrics"]["value"] == 12.0


def test_run_exit_code_is_one_when_a_claim_fails(book, capsys, tmp_path):
    assert main(["run", str(book / "notebooks/99-test/01-tiny.ipynb"), "-p", "lr=0.05",
                 "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAILED: 99-test/01-tiny (profile book, lr=0.05)")
    assert "failed claims (a check is a bug):\n    - lr is below 0.01 (Table 1): paper 0.01, ours 0.05" in out
    assert ("error: ClaimFailed (cell [3]): 1 claim(s) that must hold at profile 'book' failed:\n"
            "      - lr is below 0.01") in out
    assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "failed"


def test_run_usage_errors_exit_two_before_running(book, capsys, tmp_path):
    assert main(["run", "99-test/01-tiny", "-p", "lrate=1"]) == 2
    assert "unknown parameter(s) lrate for 99-test/01-tiny; valid: profile, seed, lr" in capsys.readouterr().err
    assert main(["run", "99-test/01-tiny", "--profile", "huge"]) == 2
    assert "valid profiles: smoke, book, paper" in capsys.readouterr().err
    assert main(["run", "99-test/01-tiny", "-p", "seed"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err
    assert main(["run", "99-test/07-nope"]) == 2
    assert "notebooks in 99-test: 01-tiny" in capsys.readouterr().err
    assert main(["sweep", "99-test/01-tiny", "--grid", "seed=0,1", "-p", "seed=2"]) == 2
    assert not (tmp_path / "runs").exists()


def test_sweep_prints_the_table_and_exits_one_if_a_run_failed(book, capsys, tmp_path):
    assert main(["sweep", "99-test/01-tiny", "--grid", "lr=1e-3,0.05", "--profile", "smoke",
                 "-p", "seed=1", "--workers", "1", "--out", str(tmp_path / "sw")]) == 1
    out = capsys.readouterr().out
    assert out.startswith("sweep: 2 run(s) of 99-test/01-tiny on 1 local process(es)")
    assert "1/2 run(s) ok" in out and "claim: lr is below 0.01" in out
    table = pd.read_csv(tmp_path / "sw" / "sweep.csv")
    assert table["value"].tolist() == pytest.approx([11.0, 60.0])
    assert table["ok"].tolist() == [True, False]
    assert table["run"].tolist() == ["0-lr=0.001", "1-lr=0.05"]


REGISTRY_99 = textwrap.dedent("""\
    chapter: 97-reg
    claims:
      - {id: beats-control, notebook: 01-x, claim: Ours beats the control., source: Table 1,
         paper: 0.9, kind: finding, statistic: accuracy per seed, registered: 2026-12-07,
         control: {kind: chance, describe: chance level, value: 0.5}, direction: greater,
         replication: {unit: seeds, n: 3}}
      - {id: ties-control, notebook: 01-x, claim: Ours ties the control., source: Fig. 2,
         paper: 0.5, kind: finding, statistic: accuracy per seed, registered: 2026-12-07,
         control: {kind: chance, describe: chance level, value: 0.5}, direction: greater,
         replication: {unit: seeds, n: 3}}
      - {id: big-model, notebook: 01-x, claim: At scale it holds., source: Table 3, paper: 1,
         kind: finding, statistic: s, registered: 2026-12-07, control: {kind: chance, value: 0},
         replication: {unit: seeds, n: 3}, profile: paper, reason: needs 7B parameters}
      - {id: never-run, notebook: 02-y, claim: Not run yet., source: Fig. 4, paper: 1,
         kind: finding, statistic: s, registered: 2026-12-07, control: {kind: chance, value: 0},
         replication: {unit: seeds, n: 3},
         amendments: [{date: 2026-12-07, field: margin, old: 0.1, new: 0.0, why: a test}]}
      - {id: identity, notebook: 01-x, claim: The identity holds., source: Eq. 1, paper: 0,
         kind: check, statistic: max error, registered: 2026-12-07}
    """)


def _registered(tmp_path):
    """A registry of chapter 97-reg and one result judged by it."""
    from iclr25 import registry as R
    from iclr25.registry import Registry

    (tmp_path / "book" / "claims").mkdir(parents=True)
    (tmp_path / "book" / "claims" / "97-reg.yaml").write_text(REGISTRY_99)
    claims = Registry(Claims("97-reg", "01-x", "book"), tmp_path)
    claims.finding("beats-control", ours=[0.9, 0.91, 0.92])
    claims.finding("ties-control", ours=[0.4, 0.6, 0.5])
    claims.finding("big-model", ours=None)
    claims.check("identity", holds=True, ours=0.0)
    claims.save(tmp_path / "res")
    return R.load("97-reg", tmp_path)


def test_scorecard_counts_registered_findings_by_verdict(tmp_path):
    from iclr25.claims import load_results
    from iclr25.scorecard import headline, readme_block, registry_table

    entries = _registered(tmp_path)
    results = load_results(tmp_path / "res")
    regs = {"97-reg": entries}
    summary = chapter_summary(results, regs)
    assert list(summary.columns) == ["chapter", "notebooks", "findings", "reproduced",
                                     "not reproduced", "inconclusive", "out of reach",
                                     "not yet judged", "checks held", "checks", "amendments",
                                     "profile"]
    assert summary.values.tolist() == [["97-reg", 1, 4, 1, 0, 1, 1, 1, 1, 1, 1, "book"]]
    assert headline(results, regs) == (
        "4 registered findings across 1 chapter(s): 1 reproduced, 0 not reproduced, "
        "1 inconclusive, 1 out of reach, 1 not yet judged; 1 of 1 checks held; 1 amendment(s)")
    table = registry_table("97-reg", entries, results)
    assert table["verdict"].tolist() == ["reproduced", "inconclusive", "out of reach",
                                         "not yet judged", "held"]
    assert table["ours"][0].startswith("0.41 [") and table["ours"][0].endswith("(n=3)")
    assert "| 97-reg | 1 | 4 | 1 | 0 | 1 | 1 | 1 | 1 / 1 | 1 | book |" in readme_block(results, regs)
    # a result judged by an entry that changed since counts as not yet judged
    changed = {**entries, "beats-control": entries["beats-control"].__class__(
        **{**entries["beats-control"].as_dict(), "margin": 0.5, "amendments": ()})}
    assert chapter_summary(results, {"97-reg": changed})["reproduced"].tolist() == [0]


def test_scorecard_functions_are_pure_tables(tmp_path):
    from iclr25.claims import load_results

    results = load_results(_results(tmp_path))
    summary = chapter_summary(results, {})
    assert summary.values.tolist() == [
        ["06-topk-sae", 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, "book"],
        ["18-relu-landscape", 1, 2, 0, 0, 0, 0, 2, 0, 0, 0, "smoke"]]
    table = scorecard_table(results)
    assert table["claim"].tolist() == ["MSE falls with k", "loss plateaus at saddles",
                                       "escape neurons appear"]
    assert table["verdict"].tolist() == ["held", "not yet judged", "not yet judged"]
    assert table["kind"].tolist() == ["check", "finding", "finding"]
    assert scorecard_table([]).empty and chapter_summary([], {}).empty
    md = render(results, "markdown", {})
    assert md.startswith("**2 registered findings across 2 chapter(s): 0 reproduced, ")
    assert "### 06-topk-sae: 0 findings: ; checks 1/1" in md and "Checks (1/1 held" in md
    assert "| needs more steps \\| smoke scale |" in md and "| 0.5 | 0.123457 |" in md


def test_scorecard_command(book, capsys, tmp_path):
    assert main(["scorecard"]) == 0  # default results/ does not exist yet
    assert "No results yet" in capsys.readouterr().out
    folder = str(_results(tmp_path / "res"))
    assert main(["scorecard", "--results", folder]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Scorecard: 2 registered findings across 2 chapter(s): 0 reproduced")
    assert ("18-relu-landscape: 2 findings: 2 not yet judged; checks 0/0 "
            "(1 notebook(s), profile smoke)") in out
    assert "06-topk-sae: 0 findings: ; checks 1/1" in out
    line = next(li for li in out.splitlines() if "escape neurons appear" in li)
    assert "Thm. 2" in line and "0.123457" in line and "needs more steps" in line
    assert main(["scorecard", "--results", folder, "--format", "csv"]) == 0
    csv = capsys.readouterr().out
    assert csv.splitlines()[0] == \
        "chapter,notebook,id,claim,kind,source,paper,ours,control,verdict,note,profile"
    assert main(["scorecard", "--results", folder, "--format", "html"]) == 2


def test_the_results_ledger_end_to_end(book, capsys):
    """check-results fails on a missing result, refresh-results fills it at the book profile,
    an edit to the notebook makes it stale, and verify-results fails when a re-run flips a claim."""
    assert main(["check-results"]) == 1
    out = capsys.readouterr().out
    assert "99-test/01-tiny: missing" in out and "iclr25 refresh-results 99-test/01-tiny" in out

    assert main(["refresh-results"]) == 0
    assert "ledger: " + str(book / "results" / "99-test" / "01-tiny.json") in capsys.readouterr().out
    saved = json.loads((book / "results" / "99-test" / "01-tiny.json").read_text())
    assert saved["profile"] == "book"
    assert list(saved["inputs"]["files"]) == ["notebooks/99-test/01-tiny.ipynb",
                                              "lib/iclr25/__init__.py", "lib/iclr25/claims.py",
                                              "lib/iclr25/profiles.py", "constraints.txt"]
    assert main(["check-results"]) == 0
    assert "are current" in capsys.readouterr().out

    assert main(["verify-results", "99-test/01-tiny"]) == 0
    assert "1/1 re-run(s) reproduce" in capsys.readouterr().out

    path = book / "notebooks" / "99-test" / "01-tiny.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace("lr = 1e-3", "lr = 2e-2")
    nbformat.write(nb, path)
    assert main(["check-results"]) == 1
    out = capsys.readouterr().out
    assert "99-test/01-tiny: stale: inputs changed since it ran: notebooks/99-test/01-tiny.ipynb" in out

    assert main(["verify-results", "99-test/01-tiny"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: 99-test/01-tiny" in out and "held, now does not: lr is below 0.01" in out


def test_verify_results_stops_starting_re_runs_when_its_budget_is_spent(book, capsys, monkeypatch):
    """CI picks by the recorded times, but a clean clone's caches are cold: once the wall clock
    passes the budget, the remaining picks are skipped and said to be, not failed."""
    from iclr25 import ledger

    assert main(["refresh-results"]) == 0
    monkeypatch.setattr(ledger, "pick_for_ci", lambda **kw: (["99-test/01-tiny"] * 2, "test"))
    capsys.readouterr()
    assert main(["verify-results", "--budget", "0"]) == 0
    out = capsys.readouterr().out
    assert "skipped: 99-test/01-tiny (the budget of 0 s is spent" in out
    assert "1/1 re-run(s) reproduce the committed results (1 skipped for time)" in out


def test_readme_block_is_rewritten_from_the_results(tmp_path):
    from iclr25.scorecard import README_BEGIN, README_END, readme_block, update_readme

    results = [json.loads(p.read_text()) for p in sorted(_results(tmp_path).glob("*/*.json"))]
    block = readme_block(results, {})
    assert block.startswith(README_BEGIN) and block.endswith(README_END)
    assert "| 18-relu-landscape | 1 | 2 | 0 | 0 | 0 | 0 | 2 | 0 / 0 | 0 | smoke |" in block
    assert "| 06-topk-sae | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 1 / 1 | 0 | book |" in block
    assert "| **all** | 2 | 2 | 0 | 0 | 0 | 0 | 2 | 1 / 1 | 0 | |" in block
    text = f"# title\n\n{README_BEGIN}\nold\n{README_END}\n\nrest\n"
    new = update_readme(text, results, {})
    assert new == f"# title\n\n{block}\n\nrest\n" and update_readme(new, results, {}) == new
    with pytest.raises(ValueError, match="no results block"):
        update_readme("# no markers\n", results)


def test_robustness_aggregates_a_hand_made_sweep(tmp_path):
    from iclr25 import robustness

    def result(*holds):
        return {"claims": [{"claim": f"c{i}", "kind": "finding", "source": "Fig. 1",
                            "holds": h} for i, h in enumerate(holds)]}

    per_seed = {0: result(True, True), 1: result(True, False), 2: None}  # seed 2 saved nothing
    agg = robustness.aggregate(per_seed)
    assert [(a["claim"], a["held"], a["n"], a["held_in"]) for a in agg] == \
        [("c0", 2, 3, [0, 1]), ("c1", 1, 3, [0])]
    assert agg[1]["verdicts"] == {"0": "held", "1": "not held", "2": None}
    path = robustness.write("18-relu-landscape", "01-x", "smoke", [0, 1, 2], per_seed,
                            {0: "ok", 1: "ok", 2: "NameError: x"}, tmp_path)
    assert path == tmp_path / "robustness" / "18-relu-landscape" / "01-x.json"
    # keyed by claim words, written outside the book: stale, so refused
    assert robustness.stale(json.loads(path.read_text()))
    assert robustness.load(tmp_path / "robustness") == {}
    assert robustness.load(tmp_path / "none") == {}


def test_robustness_records_keyed_by_registry_ids_go_stale_with_the_registry(book, tmp_path):
    """A record written against the registry is current; once the registry entry it recorded
    changes (or the notebook's inputs do), it is stale: the page refuses it, check-results names it."""
    from iclr25 import ledger, registry as R, robustness

    (book / "book" / "claims").mkdir(parents=True)
    reg = book / "book" / "claims" / "99-test.yaml"
    reg.write_text(textwrap.dedent("""\
        chapter: 99-test
        claims:
          - {id: lr-small, notebook: 01-tiny, claim: lr is small., source: Table 1, paper: 0.01,
             kind: finding, statistic: lr, registered: 2026-12-07,
             control: {kind: chance, value: 0.01}, direction: less, replication: {unit: seeds, n: 3}}
        """))
    e = R.load("99-test")["lr-small"]
    res = {"claims": [{"id": "lr-small", "claim": e.claim, "kind": "finding", "holds": True,
                       "verdict": "reproduced", "entry_hash": R.entry_hash(e)}]}
    path = robustness.write("99-test", "01-tiny", "smoke", [0, 1], {0: res, 1: res},
                            {0: "ok", 1: "ok"}, book / "results")
    record = json.loads(path.read_text())
    assert robustness.stale(record) == []
    assert robustness.load(book / "results" / "robustness")[("99-test", "01-tiny", e.claim)] == "2 / 2"
    reg.write_text(reg.read_text().replace("value: 0.01}", "value: 0.02}"))
    assert robustness.stale(record) == ["lr-small: its registry entry changed since"]
    problems = [p for p in ledger.check(book / "results") if p.kind == "robustness"]
    assert [p.notebook for p in problems] == ["99-test/01-tiny"]


def test_robustness_command_sweeps_every_seed(book, capsys, tmp_path):
    assert main(["robustness", "--seeds", "0,1", "--workers", "1", "--results", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "robustness" / "99-test" / "01-tiny.json").read_text())
    assert data["seeds"] == [0, 1] and data["runs"] == {"0": "ok", "1": "ok"}
    held = {c["claim"]: (c["held"], c["n"]) for c in data["claims"]}
    assert held == {"lr is below 0.01": (2, 2), "seed is even": (1, 2)}
    assert main(["robustness", "77", "--results", str(tmp_path)]) == 2
    assert "not a chapter of the book" in capsys.readouterr().err


def test_reproduce_runs_in_a_fresh_environment_and_names_what_moved(book, capsys, tmp_path):
    """`iclr25 reproduce` re-runs at the book profile with an empty HOME, cache and runs folder and
    compares with the committed result: reproduced as committed; after an edit that flips a
    verdict, NOT REPRODUCED with the claim named, and --update re-commits the fresh result."""
    assert main(["refresh-results"]) == 0
    capsys.readouterr()
    env_dir = tmp_path / "fresh"
    assert main(["reproduce", "99-test", "--env", str(env_dir)]) == 0
    out = capsys.readouterr().out
    assert "[1/1] 99-test/01-tiny" in out and "reproduced in" in out
    assert "1/1 notebook(s) reproduce the committed verdicts" in out
    assert sorted(p.name for p in env_dir.iterdir()) == ["cache", "home", "runs"]

    path = book / "notebooks" / "99-test" / "01-tiny.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace("lr = 1e-3", "lr = 2e-2")
    nbformat.write(nb, path)
    assert main(["reproduce", "99-test/01-tiny"]) == 1
    out = capsys.readouterr().out
    # (a must-hold claim that fails raises, so the notebook itself fails too)
    assert "FAILED in" in out and "held, now does not: lr is below 0.01" in out
    assert ". moved (no tol): lr is below 0.01 (committed: 0.001, re-run: 0.02)" in out
    assert main(["reproduce", "99-test/01-tiny", "--update"]) == 1
    saved = json.loads((book / "results" / "99-test" / "01-tiny.json").read_text())
    assert [c["ours"] for c in saved["claims"]][0] == 0.02
    capsys.readouterr()
    main(["reproduce", "99-test/01-tiny"])  # the verdicts now match the re-committed result
    assert "held, now does not" not in capsys.readouterr().out
    assert main(["reproduce", "no-such-chapter"]) == 2


def test_run_fresh_gives_the_kernel_the_environment_and_retries_a_time_out_once(tmp_path, monkeypatch):
    from iclr25 import batch, reproduce

    calls = []

    def fake_run(ident, profile, out_dir, timeout, env):
        calls.append((ident, profile, timeout, dict(env)))
        ok = len(calls) > 1
        return batch.RunResult(notebook=ident, out_dir=Path(out_dir), output_notebook=Path(out_dir),
                               parameters={}, profile=profile, ok=ok,
                               error=None if ok else "CellTimeoutError: A cell timed out",
                               duration_s=1.0, claims=[], metrics={})

    monkeypatch.setattr(batch, "run_notebook", fake_run)
    env = reproduce.fresh_environment(tmp_path / "env")
    assert all(Path(v).is_dir() and not any(Path(v).iterdir()) for k, v in env.items() if k != "HOME")
    out = reproduce.run_fresh("99-test/01-tiny", env, tmp_path / "out", {"elapsed_s": 200.0})
    assert out.ok and out.attempts == 2 and out.duration_s == 2.0
    assert [c[2] for c in calls] == [1000, 1000]          # 5 x the recorded 200 s
    assert all(c[1] == "book" and c[3]["HOME"] == env["HOME"] for c in calls)
    assert out.verdicts == ["the re-run saved no result"] and not out.reproduced

    calls.clear()
    monkeypatch.setattr(batch, "run_notebook", lambda *a, **k: fake_run(*a, **k) if False else
                        batch.RunResult("x", tmp_path, tmp_path, {}, "book", False,
                                        "ValueError: a bug", 1.0, [], {}))
    assert reproduce.run_fresh("99-test/01-tiny", env, tmp_path / "o2").attempts == 1  # no retry


def test_run_checks_values_before_running_and_names_the_parameter(book, capsys, tmp_path):
    assert main(["run", "99-test/01-tiny", "-p", "seed=abc"]) == 2
    err = capsys.readouterr().err
    assert ("parameter seed of 99-test/01-tiny expects int (from its default 0), got 'abc' (str); "
            "valid: a whole number, e.g. seed=3") in err
    assert main(["sweep", "99-test/01-tiny", "--grid", "lr=1e-3,fast"]) == 2
    assert "parameter lr of 99-test/01-tiny expects float" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_run_writes_under_the_current_directory(book, capsys, tmp_path, monkeypatch):
    assert "under the current directory" in " ".join(build_parser_help("run").split())
    monkeypatch.delenv("ICLR25_RUNS_DIR")
    here = tmp_path / "my-project"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["run", "99-test/01-tiny", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    run_dir = next((here / "runs").iterdir())
    assert f"run folder:      runs/{run_dir.name}" in out
    assert (run_dir / "run.json").is_file() and (run_dir / "99-test" / "01-tiny.json").is_file()


def build_parser_help(command: str) -> str:
    from iclr25.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command].format_help()

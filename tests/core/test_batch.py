"""iclr25.batch: papermill runs and sweeps of a tiny generated notebook.

Kernel start-ups dominate the runtime (a few seconds each), so the notebook is trivial and the
expensive fixtures (the 2x2 local sweep) are shared by the module.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from iclr25 import batch
from iclr25.profiles import ProfileError

CHAPTER, NAME = "99-test", "01-tiny"

BODY = textwrap.dedent("""\
    import os
    from iclr25.claims import Claims

    claims = Claims("99-test", "01-tiny", profile, {"seed": seed, "lr": lr})
    claims.metric("value", 10 * seed + 1000 * lr)
    claims.metric("profile_env", os.environ.get("ICLR25_PROFILE"))
    claims.check("lr is below 0.01", kind="finding", source="Table 1", paper=0.01, ours=lr, holds=lr < 0.01)
    claims.check("seed is even", kind="finding", source="Fig. 2", paper=0, ours=seed % 2, holds=seed % 2 == 0,
                 must_hold=False, note="informative only")
    claims.save()
    claims.assert_all()
""")


def write_tiny_notebook(root: Path) -> Path:
    """``<root>/notebooks/99-test/01-tiny.ipynb``: parameters ``profile, seed, lr``; saves one
    metric ``value = 10 seed + 1000 lr`` and a must-hold claim that holds iff ``lr < 0.01``."""
    params = new_code_cell("profile = None  # smoke | book | paper\nseed = 0\nlr = 1e-3  # paper: 1e-4")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# A tiny notebook"), params, new_code_cell(BODY)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = root / "notebooks" / CHAPTER / f"{NAME}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _point_env(mp: pytest.MonkeyPatch, base: Path) -> dict[str, Path]:
    root, runs = base / "book", base / "runs"
    mp.setenv("ICLR25_ROOT", str(root))
    mp.setenv("ICLR25_RUNS_DIR", str(runs))
    mp.setenv("ICLR25_PROGRESS", "0")
    mp.delenv("ICLR25_RESULTS_DIR", raising=False)
    mp.delenv("ICLR25_PROFILE", raising=False)
    return {"root": root, "runs": runs, "notebook": write_tiny_notebook(root)}


@pytest.fixture
def book(tmp_path, monkeypatch):
    return _point_env(monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """The 2x2 sweep seed x lr over a local pool of 2 processes (shared by the module)."""
    with pytest.MonkeyPatch.context() as mp:
        env = _point_env(mp, tmp_path_factory.mktemp("sweep"))
        table = batch.sweep(f"{CHAPTER}/{NAME}", {"seed": [0, 1], "lr": [1e-3, 0.05]},
                            profile="smoke", workers=2)
        yield env, table


# -- parsing ----------------------------------------------------------------------------------


def test_parse_value_takes_literals_else_strings():
    assert batch.parse_value("3") == 3 and isinstance(batch.parse_value("3"), int)
    assert batch.parse_value("1e-3") == 0.001
    assert batch.parse_value("True") is True and batch.parse_value("None") is None
    assert batch.parse_value("'abc'") == "abc" and batch.parse_value("abc") == "abc"
    assert batch.parse_value("[1, 2]") == [1, 2]
    assert batch.parse_value("relu") == "relu" and batch.parse_value("a b") == "a b"
    assert batch.parse_assignments(["seed=3", "lr=1e-3", "act=relu", "x=a=b"]) == {
        "seed": 3, "lr": 0.001, "act": "relu", "x": "a=b"}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        batch.parse_assignments(["seed"])


def test_parse_grid_splits_outside_brackets_and_quotes():
    grid = batch.parse_grid(["seed=0,1,2", "lr=1e-3,2e-3", "shape=(1,2),(3,4)", "s='a,b',c"])
    assert grid == {"seed": [0, 1, 2], "lr": [0.001, 0.002], "shape": [(1, 2), (3, 4)],
                    "s": ["a,b", "c"]}
    points = batch.grid_points({"seed": [0, 1], "lr": [1e-3, 2e-3]})
    assert points == [{"seed": 0, "lr": 1e-3}, {"seed": 0, "lr": 2e-3},
                      {"seed": 1, "lr": 1e-3}, {"seed": 1, "lr": 2e-3}]
    with pytest.raises(ValueError, match="empty"):
        batch.grid_points({"seed": []})


def test_run_dirs_are_unique_within_a_second(tmp_path):
    dirs = [batch.new_run_dir("nb", tmp_path) for _ in range(3)]
    assert len(set(dirs)) == 3 and all(d.is_dir() for d in dirs)
    assert re.fullmatch(r"\d{8}-\d{6}-nb", dirs[0].name)


# -- validation before anything runs ------------------------------------------------------------


def test_unknown_parameter_and_profile_raise_before_running(book):
    with pytest.raises(ProfileError, match=r"unknown parameter\(s\) lrate.*valid: profile, seed, lr"):
        batch.run_notebook(f"{CHAPTER}/{NAME}", parameters={"lrate": 1})
    with pytest.raises(ProfileError, match="unknown profile 'huge'; valid profiles: smoke, book, paper"):
        batch.run_notebook(f"{CHAPTER}/{NAME}", profile="huge")
    with pytest.raises(ProfileError, match="lrate"):
        batch.sweep(f"{CHAPTER}/{NAME}", {"seed": [0], "lrate": [1, 2]})
    with pytest.raises(ProfileError, match="unknown profile 'huge'"):
        batch.sweep(f"{CHAPTER}/{NAME}", {"profile": ["smoke", "huge"]})
    with pytest.raises(FileNotFoundError, match="notebooks in 99-test: 01-tiny"):
        batch.run_notebook(f"{CHAPTER}/02-missing")
    assert not book["runs"].exists()  # nothing was created, let alone executed


def test_notebook_parameters_and_listing(book):
    params = batch.notebook_parameters(f"{CHAPTER}/{NAME}.ipynb")
    assert list(params) == ["profile", "seed", "lr"]
    assert params["lr"]["default"] == "1e-3" and params["lr"]["help"] == "paper: 1e-4"
    assert batch.notebook_id(book["notebook"]) == f"{CHAPTER}/{NAME}"
    assert list(batch.list_notebooks("99")) == [CHAPTER]
    with pytest.raises(FileNotFoundError, match="chapters: 99-test"):
        batch.list_notebooks("42")


def _chapter_notebook(root: Path, source: str) -> str:
    """A notebook of chapter 15 (so its values are checked against iclr25.kan_bounds's configs)
    whose parameters cell is ``source``; returns its id."""
    params = new_code_cell(source)
    params.metadata["tags"] = ["parameters"]
    path = root / "notebooks" / "15-kan-bounds" / "99-values.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = new_notebook(cells=[params, new_code_cell("pass")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return "15-kan-bounds/99-values"


VALUES_CELL = textwrap.dedent("""\
    profile = None     # smoke | book | paper
    seed = 0           # seeds everything
    n_steps = None     # epochs (book: 300)
    optimizer = None   # adam | sgd | lbfgs
    targets = None     # the simulated setups
    dropout = 0.1      # paper: 0.1
    plot = False       # draw the figure
    widths = None      # no config field of this name: not checked
""")


def test_parameter_values_are_checked_against_the_parameters_cell_before_running(book):
    nb = _chapter_notebook(book["root"], VALUES_CELL)

    def prepare(**params):
        return batch._prepare(nb, "smoke", params)[3]

    # the type of the default, named with the parameter and the valid values
    with pytest.raises(ProfileError, match=re.escape(
            f"parameter seed of {nb} expects int (from its default 0), got 'abc' (str); "
            "valid: a whole number, e.g. seed=3")):
        prepare(seed="abc")
    with pytest.raises(ProfileError, match=r"parameter dropout .* expects float \(from its default "
                                           r"0\.1\), got None \(NoneType\); valid: a number"):
        prepare(dropout=None)
    with pytest.raises(ProfileError, match="parameter plot .* expects bool .* valid: True or False"):
        prepare(plot=2)
    # default None ("the profile's value"): the type of the chapter's config field of that name
    with pytest.raises(ProfileError, match=re.escape(
            f"parameter n_steps of {nb} expects int or None (from iclr25.kan_bounds's "
            "DigitsConfig.n_steps and SweepConfig.n_steps), got 1.5 (float); valid: a whole "
            "number, e.g. n_steps=3; or None (the profile's value)")):
        prepare(n_steps=1.5)
    # the chapter's choices (OPTIMIZERS, TARGETS), widened by those the comment lists
    with pytest.raises(ProfileError, match=re.escape(
            "got 'rmsprop' (not a valid choice); valid: adam, sgd, lbfgs; or None")):
        prepare(optimizer="rmsprop")
    with pytest.raises(ProfileError, match=r"got 'f3' \(not a valid choice\); valid: f1, f2 "
                                           r"\(a comma-separated subset\)"):
        prepare(targets="f1,f3")
    # what fits passes, as the notebook expects it (6e5 from the command line is an int)
    assert prepare(seed=2.0, n_steps=6e5, optimizer="lbfgs", targets=("f2",), dropout=1,
                   plot="true", widths="anything") == {
        "seed": 2, "n_steps": 600_000, "optimizer": "lbfgs", "targets": ("f2",), "dropout": 1,
        "plot": True, "widths": "anything"}
    assert prepare(n_steps=None, optimizer="adam", targets="f1,f2") == {
        "n_steps": None, "optimizer": "adam", "targets": "f1,f2"}
    # runs and every point of a sweep raise before anything runs
    with pytest.raises(ProfileError, match="parameter seed"):
        batch.run_notebook(f"{CHAPTER}/{NAME}", parameters={"seed": "abc"})
    with pytest.raises(ProfileError, match="parameter lr .* expects float .* got 'fast'"):
        batch.sweep(f"{CHAPTER}/{NAME}", {"lr": [1e-3, "fast"]})
    assert not book["runs"].exists()


def test_annotations_and_comments_give_types_and_choices():
    import ast

    def kinds(text):
        return batch._annotation_kinds(ast.parse(text, mode="eval").body)

    assert kinds("int") == ({"int"}, []) and kinds("float | None") == ({"float", "none"}, [])
    assert kinds("Optional[str]") == ({"str", "none"}, []) and kinds("tuple[int, ...]") == ({"seq"}, [])
    assert kinds('Literal["conv", "mlp"]') == ({"str"}, ["conv", "mlp"])
    assert kinds("'int'") == ({"int"}, []) and kinds("torch.dtype") is None
    assert batch._comment_choices("attribution: a (smoke) | b_2 (book) | per-layer") == ["a", "b_2", "per-layer"]
    assert batch._comment_choices("smoke | book | paper; None: $ICLR25_PROFILE") == ["smoke", "book", "paper"]
    assert batch._comment_choices("epochs (paper: 1000)") == []


def test_runs_go_under_the_current_directory_unless_iclr25_runs_dir_is_set(tmp_path, monkeypatch):
    from iclr25 import paths

    monkeypatch.delenv("ICLR25_RUNS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert batch.default_runs_parent() == tmp_path / "runs"
    assert batch.new_run_dir("nb").parent == tmp_path / "runs"
    assert paths.runs_dir() != tmp_path / "runs"  # the notebooks' caches stay in the repository
    monkeypatch.setenv("ICLR25_RUNS_DIR", str(tmp_path / "elsewhere"))
    assert batch.new_run_dir("nb").parent == tmp_path / "elsewhere"


# -- runs -------------------------------------------------------------------------------------


def test_run_notebook_writes_everything_into_the_run_folder(book):
    res = batch.run_notebook(f"{CHAPTER}/{NAME}", profile="smoke", parameters={"seed": 2, "lr": 2e-3})
    assert res.ok and res.error is None, res.error
    assert res.out_dir.parent == book["runs"].resolve()
    assert re.fullmatch(r"\d{8}-\d{6}-99-test-01-tiny", res.out_dir.name)
    assert (res.profile, res.parameters, res.notebook) == ("smoke", {"seed": 2, "lr": 2e-3}, "99-test/01-tiny")

    # the executed notebook, with papermill's injected parameters
    out = nbformat.read(res.output_notebook, as_version=4)
    injected = [c for c in out.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "seed = 2" in injected[0].source and "profile = \"smoke\"" in injected[0].source

    # the claims landed in the run folder (ICLR25_RESULTS_DIR reached the kernel), not in results/
    saved = json.loads((res.out_dir / CHAPTER / f"{NAME}.json").read_text())
    assert saved["profile"] == "smoke" and saved["parameters"] == {"seed": 2, "lr": 0.002}
    assert saved["metrics"] == {"value": 22.0, "profile_env": "smoke"}
    assert not (book["root"] / "results").exists()
    assert "ICLR25_RESULTS_DIR" not in os.environ  # set for the kernel only

    assert res.metrics["value"] == pytest.approx(22.0)
    assert (res.held, res.recorded, res.failed_claims) == (2, 2, [])
    run = json.loads((res.out_dir / "run.json").read_text())
    assert run["status"] == "ok" and run["error"] is None and run["profile"] == "smoke"
    assert run["parameters"] == {"seed": 2, "lr": 0.002} and run["duration_s"] > 0


def test_failing_claim_gives_not_ok_with_the_error(book, monkeypatch, tmp_path):
    monkeypatch.setenv("ICLR25_PROFILE", "smoke")  # profile=None resolves from the environment
    res = batch.run_notebook(book["notebook"], parameters={"lr": 0.05}, out_dir=tmp_path / "here")
    assert not res.ok and res.profile == "smoke"
    assert res.error.startswith("ClaimFailed") and "lr is below 0.01" in res.error
    assert [c["claim"] for c in res.failed_claims] == ["lr is below 0.01"]
    assert (res.held, res.recorded) == (1, 2)  # saved before the assertion cell raised
    assert res.output_notebook == (tmp_path / "here" / f"{NAME}.ipynb").resolve()
    assert res.output_notebook.exists()
    run = json.loads((tmp_path / "here" / "run.json").read_text())
    assert run["status"] == "failed" and "ClaimFailed" in run["error"]
    assert run["claims"]["failed_must_hold"] == ["lr is below 0.01"]


# -- sweeps -----------------------------------------------------------------------------------


def _expected_value(seed, lr):
    return 10 * seed + 1000 * lr


def test_local_sweep_tabulates_every_point(local_sweep):
    env, table = local_sweep
    assert list(table[["seed", "lr"]].itertuples(index=False, name=None)) == [
        (0, 1e-3), (0, 0.05), (1, 1e-3), (1, 0.05)]
    assert table["value"].tolist() == pytest.approx([_expected_value(s, lr) for s, lr in
                                                     zip(table["seed"], table["lr"])])
    assert table["ok"].tolist() == [True, False, True, False]
    assert table["claim: lr is below 0.01"].tolist() == [True, False, True, False]
    assert table["claim: seed is even"].tolist() == [True, True, False, False]
    assert table["held"].tolist() == [2, 1, 1, 0] and set(table["recorded"]) == {2}
    assert table["error"].str.contains("ClaimFailed").tolist() == [False, True, False, True]
    assert (table["duration_s"] > 0).all()

    sweep_dir = Path(table.attrs["out_dir"])
    assert sweep_dir.parent == env["runs"].resolve()
    assert re.fullmatch(r"\d{8}-\d{6}-sweep-99-test-01-tiny", sweep_dir.name)
    assert table["run"].tolist() == ["0-seed=0-lr=0.001", "1-seed=0-lr=0.05",
                                     "2-seed=1-lr=0.001", "3-seed=1-lr=0.05"]
    for run in table["run"]:
        assert (sweep_dir / run / f"{NAME}.ipynb").exists()
        assert (sweep_dir / run / CHAPTER / f"{NAME}.json").exists()
    import pandas as pd

    csv = pd.read_csv(sweep_dir / "sweep.csv")
    assert csv["value"].tolist() == pytest.approx(table["value"].tolist())


def test_dask_sweep_gives_the_same_table(local_sweep):
    distributed = pytest.importorskip("distributed")
    _, local = local_sweep
    with pytest.MonkeyPatch.context() as mp:
        # the same fresh book for the workers, which inherit the environment when they start
        _point_env(mp, Path(local.attrs["out_dir"]).parent.parent / "dask")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            table = batch.sweep(f"{CHAPTER}/{NAME}", {"seed": [0, 1], "lr": [1e-3]},
                                profile="smoke", scheduler=client)
    expected = local[local["lr"] == 1e-3].reset_index(drop=True)
    cols = [c for c in expected.columns if c not in ("duration_s", "run")]
    assert list(table.columns) == list(expected.columns)
    assert table[cols].to_dict("list") == expected[cols].to_dict("list")
    assert table["run"].tolist() == ["0-seed=0-lr=0.001", "1-seed=1-lr=0.001"]

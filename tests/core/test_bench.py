"""iclr25.bench: the benchmark harness (timing, asserted agreement, headline, records)."""

import json
import time

import numpy as np
import pytest

from iclr25 import bench


def _sleeper(seconds, value):
    def f():
        time.sleep(seconds)
        return value
    return f


def test_disagreeing_outputs_fail_the_run_and_write_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR25_BENCH_DIR", str(tmp_path))
    cmp = bench.Comparison("t-disagree", "two functions that differ", chapter="core", tol=1e-6,
                           repeat=1, warmup=0)
    cmp.add("ours", lambda: np.array([1.0, 2.0, 3.0]))
    cmp.add("peer", lambda: np.array([1.0, 2.0, 3.1]), role="baseline")
    with pytest.raises(bench.Disagreement, match=r"'peer' and 'ours' disagree: distance 0.1 > tol 1e-06"):
        cmp.run(echo=False)
    assert not list(tmp_path.glob("*.json"))
    # NaN never passes
    cmp = bench.Comparison("t-nan", "nan", chapter="core", tol=1.0, repeat=1, warmup=0)
    cmp.add("ours", lambda: 1.0).add("peer", lambda: float("nan"), role="baseline")
    with pytest.raises(bench.Disagreement):
        cmp.run(distance=lambda a, b: abs(a - b), echo=False)


def test_headline_is_against_the_strongest_baseline_not_a_variant(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR25_BENCH_DIR", str(tmp_path))
    cmp = bench.Comparison("t-head", "sleepers", chapter="core", target=2.0, tol=0.0, repeat=3,
                           warmup=1)
    cmp.add("ours", _sleeper(0.01, 1.0))
    cmp.add("slow", _sleeper(0.06, 1.0), role="baseline")
    cmp.add("fast", _sleeper(0.03, 1.0), role="baseline")
    cmp.add("shortcut", _sleeper(0.0, 2.0), role="variant", agree=False, what="closed form")
    rec = cmp.run(echo=False)
    assert rec["strongest_baseline"] == "fast"
    assert 1.8 < rec["headline"] < 3.5            # ~3x against "fast", not ~6x against "slow"
    assert rec["meets_target"] is True
    rows = {r["name"]: r for r in rec["rows"]}
    assert rows["shortcut"]["distance"] is None    # a variant computing something else
    assert rows["fast"]["distance"] == 0.0
    assert len(rows["ours"]["times_s"]) == 3 and rows["ours"]["min_s"] <= rows["ours"]["median_s"]
    assert rows["ours"]["peak_rss_mb"] > 0
    on_disk = json.loads((tmp_path / "t-head.json").read_text())
    assert on_disk["headline"] == pytest.approx(rec["headline"])
    assert on_disk["machine"]["cores"] >= 1 and on_disk["machine"]["cpu"]
    assert [r["id"] for r in bench.load_records(tmp_path)] == ["t-head"]


def test_work_normalises_and_result_and_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR25_BENCH_DIR", str(tmp_path))
    state = {"steps": 0}

    def step():
        state["steps"] += 1

    cmp = bench.Comparison("t-work", "per unit", chapter="core", tol=0.0, repeat=2, warmup=1)
    # ours does 10 units in 20 ms (2 ms/unit); the loop 1 unit in 10 ms (10 ms/unit): 5x per unit
    cmp.add("ours", _sleeper(0.02, 0.0), work=10, metrics=lambda out: {"out": out})
    cmp.add("loop", _sleeper(0.01, 0.0), role="baseline", work=1, repeat=1, warmup=0)
    cmp.add("trainer", step, role="variant", work=10, result=lambda: state["steps"])
    rec = cmp.run(distance=lambda a, b: 0.0 if a == b or b == 3 else 1.0, echo=False)
    rows = {r["name"]: r for r in rec["rows"]}
    assert rec["ratio_per"] == "unit of work"
    assert 3.0 < rec["headline"] < 6.5
    assert rows["loop"]["repeat"] == 1 and len(rows["loop"]["times_s"]) == 1
    assert rows["ours"]["metrics"] == {"out": 0.0}
    assert state["steps"] == 3 and rows["trainer"]["distance"] == 0.0   # result() after 1 + 2 calls


def test_bad_comparisons_are_clear_errors():
    with pytest.raises(ValueError, match="lower-case"):
        bench.Comparison("Bad Id", "x", chapter="core")
    cmp = bench.Comparison("t-bad", "x", chapter="core")
    cmp.add("ours", lambda: 1)
    with pytest.raises(ValueError, match="exactly one"):
        cmp.add("ours2", lambda: 1)
    with pytest.raises(ValueError, match="role must be one of"):
        cmp.add("x", lambda: 1, role="peer")
    with pytest.raises(ValueError, match="is a 'variant'"):
        cmp.add("x", lambda: 1, role="baseline", agree=False)
    with pytest.raises(ValueError, match="at least one 'baseline'"):
        cmp.run(echo=False, save=False)
    with pytest.raises(ValueError, match="repeat >= 1"):
        bench.time_call(lambda: 1, repeat=0)


def test_distances():
    assert bench.max_abs_diff([np.ones(3), 2.0], [np.ones(3) * 1.5, 2.0]) == 0.5
    assert bench.max_abs_diff(np.ones(3), np.ones(4)) == float("inf")
    assert bench.rel_diff(np.array([10.0, 20.0]), np.array([10.0, 21.0])) == pytest.approx(0.05)

"""Shared test set-up: every test is seeded (numpy, random, torch) through one autouse fixture,
and never writes into the repository's results/ or runs/."""

import os
import random

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _seed_everything(monkeypatch, tmp_path_factory):
    random.seed(0)
    np.random.seed(0)
    try:
        import torch

        torch.manual_seed(0)
    except ImportError:  # pragma: no cover
        pass
    out = tmp_path_factory.mktemp("iclr25")
    monkeypatch.setenv("ICLR25_RESULTS_DIR", str(out / "results"))
    monkeypatch.setenv("ICLR25_RUNS_DIR", str(out / "runs"))
    monkeypatch.setenv("ICLR25_PROGRESS", "0")
    yield


# Under CI=true a skipped test fails: in CI every test of a deliverable runs (a missing dependency
# of one, e.g. an importorskip that does not find its module, is a broken install, not a pass). A
# test that may legitimately not run on a CPU machine says so with @pytest.mark.optional("why").
_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def pytest_configure(config):
    config.addinivalue_line("markers", "optional(reason): may skip in CI (e.g. needs a GPU)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if _CI and rep.skipped and item.get_closest_marker("optional") is None \
            and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[-1] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = (f"skipped under CI=true ({reason}): a test of a deliverable may not skip in "
                        "CI; install what it needs (make install), or mark it "
                        "@pytest.mark.optional(reason) if it cannot run on this machine")

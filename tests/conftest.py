"""Shared test set-up: every test is seeded (numpy, random, torch) through one autouse fixture,
and never writes into the repository's results/ or runs/."""

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

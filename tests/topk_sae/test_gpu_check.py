"""``benchmarks/gpu_check.py`` (``make gpu-check``): its agreement check runs on the CPU through
Triton's interpreter, and on a machine without CUDA it says so instead of pretending."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_triton_and_torch_training_agree_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--small", "--steps", "6"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("gpu-check part 1")][0]
    assert line.endswith(": ok") and "['cpu']" in line


def test_backends_agree_measures_real_differences():
    """torch vs the dense reference path: the same maths summed in another order, so the
    differences are small but not zero (the check reads them from the runs, not from a flag)."""
    mod = _load()
    res = mod.backends_agree(d=16, n=64, k=4, batch=32, steps=4, device="cpu",
                             backends=("reference", "torch"))
    assert 0.0 < res["loss_rel"] < 1e-4 and 0.0 < res["weight_abs"] < 1e-3
    assert res["devices"] == ["cpu"] and res["steps"] == 4


def test_without_cuda_it_says_so_and_exits_2(monkeypatch, capsys):
    mod = _load()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert mod.main(["--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().out

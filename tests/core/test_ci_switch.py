"""tests/conftest.py's CI switch: under CI=true a skipped test fails unless marked optional."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

BODY = '''
import pytest

def test_needs_a_missing_module():
    pytest.importorskip("no_such_module_iclr25")

@pytest.mark.optional("needs a GPU")
def test_optional():
    pytest.skip("no GPU here")

def test_runs():
    assert 1 + 1 == 2
'''


def _pytest(tmp_path, ci: str | None):
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_demo.py").write_text(BODY)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                        str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    return r.returncode, r.stdout


def test_under_ci_a_skip_fails_unless_optional(tmp_path):
    rc, out = _pytest(tmp_path, "true")
    assert rc == 1
    assert "1 failed, 1 passed, 1 skipped" in out
    assert "FAILED test_demo.py::test_needs_a_missing_module" in out
    assert "no_such_module_iclr25" in out and "may not skip in CI" in out


def test_outside_ci_skips_stay_skips(tmp_path):
    rc, out = _pytest(tmp_path, None)
    assert rc == 0
    assert "1 passed, 2 skipped" in out

"""Committed notebooks: no outputs, a parameters cell with `profile = None`, claims recorded."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_notebook_is_clean_and_parameterised(path):
    cells = json.loads(path.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert not any(c.get("outputs") or c.get("execution_count") for c in code), "strip outputs before committing"
    params = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    src = "".join(params[0]["source"])
    assert "profile = None" in src and "seed" in src
    body = "\n".join("".join(c["source"]) for c in code)
    assert "claims.save()" in body and "claims.assert_all()" in body
    chapter = path.parent.name
    assert (ROOT / "book" / "chapters" / f"{chapter}.md").exists()

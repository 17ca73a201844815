"""Every notebook's parameters cell parses in full with papermill: `papermill --help-notebook` and
`iclr25 list` show every parameter with its comment."""

import json
import logging
from pathlib import Path

import papermill as pm
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*/*.ipynb"))


def _assigned(nb: Path) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    cell = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    names = []
    for line in "".join(cell["source"]).splitlines():
        code = line.split("#", 1)[0]
        if "=" in code and not line.startswith((" ", "\t")):
            names.append(code.split("=", 1)[0].strip().split(":")[0].strip())
    return names


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_papermill_parses_every_parameter_with_its_help(nb, caplog):
    with caplog.at_level(logging.WARNING, logger="papermill"):
        params = pm.inspect_notebook(str(nb))
    assert not [r for r in caplog.records if "Unable to parse" in r.getMessage()], caplog.text
    names = _assigned(nb)
    assert names and set(names) == set(params), (names, list(params))
    for name in names:
        assert params[name]["help"].strip(), f"{name}: no comment saying what it is"

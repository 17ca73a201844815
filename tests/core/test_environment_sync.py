"""environment.yml tells conda users to install exactly the Makefile's --no-deps packages."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _nodeps() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^NODEPS := (.*?)(?<!\\)\n", text, flags=re.S | re.M)
    return set(m.group(1).replace("\\\n", " ").split())


def test_environment_yml_lists_the_makefiles_nodeps_packages():
    env = (ROOT / "environment.yml").read_text()
    listed = set(re.findall(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9_.]*", env))
    assert _nodeps() and _nodeps() == listed


def test_every_nodeps_package_is_pinned_in_constraints():
    pins = {ln.split("==")[0].lower().replace("_", "-"): ln.split("==")[1]
            for ln in (ROOT / "constraints.txt").read_text().split() if "==" in ln}
    for pkg in _nodeps():
        name, version = pkg.split("==")
        assert pins.get(name.lower().replace("_", "-")) == version, pkg

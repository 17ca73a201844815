"""The shipped scaling grid of chapter 06: writing, reading, validation, the code version."""

import json
import math

import pandas as pd
import pytest

from iclr25.topk_sae import cached_grid as cg


def _frames():
    grid = pd.DataFrame({"n_latents": [512, 512, 1024, 1024], "k": [8, 32, 8, 32],
                         "nmse": [0.4, 0.3, 0.35, 0.25], "tokens": [1000, 1000, 1414, 1414],
                         "gain_last_doubling": [0.1, float("nan"), 0.05, 0.02]})
    curves = pd.DataFrame({"n_latents": [512, 512], "k": [8, 8], "step": [1, 2],
                           "tokens": [10, 20], "nmse": [0.9, 0.4]})
    return grid, curves


def test_write_load_round_trip(tmp_path):
    grid, curves = _frames()
    path = cg.write(tmp_path / "g.json", {"code_version": cg.code_version(), "elapsed_s": 1.5},
                    grid, curves)
    got = cg.load(path)
    pd.testing.assert_frame_equal(got.grid[grid.columns], grid, check_dtype=False)
    pd.testing.assert_frame_equal(got.curves[curves.columns], curves, check_dtype=False)
    assert math.isnan(got.grid.gain_last_doubling[1])  # NaN survives as null
    assert got.meta["elapsed_s"] == 1.5 and got.current


def test_stale_code_version_is_reported(tmp_path):
    grid, curves = _frames()
    got = cg.load(cg.write(tmp_path / "g.json", {"code_version": "0" * 16}, grid, curves))
    assert not got.current


def test_code_version_is_deterministic_and_hashes_the_training_code():
    v = cg.code_version()
    assert v == cg.code_version() and len(v) == 16
    assert "train.py" in cg._CODE and "acts.py" in cg._CODE


def test_missing_file_says_how_to_regenerate(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m iclr25.topk_sae.cached_grid"):
        cg.load(tmp_path / "absent.json")


def test_bad_format_and_missing_columns(tmp_path):
    grid, curves = _frames()
    p = cg.write(tmp_path / "g.json", {}, grid, curves)
    data = json.loads(p.read_text())
    p.write_text(json.dumps({**data, "format": 99}))
    with pytest.raises(ValueError, match="format"):
        cg.load(p)
    p = cg.write(tmp_path / "h.json", {}, grid.drop(columns="nmse"), curves)
    with pytest.raises(ValueError, match="nmse"):
        cg.load(p)


@pytest.mark.parametrize("ns, ks, match", [((512,), (8, 32), "two n"), ((512, 1024), (8, 512), "below")])
def test_run_rejects_infeasible_grids(ns, ks, match):
    with pytest.raises(ValueError, match=match):
        cg.run(ns, ks)


def test_shipped_grid_is_present_and_covers_16k():
    got = cg.load()
    assert got.grid.n_latents.max() >= 16384 and got.grid.k.nunique() >= 2
    assert (got.grid.nmse > 0).all() and (got.grid.nmse < 1).all()
    assert set(zip(got.curves.n_latents, got.curves.k)) == set(zip(got.grid.n_latents, got.grid.k))


def _git_sources(rev):
    """The hashed modules' text at git revision ``rev`` (skips where the history is absent)."""
    import subprocess

    from iclr25 import paths

    out = {}
    for name in (*cg._CODE, "scaling.py"):
        r = subprocess.run(["git", "show", f"{rev}:lib/iclr25/topk_sae/{name}"],
                           cwd=paths.repo_root(), capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"git history without {rev} (a shallow clone?)")
        out[name] = r.stdout
    return out


def _parts(text):
    """{top-level function or class name: its AST dump}, and the other statements under None."""
    import ast

    parts, rest = {}, []
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            parts[node.name] = ast.dump(node)
        else:
            rest.append(ast.dump(node))
    parts[None] = rest
    return parts


def test_code_version_of_given_sources_equals_the_installed_one():
    from pathlib import Path

    here = Path(cg.__file__).resolve().parent
    sources = {name: (here / name).read_text() for name in (*cg._CODE, "scaling.py")}
    assert cg.code_version(sources) == cg.code_version()
    with pytest.raises(ValueError, match="run_grid"):
        cg.code_version({**sources, "scaling.py": "x = 1\n"})


@pytest.mark.parametrize("shipped", sorted(cg.EQUIVALENT))
def test_equivalent_versions_differ_only_in_the_named_functions(shipped):
    now, made_at, equivalent_at, changed, why = cg.EQUIVALENT[shipped]
    old, new = _git_sources(made_at), _git_sources(equivalent_at)
    assert cg.code_version(old) == shipped and cg.code_version(new) == now
    allowed = {tuple(c.split(":")) for c in changed}
    differ = set()
    for name in old:
        a, b = _parts(old[name]), _parts(new[name])
        assert a[None] == b[None], f"{name}: module-level statements changed"
        differ |= {(name, f) for f in set(a) | set(b) if f is not None and a.get(f) != b.get(f)}
    assert differ == allowed and why


def test_provenance_names_same_equivalent_and_changed():
    assert cg.provenance(cg.code_version()) == "same code"
    assert cg.provenance("0" * 16) == "changed"
    for shipped, (now, *_rest, why) in cg.EQUIVALENT.items():
        want = f"equivalent: {why}" if now == cg.code_version() else "changed"
        assert cg.provenance(shipped) == want

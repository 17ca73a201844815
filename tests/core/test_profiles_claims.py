import json
from dataclasses import dataclass

import pytest

from iclr25 import claims, profiles
from iclr25.claims import Claims, ClaimFailed


@dataclass(frozen=True)
class Cfg:
    n_steps: int
    lr: float = 1e-3


TABLE = {"smoke": {"n_steps": 10}, "book": {"n_steps": 100}, "paper": {"n_steps": 1000}}


def test_resolve_default_env_and_explicit(monkeypatch):
    monkeypatch.delenv("ICLR25_PROFILE", raising=False)
    assert profiles.resolve() == "book"
    monkeypatch.setenv("ICLR25_PROFILE", "smoke")
    assert profiles.resolve() == "smoke"
    assert profiles.resolve("paper") == "paper"


def test_unknown_profile_lists_valid_ones():
    with pytest.raises(profiles.ProfileError, match="smoke, book, paper"):
        profiles.resolve("huge")


def test_make_config_overrides_and_none_keeps_profile_value():
    assert profiles.make_config(Cfg, TABLE, "smoke").n_steps == 10
    assert profiles.make_config(Cfg, TABLE, "paper", n_steps=None).n_steps == 1000
    cfg = profiles.make_config(Cfg, TABLE, "book", lr=2e-3, n_steps=6e2)
    assert cfg == Cfg(n_steps=600, lr=2e-3) and isinstance(cfg.n_steps, int)


def test_make_config_unknown_parameter_lists_fields():
    with pytest.raises(profiles.ProfileError, match="valid: lr, n_steps"):
        profiles.make_config(Cfg, TABLE, "smoke", n_stpes=3)
    with pytest.raises(profiles.ProfileError, match="integer"):
        profiles.make_config(Cfg, TABLE, "smoke", n_steps=2.5)


def test_claims_save_schema_and_assert(tmp_path):
    c = Claims("99-test", "01-nb", "smoke", parameters={"seed": 1})
    c.check("a holds", kind="finding", source="Fig. 1", paper=1.0, ours=1.01, holds=True)
    c.check("b fails but optional", kind="finding", source="Table 2", paper=3, ours=4, holds=False,
            must_hold=("book", "paper"), note="needs scale")
    c.metric("loss", 0.5)
    path = c.save(tmp_path)
    data = json.loads(path.read_text())
    assert path == tmp_path / "99-test" / "01-nb.json"
    assert data["schema"] == claims.SCHEMA and data["profile"] == "smoke"
    assert [x["must_hold"] for x in data["claims"]] == [True, False]
    assert data["metrics"] == {"loss": 0.5} and data["parameters"] == {"seed": 1}
    c.assert_all()  # the failing claim need not hold at smoke
    assert claims.load_results(tmp_path)[0]["notebook"] == "01-nb"


def test_assert_all_lists_failed_must_hold_claims():
    c = Claims("99-test", "01-nb", "book")
    c.check("b fails", kind="finding", source="Table 2", paper=3, ours=4, holds=False, must_hold=("book",))
    with pytest.raises(ClaimFailed, match="b fails .*Table 2.*paper 3, ours 4"):
        c.assert_all()
    with pytest.raises(ClaimFailed, match="no claims"):
        Claims("99-test", "02-empty", "book").assert_all()


def test_numpy_values_are_saved_as_plain_json(tmp_path):
    import numpy as np

    c = Claims("99-test", "01-nb", "smoke")
    c.check("np", kind="check", source="s", paper=np.float32(0.5), ours=np.array([1, 2]), holds=np.bool_(True))
    data = json.loads(c.save(tmp_path).read_text())
    assert data["claims"][0]["paper"] == 0.5 and data["claims"][0]["ours"] == [1, 2]


def test_package_file_finds_shipped_files_and_names_the_install():
    import pytest

    from iclr25.paths import package_file

    assert package_file("iclr25", "paths.py").name == "paths.py"
    with pytest.raises(FileNotFoundError, match="pip install --no-deps no-such-pkg"):
        package_file("no_such_pkg", "x.csv")
    with pytest.raises(FileNotFoundError, match="missing from the installed package 'iclr25'"):
        package_file("iclr25", "no-such-file.csv")


def test_kind_is_required_and_names_the_choices():
    c = Claims("99-test", "01-nb", "smoke")
    for bad in (None, "result", ""):
        with pytest.raises(ValueError, match="kind must be one of 'finding', 'check'"):
            c.check("x", kind=bad, source="Fig. 1", paper=1, ours=1, holds=True)
    with pytest.raises(ValueError, match="kind must be one of"):
        c.check("x", source="Fig. 1", paper=1, ours=1, holds=True)
    assert c.check("x", kind="check", source="Fig. 1", paper=1, ours=1, holds=True).kind == "check"
    assert c.table()["kind"].tolist() == ["check"]


def test_old_schema_results_still_read(tmp_path):
    old = {"schema": 1, "chapter": "18-relu-landscape", "notebook": "01-x", "profile": "book",
           "claims": [{"claim": "a", "source": "Fig. 1", "paper": 1, "ours": 1, "holds": True,
                       "must_hold": True, "note": ""}]}
    (tmp_path / "18-relu-landscape").mkdir()
    (tmp_path / "18-relu-landscape" / "01-x.json").write_text(json.dumps(old))
    (tmp_path / "robustness").mkdir()  # other folders under results/ are not chapters
    (tmp_path / "robustness" / "x.json").write_text("{}")
    [r] = claims.load_results(tmp_path)
    assert r["schema"] == claims.SCHEMA and r["claims"][0]["kind"] == "unclassified"
    (tmp_path / "18-relu-landscape" / "01-x.json").write_text(json.dumps({**old, "schema": 7}))
    with pytest.raises(ValueError, match="schema 7, expected 2"):
        claims.load_results(tmp_path)

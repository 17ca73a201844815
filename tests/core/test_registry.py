"""Pre-registered claims (iclr25.registry): the verdict rule against hand computations, and the
amendment guard against a registry changed without one."""

from __future__ import annotations

import json
import math
import subprocess
import textwrap

import numpy as np
import pytest
from scipy import stats

from iclr25 import registry as R

ENTRY = dict(id="beats-baseline", notebook="01-x", claim="Ours beats the baseline.",
             source="Table 1", paper=0.9, kind="finding", statistic="accuracy per seed",
             registered="2026-12-07", control={"kind": "baseline", "describe": "same features"},
             direction="greater", replication={"unit": "seeds", "n": 3})


def entry(**kw):
    return R.Entry.from_dict({**ENTRY, **kw}, "test")


def test_t_interval_matches_a_hand_computation():
    ours = [0.9, 0.8, 1.0]
    effect, lo, hi, paired = R.interval(ours, 0.5)
    q = stats.t.ppf(0.975, 2)
    se = np.std(ours, ddof=1) / math.sqrt(3)
    assert (effect, paired) == (pytest.approx(0.4), False)
    assert (lo, hi) == (pytest.approx(0.4 - q * se), pytest.approx(0.4 + q * se))
    # paired replicates: the interval is over the differences
    e, lo, hi, p = R.interval([1.0, 2.0, 3.0], [0.5, 1.4, 2.6])
    d = np.array([0.5, 0.6, 0.4])
    assert p and e == pytest.approx(0.5)
    assert hi - e == pytest.approx(q * d.std(ddof=1) / math.sqrt(3))


def test_an_interval_that_contains_the_control_is_inconclusive():
    e = entry()
    j = R.judge(e, ours=[0.6, 0.4, 0.55], control=[0.5, 0.5, 0.5])
    assert j.low < 0 < j.high and j.verdict == "inconclusive"
    assert R.judge(e, ours=[0.8, 0.82, 0.79], control=[0.5, 0.52, 0.49]).verdict == "reproduced"
    assert R.judge(e, ours=[0.3, 0.32, 0.29], control=[0.5, 0.52, 0.49]).verdict == "not reproduced"
    # one replicate: nothing can be concluded, however large the effect
    assert R.judge(e, ours=[0.99], control=0.5).verdict == "inconclusive"


def test_margin_less_and_within():
    assert R.judge(entry(margin=0.3), ours=[0.8, 0.82, 0.79], control=0.5).verdict == "inconclusive"
    assert R.judge(entry(margin=0.2), ours=[0.8, 0.82, 0.79], control=0.5).verdict == "reproduced"
    assert R.judge(entry(direction="less"), ours=[0.1, 0.12, 0.11], control=0.5).verdict == "reproduced"
    w = entry(direction="within", tolerance=0.05)
    assert R.judge(w, ours=[0.50, 0.51, 0.505], control=0.5).verdict == "reproduced"
    assert R.judge(w, ours=[0.80, 0.81, 0.805], control=0.5).verdict == "not reproduced"
    assert R.judge(w, ours=[0.40, 0.60, 0.55], control=0.5).verdict == "inconclusive"


def test_bootstrap_interval_is_seeded_and_covers_the_mean():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 1.0, 300)
    a = R.interval(x, 0.0, method="bootstrap")
    assert a == R.interval(x, 0.0, method="bootstrap")
    assert a[1] < x.mean() < a[2] and a[2] - a[1] == pytest.approx(2 * 1.96 / math.sqrt(300), rel=0.2)


def test_paper_profile_entries_are_out_of_reach_below_it_and_checks_are_not_judged():
    e = entry(profile="paper", reason="needs a 7B model")
    j = R.judge(e, ours=[0.9, 0.9, 0.9], control=0.5)
    assert j.verdict == "out of reach" and j.note == "needs a 7B model"
    with pytest.raises(R.RegistryError, match="reason"):
        entry(profile="paper")
    with pytest.raises(R.RegistryError, match="is a check"):
        R.judge(entry(kind="check"), ours=[1.0])


def test_malformed_entries_are_clear_errors():
    with pytest.raises(R.RegistryError, match="control"):
        entry(control=None)
    with pytest.raises(R.RegistryError, match="unknown field.*must_hold"):
        R.Entry.from_dict({**ENTRY, "must_hold": True}, "test")
    with pytest.raises(R.RegistryError, match="direction"):
        entry(direction="up")
    with pytest.raises(R.RegistryError, match="tolerance"):
        entry(direction="within")
    with pytest.raises(R.RegistryError, match="finite"):
        R.judge(entry(), ours=[float("nan"), 1.0], control=0.5)


def test_entry_hash_moves_with_the_test_not_with_the_wording():
    e = entry()
    assert R.entry_hash(e) == R.entry_hash(entry(claim="Reworded."))
    assert R.entry_hash(e) != R.entry_hash(entry(margin=0.1))


REGISTRY = textwrap.dedent("""\
    chapter: 99-test
    registered: 2026-12-07
    claims:
      - id: beats-baseline
        notebook: 01-x
        claim: Ours beats the baseline.
        source: Table 1
        paper: 0.9
        kind: finding
        statistic: accuracy per seed
        registered: 2026-12-07
        control: {kind: baseline, describe: same features}
        direction: greater
        margin: MARGIN
        replication: {unit: seeds, n: 3}
        AMEND
    """)


def _git_book(tmp_path, margin="0.0", amend="amendments: []"):
    root = tmp_path / "book-root"
    f = root / "book" / "claims" / "99-test.yaml"
    f.parent.mkdir(parents=True)
    f.write_text(REGISTRY.replace("MARGIN", margin).replace("AMEND", amend))
    for cmd in (["init", "-q"], ["add", "-A"],
                ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "register"]):
        subprocess.run(["git", *cmd], cwd=root, check=True)
    return root, f


def test_a_threshold_changed_without_an_amendment_fails_the_check(tmp_path):
    root, f = _git_book(tmp_path)
    assert R.check_registries(root) == []
    f.write_text(REGISTRY.replace("MARGIN", "0.2").replace("AMEND", "amendments: []"))
    problems = R.check_registries(root)
    assert len(problems) == 1 and "margin changed from 0.0 to 0.2 without an amendment" in problems[0]
    amended = ('amendments:\n      - {date: 2026-12-08, field: margin, old: 0.0, new: 0.2, '
               'why: "the paper states a 0.2 gap (Sec. 4)"}')
    f.write_text(REGISTRY.replace("MARGIN", "0.2").replace("AMEND", amended))
    assert R.check_registries(root) == []


def test_check_results_fails_on_an_unamended_registry_change(tmp_path, monkeypatch, capsys):
    from iclr25.cli import main

    root, f = _git_book(tmp_path)
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (root / "pyproject.toml").write_text("")
    (root / "constraints.txt").write_text("")
    (root / "notebooks").mkdir()
    from iclr25.scorecard import README_BEGIN, README_END, update_readme
    (root / "README.md").write_text(update_readme(f"{README_BEGIN}\n{README_END}\n", []))
    monkeypatch.setenv("ICLR25_ROOT", str(root))
    assert main(["check-results"]) == 0
    f.write_text(REGISTRY.replace("MARGIN", "0.5").replace("AMEND", "amendments: []"))
    assert main(["check-results"]) == 1
    assert "margin changed from 0.0 to 0.5 without an amendment" in capsys.readouterr().out


NB_REGISTRY = REGISTRY.replace("MARGIN", "0.0").replace("AMEND", "amendments: []") + textwrap.indent(textwrap.dedent("""\
      - id: identity
        notebook: 01-x
        claim: The fast path equals the reference.
        source: (not in paper)
        paper: null
        kind: check
        statistic: max abs difference
        registered: 2026-12-07
      - id: elsewhere
        notebook: 02-y
        claim: Judged in another notebook.
        source: Fig. 2
        paper: 1
        kind: check
        statistic: x
        registered: 2026-12-07
    """), "  ")


def _registry_root(tmp_path):
    f = tmp_path / "book" / "claims" / "99-test.yaml"
    f.parent.mkdir(parents=True)
    f.write_text(NB_REGISTRY)
    return tmp_path


def test_a_notebook_hands_over_measurements_and_the_registry_gives_the_verdict(tmp_path):
    from iclr25.claims import ClaimFailed, Claims

    root = _registry_root(tmp_path)
    claims = Claims("99-test", "01-x", "book")
    reg = R.Registry(claims, root)
    assert sorted(reg.entries) == ["beats-baseline", "identity"]       # this notebook's entries
    with pytest.raises(R.RegistryError, match="not recorded by this notebook: beats-baseline, identity"):
        reg.save(tmp_path / "out")
    j = reg.finding("beats-baseline", ours=[0.6, 0.4, 0.55], control=[0.5, 0.5, 0.5])
    assert j.verdict == "inconclusive"
    reg.check("identity", holds=True, ours=0.0)
    saved = json.loads(reg.save(tmp_path / "out").read_text())
    rec = {c["id"]: c for c in saved["claims"]}
    f = rec["beats-baseline"]
    assert f["verdict"] == "inconclusive" and f["must_hold"] is False and f["holds"] is False
    assert f["ours"] == [0.6, 0.4, 0.55] and f["low"] < 0 < f["high"]
    assert f["entry_hash"] == R.entry_hash(reg.entries["beats-baseline"])
    claims.assert_all()                                   # an inconclusive finding fails nothing
    summary = reg.summary()
    assert "1 inconclusive" in summary and "**inconclusive**" in summary and "1 of 1 held" in summary
    reg.check("identity", holds=False)                    # a failed check is a bug: it raises
    with pytest.raises(ClaimFailed):
        claims.assert_all()
    with pytest.raises(R.RegistryError, match="not registered for 99-test/01-x.*registered here"):
        reg.finding("elsewhere", ours=[1, 2, 3])
    with pytest.raises(R.RegistryError, match="is a finding"):
        reg.check("beats-baseline", holds=True)


def test_results_judged_by_a_changed_entry_are_stale(tmp_path):
    from iclr25 import ledger
    root = _registry_root(tmp_path)
    e = R.load("99-test", root)["beats-baseline"]
    result = {"chapter": "99-test", "claims": [{"id": "beats-baseline", "entry_hash": R.entry_hash(e)}]}
    assert ledger.registry_changes(result, root) == []
    f = root / "book" / "claims" / "99-test.yaml"
    f.write_text(f.read_text().replace("margin: 0.0", "margin: 0.1"))
    assert ledger.registry_changes(result, root) == ["beats-baseline"]


def test_registry_table_flags_under_replication_and_summary_renders_as_markdown(tmp_path):
    root = tmp_path
    (root / "book" / "claims").mkdir(parents=True)
    (root / "book" / "claims" / "99-test.yaml").write_text(textwrap.dedent("""\
        chapter: 99-test
        claims:
          - {id: beats-baseline, notebook: 01-x, claim: Ours beats the baseline., source: Table 1,
             paper: 0.9, kind: finding, statistic: accuracy per seed, registered: 2026-12-07,
             control: {kind: baseline, describe: same features}, direction: greater,
             replication: {unit: seeds, n: 3}}
        """))
    from iclr25.claims import Claims

    reg = R.Registry(Claims("99-test", "01-x", profile="book"), root)
    j = reg.finding("beats-baseline", ours=[0.9, 0.91], control=[0.5, 0.52], tol=0.01)
    assert j.verdict == "reproduced" and "under-replicated: 2 of the 3 seeds" in j.note
    table = reg.table()
    assert list(table["verdict"]) == ["reproduced"] and "(n=2)" in table.iloc[0, 4]
    s = reg.summary()
    assert isinstance(s, R.Summary) and s._repr_markdown_() == str(s) and "under-replicated" in s
    assert reg.claims.items[0].tol == 0.01

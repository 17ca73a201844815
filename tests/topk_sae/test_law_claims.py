"""The scaling-law findings recorded for a grid (chapter 06, ``scaling.law_claims``)."""

import numpy as np
import pandas as pd
import pytest

from iclr25.claims import Claims
from iclr25.topk_sae.scaling import JOINT_MUST_HOLD, PAPER_LAW, JointLaw, fit_joint_law, law_claims, monotone


def _grid(law, ns=(512, 1024, 2048, 4096), ks=(8, 16, 32)):
    rows = [{"n_latents": n, "k": k, "nmse": float(law(n, k)), "tokens": 1000 * n} for n in ns for k in ks]
    return pd.DataFrame(rows)


def test_monotone_against_brute_force():
    g = _grid(JointLaw(alpha=0.0, beta_k=-0.2, beta_n=-0.1, gamma=0.0))
    assert monotone(g, "n") and monotone(g, "k")
    g.loc[(g.n_latents == 2048) & (g.k == 16), "nmse"] *= 1.10   # one bump of 10% in n
    assert not monotone(g, "n")
    piv = g.pivot(index="n_latents", columns="k", values="nmse").values
    assert monotone(g, "k") == bool((piv[:, 1:] <= piv[:, :-1] * 1.02).all())
    with pytest.raises(ValueError, match="'n' or 'k'"):
        monotone(g, "x")


def test_law_claims_on_the_papers_law_all_hold():
    paper = JointLaw(alpha=-0.5, **PAPER_LAW)
    g = _grid(paper, ns=(2 ** 12, 2 ** 14, 2 ** 16, 2 ** 18))
    law = fit_joint_law(g.n_latents, g.k, g.nmse)
    c = Claims("06-topk-sae", "03-scaling-laws", "smoke")
    law_claims(c, g, law, label="synthetic")
    assert len(c.items) == 5 + 6
    assert all(x.holds for x in c.items), [x.claim for x in c.items if not x.holds]
    assert all(x.claim.startswith("synthetic: ") and x.kind == "finding" for x in c.items)
    must = {x.claim: x.must_hold for x in c.items if "joint law's fitted" in x.claim}
    assert sum(must.values()) == sum(JOINT_MUST_HOLD.values()) == 1


def test_law_claims_flag_an_opposite_sign():
    law = JointLaw(alpha=0.0, beta_k=-0.3, beta_n=-0.05, gamma=0.01)   # beta_k, gamma: signs flipped
    g = _grid(law)
    c = Claims("06-topk-sae", "03-scaling-laws", "smoke")
    law_claims(c, g, fit_joint_law(g.n_latents, g.k, g.nmse))
    held = {x.claim: x.holds for x in c.items}
    assert not held["The joint law's fitted beta_k has the paper's sign (+)"]
    assert not held["The joint law's fitted gamma has the paper's sign (-)"]
    assert held["The joint law's fitted beta_n has the paper's sign (-)"]
    assert held["The 4-term joint law fits the grid to 5% (rmse of log NMSE < 0.05)"]
    np.testing.assert_allclose([x.ours for x in c.items if "fitted beta_n" in x.claim and "sign" in x.claim], [-0.05], atol=1e-3)

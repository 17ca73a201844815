"""iclr25.jit: the one numba switch chapters 01, 04, 15 and 18 share."""

import numpy as np
import pytest

from iclr25 import jit


def test_switch_moves_every_chapter_default(monkeypatch):
    from iclr25.logic_logit import scoring
    from iclr25.mle_model_based_rl import mdp
    from iclr25.relu_landscape import train

    assert jit.numba is not None and jit.available()       # the dev install has numba
    assert scoring.default_backend() == "numba" and train.default_backend() == "numba"
    monkeypatch.setenv(jit.ENV, "1")
    assert not jit.available() and jit.disabled()
    assert scoring.default_backend() == "numpy" and train.default_backend() == "numpy"
    # chapter 04's "auto" then takes the batched numpy path, with the same values
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), size=(3, 2))
    r = rng.uniform(size=(3, 2))
    V_auto, _ = mdp.value_iteration(P, r, 4)
    V_np, _ = mdp.value_iteration(P, r, 4, backend="batched")
    np.testing.assert_allclose(V_auto, V_np, rtol=0, atol=0)


def test_require_names_the_fallback(monkeypatch):
    monkeypatch.setattr(jit, "numba", None)
    with pytest.raises(ValueError, match="needs numba installed.*use 'numpy'"):
        jit.require("numba", "numpy")

"""Chapter 04 benchmark: finite-horizon value iteration in M = 1024 models at once.

The planning oracle of O-MBRL and CPPO-LR needs the optimal value of every model in the version space.
Ours is ``iclr25.mle_model_based_rl.value_iteration(backend="numba")``: a compiled loop over models
(numba, one thread; the default; it also validates P inside the same pass). Every contender solves
the same M random models (S = 20, A = 4, H = 50, Dirichlet(0.3) rows, one shared reward in [0, 1/H]):

* baseline, the per-model loop (``backend="loop"``: one numpy Bellman backup per model and step, the
  plain reference a numpy user writes; it validates P too);
* baseline, the peer a user would pick: rlberry's tabular backward induction
  (``rlberry_scool.agents.dynprog.utils.backward_induction``, rlberry 0.7.3), called once per model.
  It is a pure-Python triple loop (rlberry-scool's copy is not numba-compiled), so it solves the
  first ``PEER_MODELS`` models only and the comparison is per model (``work`` = models solved; the
  per-model cost is constant);
* variant, ours without numba (``backend="batched"``: one batched numpy mat-vec per step over all
  models): the same answer by another route, so its speed-up is not credited to the compiled loop.

Timing and agreement go through ``iclr25.bench`` (warm-up, median and min of k repeats, peak RSS).
The headline is against the faster of the two baselines. Agreement (asserted): on the models a
contender solved, ``max |V_ours - V_other|`` over h < H must be <= 1e-9 (float64 sums of 20 terms
over 50 steps, values in [0, 1]: rounding is ~1e-15, so 1e-9 only admits rounding), and the greedy
actions must be identical (every path breaks ties towards the lowest action; a different action is
reported as an infinite distance). rlberry not installed: its row is skipped with the reason.

Run alone (timings taken beside another job are noise):
``python benchmarks/bench_mle_model_based_rl.py [--quick]``.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import iclr25.mle_model_based_rl as mb
from iclr25 import bench

M, S, A, H = 1024, 20, 4, 50
PEER_MODELS = 32
TARGET = 20.0
TOL = 1e-9


def random_models(n_models: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(S, 0.3), size=(n_models, S, A))
    r = rng.random((S, A)) / H       # normalised: every trajectory's total lies in [0, 1]
    return P, r


def vi_distance(ours, other) -> float:
    """``max |dV|`` on the models ``other`` solved (h < H); infinite if a greedy action differs."""
    V, pi = ours
    Vo, pio = other
    k = len(Vo)
    if not np.array_equal(pi[:k], pio[:, :H]):
        return math.inf
    return float(np.abs(V[:k, :H] - Vo[:, :H]).max())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64 models, 4 for rlberry, 2 repeats")
    args = ap.parse_args(argv)
    n_models, n_peer, repeat = (64, 4, 2) if args.quick else (M, PEER_MODELS, 5)
    P, r = random_models(n_models)
    mb.value_iteration(P[:2], r, H, backend="numba")  # compile (cached on disk after the first run)

    cmp = bench.Comparison(
        "04-value-iteration",
        f"finite-horizon value iteration in {n_models} models, S={S} A={A} H={H}",
        chapter="04-mle-model-based-rl", target=TARGET, tol=TOL, repeat=repeat, warmup=1,
        unit="model",
        settings={"models": n_models, "S": S, "A": A, "H": H, "models (rlberry)": n_peer,
                  "dtype": "float64", "threads": "ours one (numba serial); numpy its default"},
        notes=f"time per model solved; V (h < H) must agree to {TOL:g} and every greedy action "
              "must be the same")
    cmp.add("ours (numba, compiled)", lambda: mb.value_iteration(P, r, H, backend="numba"),
            work=n_models, what="compiled loop over models, states and actions; validates P")
    cmp.add("per-model loop (numpy)", lambda: mb.value_iteration(P, r, H, backend="loop"),
            role="baseline", work=n_models,
            what="one numpy Bellman backup per model and step (backend='loop')")
    try:
        from rlberry_scool.agents.dynprog.utils import backward_induction
    except ImportError as err:  # the bench extra is not installed
        cmp.skip("rlberry backward_induction", f"not installed ({err}); install the bench extra",
                 peer="rlberry-scool")
    else:
        def rlberry():
            out = [backward_induction(r, P[m], H) for m in range(n_peer)]
            return (np.stack([V for _, V in out]), np.stack([Q.argmax(-1) for Q, _ in out]))

        cmp.add("rlberry backward_induction", rlberry, role="baseline", peer="rlberry-scool",
                work=n_peer, repeat=max(1, repeat - 2),
                what=f"pure-Python triple loop, one model at a time (first {n_peer} models)")
    cmp.add("ours (numpy batched)", lambda: mb.value_iteration(P, r, H, backend="batched"),
            role="variant", work=n_models,
            what="ours without numba: one batched mat-vec per step over all models")
    cmp.run(distance=vi_distance)


if __name__ == "__main__":
    main()

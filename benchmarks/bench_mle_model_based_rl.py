"""Chapter 04 benchmark: finite-horizon value iteration in M = 1024 models at once.

The planning oracle of O-MBRL and CPPO-LR needs the optimal value of every model in the version space.
Ours is ``iclr25.mle_model_based_rl.value_iteration``: a compiled loop over models (numba, one thread; the
default; it also validates P inside the same pass) and a numpy path (one batched mat-vec per step over
all models).
It is timed against

* the per-model loop (``backend="loop"``: one numpy Bellman backup per model and step), and
* the peer a user would pick: rlberry's tabular backward induction
  (``rlberry_scool.agents.dynprog.utils.backward_induction``, rlberry 0.7.3), called once per model.
  It is a pure-Python triple loop (rlberry-scool's copy is not numba-compiled), so it runs on the first
  ``PEER_MODELS`` models and its time is scaled to M; the per-model cost is constant, so the scaling is exact
  up to timing noise.

Quality is compared on the same models: the largest difference in V and whether the greedy actions agree.
Run alone (timings taken beside another job are noise): ``python benchmarks/bench_mle_model_based_rl.py``.
"""

from __future__ import annotations

import time

import numpy as np

import iclr25.mle_model_based_rl as mb
from iclr25.timing import best_of

M, S, A, H = 1024, 20, 4, 50
PEER_MODELS = 32
TARGET = 20.0
REPEAT = 5          # every path: the best of 5 runs (this machine's timings vary by a third)


def random_models(seed: int = 0):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(S, 0.3), size=(M, S, A))
    r = rng.random((S, A)) / H       # normalised: every trajectory's total lies in [0, 1]
    return P, r


def main() -> None:
    P, r = random_models()
    mb.value_iteration(P[:2], r, H, backend="numba")  # compile (cached on disk after the first run)
    t_ours, (V, pi) = best_of(lambda: mb.value_iteration(P, r, H, backend="numba"), repeat=REPEAT)
    t_np, (V_np, _) = best_of(lambda: mb.value_iteration(P, r, H, backend="batched"), repeat=REPEAT)
    t_loop, (V_loop, pi_loop) = best_of(lambda: mb.value_iteration(P, r, H, backend="loop"),
                                        repeat=REPEAT)
    print(f"Value iteration: M={M} models, S={S}, A={A}, H={H}")
    print(f"  ours (numba, compiled)    {t_ours * 1e3:9.1f} ms")
    print(f"  ours (numpy batched)      {t_np * 1e3:9.1f} ms   max |dV| {np.abs(V - V_np).max():.1e}")
    print(f"  per-model loop (numpy)    {t_loop * 1e3:9.1f} ms   max |dV| {np.abs(V - V_loop).max():.1e}, "
          f"same actions {bool((pi == pi_loop).all())}")
    print(f"  ratio per-model loop / ours: {t_loop / t_ours:.1f}x (target >= {TARGET:.0f}x)")
    try:
        from rlberry_scool.agents.dynprog.utils import backward_induction
        import rlberry
    except ImportError as e:  # the bench extra is not installed
        print(f"  peer rlberry: not installed ({e}); install the bench extra")
        return
    t = time.perf_counter()
    Vp = np.stack([backward_induction(r, P[m], H)[1] for m in range(PEER_MODELS)])
    t_peer = (time.perf_counter() - t) * M / PEER_MODELS
    Qp_pi = np.stack([backward_induction(r, P[m], H)[0].argmax(-1) for m in range(4)])
    dv = np.abs(Vp - V[:PEER_MODELS, :H]).max()
    print(f"  peer rlberry {rlberry.__version__} backward_induction, one model at a time "
          f"{t_peer * 1e3:9.1f} ms (timed on {PEER_MODELS} models, scaled to {M})")
    print(f"    same work: max |dV| {dv:.1e}, same greedy actions {bool((Qp_pi == pi[:4]).all())}")
    print(f"  ratio peer rlberry / ours: {t_peer / t_ours:.1f}x (target >= {TARGET:.0f}x)")


if __name__ == "__main__":
    main()

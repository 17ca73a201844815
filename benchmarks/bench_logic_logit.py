"""Chapter 01 benchmark: candidate rules scored per second, and MNL fit time against torch-choice.

1. **Candidate scoring** (the inner loop of column generation): our compiled path on bit-packed
   predicates (``score_rules(..., backend="numba")``) and our vectorised numpy path on the same
   packed bits, against the plain per-candidate loop a user would write first (our
   ``backend="reference"``: Python loops over candidates, offer sets and items), and against a
   stronger per-candidate numpy loop (one vectorised pass per candidate on the unpacked tensor).
   Same candidates, same data; the scores must agree. Target: >= 50x over the naive loop.
2. **MNL fit** on the same standardised data: ours (L-BFGS on the exact likelihood, scipy) against
   ``torch-choice`` 1.0.7 ``ConditionalLogitModel`` with its LBFGS optimiser (strong Wolfe line
   search). choice-learn's models need TensorFlow, which the book does not install, so
   torch-choice is the peer. The peer's time is that of the fewest epochs whose log-likelihood per
   choice is within 1e-4 of ours; quality is compared at that point.

Run alone (timings beside another job are noise): ``python benchmarks/bench_logic_logit.py``.
"""

from __future__ import annotations

import time

import numpy as np

import iclr25.logic_logit as ll

N_OBS = 4000          # hotel searches (about 11.5 items each)
N_CANDIDATES = 1000   # conjunctions of 1-3 predicates
N_REFERENCE = 20      # candidates timed on the pure-Python path (it is slow)
N_NUMPY_LOOP = 200    # candidates timed on the per-candidate numpy loop


def numpy_loop(rules, P, S, choice, inv_p, grid):
    """Per-candidate numpy: evaluate the conjunction on the unpacked tensor, then vectorised sums."""
    n = S.shape[0]
    s_ch = S[np.arange(n), choice]
    out = np.empty(len(rules))
    for k, r in enumerate(rules):
        c = P[..., list(r)].all(-1)
        a = (S * c).sum(1)
        cy = c[np.arange(n), choice]
        e = np.exp(grid)[:, None]
        F = (inv_p * s_ch * np.where(cy, e, 1.0) / (1.0 + a * (e - 1.0))).mean(1)
        out[k] = F.max()
    return out


def bench_scoring():
    data, lib, _ = ll.make_hotel_search(N_OBS, seed=0)
    P = lib.evaluate(data)
    rng = np.random.default_rng(0)
    # a type under construction: one planted rule with weight 2, mixture p from the uniform model
    U = 2.0 * P[..., sorted(lib.parse("price <= 100 AND stars >= 4"))].all(-1)
    S = ll.softmax(U, data.mask)
    inv_p = data.mask.sum(1).astype(float)
    rules = [tuple(sorted(rng.choice(len(lib), size=rng.integers(1, 4), replace=False)))
             for _ in range(N_CANDIDATES)]
    grid = np.linspace(0, 6, 13)[1:]
    t = time.perf_counter()
    packed = ll.pack_predicates(P)
    t_pack = time.perf_counter() - t
    ll.score_rules(rules[:2], P[:5], S[:5], data.choice[:5], inv_p[:5], grid, backend="numba")  # compile
    t = time.perf_counter()
    F_fast, _ = ll.score_rules(rules, P, S, data.choice, inv_p, grid, packed=packed, backend="numba")
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    F_vec, _ = ll.score_rules(rules, P, S, data.choice, inv_p, grid, packed=packed, backend="numpy")
    t_vec = time.perf_counter() - t
    t = time.perf_counter()
    F_ref, _ = ll.score_rules(rules[:N_REFERENCE], P, S, data.choice, inv_p, grid, backend="reference")
    t_ref = time.perf_counter() - t
    t = time.perf_counter()
    F_np = numpy_loop(rules[:N_NUMPY_LOOP], P, S, data.choice, inv_p, grid)
    t_np = time.perf_counter() - t
    rate_fast = N_CANDIDATES / t_fast
    rate_ref = N_REFERENCE / t_ref
    rate_np = N_NUMPY_LOOP / t_np
    diff = max(np.abs(F_fast[:N_REFERENCE] - F_ref).max(), np.abs(F_fast[:N_NUMPY_LOOP] - F_np).max(),
               np.abs(F_fast - F_vec).max())
    print(f"candidate scoring on {N_OBS} searches x {data.mask.sum(1).mean():.1f} items, "
          f"{len(lib)} predicates, {len(grid)} weights per candidate")
    print(f"  ours (bit-packed, numba)     : {rate_fast:10.0f} candidates/s  (packing once: {t_pack * 1e3:.1f} ms)")
    print(f"  ours (bit-packed, numpy)     : {N_CANDIDATES / t_vec:10.0f} candidates/s")
    print(f"  naive per-candidate loop     : {rate_ref:10.1f} candidates/s  -> ratio {rate_fast / rate_ref:.0f}x "
          f"(target >= 50x)")
    print(f"  per-candidate numpy loop     : {rate_np:10.0f} candidates/s  -> ratio {rate_fast / rate_np:.1f}x")
    print(f"  max |score difference|       : {diff:.1e}")
    return rate_fast / rate_ref


def bench_mnl():
    import torch
    from torch_choice.data import ChoiceDataset
    from torch_choice.model import ConditionalLogitModel

    data, _, _ = ll.make_hotel_search(10000, seed=1)
    v = data.X[data.mask]
    X = np.where(data.mask[..., None], (data.X - v.mean(0)) / v.std(0), 0.0)
    data = ll.ChoiceData(X, data.mask, data.choice, data.feature_names)
    n, J, _ = X.shape
    t = time.perf_counter()
    ours = ll.MNL(l2=0.0).fit(data)
    t_ours = time.perf_counter() - t
    ll_ours = -ours.nll(data)

    ds = ChoiceDataset(item_index=torch.tensor(data.choice), num_items=J, session_index=torch.arange(n),
                       item_availability=torch.tensor(data.mask),
                       itemsession_x=torch.tensor(X, dtype=torch.float64))
    result = None
    for epochs in (1, 2, 3, 5, 10, 20, 50):
        torch.manual_seed(0)
        model = ConditionalLogitModel(formula="(itemsession_x|constant)", dataset=ds, num_items=J).double()
        t = time.perf_counter()
        model.fit(ds, num_epochs=epochs, model_optimizer="LBFGS", learning_rate=1.0, print_summary=False,
                  report_frequency=10 ** 9, optimizer_kwargs={"line_search_fn": "strong_wolfe"})
        t_peer = time.perf_counter() - t
        with torch.no_grad():
            ll_peer = -model.negative_log_likelihood(ds, ds.item_index).item() / n
        result = (epochs, t_peer, ll_peer)
        if abs(ll_peer - ll_ours) < 1e-4:
            break
    epochs, t_peer, ll_peer = result
    print(f"MNL fit on {n} choices x {J} slots, {X.shape[2]} features")
    print(f"  ours (scipy L-BFGS)          : {t_ours:7.3f} s, log-likelihood per choice {ll_ours:.6f}")
    print(f"  torch-choice 1.0.7 (LBFGS)   : {t_peer:7.3f} s at {epochs} epoch(s), {ll_peer:.6f}")
    print(f"  |difference| = {abs(ll_peer - ll_ours):.1e} (required < 1e-4: "
          f"{'yes' if abs(ll_peer - ll_ours) < 1e-4 else 'NO'}); ours {t_peer / t_ours:.1f}x faster")


def main() -> None:
    bench_scoring()
    try:
        bench_mnl()
    except ImportError as e:
        print(f"MNL peer not installed ({e}); install the bench extra: torch-choice==1.0.7 --no-deps, "
              "pytorch-lightning, termcolor")


if __name__ == "__main__":
    main()

"""Chapter 15 benchmark: one full-batch training step of a KAN [4, 50, 100, 50, 1] on 10,000
samples (the paper's simulated setup), ours against pykan 0.2.8 -- default mode and ``speed()``.

The peer is what a user would pick: pykan's ``KAN`` (``MultKAN``). Ours is
``iclr25.kan_bounds.KAN`` built from the *same coefficients* (``KAN.from_pykan``), so quality is
compared on the same work: the outputs must agree (max |difference| printed), and so must the loss.
Each implementation runs in its own process so that its peak memory (max RSS above the RSS before
the first step) is its own. Threads: 2 (``--threads``).

Run alone (timings taken beside other jobs are noise)::

    python benchmarks/bench_kan_bounds.py            # the paper's size
    python benchmarks/bench_kan_bounds.py --n 2000   # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

WIDTHS = [4, 50, 100, 50, 1]
IMPLS = ("ours", "ours-torch", "pykan-speed", "pykan")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def worker(impl: str, n: int, reps: int, threads: int, seed: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from kan import KAN as PyKAN

    import iclr25.kan_bounds as kb

    g = torch.Generator().manual_seed(seed)
    X = torch.rand((n, WIDTHS[0]), generator=g) * 2 - 1
    y = torch.sin(3 * X).sum(1, keepdim=True)
    peer = PyKAN(width=list(WIDTHS), grid=5, k=3, seed=seed, auto_save=False)
    if impl.startswith("ours"):
        model = kb.KAN.from_pykan(peer)
        model.set_backend("torch" if impl == "ours-torch" else "fast")
        ((model(X) - y) ** 2).mean().backward()    # warm-up: numba compile / caches, out of the timing
        model.zero_grad(set_to_none=True)
        del peer
    else:
        model = peer.speed() if impl == "pykan-speed" else peer
    with torch.no_grad():                           # outputs on the shared coefficients, before any step
        out = model(X[:2000]).double().numpy().ravel().tolist()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    base = _rss_mb()
    times, loss0 = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = ((model(X) - y) ** 2).mean()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        loss0 = float(loss) if loss0 is None else loss0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"impl": impl, "step_s": min(times), "steps": len(times), "loss_first_step": loss0,
            "peak_mb": peak - base, "out": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="samples (paper: 10,000)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3, help="timed steps for ours (pykan default: 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {IMPLS}")
    ap.add_argument("--worker", choices=IMPLS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        reps = 1 if a.worker == "pykan" else (2 if a.worker == "pykan-speed" else a.reps)
        print(json.dumps(worker(a.worker, a.n, reps, a.threads, a.seed)))
        return
    impls = [s.strip() for s in a.impls.split(",") if s.strip()]
    bad = [s for s in impls if s not in IMPLS]
    if bad:
        ap.error(f"unknown implementation(s) {bad}; valid: {', '.join(IMPLS)}")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))
    res = {}
    for impl in impls:
        cmd = [sys.executable, __file__, "--worker", impl, "--n", str(a.n), "--threads", str(a.threads),
               "--reps", str(a.reps), "--seed", str(a.seed)]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            print(f"{impl}: failed\n{out.stderr[-2000:]}")
            continue
        res[impl] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"KAN {WIDTHS}, G = 5, k = 3, {a.n:,} samples, full-batch Adam step, {a.threads} threads")
    print(f"{'implementation':<14} {'step (s)':>9} {'peak MB':>9} {'first loss':>11} {'max |out - ours|':>17}")
    ref = res.get("ours", {}).get("out")
    for impl, r in res.items():
        diff = max(abs(p - q) for p, q in zip(r["out"], ref)) if ref else float("nan")
        print(f"{impl:<14} {r['step_s']:>9.3f} {r['peak_mb']:>9.0f} {r['loss_first_step']:>11.6f} {diff:>17.2e}")
    if "ours" in res:
        for peer in ("pykan-speed", "pykan"):
            if peer in res:
                print(f"ours vs {peer}: {res[peer]['step_s'] / res['ours']['step_s']:.1f}x faster, "
                      f"{res[peer]['peak_mb'] / max(res['ours']['peak_mb'], 1):.1f}x less peak memory")
        print("target (issue 11): >= 8x pykan speed() at <= half its memory")


if __name__ == "__main__":
    main()

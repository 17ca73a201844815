"""Chapter 18 benchmark: GD iterations per second on the Fig. 3 run, ours vs a per-step PyTorch loop.

Setting: the Fig. 3 run (5 points, width 50, init std 50^-3, lr 1e-3), full-batch GD on the MSE,
every contender from the same initialisation on the same data, timed through ``iclr25.bench``
(warm-up, median and min of k repeats, peak RSS).

1. ``18-gd-fig3``, GD steps per second (``work`` = steps, so rows may run different step counts):

   - ours: the compiled loop behind ``iclr25.relu_landscape.train_gd`` (numba, float64, one thread),
     ``PEER_STEPS`` steps;
   - baseline, the peer: what the official experiments do (and what a user would write), a
     bias-free two-layer ``nn.Module``, ``optim.SGD`` and ``F.mse_loss``, one Python-level step per
     iteration, in **float64** (the precision ours computes in: the same arithmetic) and, as a
     second baseline, in float32 (the official precision);
   - baseline, our numpy reference (``backend="numpy"``: one vectorised numpy step per iteration,
     the plain reference);
   - variant: ours on the whole Fig. 3 run (6e5 steps, final loss beside the paper's 0.027886),
     shown for scale; it is a different amount of work, so it is not compared.

   The headline is against the fastest baseline. Agreement (asserted): the loss after the same
   ``PEER_STEPS`` steps from the same init, relative difference <= 1e-9 for the float64 rows (the
   three compute the same float64 arithmetic in different orders: 2e-16 measured after 3e4
   steps) and <= 1e-4 for the float32 peer (single precision; 8e-8 measured).

   Fairness change: the peer used to run in float32 only, beside ours in float64; the float64 peer
   now runs too, and the headline is against the fastest baseline, which includes our numpy
   reference.

2. ``18-perturbation-test``, the local-minimum test at the final point of the full run: ours, the
   batched perturbation test (``perturbation_test``: 5,000 perturbations U(-a, a) of all non-dead
   neurons, vectorised over samples) against the official test's shape (baseline: one perturbed
   ``nn.Module`` and one forward pass per sample, float64). Both use the *same* draws (the peer
   takes them from the same numpy generator in the same batches of 1,000 instead of
   ``torch.rand_like``), so their loss changes must agree: relative difference (to the largest
   change) <= 1e-8 (each change is a difference of two float64 losses of ~0.03, rounded to
   ~1e-17, over changes of ~1e-7: ~1e-10). The certificate answers a different question (a
   verdict, not sampled loss changes): two variant rows with their verdicts, the fast path
   (``certify``: float64, LPs over the activation sectors) and the reference (``certify_exact``:
   the same rules in exact rational arithmetic).

Run alone (timings taken beside another job are noise):
``python benchmarks/bench_relu_landscape.py [--quick]``.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

import iclr25.relu_landscape as rl
from iclr25 import bench

PEER_STEPS = 30_000
N_PERTURB = 5000
TOL64, TOL32, TOL_PERTURB = 1e-9, 1e-4, 1e-8
PAPER_FINAL_LOSS = 0.027886


class TwoLayer(torch.nn.Module):
    """The peer: bias-free input and output layers, ReLU, as in the official model."""

    def __init__(self, W, H, dtype=torch.float32):
        super().__init__()
        self.inp = torch.nn.Linear(W.shape[1], W.shape[0], bias=False, dtype=dtype)
        self.out = torch.nn.Linear(W.shape[0], H.shape[1], bias=False, dtype=dtype)
        with torch.no_grad():
            self.inp.weight.copy_(torch.tensor(W))
            self.out.weight.copy_(torch.tensor(H.T))

    def forward(self, x):
        return self.out(torch.relu(self.inp(x)))


def peer_gd(W, H, X, Y, lr, n_steps, dtype=torch.float32):
    model = TwoLayer(W, H, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    Xt, Yt = torch.tensor(X, dtype=dtype), torch.tensor(Y, dtype=dtype)
    for _ in range(n_steps):
        loss = F.mse_loss(model(Xt), Yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return F.mse_loss(model(Xt), Yt).item()


def peer_perturbation_test(net, X, Y, n, amplitude, keep, seed=0, batch=1000):
    """The official test's shape: one perturbed model and one forward pass per sample (float64).

    The draws are those of :func:`iclr25.relu_landscape.perturbation_test` (same generator, same
    batches), so the two must return the same loss changes.
    """
    model = TwoLayer(net.W, net.H, torch.float64)
    Xt, Yt = torch.tensor(X, dtype=torch.float64), torch.tensor(Y, dtype=torch.float64)
    rng = np.random.default_rng(seed)
    mask = keep.astype(float)
    changes = []
    with torch.no_grad():
        base = F.mse_loss(model(Xt), Yt).item()
        W0, H0 = model.inp.weight.clone(), model.out.weight.clone()
        for i0 in range(0, n, batch):
            b = min(batch, n - i0)
            dW = torch.from_numpy(rng.uniform(-amplitude, amplitude, (b,) + net.W.shape)
                                  * mask[None, :, None])
            dH = torch.from_numpy(rng.uniform(-amplitude, amplitude, (b,) + net.H.shape)
                                  * mask[None, :, None])
            for j in range(b):
                model.inp.weight.copy_(W0 + dW[j])
                model.out.weight.copy_(H0 + dH[j].T)
                changes.append(F.mse_loss(model(Xt), Yt).item() - base)
    return np.array(changes)


def rel_loss(a, b) -> float:
    return abs(float(a) - float(b)) / max(abs(float(a)), 1e-300)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2,000 peer steps, 200 perturbations, 2 repeats (the full run stays)")
    args = ap.parse_args(argv)
    peer_steps, n_perturb, repeat = (2000, 200, 2) if args.quick else (PEER_STEPS, N_PERTURB, 3)
    cfg = rl.fig3("book")
    X, Y = rl.five_point()
    net = rl.init_net(2, cfg.width, 1, init_scale=cfg.init_scale, seed=cfg.seed)
    rl.train_gd(net, X, Y, lr=cfg.lr, n_steps=10, log_every=5, show_progress=False)  # compile once

    def ours_gd(n_steps, backend="numba"):
        return rl.train_gd(net, X, Y, lr=cfg.lr, n_steps=n_steps, log_every=n_steps,
                           backend=backend, show_progress=False).loss[-1]

    full = {}

    def ours_full():
        full["traj"] = rl.train_gd(net, X, Y, lr=cfg.lr, n_steps=cfg.n_steps,
                                   log_every=cfg.log_every, show_progress=False)
        return full["traj"]

    cmp = bench.Comparison(
        "18-gd-fig3", f"GD steps on the Fig. 3 run (N=5, width {cfg.width}, lr {cfg.lr:g})",
        chapter="18-relu-landscape", target=10.0, tol=TOL64, repeat=repeat, warmup=1, unit="step",
        settings={"points": len(X), "width": cfg.width, "init_scale": cfg.init_scale, "lr": cfg.lr,
                  "steps (compared)": peer_steps, "steps (full run)": cfg.n_steps,
                  "optimiser": "plain full-batch GD (optim.SGD for the peer)",
                  "torch_threads": torch.get_num_threads()},
        notes=f"time per step; the loss after {peer_steps} steps from the same init must agree: "
              f"relative {TOL64:g} (float64 rows), {TOL32:g} (float32 peer)")
    cmp.add("ours (compiled, float64)", lambda: ours_gd(peer_steps), work=peer_steps,
            what="the whole loop compiled by numba (train_gd's default)")
    cmp.add("PyTorch loop, float64", lambda: peer_gd(net.W, net.H, X, Y, cfg.lr, peer_steps,
                                                     torch.float64),
            role="baseline", peer="torch", work=peer_steps, repeat=1,
            what="official-style nn.Module + optim.SGD + F.mse_loss, one step per iteration")
    cmp.add("PyTorch loop, float32", lambda: peer_gd(net.W, net.H, X, Y, cfg.lr, peer_steps),
            role="baseline", peer="torch", work=peer_steps, repeat=1, tol=TOL32,
            what="the same loop in the official code's float32")
    cmp.add("numpy reference", lambda: ours_gd(peer_steps, "numpy"), role="baseline",
            work=peer_steps, repeat=1, what="one vectorised numpy step per iteration")
    cmp.add("ours, full Fig. 3 run", ours_full, role="variant", agree=False, work=cfg.n_steps,
            repeat=1, warmup=0,
            what=f"{cfg.n_steps:,} steps, logging every {cfg.log_every}: shown for scale",
            metrics=lambda t: {"final loss": float(t.loss[-1]), "paper": PAPER_FINAL_LOSS})
    cmp.run(distance=rel_loss)

    final = full["traj"].net
    keep = rl.certify(final, X, Y).labels != "dead"      # the neurons the test perturbs
    amplitude = rl.perturbation_test(final, X, Y, n=1, exclude=~keep).amplitude
    pt = bench.Comparison(
        "18-perturbation-test", f"local-minimum test at the final point: {n_perturb} perturbations",
        chapter="18-relu-landscape", tol=TOL_PERTURB, repeat=repeat, warmup=1,
        settings={"perturbations": n_perturb, "amplitude": amplitude, "dtype": "float64",
                  "draws": "numpy default_rng(0), batches of 1000, shared"},
        notes=f"the loss changes of the same perturbations must agree (relative {TOL_PERTURB:g})")
    pt.add("ours (batched perturbation test)",
           lambda: rl.perturbation_test(final, X, Y, n=n_perturb, exclude=~keep).loss_changes,
           what="vectorised over samples (einsum), float64",
           metrics=lambda c: {"min change": float(c.min())})
    pt.add("per-sample loop (official shape)",
           lambda: peer_perturbation_test(final, X, Y, n_perturb, amplitude, keep),
           role="baseline", peer="torch", repeat=1,
           what="one perturbed nn.Module and one forward pass per sample, same draws",
           metrics=lambda c: {"min change": float(c.min())})
    pt.add("certificate (float64, LPs)", lambda: rl.certify(final, X, Y), role="variant",
           agree=False, what="a verdict by linear programs over the sectors, not sampled changes",
           metrics=lambda c: {"verdict": c.verdict})
    pt.add("certificate (exact, rational)", lambda: rl.certify_exact(final, X, Y), role="variant",
           agree=False, repeat=1, what="the same verdict in exact rational arithmetic (the reference)",
           metrics=lambda c: {"verdict": c.verdict})
    pt.run(distance=bench.rel_diff)


if __name__ == "__main__":
    main()

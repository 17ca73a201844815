"""Chapter 09 benchmark: R = 32 SIM training runs as one batched ensemble vs 32 sequential plain loops.

The peer is what the official experiments do (``main.py`` / ``train_and_test.py``), and what a user
would write: an ``nn.Module`` of ``nn.Linear`` layers, ``optim.SGD``, ``F.mse_loss``, and a test pass
over the whole OOD set (``n_ood`` points) before *every* step, one run after another.
Ours is ``iclr25.sim_dynamics.train_sim`` (stacked weights, ``torch.bmm``, one backward for all runs;
for linear models the OOD mean comes exactly from the OOD set's moments, also timed without that),
doing the same work: the same initial weights, the same batch order, the OOD set evaluated before
every step. Quality is compared on that same work: the final OOD loss of every run, ours vs peer
(they should agree to float32 rounding; the peer's lr 0.1 on ``F.mse_loss`` in 64-d is our
0.003125 on ``1/2 ||.||^2``).

Run alone (timings taken beside another job are noise): ``python benchmarks/bench_sim_dynamics.py``.
Options: ``--runs 32 --steps 300 --n-ood 5000 --layers 2``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

import iclr25.sim_dynamics as sd
from iclr25.sim_dynamics.train import _batch_orders


class OfficialStyleMLP(torch.nn.Module):
    """The peer's model: a list of ``nn.Linear`` layers (no bias), optional ReLU between them."""

    def __init__(self, weights, relu):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        for W in weights:
            lin = torch.nn.Linear(W.shape[1], W.shape[0], bias=False)
            with torch.no_grad():
                lin.weight.copy_(W)
            self.layers.append(lin)
        self.relu = relu

    def forward(self, X):
        for i, layer in enumerate(self.layers):
            X = layer(X)
            if self.relu and i < len(self.layers) - 1:
                X = F.relu(X)
        return X


def peer(data, spec, seeds, lr_official, batch_size, n_steps):
    """32 sequential runs of the official loop: test on the OOD set, then one SGD step."""
    X = torch.as_tensor(data.X, dtype=torch.float32)
    Xo = torch.as_tensor(data.X_ood, dtype=torch.float32)
    N, dim = X.shape
    per_epoch = -(-N // batch_size)
    orders = _batch_orders(N, batch_size, -(-n_steps // per_epoch), seeds)
    finals = []
    for r, s in enumerate(seeds):
        model = OfficialStyleMLP(sd.init_params(spec, dim, s)[0], spec.relu)
        opt = torch.optim.SGD(model.parameters(), lr=lr_official)
        test_losses = []
        for step in range(n_steps):
            with torch.no_grad():                       # official test(): MSE on the OOD set
                test_losses.append(float(F.mse_loss(model(Xo), Xo)))
            e, k = divmod(step, per_epoch)
            xb = X[orders[r, e, k * batch_size:(k + 1) * batch_size]]
            opt.zero_grad()
            loss = F.mse_loss(model(xb), xb)
            loss.backward()
            opt.step()
        with torch.no_grad():
            finals.append(float(F.mse_loss(model(Xo), Xo)) * dim / 2)   # in units of 1/2 ||.||^2
    return np.array(finals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=32)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--n-ood", type=int, default=5000, help="OOD points evaluated before every step (official: 5000)")
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args()

    data = sd.two_concept(mu=(1, 2), var=(0.05, 0.05), n=5000, n_ood=args.n_ood, dim=64, seed=0)
    spec = sd.MLPSpec(n_layers=args.layers, hdim=64)
    seeds = list(range(args.runs))
    lr_official, batch_size = 0.1, 128
    lr = lr_official * 2 / 64

    sd.train_sim(data, spec, seeds=seeds[:2], lr=lr, n_steps=5, show_progress=False)  # warm-up
    t = time.perf_counter()
    ours = sd.train_sim(data, spec, seeds=seeds, lr=lr, batch_size=batch_size, n_steps=args.steps,
                        jac_every=10 ** 9, show_progress=False)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    sd.train_sim(data, spec, seeds=seeds, lr=lr, batch_size=batch_size, n_steps=args.steps,
                 jac_every=10 ** 9, ood_eval="samples", show_progress=False)
    t_samples = time.perf_counter() - t
    t = time.perf_counter()
    peer_final = peer(data, spec, seeds, lr_official, batch_size, args.steps)
    t_peer = time.perf_counter() - t

    ours_final = ours.ood_loss[:, -1]
    rel = np.abs(ours_final - peer_final).max() / np.abs(peer_final).max()
    work = args.runs * args.steps
    print(f"SIM task: {args.runs} runs x {args.steps} SGD steps, {args.layers}-layer linear MLP (64-d, width 64), "
          f"batch {batch_size}, OOD set of {args.n_ood} evaluated before every step")
    print(f"  ours (batched ensemble, bmm)   {work / t_ours:10,.0f} run-steps/s   {t_ours:7.2f} s")
    print(f"  ours, OOD set by samples       {work / t_samples:10,.0f} run-steps/s   {t_samples:7.2f} s   "
          f"(batching alone: {t_peer / t_samples:.1f}x)")
    print(f"  peer (official-style loop)     {work / t_peer:10,.0f} run-steps/s   {t_peer:7.2f} s")
    print(f"  same work, same init and batches: final OOD loss, mean ours {ours_final.mean():.6f} "
          f"peer {peer_final.mean():.6f}, largest relative gap {rel:.1e}")
    print(f"  ratio ours/peer: {t_peer / t_ours:.1f}x (target >= 5x)")

    # secondary: the two-layer ODE by solve_ivp vs explicit SGD of the symmetric model to the same time
    d2 = sd.two_concept(n=1000, dim=2, rotate=False, seed=0)
    sym = sd.MLPSpec(2, 64, init_scale=0.01, init_dist="uniform", symmetric=True)
    V0 = sd.init_params(sym, 2, 0)[0][0].double().numpy()
    t = time.perf_counter()
    sd.sym2_linear_ode(d2.a, V0.T @ V0, np.linspace(0, 4.8, 961))
    t_ode = time.perf_counter() - t
    t = time.perf_counter()
    sd.train_sim(d2, sym, seeds=[0], lr=0.005, n_epochs=40, show_progress=False)
    t_sgd = time.perf_counter() - t
    print(f"Two-layer theory to t = 4.8: solve_ivp {t_ode:.3f} s vs SGD on samples {t_sgd:.3f} s "
          f"({t_sgd / t_ode:.0f}x)")


if __name__ == "__main__":
    main()

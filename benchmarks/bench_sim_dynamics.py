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

Every contender runs through ``iclr25.bench``: the headline is ours (batching alone, OOD loss by
samples, the same computation as the loop) against the faster of the two sequential loops; the
exact closed-form OOD loss from moments is a separate variant row, so its speed-up is not credited
to batching. Final OOD losses must agree to a relative 1e-4.

Run alone (timings taken beside another job are noise): ``python benchmarks/bench_sim_dynamics.py``.
Options: ``--runs 32 --steps 300 --n-ood 5000 --layers 2 --no-bias``. The layers have biases, as the
official ``models/mlp.py`` does by default.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

import iclr25.sim_dynamics as sd
from iclr25 import bench
from iclr25.sim_dynamics.train import _batch_orders


class OfficialStyleMLP(torch.nn.Module):
    """The peer's model (official ``models/mlp.py``): ``nn.Linear`` layers with biases by default,
    optional ReLU between them."""

    def __init__(self, weights, biases, relu, bias=True):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        for W, b in zip(weights, biases):
            lin = torch.nn.Linear(W.shape[1], W.shape[0], bias=bias)
            with torch.no_grad():
                lin.weight.copy_(W)
                if bias:
                    lin.bias.copy_(b)
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
        model = OfficialStyleMLP(*sd.init_params(spec, dim, s), spec.relu, spec.bias)
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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=32)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--n-ood", type=int, default=5000, help="OOD points evaluated before every step (official: 5000)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--no-bias", action="store_true", help="bias-free layers (official default: biases)")
    ap.add_argument("--quick", action="store_true", help="4 runs x 20 steps")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.steps = 4, 20

    data = sd.two_concept(mu=(1, 2), var=(0.05, 0.05), n=5000, n_ood=args.n_ood, dim=64, seed=0)
    spec = sd.MLPSpec(n_layers=args.layers, hdim=64, bias=not args.no_bias)
    seeds = list(range(args.runs))
    lr_official, batch_size = 0.1, 128
    lr = lr_official * 2 / 64

    def ours(ood_eval):
        return sd.train_sim(data, spec, seeds=seeds, lr=lr, batch_size=batch_size, n_steps=args.steps,
                            jac_every=10 ** 9, ood_eval=ood_eval, show_progress=False).ood_loss[:, -1]

    work = args.runs * args.steps
    cmp = bench.Comparison(
        f"09-sim-ensemble-r{args.runs}", f"{args.runs} SIM runs x {args.steps} SGD steps, OOD set "
        f"({args.n_ood} points) evaluated before every step", chapter="09-sim-dynamics",
        target=5.0, tol=1e-4, repeat=3, warmup=1, unit="run-step",
        settings={"runs": args.runs, "steps": args.steps, "n_ood": args.n_ood, "layers": args.layers,
                  "bias": spec.bias,
                  "width": 64, "dim": 64, "batch_size": batch_size, "optimiser": "SGD",
                  "lr": f"{lr_official} on F.mse_loss = {lr} on 1/2||.||^2", "dtype": "float32"})
    cmp.add("ours (batched ensemble, bmm)", lambda: ours("samples"), work=work,
            what="stacked weights, one backward for all runs; OOD loss by a forward over the set")
    cmp.add("official-style loop", lambda: peer(data, spec, seeds, lr_official, batch_size, args.steps),
            role="baseline", work=work, repeat=2,
            what="nn.Linear layers, optim.SGD, F.mse_loss, one run after another (official main.py)")
    cmp.add("ours, loop backend", lambda: sd.train_sim(
                data, spec, seeds=seeds, lr=lr, batch_size=batch_size, n_steps=args.steps,
                jac_every=10 ** 9, backend="loop", show_progress=False).ood_loss[:, -1],
            role="baseline", work=work, repeat=2, what="our reference: nn.Sequential + optim.SGD per run")
    if not spec.relu:
        cmp.add("ours + exact OOD loss from moments", lambda: ours("moments"), role="variant",
                work=work, what="a different computation: the OOD mean in closed form from the set's "
                                "moments (linear models only), not batching")
    cmp.run(distance=bench.rel_diff)


if __name__ == "__main__":
    main()

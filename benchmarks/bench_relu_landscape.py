"""Chapter 18 benchmark: GD iterations per second on the Fig. 3 run, ours vs a per-step PyTorch loop.

The peer is what the official experiments do (and what a user would write): a bias-free two-layer
``nn.Module`` in float32, ``optim.SGD`` and ``F.mse_loss``, one Python-level step per iteration.
Ours is the compiled loop behind ``iclr25.relu_landscape.train_gd`` (plus its numpy reference).
Quality is compared on the same work: the loss after the same number of steps from the same init.
Also: the cost of the escape-neuron certificate against the paper's 5,000-sample perturbation test.

Run alone (timings taken beside another job are noise): ``python benchmarks/bench_relu_landscape.py``.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

import iclr25.relu_landscape as rl

PEER_STEPS = 30_000


class TwoLayer(torch.nn.Module):
    """The peer: bias-free input and output layers, ReLU, as in the official model."""

    def __init__(self, W, H):
        super().__init__()
        self.inp = torch.nn.Linear(W.shape[1], W.shape[0], bias=False)
        self.out = torch.nn.Linear(W.shape[0], H.shape[1], bias=False)
        with torch.no_grad():
            self.inp.weight.copy_(torch.tensor(W))
            self.out.weight.copy_(torch.tensor(H.T))

    def forward(self, x):
        return self.out(torch.relu(self.inp(x)))


def peer_gd(W, H, X, Y, lr, n_steps):
    model = TwoLayer(W, H)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    Xt, Yt = torch.tensor(X, dtype=torch.float32), torch.tensor(Y, dtype=torch.float32)
    for _ in range(n_steps):
        loss = F.mse_loss(model(Xt), Yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return F.mse_loss(model(Xt), Yt).item()


def peer_perturbation_test(net, X, Y, n, amplitude, keep):
    """The official test's shape: one perturbed model and one forward pass per sample."""
    model = TwoLayer(net.W, net.H)
    Xt, Yt = torch.tensor(X, dtype=torch.float32), torch.tensor(Y, dtype=torch.float32)
    base = F.mse_loss(model(Xt), Yt).item()
    W0, H0 = model.inp.weight.detach().clone(), model.out.weight.detach().clone()
    mask = torch.tensor(keep, dtype=torch.float32)
    changes = []
    with torch.no_grad():
        for _ in range(n):
            model.inp.weight.copy_(W0 + amplitude * (2 * torch.rand_like(W0) - 1) * mask[:, None])
            model.out.weight.copy_(H0 + amplitude * (2 * torch.rand_like(H0) - 1) * mask[None, :])
            changes.append(F.mse_loss(model(Xt), Yt).item() - base)
    return min(changes)


def main() -> None:
    cfg = rl.fig3("book")
    X, Y = rl.five_point()
    net = rl.init_net(2, cfg.width, 1, init_scale=cfg.init_scale, seed=cfg.seed)
    rl.train_gd(net, X, Y, lr=cfg.lr, n_steps=10, log_every=5, show_progress=False)  # compile once

    t = time.perf_counter()
    ours = rl.train_gd(net, X, Y, lr=cfg.lr, n_steps=cfg.n_steps, log_every=cfg.log_every,
                       show_progress=False)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    ref = rl.train_gd(net, X, Y, lr=cfg.lr, n_steps=PEER_STEPS, log_every=PEER_STEPS, backend="numpy",
                      show_progress=False)
    t_ref = time.perf_counter() - t
    t = time.perf_counter()
    peer_loss = peer_gd(net.W, net.H, X, Y, cfg.lr, PEER_STEPS)
    t_peer = time.perf_counter() - t
    ours_at = rl.train_gd(net, X, Y, lr=cfg.lr, n_steps=PEER_STEPS, log_every=PEER_STEPS,
                          show_progress=False).loss[-1]

    r_ours, r_ref, r_peer = cfg.n_steps / t_ours, PEER_STEPS / t_ref, PEER_STEPS / t_peer
    print("Fig. 3 run: N=5 points, width 50, full-batch GD")
    print(f"  ours (compiled, float64)   {r_ours:12,.0f} it/s   {cfg.n_steps:,} steps in {t_ours:.2f} s, "
          f"final loss {ours.loss[-1]:.6f} (paper 0.027886)")
    print(f"  ours (numpy reference)     {r_ref:12,.0f} it/s")
    print(f"  peer (PyTorch loop, fp32)  {r_peer:12,.0f} it/s   ({PEER_STEPS:,} steps; 6e5 would take "
          f"{cfg.n_steps / r_peer:.0f} s)")
    print(f"  same work, same init: loss after {PEER_STEPS:,} steps  ours {ours_at:.8f}  "
          f"peer {peer_loss:.8f}  numpy {ref.loss[-1]:.8f}")
    print(f"  ratio ours/peer: {r_ours / r_peer:.1f}x (target >= 10x)")

    cert_t = time.perf_counter()
    cert = rl.certify(ours.net, X, Y)
    cert_t = time.perf_counter() - cert_t
    keep = cert.labels != "dead"
    t = time.perf_counter()
    pert = rl.perturbation_test(ours.net, X, Y, n=5000, exclude=~keep)
    t_pert = time.perf_counter() - t
    t = time.perf_counter()
    peer_min = peer_perturbation_test(ours.net, X, Y, 5000, pert.amplitude, keep)
    t_peer_pert = time.perf_counter() - t
    print("Local-minimum test at the final point")
    print(f"  certificate (exact, LPs)          {cert_t:8.3f} s  -> {cert.verdict}")
    print(f"  perturbation test, ours (batched) {t_pert:8.3f} s  -> min change {pert.min_change:.2e}")
    print(f"  perturbation test, per-sample     {t_peer_pert:8.3f} s  -> min change {peer_min:.2e}")
    print(f"  ratio per-sample perturbation / certificate: {t_peer_pert / cert_t:.1f}x")


if __name__ == "__main__":
    main()

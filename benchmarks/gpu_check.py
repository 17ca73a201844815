"""Chapter 06 GPU check: the TopK SAE trainer on a CUDA device (``make gpu-check``).

Two parts, both on ``--device`` (default ``cuda``):

1. **Triton = torch.** :func:`iclr25.topk_sae.train_sae` trains two SAEs from the same weights on
   the same batches, one with the Triton kernels and one with the torch path; the per-step losses
   and the final weights must agree (float32: the kernels sum in another order, so to 1e-4
   relative on the losses and 1e-3 absolute on the weights after ``--steps`` Adam steps). This
   also checks that every tensor of the training loop lives on the model's device.
2. **Speed.** The training step of ``benchmarks/bench_topk_sae.py`` (d = 576, n = 16384, k = 32,
   batches of 4096, cached SmolLM2-135M activations) on the device, ours vs sparsify vs SAELens,
   through the core harness (same init, optimiser, batches; held-out NMSE must agree to 0.01).
   Written to ``results/bench/06-topk-sae-train-step-<device>.json``.

On a machine without CUDA it says so and exits 2. ``--device cpu`` with ``TRITON_INTERPRET=1``
runs part 1 on the CPU through Triton's interpreter (slow; tiny sizes with ``--small``): that is
how the unit tests check the script itself.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

import iclr25.topk_sae as ts


def backends_agree(d: int = 576, n: int = 16384, k: int = 32, batch: int = 4096, steps: int = 20,
                   device: str = "cuda", seed: int = 0, n_rows: int | None = None,
                   backends: tuple[str, str] = ("triton", "torch")) -> dict:
    """Train with the two ``backends`` (default Triton and torch) from the same init on ``device``;
    return the largest differences of the logged losses (relative) and of the final weights."""
    g = torch.Generator().manual_seed(seed)
    acts = torch.randn(n_rows or 4 * batch, d, generator=g)
    acts[:, : d // 8] *= 3.0                      # anisotropic, as activations are
    base = ts.TopKSAE(d, n, k, seed=seed)
    weights = {name: t.detach().clone() for name, t in base.state_dict().items()}
    out = {}
    if backends[0] == backends[1]:
        raise ValueError(f"backends_agree compares two different backends; got {backends}")
    for backend in backends:
        sae = ts.TopKSAE(d, n, k, seed=seed, backend=backend)
        sae.load_state_dict(weights)
        sae.to(device)
        log = ts.train_sae(sae, acts, n_steps=steps, batch_size=batch, seed=seed, log_every=1,
                           init_b_pre=True, backend=backend, desc=None)
        devices = {str(t.device) for t in sae.state_dict().values()}
        devices.add(str(log.tokens_since_fired.device))
        out[backend] = (torch.tensor(log.fvu), {k_: v.detach().cpu() for k_, v in sae.state_dict().items()},
                        devices)
    (f_tri, w_tri, dev_tri), (f_tor, w_tor, dev_tor) = out[backends[0]], out[backends[1]]
    loss_rel = float(((f_tri - f_tor).abs() / f_tor.abs().clamp_min(1e-12)).max())
    weight_abs = max(float((w_tri[name] - w_tor[name]).abs().max()) for name in w_tri)
    return {"loss_rel": loss_rel, "weight_abs": weight_abs, "steps": steps,
            "devices": sorted(dev_tri | dev_tor), "final_fvu": float(f_tor[-1])}


def _bench_module():
    path = Path(__file__).with_name("bench_topk_sae.py")
    spec = importlib.util.spec_from_file_location("bench_topk_sae", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=20, help="training steps of the agreement check")
    ap.add_argument("--small", action="store_true", help="d=16, n=64, k=4, batch 32 (interpreter)")
    ap.add_argument("--no-speed", action="store_true", help="skip part 2 (the timed comparison)")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-check: no CUDA device on this machine; nothing checked (run it where one is)")
        return 2
    sizes = dict(d=16, n=64, k=4, batch=32) if args.small else {}
    res = backends_agree(steps=args.steps, device=args.device, **sizes)
    ok = res["loss_rel"] < 1e-4 and res["weight_abs"] < 1e-3 and \
        all(d_.split(":")[0] == args.device.split(":")[0] for d_ in res["devices"])
    print(f"gpu-check part 1 (triton vs torch, {res['steps']} steps on {args.device}): "
          f"loss rel diff {res['loss_rel']:.2e}, weight abs diff {res['weight_abs']:.2e}, "
          f"tensors on {res['devices']}: {'ok' if ok else 'FAILED'}")
    if not ok:
        return 1
    if args.no_speed or args.small:
        return 0
    _bench_module().main(["--device", args.device])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Chapter 06 benchmark: TopK SAE training tokens per second on the CPU, ours vs SAELens vs sparsify.

Setting (the issue's): d = 576 (SmolLM2-135M residual stream), n = 16384 latents, k = 32, batches of
4096 tokens, float32, on the same cached activations (``iclr25.topk_sae.acts``, layer 15). Every
trainer starts from the same weights (a tied encoder/decoder with unit-norm rows, ``b_pre`` = our
geometric median, zero encoder bias), uses the same optimiser, torch's fused CPU Adam (lr, eps 6.25e-10), with the decoder gradient projected
and the decoder renormalised each step, and sees the same batches; the NMSE each reaches on
held-out activations after the same number of tokens is printed beside its speed.

- ours: :func:`iclr25.topk_sae.topk_loss_and_grads` (one dense matmul, top-k, sparse products);
- sparsify (``eai-sparsify``): ``SparseCoder`` forward (its ``fused_encoder`` and ``decoder_impl``)
  and autograd;
- SAELens (``sae-lens``): ``TopKTrainingSAE.training_forward_pass`` and autograd.

Also reported: the encoder forward alone (the one dense matmul a TopK step cannot avoid, timed
as ``addmm`` into a preallocated buffer: its floor) and our step's fraction of that limit, and the
largest speed-up over sparsify that any exact float32 trainer could reach here (sparsify's step
over the limit). A peer that is not installed is skipped with the reason. Step times are medians
through ``iclr25.bench``; the held-out NMSE after the same steps must agree with ours to 0.01.

Run alone (timings beside other jobs are noise):
``python benchmarks/bench_topk_sae.py [--steps 4] [--tokens 12288]``.
"""

from __future__ import annotations

import argparse
import os

import torch

import iclr25.topk_sae as ts
from iclr25 import bench
from iclr25.topk_sae import acts as A

D, N, K, B = 576, 16384, 32, 4096


def load_acts(n_train: int, n_eval: int, layer: int = 15):
    tr = A.collect_activations(A.ActsSpec(n_train, layer, 64, 0, "train"))
    ev = A.collect_activations(A.ActsSpec(n_eval, layer, 64, 0, "val"))
    mx = A.outlier_threshold(tr.acts)
    rt, re = A.training_rows(tr.acts, mx), A.training_rows(ev.acts, mx)
    scale = ts.activation_scale(A.Rows(tr.acts, rt)[:])
    return (torch.from_numpy(A.Rows(tr.acts, rt, scale)[:]),
            torch.from_numpy(A.Rows(ev.acts, re, scale)[:]))


def init_weights(X):
    base = ts.TopKSAE(D, N, K, auxk=0, seed=0)
    base.init_b_pre_(X[:8192])
    return {k: v.detach().clone() for k, v in base.state_dict().items()}


def batch_list(X, steps):
    return list(ts.train.batches(X, B, steps, seed=0))


def adam(params, lr):
    """The one optimiser every trainer gets: torch's fused Adam (CPU or CUDA), eps 6.25e-10."""
    return torch.optim.Adam(params, lr=lr, eps=6.25e-10, fused=True)


def synced(step, device):
    """``step`` followed by a CUDA synchronisation, so the harness times the work, not its launch."""
    if not str(device).startswith("cuda"):
        return step

    def run():
        step()
        torch.cuda.synchronize(device)
    return run


def cycling(batches):
    """A step function's next batch: the same sequence for every trainer."""
    it = [0]

    def nxt():
        x = batches[it[0] % len(batches)]
        it[0] += 1
        return x
    return nxt


def run_ours(w, batches, X_eval, lr, scale, device="cpu"):
    sae = ts.TopKSAE(D, N, K, auxk=0)
    sae.load_state_dict(w)
    sae.to(device)
    opt = adam(sae.parameters(), lr)
    buf = torch.empty(B, N, device=device)  # the pre-activations, reused (as train_sae does)
    nxt = cycling(batches)

    def step():
        x = nxt()
        ts.topk_loss_and_grads(sae, x, scale, out=buf)
        sae.project_decoder_grad_()
        opt.step()
        sae.normalize_decoder_()

    return synced(step, device), lambda: ts.evaluate(sae, X_eval)["nmse"]


def run_sparsify(w, batches, X_eval, lr, device="cpu"):
    # sparsify picks its Triton decoder whenever triton imports, even for CPU tensors, and then
    # fails ("0 active drivers"); its own switch selects the eager embedding_bag decoder.
    if device == "cpu":
        os.environ.setdefault("SPARSIFY_DISABLE_TRITON", "1")
    from sparsify import SparseCoder, SparseCoderConfig

    sae = SparseCoder(D, SparseCoderConfig(num_latents=N, k=K), device=device)
    with torch.no_grad():
        sae.encoder.weight.copy_(w["W_enc"])
        sae.encoder.bias.copy_(w["b_enc"])
        sae.W_dec.copy_(w["W_dec"])
        sae.b_dec.copy_(w["b_pre"])
    opt = adam(sae.parameters(), lr)
    nxt = cycling(batches)

    def step():
        opt.zero_grad(set_to_none=True)
        sae(nxt()).fvu.backward()
        sae.remove_gradient_parallel_to_decoder_directions()
        opt.step()
        sae.set_decoder_norm_to_unit_norm()

    def result():
        with torch.no_grad():
            out = torch.cat([sae(X_eval[s:s + 2048].to(device)).sae_out.cpu()
                             for s in range(0, len(X_eval), 2048)])
        return ts.nmse(out, X_eval)
    return synced(step, device), result


def run_saelens(w, batches, X_eval, lr, device="cpu"):
    from sae_lens import TopKTrainingSAE, TopKTrainingSAEConfig
    from sae_lens.saes.sae import TrainStepInput

    cfg = TopKTrainingSAEConfig(d_in=D, d_sae=N, k=K, dtype="float32", device=device)
    sae = TopKTrainingSAE(cfg)
    with torch.no_grad():
        sae.W_enc.copy_(w["W_enc"].T)
        sae.b_enc.copy_(w["b_enc"])
        sae.W_dec.copy_(w["W_dec"])
        sae.b_dec.copy_(w["b_pre"])
    opt = adam(sae.parameters(), lr)
    it = [0]
    nxt = cycling(batches)

    def step():
        opt.zero_grad(set_to_none=True)
        out = sae.training_forward_pass(TrainStepInput(sae_in=nxt(), coefficients={},
                                                       dead_neuron_mask=None,
                                                       n_training_steps=it[0],
                                                       is_logging_step=False))
        out.loss.backward()
        with torch.no_grad():  # same projection + renormalisation as the others
            g = sae.W_dec.grad
            g -= (g * sae.W_dec).sum(1, keepdim=True) * sae.W_dec
        opt.step()
        with torch.no_grad():
            sae.W_dec /= sae.W_dec.norm(dim=1, keepdim=True)
        it[0] += 1

    def result():
        with torch.no_grad():
            out = torch.cat([sae.decode(sae.encode(X_eval[s:s + 2048].to(device))).cpu()
                             for s in range(0, len(X_eval), 2048)])
        return ts.nmse(out, X_eval)
    return synced(step, device), result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="steps per trainer (first is warm-up)")
    ap.add_argument("--tokens", type=int, default=12288, help="training activations to cache")
    ap.add_argument("--eval-tokens", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--quick", action="store_true", help="3 steps on 8192 cached tokens")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (benchmarks/gpu_check.py)")
    args = ap.parse_args(argv)
    dev = args.device
    if args.quick:
        args.steps, args.tokens = 3, 8192
    torch.manual_seed(0)
    X, X_eval = load_acts(args.tokens, args.eval_tokens)
    w = init_weights(X)
    scale = ts.mse_scale(X[:8192])
    batches = [x.to(dev) for x in batch_list(X, args.steps)]
    suffix = "" if dev == "cpu" else f"-{dev.split(':')[0]}"
    cmp = bench.Comparison(
        f"06-topk-sae-train-step{suffix}", f"TopK SAE training step on {dev}, d={D} n={N} k={K}, batch {B}",
        chapter="06-topk-sae", target=2.0, tol=0.01, repeat=args.steps - 1, warmup=1, unit="tok",
        settings={"d": D, "n_latents": N, "k": K, "batch": B, "dtype": "float32",
                  "optimiser": "torch.optim.Adam(fused=True, eps=6.25e-10) for every trainer",
                  "lr": args.lr, "steps": args.steps, "threads": torch.get_num_threads(),
                  "device": dev if dev == "cpu" else torch.cuda.get_device_name(dev),
                  "activations": "SmolLM2-135M layer 15 (cached)"},
        notes="compared: held-out NMSE after the same steps on the same batches from the same "
              "weights (absolute tolerance 0.01)")
    step, result = run_ours(w, batches, X_eval, args.lr, scale, dev)
    cmp.add("ours (topk_loss_and_grads)", step, result=result, work=B)
    for name, peer, fn in (("sparsify SparseCoder", "eai-sparsify", run_sparsify),
                           ("SAELens TopKTrainingSAE", "sae-lens", run_saelens)):
        try:
            step, result = fn(w, batches, X_eval, args.lr, dev)
        except ImportError as err:
            cmp.skip(name, str(err), peer=peer)
            continue
        cmp.add(name, step, role="baseline", peer=peer, result=result, work=B,
                what="its forward + autograd, same projection and renormalisation")
    W_enc, b_enc, buf = w["W_enc"].to(dev), w["b_enc"].to(dev), torch.empty(B, N, device=dev)
    nxt = cycling(batches)
    cmp.add("encoder forward alone (the floor)",
            synced(lambda: torch.addmm(b_enc, nxt(), W_enc.T, out=buf), dev), role="variant", agree=False,
            work=B, what="the one dense matmul any exact TopK step does: the limit for every trainer")
    cmp.run(distance=lambda a, b: abs(float(a) - float(b)))


if __name__ == "__main__":
    main()

"""Chapter 06 benchmark: TopK SAE training tokens per second on the CPU, ours vs SAELens vs sparsify.

Setting (the issue's): d = 576 (SmolLM2-135M residual stream), n = 16384 latents, k = 32, batches of
4096 tokens, float32, on the same cached activations (``iclr25.topk_sae.acts``, layer 15). Every
trainer starts from the same weights (a tied encoder/decoder with unit-norm rows, ``b_pre`` = our
geometric median, zero encoder bias), uses Adam (lr, eps 6.25e-10) with the decoder gradient projected
and the decoder renormalised each step, and sees the same batches; the NMSE each reaches on
held-out activations after the same number of tokens is printed beside its speed.

- ours: :func:`iclr25.topk_sae.topk_loss_and_grads` (one dense matmul, top-k, sparse products);
- sparsify (``eai-sparsify``): ``SparseCoder`` forward (its ``fused_encoder`` and ``decoder_impl``)
  and autograd;
- SAELens (``sae-lens``): ``TopKTrainingSAE.training_forward_pass`` and autograd.

Also reported: the encoder forward alone (the one dense matmul a TopK step cannot avoid, timed
as ``addmm`` into a preallocated buffer: its floor) and our step's fraction of that limit, and the
largest speed-up over sparsify that any exact float32 trainer could reach here (sparsify's step
over the limit). A peer that is not installed is skipped with the reason. Step times are medians.

Run alone (timings beside other jobs are noise):
``python benchmarks/bench_topk_sae.py [--steps 4] [--tokens 12288]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

import iclr25.topk_sae as ts
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


def time_steps(step, batches):
    """Median seconds per step over ``batches[1:]`` (the first step is a warm-up, not timed, but
    its tokens count towards the NMSE)."""
    step(batches[0])
    times = []
    for x in batches[1:]:
        t0 = time.perf_counter()
        step(x)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def run_ours(w, batches, X_eval, lr, scale):
    sae = ts.TopKSAE(D, N, K, auxk=0)
    sae.load_state_dict(w)
    opt = torch.optim.Adam(sae.parameters(), lr=lr, eps=6.25e-10, fused=True)
    buf = torch.empty(B, N)     # the pre-activations, reused every step (as train_sae does)

    def step(x):
        ts.topk_loss_and_grads(sae, x, scale, out=buf)
        sae.project_decoder_grad_()
        opt.step()
        sae.normalize_decoder_()

    sec = time_steps(step, batches)
    return sec, ts.evaluate(sae, X_eval)["nmse"]


def run_sparsify(w, batches, X_eval, lr):
    # sparsify picks its Triton decoder whenever triton imports, even for CPU tensors, and then
    # fails ("0 active drivers"); its own switch selects the eager embedding_bag decoder.
    os.environ.setdefault("SPARSIFY_DISABLE_TRITON", "1")
    from sparsify import SparseCoder, SparseCoderConfig

    sae = SparseCoder(D, SparseCoderConfig(num_latents=N, k=K), device="cpu")
    with torch.no_grad():
        sae.encoder.weight.copy_(w["W_enc"])
        sae.encoder.bias.copy_(w["b_enc"])
        sae.W_dec.copy_(w["W_dec"])
        sae.b_dec.copy_(w["b_pre"])
    opt = torch.optim.Adam(sae.parameters(), lr=lr, eps=6.25e-10)

    def step(x):
        opt.zero_grad(set_to_none=True)
        sae(x).fvu.backward()
        sae.remove_gradient_parallel_to_decoder_directions()
        opt.step()
        sae.set_decoder_norm_to_unit_norm()

    sec = time_steps(step, batches)
    with torch.no_grad():
        out = torch.cat([sae(X_eval[s:s + 2048]).sae_out for s in range(0, len(X_eval), 2048)])
    return sec, ts.nmse(out, X_eval)


def run_saelens(w, batches, X_eval, lr):
    from sae_lens import TopKTrainingSAE, TopKTrainingSAEConfig
    from sae_lens.saes.sae import TrainStepInput

    cfg = TopKTrainingSAEConfig(d_in=D, d_sae=N, k=K, dtype="float32", device="cpu")
    sae = TopKTrainingSAE(cfg)
    with torch.no_grad():
        sae.W_enc.copy_(w["W_enc"].T)
        sae.b_enc.copy_(w["b_enc"])
        sae.W_dec.copy_(w["W_dec"])
        sae.b_dec.copy_(w["b_pre"])
    opt = torch.optim.Adam(sae.parameters(), lr=lr, eps=6.25e-10)
    it = [0]

    def step(x):
        opt.zero_grad(set_to_none=True)
        out = sae.training_forward_pass(TrainStepInput(sae_in=x, coefficients={},
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

    sec = time_steps(step, batches)
    with torch.no_grad():
        out = torch.cat([sae.decode(sae.encode(X_eval[s:s + 2048]))
                         for s in range(0, len(X_eval), 2048)])
    return sec, ts.nmse(out, X_eval)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="steps per trainer (first is warm-up)")
    ap.add_argument("--tokens", type=int, default=12288, help="training activations to cache")
    ap.add_argument("--eval-tokens", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"threads {torch.get_num_threads()}; d={D} n={N} k={K} batch={B}; {args.steps} steps")
    X, X_eval = load_acts(args.tokens, args.eval_tokens)
    print(f"activations: train {tuple(X.shape)}, eval {tuple(X_eval.shape)} (SmolLM2 layer 15)")
    w = init_weights(X)
    scale = ts.mse_scale(X[:8192])
    batches = batch_list(X, args.steps)
    W_enc, buf = w["W_enc"], torch.empty(B, N)
    enc = time_steps(lambda x: torch.addmm(w["b_enc"], x, W_enc.T, out=buf), batches)
    results = {"ours": run_ours(w, batches, X_eval, args.lr, scale)}
    for name, fn in (("sparsify", run_sparsify), ("SAELens", run_saelens)):
        try:
            results[name] = fn(w, batches, X_eval, args.lr)
        except ImportError as err:
            print(f"{name}: skipped ({err})")
    tokens = args.steps * B
    print(f"\nencoder forward alone: {enc:.3f} s per batch ({B / enc:,.0f} tok/s): the limit")
    print(f"{'trainer':10s} {'s/step':>8s} {'tok/s':>8s} {'NMSE after ' + format(tokens, ','):>20s}")
    for name, (sec, err) in results.items():
        print(f"{name:10s} {sec:8.3f} {B / sec:8,.0f} {err:20.4f}")
    ours = results["ours"][0]
    for name in ("sparsify", "SAELens"):
        if name in results:
            print(f"speed-up over {name}: {results[name][0] / ours:.2f}x "
                  f"(NMSE {results['ours'][1]:.4f} vs {results[name][1]:.4f})")
    print(f"our step's fraction of the encoder-forward limit: {enc / ours:.0%}")
    if "sparsify" in results:
        print(f"ceiling (sparsify's step / the limit): {results['sparsify'][0] / enc:.2f}x; "
              "target: >= 2x sparsify at equal or better NMSE")


if __name__ == "__main__":
    main()

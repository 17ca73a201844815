"""Chapter 10 benchmark: per-head ridge probes for every head and fold, and per-head capture,
through the core harness (:mod:`iclr25.bench`).

``10-head-ridge``: fit one ``Ridge(alpha=1, fit_intercept=False)`` per attention head and per
fold of a 2-fold split (the paper's probing loop), at two shapes: SmolLM2-135M (270 heads x 64
dims, 300 prompts) and Llama-2-7B (1024 heads x 128 dims, 552 lawmakers, the paper's own loop),
on synthetic activations with a planted signal.

- ours: :func:`iclr25.ideology_probes.ridge_fit` (``method="batched"``): the heads' Gram
  matrices stacked into ``(G, d, d)``, one ``torch.linalg.solve`` per fold, float64;
- scikit-learn (baseline, the official route): ``Ridge`` fitted head by head and fold by fold;
- numpy loop (baseline): the same normal equations solved head by head (our reference path).

The coefficients of every head and fold must agree to 1e-6 (absolute). Target: >= 10x.

``10-head-capture``: every head's output before ``o_proj`` at the last prompt token of 64
persona prompts on SmolLM2 (left-padded batches of 16).

- ours: :func:`iclr25.ideology_probes.head_outputs` (``o_proj`` pre-hooks, batched);
- nnsight (baseline): ``NNsight(model).trace`` saving each ``o_proj``'s input at the last token,
  same batches (skipped with a message when nnsight is not installed: ``make bench`` installs it);
- one prompt at a time (baseline): our reference path, no padding.

Outputs must agree to 1e-4. Torch runs on one thread by default (``--threads``). Run alone:
timings beside other jobs are noise. ``--quick`` runs tiny sizes.
"""

from __future__ import annotations

import argparse
import importlib.util

import numpy as np
import torch

from iclr25 import bench, lm
from iclr25 import ideology_probes as ip


def _synthetic(n: int, G: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, G, d)) * 0.3          # float64, as the probes solve
    y = X[:, G // 2] @ rng.normal(size=d) + 0.5 * rng.normal(size=n)
    return X, y


def _per_fold(fit, X, y, splits) -> np.ndarray:
    return np.stack([fit(X[tr], y[tr]) for tr, _ in splits])


def bench_ridge(name: str, n: int, G: int, d: int, repeat: int) -> dict:
    from sklearn.linear_model import Ridge

    X, y = _synthetic(n, G, d)
    splits = ip.fold_indices(n, 2, 42)

    def ours(Xf, yf):
        return ip.ridge_fit(Xf, yf, 1.0, method="batched")[0]

    def loop(Xf, yf):
        return ip.ridge_fit(Xf, yf, 1.0, method="loop")[0]

    def sk(Xf, yf):
        return np.stack([Ridge(alpha=1.0, fit_intercept=False).fit(Xf[:, g], yf).coef_
                         for g in range(Xf.shape[1])])

    cmp = bench.Comparison(
        f"10-head-ridge-{name}", f"Per-head ridge probes, all heads x 2 folds ({name} shape)",
        chapter="10-ideology-probes", target=10.0, tol=1e-6, repeat=repeat, warmup=1,
        settings={"n": n, "heads": G, "head_dim": d, "folds": 2, "alpha": 1.0,
                  "threads": torch.get_num_threads()})
    cmp.add("ours (stacked Gram, one torch.linalg.solve per fold)",
            lambda: _per_fold(ours, X, y, splits), role="ours", work=2 * G)
    cmp.add("scikit-learn Ridge per head and fold", lambda: _per_fold(sk, X, y, splits),
            role="baseline", peer="scikit-learn", work=2 * G,
            what="the official notebook's loop: Ridge(alpha=1, fit_intercept=False).fit per head")
    cmp.add("numpy solve per head (reference)", lambda: _per_fold(loop, X, y, splits),
            role="baseline", peer="numpy", work=2 * G, what="the same normal equations, one head at a time")
    return cmp.run(distance=bench.max_abs_diff)


def bench_capture(model, tok, texts, repeat: int) -> dict:
    cmp = bench.Comparison(
        "10-head-capture", "Per-head outputs before o_proj at the last prompt token (SmolLM2)",
        chapter="10-ideology-probes", target=1.0, tol=1e-4, repeat=repeat, warmup=1,
        settings={"model": "SmolLM2-135M-Instruct", "prompts": len(texts), "batch_size": 16,
                  "threads": torch.get_num_threads()})
    cmp.add("ours (o_proj pre-hooks, batched)",
            lambda: ip.head_outputs(model, tok, texts, batch_size=16, desc=None),
            role="ours", work=len(texts))
    cmp.add("one prompt at a time (reference)",
            lambda: ip.head_outputs(model, tok, texts, method="loop", desc=None),
            role="baseline", peer="ours, unbatched", work=len(texts))
    if importlib.util.find_spec("nnsight") is None:
        cmp.skip("nnsight", "nnsight is not installed (make bench installs it)", peer="nnsight")
    else:
        from nnsight import NNsight

        from iclr25.lm._common import pad_batch, pad_id, position_ids

        traced = NNsight(model)
        n_layers = len(lm.decoder_layers(model))
        ids = ip.encode(tok, texts)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        hd = model.config.hidden_size // model.config.num_attention_heads

        def peer():
            out = np.zeros((len(ids), n_layers, model.config.num_attention_heads, hd), np.float32)
            for s in range(0, len(order), 16):
                chunk = order[s:s + 16]
                x, mask = pad_batch([ids[i] for i in chunk], pad_id(tok), left=True)
                saved = []
                with torch.no_grad(), traced.trace(input_ids=x, attention_mask=mask,
                                                   position_ids=position_ids(mask), use_cache=False):
                    for l in range(n_layers):
                        saved.append(traced.model.layers[l].self_attn.o_proj.input[:, -1].save())
                vals = [getattr(v, "value", v) for v in saved]
                out[chunk] = torch.stack(vals, 1).reshape(len(chunk), n_layers, -1, hd).float().numpy()
            return out

        cmp.add("nnsight (trace, save o_proj input)", peer, role="baseline", peer="nnsight",
                work=len(texts), what="NNsight(model).trace saving every o_proj input at the last token")
    return cmp.run(distance=bench.max_abs_diff)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check agreement only")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        bench_ridge("smollm2", 40, 12, 8, repeat=1)
    else:
        bench_ridge("smollm2", 300, 270, 64, repeat=3)
        bench_ridge("llama2-7b", 552, 1024, 128, repeat=1)
    model, tok = lm.load()
    texts = ip.make_personas(tok, 8 if args.quick else 64, seed=0).texts
    bench_capture(model, tok, texts, repeat=1 if args.quick else 2)


if __name__ == "__main__":
    main()

"""Chapter 08 benchmark: refusal-feature extraction and RFA with our hooks against nnsight, and
the cost of RFA hooks inside a training step, through the core harness (:mod:`iclr25.bench`).

``08-direction``: the difference of means at the last prompt token of every layer input (31
layers) for 32 + 32 chat-formatted prompts of the chapter (left-padded batches of 16) on
SmolLM2-135M-Instruct.

- ours: :func:`iclr25.refat.last_token_acts` (forward pre-hooks that keep position -1 only) and
  :meth:`RefusalFeature.from_contrast`;
- nnsight (the peer a user would pick): ``NNsight(model).trace`` saving each decoder layer's
  ``.input`` (and the last layer's output), then the same last-token slice and means.

``08-rfa``: next-token logits of the 32 harmful prompts under mean-mode RFA at layers 16-30,
ours (:func:`iclr25.refat.rfa`, hooks through :func:`iclr25.lm.intervene`) against nnsight setting
each layer's ``.input`` inside a trace. Outputs must agree to 1e-4 (absolute).

``08-hook-overhead``: a training step (batch 8, LoRA on layers 22-29, cached states) with RFA
hooks on every harmful row (the direction fixed, no recomputation) against the same step without,
on the same rows: the target is an overhead below 5%. Torch runs on one thread. Run alone:
timings beside other jobs are noise. ``--quick``: fewer prompts, agreement only.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from iclr25 import bench, lm
from iclr25 import refat as R
from iclr25.lm._common import pad_batch, pad_id, position_ids


def _batches(tok, prompts, bs):
    ids_all = R.encode_prompts(tok, prompts)
    return [pad_batch(ids_all[s:s + bs], pad_id(tok), left=True) for s in range(0, len(ids_all), bs)]


def bench_direction(model, tok, harmful, harmless, repeat):
    from nnsight import NNsight

    n = len(lm.decoder_layers(model))
    layers = list(range(n + 1))
    traced = NNsight(model)

    def ours():
        return R.RefusalFeature.from_contrast(R.last_token_acts(model, tok, harmful, layers),
                                              R.last_token_acts(model, tok, harmless, layers), layers).raw.numpy()

    def nn_acts(prompts):
        rows = []
        for ids, mask in _batches(tok, prompts, 16):
            saved = []
            with torch.no_grad(), traced.trace(input_ids=ids, attention_mask=mask,
                                               position_ids=position_ids(mask), use_cache=False):
                for l in range(n):
                    saved.append(traced.model.layers[l].input[:, -1].save())
                last = traced.model.layers[n - 1].output
                saved.append((last[0] if isinstance(last, tuple) else last)[:, -1].save())
            rows.append(torch.stack([getattr(s, "value", s).double() for s in saved], 1))
        return torch.cat(rows)

    def peer():
        return R.RefusalFeature.from_contrast(nn_acts(harmful), nn_acts(harmless), layers).raw.numpy()

    cmp = bench.Comparison("08-direction", "Refusal feature (difference of means) at every layer input",
                           chapter="08-refat", target=1.0, tol=1e-3, repeat=repeat, warmup=1,
                           settings={"model": "SmolLM2-135M-Instruct", "prompts": len(harmful) + len(harmless),
                                     "layers": len(layers), "threads": torch.get_num_threads()})
    cmp.add("ours (pre-hooks, last token, early stop)", ours, role="ours", work=len(harmful) + len(harmless))
    cmp.add("nnsight (trace, save .input)", peer, role="baseline", peer="nnsight",
            work=len(harmful) + len(harmless), what="NNsight(model).trace saving each layer's input")
    return cmp.run()


def bench_rfa(model, tok, rf, harmful, repeat):
    from nnsight import NNsight

    n = len(lm.decoder_layers(model))
    traced = NNsight(model)
    batches = _batches(tok, harmful, 16)
    edit = R.RFAEdit(rf, "mean")

    def run_plain():
        out = []
        for ids, mask in batches:
            with torch.no_grad():
                out.append(model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask),
                                 use_cache=False, logits_to_keep=1).logits[:, -1])
        return torch.cat(out).numpy()

    def ours():
        with R.rfa(model, rf):
            return run_plain()

    def peer():
        out = []
        for ids, mask in batches:
            with torch.no_grad(), traced.trace(input_ids=ids, attention_mask=mask,
                                               position_ids=position_ids(mask), use_cache=False,
                                               logits_to_keep=1):
                for l in rf.layers:
                    if l < n:
                        traced.model.layers[l].input = edit(traced.model.layers[l].input, l)
                if n in rf.layers:
                    o = traced.model.layers[n - 1].output
                    traced.model.layers[n - 1].output = ((edit(o[0], n),) + tuple(o[1:])
                                                         if isinstance(o, tuple) else edit(o, n))
                logits = traced.output.logits[:, -1].save()
            out.append(getattr(logits, "value", logits))
        return torch.cat(out).numpy()

    cmp = bench.Comparison("08-rfa", "Forward pass under RFA (mean, layers 16-30), last-token logits",
                           chapter="08-refat", target=1.0, tol=1e-4, repeat=repeat, warmup=1,
                           settings={"prompts": len(harmful), "rfa_layers": f"{min(rf.layers)}-{max(rf.layers)}",
                                     "threads": torch.get_num_threads()})
    cmp.add("ours (lm.intervene hooks)", ours, role="ours", work=len(harmful))
    cmp.add("nnsight (set .input in a trace)", peer, role="baseline", peer="nnsight", work=len(harmful),
            what="NNsight(model).trace assigning each layer's input")
    return cmp.run()


def bench_overhead(model, tok, train, rf, n_steps):
    """Training steps with and without RFA hooks on the same rows (p = 1 against p = 0)."""
    import time

    n = len(lm.decoder_layers(model))
    start = n - 8
    data = R.prepare(model, tok, train, start)
    R.pipeline.add_adapters(model, R.configs.sft("book"))

    def steps(p):
        t0 = time.perf_counter()
        h = R.train_refusal(model, tok, data, n_steps=n_steps, batch_size=8, lr=1e-4, seed=0, p_rfa=p,
                            recalc_every=10**6, n_dir_samples=8)
        return np.median(h["step_seconds"][1:]), time.perf_counter() - t0

    steps(0.0)                                           # warm-up
    plain, _ = steps(0.0)
    hooked, _ = steps(1.0)
    rec = {"name": "08-hook-overhead", "step_s_plain": plain, "step_s_rfa_hooks": hooked,
           "overhead": hooked / plain - 1, "target": 0.05, "steps": n_steps}
    print(f"08-hook-overhead: plain step {plain:.3f} s, with RFA hooks {hooked:.3f} s: "
          f"overhead {100 * (hooked / plain - 1):.1f}% (target < 5%; includes the direction's first computation: no)")
    lm.lora.remove(model)
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few prompts and steps: agreement only")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = lm.load()
    model.eval()
    train, _ = R.make_dataset(48, 8, seed=0)
    k = 8 if args.quick else 32
    harmful, harmless = train.harmful[:k], train.harmless[:k]
    with torch.no_grad():
        model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=False)
    bench_direction(model, tok, harmful, harmless, repeat=1 if args.quick else 3)
    n = len(lm.decoder_layers(model))
    rf = R.model_feature(model, tok, train, range(16, n + 1), k)
    bench_rfa(model, tok, rf, harmful, repeat=1 if args.quick else 3)
    rec = bench_overhead(model, tok, train, rf, n_steps=3 if args.quick else 12)
    import json

    out = bench.bench_dir() / "refat_hook_overhead.json"
    out.write_text(json.dumps({k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in rec.items()},
                              indent=1))


if __name__ == "__main__":
    main()

"""Chapter 05 benchmark: knowledge-neuron attribution by integrated gradients on SmolLM2, ours
against captum on the same path, through the core harness (:mod:`iclr25.bench`).

``05-kn-ig``: Dai et al.'s per-layer integrated gradients of ``p("Berlin" | "The capital of
Germany is")`` over every MLP hidden unit at the last position (30 layers x 1536 units), m = 20
midpoint steps, baseline 0.

- ours: :func:`iclr25.query_localization.attribute` with ``path="per_layer"``: the prompt's
  first T - 1 tokens are run once and their keys/values cached; every (layer, step) row is then a
  one-token forward on that cache, stacked into batches of 100 rows, one backward per batch;
- captum (baseline): ``captum.attr.IntegratedGradients`` (``method="riemann_middle"``,
  ``n_steps=20``, ``internal_batch_size=20``), looped over the 30 layers, on a forward function
  that writes its input into that layer's last-position units (a hook on ``down_proj``) and runs
  the whole prompt. This is the same path, steps and baseline. captum's
  ``LayerIntegratedGradients`` is not used because it interpolates a layer's input at *every*
  position between the activations of two token inputs, which is not Dai et al.'s path;
- joint (variant, a different estimator): ``path="joint"``, all layers scaled together along one
  path (m = 20): the book profile's estimator; its top-20 KN overlap with the per-layer set is
  printed.

Attributions must agree to 1e-5 (absolute); target >= 5x. The model runs in float64 by default
(``--dtype``): in float32 the two routes differ by ~3e-5 (the one-token pass on cached keys sums in
another order than the whole-prompt pass), above the tolerance; in float64 both are exact to it. One torch thread by default
(``--threads``); run alone, timings beside other jobs are noise. ``--quick`` uses a tiny random
Llama.
"""

from __future__ import annotations

import argparse
import sys

import torch

from iclr25 import bench, lm
from iclr25 import query_localization as ql


def captum_per_layer(model, tok, prompt: str, target: int, n_steps: int) -> torch.Tensor:
    """Dai et al.'s per-layer IG with captum's IntegratedGradients, one layer at a time."""
    from captum.attr import IntegratedGradients

    downs = [b.mlp.down_proj for b in lm.decoder_layers(model)]
    acts = ql.last_position_acts(model, tok, [prompt])[0]
    ids = torch.tensor([tok(prompt)["input_ids"]])
    out = []
    for l, down in enumerate(downs):
        def forward(x, l=l, down=down):
            def pre(mod, args):
                h = args[0].expand(x.shape[0], -1, -1).clone()
                h[:, -1] = x
                return (h,) + tuple(args[1:])
            handle = down.register_forward_pre_hook(pre)
            try:
                logits = model(input_ids=ids.expand(x.shape[0], -1), logits_to_keep=1).logits[:, -1]
            finally:
                handle.remove()
            return torch.softmax(logits.float(), -1)[:, target]
        ig = IntegratedGradients(forward)
        attr = ig.attribute(acts[l][None], baselines=torch.zeros_like(acts[l][None]), n_steps=n_steps,
                            method="riemann_middle", internal_batch_size=n_steps)
        out.append(attr[0].detach())
    return torch.stack(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tiny random Llama instead of SmolLM2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        import captum  # noqa: F401
    except ImportError:
        print("captum is not installed: `pip install captum` (the bench extra) to run this benchmark",
              file=sys.stderr)
        return 2
    if args.quick:
        model, tok = lm.tiny_llama(n_layers=4, d_model=64, d_ff=128), lm.tiny_tokenizer()
        prompt, target = "The capital of France is", 5
    else:
        model, tok = lm.load()
        prompt, target = "The capital of Germany is", ql.answer_token(tok, "Berlin")
    model = model.to(getattr(torch, args.dtype))
    for p in model.parameters():
        p.requires_grad_(False)
    m = args.n_steps
    n_layers = len(lm.decoder_layers(model))

    def ours():
        return ql.attribute(model, tok, [prompt], [target], path="per_layer", n_steps=m, rule="midpoint",
                            batch_size=100, show_progress=False).scores[0]

    def joint():
        return ql.attribute(model, tok, [prompt], [target], path="joint", n_steps=m, rule="midpoint",
                            show_progress=False).scores[0]

    cmp = bench.Comparison(
        "05-kn-ig", "Knowledge-neuron integrated gradients (Dai et al.'s per-layer path), one prompt",
        chapter="05-query-localization", target=5.0, tol=1e-5, repeat=args.repeat, warmup=1,
        settings={"model": "tiny-llama" if args.quick else "smollm2-135m-instruct", "prompt": prompt,
                  "n_tokens": len(tok(prompt)["input_ids"]), "n_layers": n_layers, "n_steps": m,
                  "rule": "midpoint", "baseline": 0, "threads": args.threads, "dtype": args.dtype},
        notes="same path, steps and baseline; the joint row is a different estimator (all layers "
              "scaled together), timed for the book profile")
    cmp.add("ours (per-layer, prefix cache, batched rows)", ours,
            what="one-token rows on the prompt's cached keys/values, 100 (layer, step) rows a batch")
    cmp.add("captum IntegratedGradients x 30 layers", lambda: captum_per_layer(model, tok, prompt, target, m),
            role="baseline", peer="captum", what="riemann_middle, internal_batch_size = m, whole prompt per row")
    cmp.add("ours, joint path (different estimator)", joint, role="variant", agree=False,
            what="all layers' units scaled along one path; one batch of m rows")
    rec = cmp.run(distance=bench.max_abs_diff)
    a, b = ours(), joint()
    top = lambda s: set(torch.topk(s.flatten(), 20).indices.tolist())   # noqa: E731
    print(f"top-20 KN overlap, joint vs per-layer: {len(top(a) & top(b))} of 20")
    return 0 if rec else 1


if __name__ == "__main__":
    sys.exit(main())

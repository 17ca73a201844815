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

``08-hook-overhead``: a training step (forward on cached states through layers 22-29 with LoRA,
response loss, backward; batch 8) with mean-mode RFA on the 4 harmful rows at layers 22-30, the
direction fixed: ours through hooks (as ReFAT trains) against the same edit written into the
layers' forward; loss and gradients agree; the target is a hook overhead below 5% of the step.
A step without RFA is recorded as a variant. Torch runs on one thread. Run alone: timings beside
other jobs are noise. ``--quick``: fewer prompts and repeats, agreement only.
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
        with R.rfa(model, rf, positions="all"):   # the peer edits every position
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


class _EditedLayer(torch.nn.Module):
    """A decoder layer with the RFA edit written into its forward (no hooks): the inline
    reference of ``08-hook-overhead``. ``last``: also edit the layer's output (layer ``n``)."""

    def __init__(self, layer, edit, l, rows, last=None):
        super().__init__()
        self.layer, self.edit, self.l, self.rows, self.last = layer, edit, l, rows, last

    def _ed(self, x, l):
        out = x.clone()
        out[:self.rows] = self.edit(x[:self.rows], l)
        return out

    def forward(self, hidden_states, *args, **kwargs):
        out = self.layer(self._ed(hidden_states, self.l), *args, **kwargs)
        if self.last is None:
            return out
        if isinstance(out, tuple):
            return (self._ed(out[0], self.last),) + tuple(out[1:])
        return self._ed(out, self.last)


def bench_overhead(model, tok, train, repeat):
    """One training step (forward through the adapted layers 22-29 on cached states, response
    loss, backward; batch 8, LoRA rank 8) with RFA on the 4 harmful rows at layers 22-30:
    ours through hooks (:func:`iclr25.refat.rfa`, as ReFAT trains) against the same edit written
    into the layers' forward (no hooks). Loss and gradients must agree; the target is a hook
    overhead below 5% (ratio >= 1/1.05). A plain step without RFA is a variant row (the cost of
    the edit itself)."""
    n = len(lm.decoder_layers(model))
    start = n - 8
    data = R.prepare(model, tok, train, start)
    R.pipeline.add_adapters(model, R.configs.sft("book"))
    params = [p for p in model.parameters() if p.requires_grad]
    rows = list(range(4)) + list(range(len(train.harmful), len(train.harmful) + 4))
    from iclr25.refat.training import _collate, forward_top, response_loss

    I, M, Rm, H = _collate([data.ids[i] for i in rows], [data.resp[i] for i in rows],
                           [data.hidden[i] for i in rows], pad_id(tok))
    rf = R.top_layer_feature(model, data, range(8), range(len(train.harmful), len(train.harmful) + 8),
                             range(start, n + 1))
    edit = R.RFAEdit(rf, "mean")
    inner = model.model

    def step(ctx=None, layers=None):
        for p in params:
            p.grad = None
        full = inner.layers
        try:
            if layers is not None:
                inner.layers = layers
            if ctx is not None:
                with ctx():
                    last = forward_top(model, start, H, M)
            else:
                last = forward_top(model, start, H, M)
        finally:
            inner.layers = full
        loss = response_loss(model, last, I, Rm, M)
        loss.backward()
        return np.concatenate([[float(loss.detach())], params[0].grad.flatten()[:64].numpy()])

    blocks = list(inner.layers)
    wrapped = torch.nn.ModuleList(blocks[:start] + [
        _EditedLayer(b, edit, l, 4, last=n if l == n - 1 else None) for l, b in enumerate(blocks) if l >= start])
    model.train()
    cmp = bench.Comparison("08-hook-overhead", "A training step with RFA on the harmful rows: hooks vs the edit inline",
                           chapter="08-refat", target=1 / 1.05, tol=1e-4, repeat=repeat, warmup=1, unit="step",
                           settings={"batch": 8, "rfa_rows": 4, "lora_layers": f"{start}-{n - 1}",
                                     "rfa_layers": f"{start}-{n}", "threads": torch.get_num_threads()},
                           notes="ratio = inline / hooks (target: hooks add < 5%, ratio >= 0.952); loss and "
                                 "gradients agree; the variant row is a step without RFA")
    cmp.add("ours (RFA through lm.intervene hooks)", lambda: step(ctx=lambda: R.rfa(model, rf, rows=range(4), positions="all")),
            role="ours", work=1)
    cmp.add("edit written into the layers' forward (no hooks)", lambda: step(layers=wrapped), role="baseline",
            work=1, what="decoder layers wrapped so the forward applies the same RFAEdit")
    cmp.add("plain step, no RFA", lambda: step(), role="variant", agree=False, work=1,
            what="the same step without RFA: the cost of the edit itself")
    rec = cmp.run()
    model.eval()
    lm.lora.remove(model)
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few prompts and steps: agreement only")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", choices=("direction", "rfa", "overhead"), action="append",
                    help="run only these comparisons (repeatable; default: all three)")
    args = ap.parse_args(argv)
    only = set(args.only or ("direction", "rfa", "overhead"))
    torch.set_num_threads(args.threads)
    model, tok = lm.load()
    model.eval()
    train, _ = R.make_dataset(48, 8, seed=0)
    k = 8 if args.quick else 32
    harmful, harmless = train.harmful[:k], train.harmless[:k]
    with torch.no_grad():
        model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=False)
    if "direction" in only:
        bench_direction(model, tok, harmful, harmless, repeat=1 if args.quick else 3)
    n = len(lm.decoder_layers(model))
    if "rfa" in only:
        rf = R.model_feature(model, tok, train, range(16, n + 1), k)
        bench_rfa(model, tok, rf, harmful, repeat=1 if args.quick else 3)
    if "overhead" in only:
        bench_overhead(model, tok, train, repeat=3 if args.quick else 15)


if __name__ == "__main__":
    main()

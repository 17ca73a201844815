"""Chapter 13 benchmark: per-layer outlier statistics of SmolLM2, streamed inside hooks, against
the routes a user would take instead, through the core harness (:mod:`iclr25.bench`).

``13-outlier-stats``: top-3 |activation|, median |activation|, and the token and channel of the
maximum, for every decoder layer's output (layers 0-28 of 30: ``hidden_states[-1]`` is after the
final norm, so the official route cannot read layer 29), on 4 sequences of 512 tokens.

- ours: :func:`iclr25.systematic_outliers.activation_stats`: ``topk`` and ``median`` (selection)
  computed in a forward hook, nothing stored but O(k + T + D) numbers per layer;
- official (baseline): ``output_hidden_states=True``, every hidden state copied, each layer's
  flattened tensor sorted with ``torch.sort`` (what the paper's ``analyze.py`` does);
- nnsight (baseline): ``NNsight(model).trace`` saving every layer's output, then the same
  statistics as ours (top-k, median, mean, token maxima, channel sums of squares) on the saved
  tensors (nnsight is the collection route).

Outputs (top-3 values and medians of every layer and sequence) must agree to 1e-4 relative. Time
and the peak resident memory above the starting point are recorded (glibc's mmap threshold is
fixed so that freed activations leave the process; see ``_fixed_mmap_threshold``); the target is
>= 5x faster and >= 10x less extra memory than the official route. Torch runs on one thread by default
(``--threads``). Run alone: timings beside other jobs are noise. ``--quick`` runs tiny sizes.

``13-outlier-reduce``: the reduction alone on hidden states already in memory (``torch.sort``
against ``topk`` + ``median``), to show where the difference lies when the forward pass, which
every route pays, is taken out.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import numpy as np
import torch

from iclr25 import bench, lm, tinygpt
from iclr25 import systematic_outliers as so
from iclr25.systematic_outliers.stats import _Accumulator


def _pack(stats) -> np.ndarray:
    """(layers, n_seq, k + 1): the top-k values and the median, what every route must agree on."""
    return np.stack([np.concatenate([stats["block_out"][l].topk, stats["block_out"][l].median[:, None]], 1)
                     for l in stats.layers])


def _stats_of(hidden: list[torch.Tensor], k: int) -> np.ndarray:
    out = []
    for x in hidden:
        B, T, D = x.shape
        a = x.abs().float().reshape(B, T * D)
        out.append(torch.cat([a.topk(k, dim=1).values, a.median(dim=1).values[:, None]], 1).numpy())
    return np.stack(out)


def rel_close(a, b) -> float:
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-6)))


def bench_stats(model, ids, k: int, repeat: int) -> dict:
    """Every route runs the decoder stack only (``model.model``: no LM head, whose logits would
    cost every route the same time and 400 MB at 4 x 512 tokens), so what differs is how the
    statistics are collected."""
    model = model.model
    n = len(lm.decoder_layers(model))
    layers = list(range(n - 1))
    B, T = ids.shape
    cmp = bench.Comparison(
        "13-outlier-stats", "Per-layer outlier statistics of SmolLM2 (top-3, median, argmax)",
        chapter="13-systematic-outliers", target=5.0, tol=1e-4, repeat=repeat, warmup=1,
        settings={"model": "SmolLM2-135M-Instruct", "n_seq": B, "seq_len": T, "layers": len(layers),
                  "k": k, "threads": torch.get_num_threads(), "forward": "decoder stack, no LM head",
                  "floats_kept_per_layer_ours": B * (3 * k + 2 + T) + model.config.hidden_size,
                  "floats_kept_per_layer_official": B * T * model.config.hidden_size})
    cmp.add("ours (hooks: topk + median)",
            lambda: _pack(so.activation_stats(model, ids, layers=layers, k=k, batch_size=B)),
            role="ours", work=B * T)
    cmp.add("official (hidden states + torch.sort)",
            lambda: _pack(so.activation_stats_reference(model, ids, layers=layers, k=k, batch_size=B)),
            role="baseline", peer="official analyze.py route", work=B * T,
            what="output_hidden_states=True, each layer sorted (an-yongqi/systematic-outliers)")
    if importlib.util.find_spec("nnsight") is None:
        cmp.skip("nnsight", "nnsight is not installed (make bench installs it)", peer="nnsight")
    else:
        from nnsight import NNsight

        traced = NNsight(model)

        def peer():
            saved = []
            with torch.no_grad(), traced.trace(ids):
                for l in layers:
                    saved.append(traced.layers[l].output.save())
            outs = [getattr(s, "value", s) for s in saved]
            acc = []
            for o in outs:                      # the same statistics as ours, on the saved tensors
                a = _Accumulator(k)
                a.add(o[0] if isinstance(o, (tuple, list)) else o)
                acc.append(a.result())
            return np.stack([np.concatenate([r.topk, r.median[:, None]], 1) for r in acc])

        cmp.add("nnsight (save outputs, then the same stats)", peer, role="baseline", peer="nnsight",
                work=B * T, what="NNsight(model).trace saving every layer's output")
    return cmp.run(distance=rel_close)


def _sort_stats(hidden: list[torch.Tensor], k: int) -> np.ndarray:
    out = []
    for x in hidden:
        B, T, D = x.shape
        srt = x.abs().float().reshape(B, T * D).sort(dim=1, descending=True).values
        n = T * D
        out.append(torch.cat([srt[:, :k], srt[:, n - 1 - (n - 1) // 2, None]], 1).numpy())
    return np.stack(out)


def bench_reduce(model, ids, k: int, repeat: int) -> dict:
    """The reduction alone, on hidden states already in memory: sort vs topk + median."""
    with torch.no_grad():
        hs = model.model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states[1:-1]
    B, T = ids.shape
    cmp = bench.Comparison(
        "13-outlier-reduce", "The per-layer reduction alone: torch.sort vs topk + median",
        chapter="13-systematic-outliers", target=5.0, tol=1e-6, repeat=repeat, warmup=1,
        settings={"n_seq": B, "seq_len": T, "layers": len(hs), "k": k,
                  "threads": torch.get_num_threads()})
    cmp.add("ours (topk + median)", lambda: _stats_of(list(hs), k), role="ours", work=B * T)
    cmp.add("official (torch.sort)", lambda: _sort_stats(list(hs), k), role="baseline",
            peer="official analyze.py route", work=B * T, what="sort of each flattened layer")
    return cmp.run(distance=rel_close)


def _fixed_mmap_threshold() -> None:
    """Re-run this script with glibc's mmap threshold fixed at 64 KiB: every activation-sized
    buffer is then mapped and returned to the OS when freed, so each contender's resident-memory
    peak is its own and not the heap a previous contender left behind."""
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") is None and sys.platform.startswith("linux"):
        os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"
        os.execv(sys.executable, [sys.executable] + sys.argv)


def main(argv=None):
    _fixed_mmap_threshold()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check agreement only")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = lm.load()
    n_seq, seq_len = (1, 64) if args.quick else (4, 512)
    arts = [a.text for a in tinygpt.wiki_corpus()]
    # no single summary reaches 512 tokens: each sequence joins consecutive articles
    texts = ["\n\n".join(arts[i:i + 8]) for i in range(0, 8 * n_seq, 8)]
    ids = so.token_batch(tok, texts, seq_len, n_seq)
    with torch.no_grad():   # page the weights in (they are memory-mapped) before anything is measured
        model(input_ids=ids[:1, :8], use_cache=False)
    bench_stats(model, ids, k=3, repeat=1 if args.quick else 3)
    bench_reduce(model, ids, k=3, repeat=1 if args.quick else 5)


if __name__ == "__main__":
    main()

"""Chapter 02 benchmark: the data-value-embedding recursion, ours against dattri's DVEmbAttributor.

(a) Same work: both compute the embeddings of the same recorded per-sample gradients (random,
    float32, batch 32, 2 epochs of 500 steps = 1,000 training steps) at p~ in {256, 1024}. The
    peer is ``dattri.algorithm.dvemb.DVEmbAttributor.cache`` (dattri 0.3.0, factorization "none",
    external gradients). Quality: the relative difference of the embeddings (must be < 1e-5).
    Ours: ``compute_dvemb`` with its default ``method="auto"`` and with each path forced.
(b) The recorder's training-step overhead: TinyGPT (2 layers, d_model 64, seq 64, batch 16)
    trained by SGD with and without ``GradRecorder`` (projection 8x8 per layer). Target < 1.5x.

Run alone (timings beside other jobs are noise): ``python benchmarks/bench_data_value_embedding.py``.
"""

from __future__ import annotations

import time

import torch

import iclr25.data_value_embedding as dv

STEPS, BATCH, EPOCHS = 1000, 32, 2


def records_for(p: int, seed: int = 0) -> dv.Records:
    gen = torch.Generator().manual_seed(seed)
    rec = dv.Records()
    per_epoch = STEPS // EPOCHS
    n_train = per_epoch * BATCH
    for t in range(STEPS):
        e = t // per_epoch
        idx = torch.randperm(n_train, generator=gen)[:BATCH] if e else torch.arange(BATCH) + BATCH * t
        rec.append(torch.randn(BATCH, p, generator=gen) / p ** 0.5, 0.05, idx, epoch=e)
    return rec


def dattri_embeddings(records: dv.Records):
    from dattri.algorithm.dvemb import DVEmbAttributor
    from dattri.task import AttributionTask

    model = torch.nn.Linear(2, 2)

    def loss(params, data):          # unused: the gradients are given to cache()
        x, y = data
        return ((torch.func.functional_call(model, params, (x,)) - y) ** 2).sum()

    task = AttributionTask(loss_func=loss, model=model, checkpoints=model.state_dict())
    att = DVEmbAttributor(task=task)
    grads, lrs, idx = {}, {}, {}
    for g, eta, i, e in zip(records.grads, records.lrs, records.indices, records.epochs):
        grads.setdefault(e, []).append(g)
        lrs.setdefault(e, []).append(eta)
        idx.setdefault(e, []).append(i)
    att.data_indices = idx
    t0 = time.perf_counter()
    att.cache(gradients=grads, learning_rates=lrs)
    return att.embeddings, time.perf_counter() - t0


def max_diff(peer, embs) -> float:
    diff = 0.0
    for e in peer:
        for emb in embs.values():
            ours = emb.by_epoch(e)
            diff = max(diff, float((ours - peer[e][:ours.shape[0]]).norm() / peer[e].norm()))
    return diff


def bench_recursion() -> None:
    print(f"(a) embeddings of {STEPS} training steps x batch {BATCH} ({EPOCHS} epochs), float32, "
          f"{torch.get_num_threads()} thread(s)")
    print("    quality: relative difference of the embeddings, float32 (as timed) and float64 "
          "(same gradients, 200 steps)")
    print(f"{'p~':>6} {'dattri s':>9} {'ours auto s':>12} {'reference s':>12} {'blocked s':>10} "
          f"{'ratio dattri/ours':>18} {'diff f32':>9} {'diff f64':>9}")
    for p in (256, 1024):
        rec = records_for(p)
        dv.compute_dvemb(rec.truncate(4))                               # warm-up
        peer, t_peer = dattri_embeddings(rec)
        times, embs = {}, {}
        for method in dv.METHODS:
            t0 = time.perf_counter()
            embs[method] = dv.compute_dvemb(rec, method=method)
            times[method] = time.perf_counter() - t0
        diff32 = max_diff(peer, embs)
        short = rec.truncate(200)
        short = dv.Records([g.double() for g in short.grads], short.lrs, short.indices, short.epochs)
        peer64, _ = dattri_embeddings(short)
        diff64 = max_diff(peer64, {m: dv.compute_dvemb(short, method=m) for m in dv.METHODS})
        print(f"{p:>6} {t_peer:>9.2f} {times['auto']:>12.2f} {times['reference']:>12.2f} "
              f"{times['blocked']:>10.2f} {t_peer / times['auto']:>17.2f}x {diff32:>9.1e} {diff64:>9.1e}"
              + ("" if diff64 < 1e-5 else "   <-- embeddings differ!"))


def bench_recorder(n_steps: int = 30) -> None:
    from iclr25 import tinygpt

    data = tinygpt.load_text_dataset("byte", max_docs=200, seed=0)
    cfg = tinygpt.TinyGPTConfig(vocab_size=256, d_model=64, n_layers=2, n_heads=4, d_ff=256, max_len=64)
    times = {}
    for mode in ("plain", "recorder", "plain"):
        torch.manual_seed(0)
        model = tinygpt.TinyGPT(cfg)
        rec = dv.GradRecorder(model, proj_dim=64) if mode == "recorder" else None
        t0 = time.perf_counter()
        dv.train_tinygpt_sgd(model, data.train, data.val, n_steps=n_steps, batch_size=16,
                             seq_len=64, lr=0.1, warmup=5, recorder=rec)
        times[mode] = min(times.get(mode, float("inf")), time.perf_counter() - t0)
    ratio = times["recorder"] / times["plain"]
    print(f"(b) TinyGPT SGD step: plain {1e3 * times['plain'] / n_steps:.1f} ms, with recorder "
          f"{1e3 * times['recorder'] / n_steps:.1f} ms: overhead {ratio:.2f}x (target < 1.5x)")


if __name__ == "__main__":
    import os

    os.environ.setdefault("ICLR25_PROGRESS", "0")
    bench_recursion()
    bench_recorder()

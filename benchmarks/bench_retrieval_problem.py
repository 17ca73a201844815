"""Chapter 11 benchmark: training throughput of tiny transformers with attention capture.

Ours: the core's ``TinyGPT`` (fused QKV; ``forward(idx, return_attn=True)`` returns every layer's
attention probabilities). Peer (the baseline): TransformerLens's ``HookedTransformer`` built from
the same configuration (layers, width, heads, MLP width, context, vocabulary, exact GELU,
LayerNorm eps 1e-5, learned positions), trained with ``run_with_cache`` keeping the attention
patterns -- what a user who wants attention maps over training would reach for. Same data (the
same batches in the same order), same steps, same optimiser (AdamW, lr 3e-3, default weight
decay, fused for both: at this size the per-parameter loop of the default implementation is a
tenth of a step), the same torch threads; one step (forward with capture, loss, backward, AdamW)
is timed through ``iclr25.bench`` (one warm-up step, then the median and min over the others),
tokens/s of both and their ratio are printed. Target: >= 2x.

The task is the retrieval problem of chapter 11 written as plain tokens (each fact ``a -> b`` as
two tokens, then the query symbol and a depth marker; the answer is predicted at the last
position), with D = 1 (one induction-style lookup, which a 2-layer model can learn).

Same initial weights: the HookedTransformer is loaded with TinyGPT's initial weights (normal,
std ``0.8/sqrt(d_model)``, HookedTransformer's default scheme; ``--gpt2-init``: TinyGPT's GPT-2
initialisation), Q/K/V split per head, and its unembedding bias ``b_U`` (TinyGPT's head has none)
is held at zero, outside the optimiser. The two models then compute the same function with the
same parameters and take the same AdamW steps, so the training is the same up to float32 rounding.
Agreement (asserted): the training losses of the first ``COMPARED`` = 100 steps must agree to
1e-4 (absolute, losses of ~2-3; the forward passes differ by ~1e-6 in float32 rounding, and the
losses of the first 100 steps by ~1e-6, measured). Later losses are not compared: the task is learned abruptly
(an induction-head phase change) and rounding can move that step. The final loss and accuracy
of both are printed as metrics, not asserted.

Fairness change: the two used to start from two independent draws of the same initialisation
scheme (the peer with a trainable ``b_U``), so their losses could not be compared; they now
start from the same weights with the same trainable parameters.

Also timed (``11-sampler``): the vectorised sampler against the per-example loop; both take the
same random draws, so the batches must be identical (tolerance 0).

Run: ``python benchmarks/bench_retrieval_problem.py [--steps N] [--layers t] [--quick]``.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from iclr25 import bench
from iclr25.retrieval_problem import RetrievalTask
from iclr25.tinygpt import TinyGPT, TinyGPTConfig

COMPARED = 100      # training losses compared step by step
TOL_LOSS = 1e-4
TARGET = 2.0


def flat_tokens(task: RetrievalTask, batch):
    """(B, 2K+2) token ids: a, b per fact, then q and the depth marker."""
    X = batch.X
    facts = X[:, :-1, :2].reshape(len(X), -1)
    return np.concatenate([facts, X[:, -1, :2]], axis=1)


def make_data(task, n_steps, batch_size, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_steps):
        b = task.sample(batch_size, rng, depth=1)
        out.append((torch.from_numpy(flat_tokens(task, b)), torch.from_numpy(b.y)))
    return out


def adamw(params, lr):
    """The one optimiser both get."""
    return torch.optim.AdamW(params, lr=lr, fused=True)


def hooked_from_tinygpt(model: TinyGPT):
    """A HookedTransformer with the configuration and the weights of ``model``."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = model.cfg
    D, H = cfg.d_model, cfg.n_heads
    dh = D // H
    tl_cfg = HookedTransformerConfig(
        n_layers=cfg.n_layers, d_model=D, n_heads=H, d_head=dh, d_mlp=cfg.d_ff, n_ctx=cfg.max_len,
        d_vocab=cfg.vocab_size, act_fn="gelu", normalization_type="LN",
        positional_embedding_type="standard", attn_only=False, seed=0, device="cpu")
    tl = HookedTransformer(tl_cfg)
    with torch.no_grad():
        tl.embed.W_E.copy_(model.tok_emb.weight)
        tl.pos_embed.W_pos.copy_(model.pos_emb.weight)
        for ours, theirs in zip(model.blocks, tl.blocks):
            for ln_o, ln_t in ((ours.ln1, theirs.ln1), (ours.ln2, theirs.ln2)):
                ln_t.w.copy_(ln_o.weight)
                ln_t.b.copy_(ln_o.bias)
            Wqkv, bqkv = ours.attn.qkv.weight, ours.attn.qkv.bias       # (3D, D), (3D,)
            for i, (W, b) in enumerate(((theirs.attn.W_Q, theirs.attn.b_Q),
                                        (theirs.attn.W_K, theirs.attn.b_K),
                                        (theirs.attn.W_V, theirs.attn.b_V))):
                W.copy_(Wqkv[i * D:(i + 1) * D].view(H, dh, D).transpose(1, 2))
                b.copy_(bqkv[i * D:(i + 1) * D].view(H, dh))
            theirs.attn.W_O.copy_(ours.attn.proj.weight.T.reshape(H, dh, D))
            theirs.attn.b_O.copy_(ours.attn.proj.bias)
            theirs.mlp.W_in.copy_(ours.mlp[0].weight.T)
            theirs.mlp.b_in.copy_(ours.mlp[0].bias)
            theirs.mlp.W_out.copy_(ours.mlp[2].weight.T)
            theirs.mlp.b_out.copy_(ours.mlp[2].bias)
        tl.ln_final.w.copy_(model.ln_f.weight)
        tl.ln_final.b.copy_(model.ln_f.bias)
        tl.unembed.W_U.copy_(model.head.weight.T)
        tl.unembed.b_U.zero_()
    tl.unembed.b_U.requires_grad_(False)       # TinyGPT's head has no bias
    return tl


def cycling(data):
    it = [0]

    def nxt():
        x = data[it[0] % len(data)]
        it[0] += 1
        return x
    return nxt


def ours_step(model, data, lr, state):
    opt = adamw(model.parameters(), lr)
    nxt = cycling(data)

    def step():
        x, y = nxt()
        logits, state["maps"] = model(x, return_attn=True)
        loss = F.cross_entropy(logits[:, -1], y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        state["losses"].append(float(loss.detach()))
    return step


def tl_step(model, data, lr, state):
    opt = adamw([p for p in model.parameters() if p.requires_grad], lr)
    keep = lambda name: name.endswith("hook_pattern")  # noqa: E731  attention probabilities
    nxt = cycling(data)

    def step():
        x, y = nxt()
        logits, state["maps"] = model.run_with_cache(x, names_filter=keep)
        loss = F.cross_entropy(logits[:, -1], y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        state["losses"].append(float(loss.detach()))
    return step


@torch.no_grad()
def quality(forward, task, n=1024):
    b = task.sample(n, 12345, depth=1)
    x = torch.from_numpy(flat_tokens(task, b))
    logits = forward(x)[:, -1]
    y = torch.from_numpy(b.y)
    return float(F.cross_entropy(logits, y)), float((logits[:, :task.n_symbols].argmax(-1) == y).float().mean())


def bench_sampler(repeat):
    big = RetrievalTask(n_symbols=24, n_chains=3, max_depth=4)
    cmp = bench.Comparison(
        "11-sampler", "retrieval-task sampler, 4096 examples (D <= 4, 24 symbols, 3 chains)",
        chapter="11-retrieval-problem", tol=0.0, repeat=repeat, warmup=1,
        settings={"examples": 4096, "n_symbols": 24, "n_chains": 3, "max_depth": 4, "seed": 0},
        notes="same random draws: the batches must be identical")
    cmp.add("ours (vectorised numpy)", lambda: big.sample(4096, 0))
    cmp.add("per-example loop", lambda: big.sample(4096, 0, sampler="loop"), role="baseline",
            what="the same draws assembled one example at a time (sampler='loop')")
    cmp.run(distance=bench.max_abs_diff)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--gpt2-init", action="store_true",
                    help="TinyGPT's default GPT-2 initialisation instead of TransformerLens's")
    ap.add_argument("--quick", action="store_true", help="20 training steps, 2 sampler repeats")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps = 20
    if args.steps < 2:
        ap.error("--steps must be at least 2 (one warm-up step, then timed steps)")
    bench_sampler(2 if args.quick else 5)

    try:
        import transformer_lens  # noqa: F401
    except ImportError as err:
        raise SystemExit(f"TransformerLens, this benchmark's peer, is not installed ({err}); "
                         "install the bench extra (pip install -c constraints.txt -e '.[bench]')")
    task = RetrievalTask(n_symbols=16, n_chains=3, max_depth=1)
    T = 2 * task.n_pairs + 2
    cfg = TinyGPTConfig(vocab_size=task.vocab_size, d_model=64, n_layers=args.layers, n_heads=2,
                        d_ff=128, max_len=T, tie_weights=False,
                        init_std=None if args.gpt2_init else 0.8 / 64 ** 0.5)
    data = make_data(task, args.steps, args.batch_size)
    torch.manual_seed(0)
    m_ours = TinyGPT(cfg)
    m_tl = hooked_from_tinygpt(m_ours)
    k = min(COMPARED, args.steps)
    s_ours, s_tl = {"losses": []}, {"losses": []}

    def result(model, state):
        return lambda: (torch.tensor(state["losses"][:k]), quality(lambda x: model(x), task))

    def metrics(out):
        return {"final loss": out[1][0], "D=1 accuracy": out[1][1]}

    cmp = bench.Comparison(
        "11-train-attn-capture",
        f"transformer training with attention capture, {args.layers} layers, seq {T}, "
        f"batch {args.batch_size}",
        chapter="11-retrieval-problem", target=TARGET, tol=TOL_LOSS, repeat=args.steps - 1,
        warmup=1, unit="tok",
        settings={"layers": args.layers, "d_model": 64, "heads": 2, "d_ff": 128, "seq": T,
                  "batch": args.batch_size, "steps": args.steps,
                  "optimiser": f"torch.optim.AdamW(lr={args.lr:g}, fused=True) for both",
                  "init": "TinyGPT GPT-2" if args.gpt2_init else "normal 0.8/sqrt(d_model)",
                  "same initial weights": True, "threads": torch.get_num_threads()},
        notes=f"the training losses of the first {k} steps must agree to {TOL_LOSS:g}; final "
              "loss and accuracy are printed, not compared (the phase change moves with rounding)")
    cmp.add("ours (TinyGPT, return_attn=True)", ours_step(m_ours, data, args.lr, s_ours),
            result=result(m_ours, s_ours), metrics=metrics, work=args.batch_size * T,
            what="attention probabilities of every layer returned by forward")
    cmp.add("HookedTransformer run_with_cache", tl_step(m_tl, data, args.lr, s_tl),
            role="baseline", peer="transformer-lens", result=result(m_tl, s_tl), metrics=metrics,
            work=args.batch_size * T, what="names_filter keeps the hook_pattern activations")
    cmp.run(distance=lambda a, b: bench.max_abs_diff(a[0], b[0]))
    n_tl = len([name for name in s_tl["maps"].keys() if name.endswith("hook_pattern")])
    if not len(s_ours["maps"]) == n_tl == args.layers:
        raise AssertionError(f"attention maps captured: ours {len(s_ours['maps'])}, "
                             f"TransformerLens {n_tl}, layers {args.layers}")


if __name__ == "__main__":
    main()

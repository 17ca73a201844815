"""Core benchmark: the LM toolkit (:mod:`iclr25.lm`) on SmolLM2-135M-Instruct, against the
route a user would take instead, through the core harness (:mod:`iclr25.bench`).

1. ``core-lm-generate-b{1,8,32}``: greedy :func:`iclr25.lm.generate_batch` (left padding, KV
   cache) vs one-prompt :func:`iclr25.lm.generate` in a loop and vs ``transformers``' own batched
   ``model.generate`` (left padded); the generated texts must be identical; tok/s.
2. ``core-lm-continuation``: :func:`iclr25.lm.continuation_logprobs` with the few-shot prefix's KV
   cache reused vs ``lm-eval``'s ``HFLM.loglikelihood`` on the same requests (log-likelihoods
   equal to 1e-4; target >= 2x); ours without the prefix cache is a variant row.
3. ``core-lm-intervene``: a forward pass with a steering edit (add ``alpha * d`` to the residual
   stream after layer 15) through :func:`iclr25.lm.intervene` vs ``nnsight``'s ``trace`` with the
   same edit (logits equal to 1e-5; target: no slower than nnsight); the plain forward is a
   variant row (the edit's floor).

Peers come from the ``bench`` extra (``lm-eval`` is installed ``--no-deps``, see the Makefile).
Torch runs on one thread by default (``--threads``). Run alone: timings beside other jobs are
noise. ``--quick`` runs tiny sizes to check that everything agrees.
"""

from __future__ import annotations

import argparse
import importlib.util

import torch

from iclr25 import bench, lm

QUESTIONS = [
    "What is the capital of France?", "Name three primary colours.", "What is two plus two?",
    "Write a haiku about the sea.", "Who wrote Romeo and Juliet?", "What is photosynthesis?",
    "Give me a synonym for happy.", "How many legs does a spider have?",
    "What is the boiling point of water?", "Translate 'thank you' into French.",
    "What is the largest planet in the solar system?", "Explain gravity in one sentence.",
    "What is a prime number?", "Name a famous painter.", "What do bees make?",
    "What is the opposite of cold?",
]

FEW_SHOT = ("Answer each question with one word.\n"
            "Question: What colour is the sky on a clear day?\nAnswer: blue\n"
            "Question: How many days are in a week?\nAnswer: seven\n"
            "Question: What animal says moo?\nAnswer: cow\n"
            "Question: What is frozen water called?\nAnswer: ice\n"
            "Question: Which planet do we live on?\nAnswer: Earth\n"
            "Question: What is the opposite of up?\nAnswer: down\n")
MC = [("What is the capital of France?", [" Paris", " London", " Rome", " Berlin"]),
      ("What colour is grass?", [" green", " red", " blue", " yellow"]),
      ("How many legs does a dog have?", [" four", " two", " six", " eight"]),
      ("What do bees make?", [" honey", " milk", " silk", " wax"]),
      ("What is the largest ocean?", [" Pacific", " Atlantic", " Indian", " Arctic"]),
      ("What is two plus three?", [" five", " four", " six", " seven"]),
      ("Which animal barks?", [" dog", " cat", " cow", " bird"]),
      ("What is the sun?", [" star", " planet", " moon", " comet"])]


def prompts_for(n: int) -> list[str]:
    return [QUESTIONS[i % len(QUESTIONS)] + ("" if i < len(QUESTIONS) else f" ({i})")
            for i in range(n)]


def text_mismatch(a, b) -> float:
    """The fraction of prompts whose generated texts differ (0 when all are equal)."""
    return sum(x != y for x, y in zip(a, b)) / max(1, len(a)) if len(a) == len(b) else 1.0


def bench_generate(model, tok, sizes, max_new_tokens, repeat):
    for B in sizes:
        prompts = prompts_for(B)
        first = lm.generate_batch(model, tok, prompts, max_new_tokens=max_new_tokens,
                                  batch_size=B)
        n_tok = sum(len(t) for t in first.token_ids)

        def hf_batched():
            texts = [lm.chat_text(tok, p) for p in prompts]
            old = tok.padding_side
            tok.padding_side = "left"
            try:
                enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            finally:
                tok.padding_side = old
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                     pad_token_id=tok.pad_token_id or tok.eos_token_id)
            return [tok.decode(o[enc["input_ids"].shape[1]:], skip_special_tokens=True)
                    for o in out]

        cmp = bench.Comparison(
            f"core-lm-generate-b{B}", f"greedy generation of {B} prompts, generate_batch vs "
            "one prompt at a time", chapter="core", target=2.0 if B > 1 else None, tol=0,
            settings={"model": "smollm2-135m-instruct", "batch": B,
                      "max_new_tokens": max_new_tokens, "threads": torch.get_num_threads(),
                      "chat": True},
            repeat=repeat, warmup=1, unit="tok",
            notes="distance: the fraction of prompts whose texts differ (must be 0)")
        cmp.add("ours", lambda: lm.generate_batch(model, tok, prompts,
                                                  max_new_tokens=max_new_tokens,
                                                  batch_size=B).texts, work=n_tok,
                what="iclr25.lm.generate_batch: left padding, KV cache, one batch")
        cmp.add("one-prompt generate", lambda: [lm.generate(model, tok, p,
                                                            max_new_tokens=max_new_tokens)
                                                for p in prompts],
                role="baseline", work=n_tok, what="iclr25.lm.generate in a loop")
        if B > 1:
            cmp.add("transformers generate", hf_batched, role="baseline", peer="transformers",
                    work=n_tok, what="model.generate on the left-padded batch")
        cmp.run(distance=text_mismatch)


def bench_continuation(model, tok, n_questions, batch_size, repeat):
    contexts, conts = [], []
    for q, choices in MC[:n_questions]:
        for c in choices:
            contexts.append(f"Question: {q}\nAnswer:")
            conts.append(c)
    full = [FEW_SHOT + c for c in contexts]
    cmp = bench.Comparison(
        "core-lm-continuation", f"log-likelihood of {len(conts)} multiple-choice continuations "
        "after a shared few-shot prompt", chapter="core", target=2.0, tol=1e-4,
        settings={"model": "smollm2-135m-instruct", "requests": len(conts),
                  "prefix_tokens": len(tok(FEW_SHOT).input_ids), "batch_size": batch_size,
                  "threads": torch.get_num_threads()},
        repeat=repeat, warmup=1, unit="req")
    cmp.add("ours", lambda: lm.continuation_logprobs(model, tok, contexts, conts,
                                                     shared_prefix=FEW_SHOT,
                                                     batch_size=batch_size).logprob,
            work=len(conts), what="continuation_logprobs, the few-shot prefix's KV cache reused")
    cmp.add("ours, no prefix cache", lambda: lm.continuation_logprobs(
        model, tok, full, conts, batch_size=batch_size).logprob, role="variant",
        work=len(conts), what="continuation_logprobs on the full texts")
    if importlib.util.find_spec("lm_eval") is None:
        cmp.skip("lm-eval HFLM", "lm-eval is not installed (make bench installs it)",
                 peer="lm-eval")
        cmp.add("ours, unbatched", lambda: lm.continuation_logprobs(
            model, tok, full, conts, batch_size=1).logprob, role="baseline",
            work=len(conts), what="one request per forward")
    else:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM

        hflm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size)
        reqs = [Instance(request_type="loglikelihood", doc={}, arguments=(c, x), idx=i)
                for i, (c, x) in enumerate(zip(full, conts))]

        def peer():
            return torch.tensor([lp for lp, _ in hflm.loglikelihood(reqs, disable_tqdm=True)],
                                dtype=torch.float64)

        cmp.add("lm-eval HFLM", peer, role="baseline", peer="lm-eval", work=len(conts),
                what="HFLM.loglikelihood on the same (context, continuation) requests")
    cmp.run(distance=bench.max_abs_diff)


def bench_intervene(model, tok, batch, seq, repeat):
    ids = torch.randint(100, 40000, (batch, seq), generator=torch.Generator().manual_seed(0))
    d = torch.randn(576, generator=torch.Generator().manual_seed(1))
    alpha, layer = 4.0, 15

    def ours():
        with torch.no_grad(), lm.intervene(model, "resid_post", lm.add(d, alpha), layers=layer):
            return model(ids).logits

    def plain():
        with torch.no_grad():
            return model(ids).logits

    cmp = bench.Comparison(
        "core-lm-intervene", f"a forward of {batch} x {seq} tokens with a steering edit at layer "
        f"{layer}", chapter="core", target=1.0, tol=1e-4,
        settings={"model": "smollm2-135m-instruct", "batch": batch, "seq": seq, "layer": layer,
                  "edit": "resid_post += 4 d", "threads": torch.get_num_threads()},
        repeat=repeat, warmup=1, unit="tok")
    cmp.add("ours", ours, work=batch * seq, what="iclr25.lm.intervene + lm.add (a forward hook)")
    cmp.add("plain forward", plain, role="variant", agree=False, work=batch * seq,
            what="no edit: the floor")
    if importlib.util.find_spec("nnsight") is None:
        cmp.skip("nnsight", "nnsight is not installed (make bench installs it)", peer="nnsight")
        cmp.add("hand-written hook", lambda: _hand_hook(model, ids, layer, alpha * d),
                role="baseline", work=batch * seq)
    else:
        from nnsight import NNsight

        traced = NNsight(model)

        def peer():
            with torch.no_grad(), traced.trace(ids):
                out = traced.model.layers[layer].output
                traced.model.layers[layer].output = out + alpha * d
                logits = traced.output.logits.save()
            return logits

        cmp.add("nnsight", peer, role="baseline", peer="nnsight", work=batch * seq,
                what="NNsight(model).trace with the same edit")
    cmp.run(distance=bench.max_abs_diff)


def _hand_hook(model, ids, layer, delta):
    h = model.model.layers[layer].register_forward_hook(lambda m, a, o: o + delta)
    try:
        with torch.no_grad():
            return model(ids).logits
    finally:
        h.remove()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check agreement only")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", choices=["generate", "continuation", "intervene"], default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = lm.load()
    q = args.quick
    if args.only in (None, "generate"):
        bench_generate(model, tok, (1, 2) if q else (1, 8, 32), 4 if q else 32, 1 if q else 3)
    if args.only in (None, "continuation"):
        bench_continuation(model, tok, 2 if q else len(MC), 8 if q else 16, 1 if q else 3)
    if args.only in (None, "intervene"):
        bench_intervene(model, tok, 2 if q else 16, 8 if q else 32, 1 if q else 5)


if __name__ == "__main__":
    main()

"""Chapter 03 benchmark: reading a subject's two-option decisions, through the core harness.

The workload is notebook 01's: herd (N = 1, 7, 49), authority and no-cue trials on our unknown
questions, with SmolLM2-135M-Instruct as the subject.

1. ``cogmir-option-scoring``: our :class:`iclr25.cogmir.OptionScorer` (the two options' first
   tokens after the prefilled "Answer:", one forward per trial, the shared chat prefix's KV cache
   reused, through :func:`iclr25.lm.continuation_logprobs`) vs ``lm-eval``'s
   ``HFLM.loglikelihood`` on the same (context, continuation) requests (two per trial);
   log-likelihoods equal to 1e-4; target >= 2x. Ours without the prefix cache is a variant.
2. In the same comparison, a variant row: one greedy chat reply per trial (12 new tokens, the
   chat template, no prefill) parsed with ``parse_choice``, the way a chat-agent harness reads a
   reply. It is a variant, not a baseline: SmolLM2's greedy reply often names neither option
   (even after a prefilled "Answer:" it writes "[response to the user's question]"), so its
   decisions are not the scored ones; the row records the share of replies that name an option
   and the agreement with ours on those.

Torch runs on one thread (``--threads``). Run alone: timings beside other jobs are noise.
``--quick`` runs tiny sizes to check that everything agrees.
"""

from __future__ import annotations

import argparse
import importlib.util

import numpy as np
import torch

import iclr25.cogmir as cm
from iclr25 import bench, lm
from iclr25.cogmir.discriminators import chat_context


def workload(n_questions: int):
    qs = cm.unknown_bank(n_questions, seed=0)
    return (cm.control_trials(qs) + cm.herd_trials(qs, 1) + cm.herd_trials(qs, 49)
            + cm.authority_trials(qs))


def bench_lm_eval(model, tok, trials, batch_size, repeat, with_generate=True):
    scorer = cm.OptionScorer(model, tok, batch_size=batch_size)
    plain = cm.OptionScorer(model, tok, batch_size=batch_size, reuse_prefix=False)
    contexts, conts = scorer.requests(trials)
    n = len(trials)
    cmp = bench.Comparison(
        "cogmir-option-scoring", f"two-option decisions of {n} CogMir trials (SmolLM2-135M): "
        "option log-likelihoods", chapter="03-cogmir", target=2.0, tol=1e-4,
        settings={"model": "smollm2-135m-instruct", "trials": n, "requests": len(conts),
                  "batch_size": batch_size, "threads": torch.get_num_threads(),
                  "mean_context_tokens": float(np.mean([len(tok(c).input_ids)
                                                        for c in contexts[::2]]))},
        repeat=repeat, warmup=1, unit="trial")
    cmp.add("ours", lambda: scorer.score(trials).reshape(-1), work=n,
            what="OptionScorer: one forward per trial, the shared chat prefix cached once")
    cmp.add("ours, no prefix cache", lambda: plain.score(trials).reshape(-1), role="variant",
            work=n, what="the same without the prefix cache")
    if with_generate:
        generate_variant(cmp, model, tok, trials, scorer.score(trials).argmax(1))
    if importlib.util.find_spec("lm_eval") is None:
        cmp.skip("lm-eval HFLM", "lm-eval is not installed (make bench installs it)",
                 peer="lm-eval")
        cmp.add("one request per forward", lambda: np.array(lm.continuation_logprobs(
            model, tok, contexts, conts, batch_size=1).logprob), role="baseline", work=n,
            what="continuation_logprobs with batch_size=1")
    else:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM

        hflm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size)
        reqs = [Instance(request_type="loglikelihood", doc={}, arguments=(c, x), idx=i)
                for i, (c, x) in enumerate(zip(contexts, conts))]

        def peer():
            return np.array([lp for lp, _ in hflm.loglikelihood(reqs, disable_tqdm=True)])

        cmp.add("lm-eval HFLM", peer, role="baseline", peer="lm-eval", work=n,
                what="HFLM.loglikelihood on the same (context, continuation) requests")
    cmp.run(distance=bench.max_abs_diff)


def generate_variant(cmp, model, tok, trials, ours_choice, max_new_tokens=12):
    """One greedy chat reply per trial (no prefill, as a chat-agent harness runs it), then
    parse_choice: a variant row, since its decisions are not the scored ones (SmolLM2's greedy
    reply often names neither option)."""
    n = len(trials)

    def generate_and_parse():
        return np.array([cm.parse_choice(lm.generate(model, tok, t.messages,
                                                      max_new_tokens=max_new_tokens),
                                          t.options) for t in trials])

    def metrics(out):
        named = out >= 0
        return {"named_an_option": float(named.mean()),
                "agree_where_named": (float(np.mean(out[named] == ours_choice[named]))
                                      if named.any() else None)}

    cmp.add("generate + parse", generate_and_parse, role="variant", agree=False, work=n,
            repeat=1, metrics=metrics,
            what=f"iclr25.lm.generate ({max_new_tokens} greedy tokens, chat template) per "
                 "trial, then parse_choice; the decision only when the reply names an option")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check agreement only")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--questions", type=int, default=16, help="unknown questions (8 trials each)")
    ap.add_argument("--no-generate", action="store_true", help="skip the generate+parse row")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = lm.load()
    trials = workload(2 if args.quick else args.questions)
    repeat = 1 if args.quick else 3
    bench_lm_eval(model, tok, trials, 16, repeat, with_generate=not args.no_generate)


if __name__ == "__main__":
    main()

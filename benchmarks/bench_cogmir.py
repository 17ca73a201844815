"""Chapter 03 benchmark: reading a subject's two-option decisions, through the core harness.

The workload is notebook 01's: herd (N = 1, 7, 49), authority and no-cue trials on our unknown
questions, with SmolLM2-135M-Instruct as the subject.

1. ``cogmir-option-scoring``: our :class:`iclr25.cogmir.OptionScorer` (the two options' first
   tokens after the prefilled "Answer:", one forward per trial, the shared chat prefix's KV cache
   reused, through :func:`iclr25.lm.continuation_logprobs`) vs ``lm-eval``'s
   ``HFLM.loglikelihood`` on the same (context, continuation) requests (two per trial);
   log-likelihoods equal to 1e-4; target >= 2x. Ours without the prefix cache is a variant.
2. ``cogmir-vs-generate``: the same decisions vs one greedy ``generate`` per trial (8 new tokens
   after "Answer:") and parsing the option from the text, the way a chat-agent harness reads a
   reply; the decisions must agree on every trial whose generation names one of the options
   (distance: the share of trials that disagree, tolerance 0.05); target >= 5x.

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


def bench_lm_eval(model, tok, trials, batch_size, repeat):
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


def bench_generate(model, tok, trials, batch_size, repeat, max_new_tokens=8):
    agent = cm.ScoringAgent(model, tok, batch_size=batch_size)
    n = len(trials)

    def generate_and_parse():
        out = []
        for t in trials:
            text = lm.generate(model, tok, chat_context(tok, t.messages, t.prefill),
                               chat=False, max_new_tokens=max_new_tokens)
            out.append(cm.parse_choice("Answer:" + text, t.options))
        return np.array(out)

    def disagreement(ours, other):
        ours, other = np.asarray(ours), np.asarray(other)
        return float(np.mean(ours != other)) if len(ours) == len(other) else 1.0

    cmp = bench.Comparison(
        "cogmir-vs-generate", f"two-option decisions of {n} CogMir trials (SmolLM2-135M): "
        "scoring vs generate-and-parse", chapter="03-cogmir", target=5.0, tol=0.05,
        settings={"model": "smollm2-135m-instruct", "trials": n, "batch_size": batch_size,
                  "max_new_tokens": max_new_tokens, "threads": torch.get_num_threads()},
        repeat=repeat, warmup=1, unit="trial",
        notes="distance: the share of trials whose decisions differ (a generation that names "
              "neither option counts as a disagreement)")
    cmp.add("ours", lambda: agent.choose(trials).choice, work=n,
            what="ScoringAgent.choose: the likelier first option token, one forward per trial")
    cmp.add("generate + parse", generate_and_parse, role="baseline", work=n,
            repeat=1 if repeat > 1 else repeat,
            what=f"iclr25.lm.generate ({max_new_tokens} greedy tokens) per trial, parse_choice")
    cmp.run(distance=disagreement)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check agreement only")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--questions", type=int, default=16, help="unknown questions (8 trials each)")
    ap.add_argument("--only", choices=["lm-eval", "generate"], default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = lm.load()
    trials = workload(2 if args.quick else args.questions)
    repeat = 1 if args.quick else 3
    if args.only in (None, "lm-eval"):
        bench_lm_eval(model, tok, trials, 16, repeat)
    if args.only in (None, "generate"):
        bench_generate(model, tok, trials, 16, repeat)


if __name__ == "__main__":
    main()

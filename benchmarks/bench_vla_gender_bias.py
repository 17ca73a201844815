"""Chapter 19 benchmark: option-letter scoring of the bias protocol's prompts on SmolLM2-135M,
through the core harness (:mod:`iclr25.bench`).

``19-letter-scoring``: the letter log-probabilities (A, B) after each protocol prompt (chat
template, text-proxy persons, every option order).

- ours: :func:`iclr25.vla_gender_bias.score_letters` (``method="batched"``): left-padded
  batches, one forward each, only the last position through the LM head;
- official route (baseline): one ``model.generate(max_new_tokens=1, output_scores=True)`` per
  prompt, reading the first step's scores, as the paper's evaluation does; target >= 10x;
- lm-eval (baseline): ``HFLM.loglikelihood`` on (prompt, letter) requests, two per prompt.

Outputs must agree to 1e-4: the letters' log-probabilities renormalised over the two letters,
which is what the protocol uses. (lm-eval moves the context's trailing newline into the
continuation, so it scores "\nA" and "\nB": its raw numbers carry log p("\n") of the chat
template, about -0.003, the same for both letters; renormalising removes it.) Torch runs on one thread by default
(``--threads``). Run alone: timings beside other jobs are noise. ``--quick`` runs a few prompts.
"""

from __future__ import annotations

import argparse
import importlib.util

import numpy as np
import torch

from iclr25 import bench, lm
from iclr25 import vla_gender_bias as vgb
from iclr25.vla_gender_bias.configs import TextProxyConfig


def renorm(lp: np.ndarray) -> np.ndarray:
    """Log-probabilities renormalised over the letters (rows)."""
    m = lp.max(1, keepdims=True)
    return lp - (m + np.log(np.exp(lp - m).sum(1, keepdims=True)))


def workload(tok, n_occupations: int):
    cfg = TextProxyConfig(seeds=(0,), n_traits=0, n_skills=0, n_occupations=n_occupations)
    prompts = vgb.textproxy.proxy_prompts(cfg, 0)
    return vgb.scoring.chat_prompts(tok, prompts["body"].tolist())


def bench_scoring(model, tok, texts, batch_size: int, repeat: int) -> dict:
    n = len(texts)
    cmp = bench.Comparison(
        "19-letter-scoring", f"option-letter log-probabilities of {n} bias-protocol prompts (SmolLM2-135M)",
        chapter="19-vla-gender-bias", target=10.0, tol=1e-4, repeat=repeat, warmup=1, unit="prompt",
        settings={"model": "smollm2-135m-instruct", "prompts": n, "batch_size": batch_size,
                  "threads": torch.get_num_threads(),
                  "mean_prompt_tokens": float(np.mean([len(tok(t).input_ids) for t in texts]))})
    cmp.add("ours (batched, last position only)",
            lambda: renorm(vgb.score_letters(model, tok, texts, 2, batch_size=batch_size)), work=n,
            what="score_letters(method='batched')")
    cmp.add("official route (generate, 1 new token, per prompt)",
            lambda: renorm(vgb.score_letters(model, tok, texts, 2, method="generate")), role="baseline",
            peer="transformers generate", work=n,
            what="model.generate(max_new_tokens=1, output_scores=True) per prompt, as the paper's evaluation")
    if importlib.util.find_spec("lm_eval") is None:
        cmp.skip("lm-eval HFLM", "lm-eval is not installed (make bench installs it)", peer="lm-eval")
    else:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM

        hflm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size)
        reqs = [Instance(request_type="loglikelihood", doc={}, arguments=(t, L), idx=2 * i + k)
                for i, t in enumerate(texts) for k, L in enumerate("AB")]

        def peer():
            out = hflm.loglikelihood(reqs, disable_tqdm=True)
            return renorm(np.array([lp for lp, _ in out]).reshape(n, 2))

        cmp.add("lm-eval HFLM.loglikelihood", peer, role="baseline", peer="lm-eval", work=n,
                what="HFLM.loglikelihood on (prompt, letter) requests, two per prompt")
    return cmp.run(distance=bench.max_abs_diff)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few prompts: check agreement only")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = lm.load()
    texts = workload(tok, 4 if args.quick else 16)
    bench_scoring(model, tok, texts, args.batch_size, repeat=1 if args.quick else 3)


if __name__ == "__main__":
    main()

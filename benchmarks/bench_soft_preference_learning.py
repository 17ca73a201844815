"""Chapter 17 benchmark: our preference trainer (:func:`iclr25.soft_preference_learning.lm.train_preference`)
against TRL's ``DPOTrainer`` on SmolLM2-135M-Instruct, through the core harness (:mod:`iclr25.bench`).

The same work for both: 4 preference pairs of ~128 tokens (prompt masked), sigmoid DPO
(``alpha = beta = 0.1``; at ``alpha = beta`` SPL *is* DPO, TRL has no SPL loss), reference
log-probabilities precomputed once per run (TRL: ``precompute_ref_log_probs=True``), the same
LoRA (rank 8, scale 2, every linear layer of the top 4 decoder layers; peft's adapters start from
our adapters' weights), AdamW with a constant learning rate, gradient clipping at 1, the whole
data set as one batch each step. One timed call is a whole run: reference log-probabilities plus
``--steps`` optimiser steps (TRL: building the trainer, which precomputes, plus ``train()``).
The per-step losses must agree (absolute tolerance 1e-3). Ours without the cache of the frozen
lower layers is a variant row (what the cache buys).

TRL and peft come from the ``bench`` extra. Torch runs on one thread by default (``--threads``).
Run alone: timings beside other jobs are noise. ``--quick`` runs 2 steps once.
"""

from __future__ import annotations

import argparse
import tempfile

import torch

from iclr25 import bench, lm
from iclr25.lm import lora
from iclr25.soft_preference_learning import lm as slm

WORDS = ("the doctor walked into the quiet ward before dawn and read every chart twice while the "
         "nurses prepared the morning rounds and a small radio played old songs in the corner of "
         "the room where a patient waited for news about the results of a long test").split()


def make_pairs(tok, n_pairs: int, seq_len: int):
    """``n_pairs`` (prompt, chosen, rejected) texts of about ``seq_len`` tokens each."""
    prompts, chosen, rejected = [], [], []
    for i in range(n_pairs):
        prompt = f"Story {i}: " + " ".join(WORDS[i:i + 12]) + "\n"
        n_p = len(tok(prompt)["input_ids"])
        body_c, body_r, k = [], [], i
        while len(tok(prompt + " ".join(body_c))["input_ids"]) < seq_len - 1:
            body_c.append(WORDS[k % len(WORDS)])
            body_r.append(WORDS[(3 * k + 7) % len(WORDS)])
            k += 1
        assert n_p < seq_len
        prompts.append(prompt)
        chosen.append(" ".join(body_c))
        rejected.append(" ".join(body_r))
    return prompts, chosen, rejected


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8, help="optimiser steps per run")
    ap.add_argument("--pairs", type=int, default=4, help="preference pairs (= the batch)")
    ap.add_argument("--seq-len", type=int, default=128, help="tokens per prompt + response")
    ap.add_argument("--layers", type=int, default=4, help="LoRA on the top this many layers")
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="2 steps, one timed call each")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.repeat = 2, 1
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tok = lm.load()
    prompts, chosen, rejected = make_pairs(tok, args.pairs, args.seq_len)
    data = slm.make_preference_data(tok, prompts, chosen, rejected, chat=False, add_eos=True)
    n_tok = int(data.attention_mask.sum())
    work = n_tok * args.steps
    n_layers = len(lm.decoder_layers(model))
    layers = list(range(n_layers - args.layers, n_layers))

    def ours(cache=None):
        slm.reference_logprobs(model, data)
        slm.add_top_lora(model, args.layers, 8, seed=0)
        try:
            hist = slm.train_preference(model, data, alpha=args.beta, beta=args.beta,
                                        n_steps=args.steps, batch_size=None, lr=args.lr,
                                        cache_frozen=cache, desc="ours")
        finally:
            lora.remove(model)
        return hist["loss"]

    def trl_run():
        from datasets import Dataset
        from peft import LoraConfig, get_peft_model
        from trl import DPOConfig, DPOTrainer

        slm.add_top_lora(model, args.layers, 8, seed=0)          # our adapters' initial weights
        init = {n: p.detach().clone() for n, p in lora.trainable_parameters(model).items()}
        lora.remove(model)
        for p in model.parameters():
            p.requires_grad_(True)
        cfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=list(slm.ALL_LINEAR),
                         layers_to_transform=layers, bias="none", task_type="CAUSAL_LM")
        peft_model = get_peft_model(model, cfg)
        with torch.no_grad():
            for name, p in peft_model.named_parameters():
                if "lora_" in name:
                    # base_model.model.model.layers.L.mlp.up_proj.lora_A.default.weight -> ours
                    key = name.split("base_model.model.", 1)[1].replace(".default.weight", "")
                    p.copy_(init[key])
        with tempfile.TemporaryDirectory() as out:
            dcfg = DPOConfig(output_dir=out, beta=args.beta, loss_type=["sigmoid"],
                             precompute_ref_log_probs=True, per_device_train_batch_size=args.pairs,
                             precompute_ref_batch_size=args.pairs, max_steps=args.steps,
                             learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0,
                             weight_decay=0.0, max_grad_norm=1.0, logging_steps=1, report_to="none",
                             save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True,
                             dataloader_num_workers=0, bf16=False, fp16=False,
                             gradient_checkpointing=False)
            trainer = DPOTrainer(model=peft_model, args=dcfg, processing_class=tok,
                                 train_dataset=Dataset.from_dict(
                                     {"prompt": prompts, "chosen": chosen, "rejected": rejected}))
            trainer.train()
            losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        peft_model.unload()
        for p in model.parameters():
            p.requires_grad_(False)
        model.eval()
        return losses

    cmp = bench.Comparison(
        "17-spl-dpo-train", f"DPO fine-tuning run ({args.steps} steps, {args.pairs} pairs of "
        f"{args.seq_len} tokens, LoRA on the top {args.layers} layers), ours vs TRL DPOTrainer",
        chapter="17-soft-preference-learning", target=1.0, tol=1e-3, repeat=args.repeat, warmup=1,
        unit="tok",
        settings={"model": "smollm2-135m-instruct", "pairs": args.pairs, "seq_len": args.seq_len,
                  "steps": args.steps, "lora": f"r=8, alpha=16, all linear, top {args.layers} layers",
                  "beta": args.beta, "lr": args.lr, "optimiser": "AdamW, constant lr, clip 1.0",
                  "threads": torch.get_num_threads(), "ref_logps": "precomputed",
                  "trl": "float32 (bf16=False), gradient_checkpointing=False"},
        notes="compared: the per-step DPO losses (absolute tolerance 1e-3); work = tokens of the "
              "pairs x steps")
    cmp.add("ours (train_preference, cached lower layers)", ours, work=work,
            what="iclr25.soft_preference_learning.lm: distinct sequences once, frozen layers cached, "
                 "LM head on response tokens")
    cmp.add("TRL DPOTrainer + peft", trl_run, role="baseline", peer="trl", work=work,
            what="precompute_ref_log_probs=True, loss_type sigmoid, peft LoRA with our initial weights")
    cmp.add("ours without the cache", lambda: ours(cache=False), role="variant", work=work,
            what="every step runs all 30 layers")
    def distance(a, b):
        print(f"losses: {[round(x, 6) for x in a]} vs {[round(x, 6) for x in b]}")
        return max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")

    return cmp.run(distance=distance)


if __name__ == "__main__":
    main()

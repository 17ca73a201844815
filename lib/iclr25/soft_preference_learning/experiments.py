"""The chapter's language-model experiments, one replicate at a time (chapter 17).

Each function runs one seed (or one set of held-out items) of a notebook's experiment and
returns plain measurements; the notebooks hand their replicates to the chapter's registry
(``book/claims/17-soft-preference-learning.yaml``). Imported on demand: it needs
``transformers`` through :mod:`.lm`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from . import evaluation as E
from .bandit import closed_form_policy, sample_comparisons, tv_distance
from . import lm as slm

__all__ = ["answer_distribution", "lm_bandit_seed", "lm_bandit_measurements",
           "story_pairs", "story_metrics", "story_seed",
           "story_measurements", "SequenceScorer", "near_miss_pairs", "train_adapter",
           "best_of_n_run", "best_of_n_measurements"]


def answer_distribution(model, tokenizer, prompt: str, answers: Sequence[str],
                        temperatures: Sequence[float] = (1.0,)) -> tuple[np.ndarray, np.ndarray]:
    """The model's distribution over ``answers`` (renormalised over them) and its *valid mass*
    (the probability that the whole continuation is one of them), at each token-level
    temperature: ``(len(temperatures), K)`` and ``(len(temperatures),)`` (chapter 17)."""
    lp = slm.response_logprobs(model, tokenizer, prompt, list(answers), temperatures=temperatures,
                               chat=False, add_eos=False).numpy()
    probs = np.exp(lp)
    valid = probs.sum(1)
    return probs / valid[:, None], valid


def lm_bandit_seed(model, tokenizer, cfg, seed: int, *, prompt: str, answers: Sequence[str], p,
                   ref_k) -> dict:
    """One replicate of ``02-lm-bandit`` (chapter 17): ``cfg.n_pairs`` Bradley-Terry pairs drawn
    with ``seed``, then DPO (``alpha = beta``) and SPL at each ``cfg.alphas``, each a fresh LoRA
    adapter (initialised with ``seed``) trained for ``cfg.n_steps``. Returns, per method,
    ``alpha``, the learned distribution ``pi`` over the answers, its ``valid`` mass, its
    ``closed_form`` and the training history; and ``dpo_T`` = (distributions, valid masses) of
    the DPO model at every ``cfg.temperatures``."""
    from ..lm import lora

    p = np.asarray(p, dtype=np.float64)
    C = sample_comparisons(p, cfg.n_pairs, seed=seed)
    w, l, c = C.pairs()
    W, L = np.repeat(w, c), np.repeat(l, c)
    data = slm.make_preference_data(tokenizer, [prompt] * len(W), [answers[i] for i in W],
                                    [answers[i] for i in L], chat=False, add_eos=False)
    slm.reference_logprobs(model, data)
    methods = [("DPO", cfg.beta)] + [(f"SPL alpha={a:g}", a) for a in cfg.alphas if a != cfg.beta]
    out: dict = {"seed": seed, "methods": {}, "dpo_T": None}
    for name, alpha in methods:
        torch.manual_seed(seed)
        slm.add_top_lora(model, cfg.lora_layers, cfg.lora_r, seed=seed)
        try:
            hist = slm.train_preference(model, data, alpha=alpha, beta=cfg.beta,
                                        n_steps=cfg.n_steps, batch_size=cfg.batch_size or None,
                                        lr=cfg.lr, seed=seed, desc=f"{name}, seed {seed}")
            temps = tuple(cfg.temperatures) if name == "DPO" else (1.0,)
            dist, valid = answer_distribution(model, tokenizer, prompt, answers, temps)
        finally:
            lora.remove(model)
        if name == "DPO":
            i1 = temps.index(1.0)
            out["dpo_T"] = (dist, valid)
            dist, valid = dist[i1:i1 + 1], valid[i1:i1 + 1]
        out["methods"][name] = {"alpha": alpha, "pi": dist[0], "valid": float(valid[0]),
                                "closed_form": closed_form_policy(ref_k, p, alpha, cfg.beta),
                                "hist": hist}
    return out


def lm_bandit_measurements(runs: Sequence[dict], p, ref_valid: float, beta: float,
                           spl_name: str = "SPL alpha=1") -> dict[str, np.ndarray]:
    """The registered statistics of ``02-lm-bandit``, one entry per replicate (seed) of
    :func:`lm_bandit_seed` (chapter 17):

    ``tv_p_spl``, ``tv_p_dpo``
        TV to the population ``p`` of SPL (``spl_name``) and DPO;
    ``dpo_majority``
        DPO's share of the majority answer (``argmax p``);
    ``max_tv_own_closed_form``
        the largest TV between a trained LM and its own closed form;
    ``valid_spl``, ``valid_ref``, ``valid_dpo_T_matched``
        SPL's valid mass, the reference's, and DPO + temperature's valid mass at SPL's TV to
        ``p`` (:func:`~.evaluation.matched_control` over the temperature grid);
    ``validity_slope``
        least-squares slope of the valid mass on ``log(beta/alpha)`` over the trained LMs;
    ``tv_spl_cf_spl``, ``tv_dpo_cf_spl``
        TV of SPL and of DPO to SPL's closed form.
    """
    if not runs:
        raise ValueError("no runs to measure")
    p = np.asarray(p, dtype=np.float64)
    maj = int(np.argmax(p))
    keys = ("tv_p_spl", "tv_p_dpo", "dpo_majority", "max_tv_own_closed_form", "valid_spl",
            "valid_ref", "valid_dpo_T_matched", "validity_slope", "tv_spl_cf_spl",
            "tv_dpo_cf_spl")
    out = {k: [] for k in keys}
    for run in runs:
        m = run["methods"]
        spl, dpo = m[spl_name], m["DPO"]
        dists, valids = run["dpo_T"]
        tv_T = [tv_distance(d, p) for d in dists]
        tv_spl = tv_distance(spl["pi"], p)
        out["tv_p_spl"].append(tv_spl)
        out["tv_p_dpo"].append(tv_distance(dpo["pi"], p))
        out["dpo_majority"].append(float(dpo["pi"][maj]))
        out["max_tv_own_closed_form"].append(max(tv_distance(v["pi"], v["closed_form"])
                                                 for v in m.values()))
        out["valid_spl"].append(spl["valid"])
        out["valid_ref"].append(float(ref_valid))
        out["valid_dpo_T_matched"].append(E.matched_control(tv_T, valids, tv_spl))
        out["validity_slope"].append(E.slope([np.log(beta / v["alpha"]) for v in m.values()],
                                             [v["valid"] for v in m.values()]))
        out["tv_spl_cf_spl"].append(tv_distance(spl["pi"], spl["closed_form"]))
        out["tv_dpo_cf_spl"].append(tv_distance(dpo["pi"], spl["closed_form"]))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def story_pairs(model, tokenizer, prompts: Sequence[str], *, n_samples: int, max_new_tokens: int,
                seed: int):
    """Preference pairs from the model's own stories (chapter 17): ``n_samples`` samples per
    prompt at T = 1, ranked by :func:`~.tasks.story_quality`; every pair of distinct stories
    with different scores is a pair (the better one chosen). Returns ``(prompts, chosen,
    rejected, mean quality of the samples)``."""
    from .. import lm
    from .tasks import story_quality

    gen = lm.generate_batch(model, tokenizer, list(prompts), do_sample=True, temperature=1.0,
                            seed=seed, num_return_sequences=n_samples,
                            max_new_tokens=max_new_tokens)
    P, W, L, qs = [], [], [], []
    for i, pr in enumerate(prompts):
        outs = gen.texts[i * n_samples:(i + 1) * n_samples]
        q = [story_quality(pr, t) for t in outs]
        qs += q
        for a in range(len(outs)):
            for b in range(len(outs)):
                if q[a] > q[b] and outs[a] != outs[b]:
                    P.append(pr); W.append(outs[a]); L.append(outs[b])
    if not P:
        raise ValueError("every sample scored the same: no preference pair (sample more stories)")
    return P, W, L, float(np.mean(qs))


def story_metrics(encoder, prompt: str, texts: Sequence[str]) -> dict[str, float]:
    """Semantic spread (mean pairwise cosine distance of MiniLM embeddings), distinct-2 and mean
    story quality of the samples of one prompt (chapter 17)."""
    from .metrics import distinct_n, embedding_spread
    from .tasks import story_quality

    return {"spread": embedding_spread(encoder.encode(list(texts))),
            "distinct2": distinct_n(list(texts), 2),
            "quality": float(np.mean([story_quality(prompt, t) for t in texts]))}


def story_seed(model, tokenizer, encoder, cfg, seed: int, prompts: Sequence[str], *,
               reference: bool = False) -> tuple[list[dict], dict]:
    """One replicate of ``03-diversity-and-calibration`` (chapter 17): preference pairs from the
    reference model's stories (:func:`story_pairs`, drawn with ``seed``), then DPO (``alpha =
    beta``; sampled at every ``cfg.temperatures``) and SPL (``cfg.spl_alpha``; T = 1), each a
    fresh LoRA adapter initialised with ``seed``; ``cfg.n_samples`` stories per prompt and
    setting. Returns rows ``{seed, method, T, prompt, spread, distinct2, quality}`` (one per
    prompt) and the samples by ``(method, T)``; ``reference=True`` adds the untrained model."""
    from .. import lm
    from ..lm import lora

    prompts = list(prompts)
    P, W, L, _ = story_pairs(model, tokenizer, prompts, n_samples=cfg.n_pref_samples,
                             max_new_tokens=cfg.max_new_tokens, seed=seed)
    data = slm.make_preference_data(tokenizer, P, W, L)
    slm.reference_logprobs(model, data)
    rows, samples = [], {}

    def sample_all(name, T):
        gen = lm.generate_batch(model, tokenizer, prompts, do_sample=True, temperature=T,
                                seed=seed + 1, num_return_sequences=cfg.n_samples,
                                max_new_tokens=cfg.max_new_tokens)
        samples[(name, T)] = gen.texts
        for i, pr in enumerate(prompts):
            texts = gen.texts[i * cfg.n_samples:(i + 1) * cfg.n_samples]
            rows.append({"seed": seed, "method": name, "T": T, "prompt": pr,
                         **story_metrics(encoder, pr, texts)})

    for name, alpha, temps in (("DPO", cfg.beta, tuple(cfg.temperatures)),
                               ("SPL", cfg.spl_alpha, (1.0,))):
        torch.manual_seed(seed)
        slm.add_top_lora(model, cfg.lora_layers, cfg.lora_r, seed=seed)
        try:
            slm.train_preference(model, data, alpha=alpha, beta=cfg.beta, n_steps=cfg.n_steps,
                                 batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                                 desc=f"{name}, seed {seed}")
            for T in temps:
                sample_all(name, T)
        finally:
            lora.remove(model)
    if reference:
        sample_all("reference", 1.0)
    return rows, samples


def story_measurements(rows) -> dict[str, np.ndarray]:
    """The registered statistics of ``03-diversity-and-calibration`` per seed (chapter 17), from
    the rows of :func:`story_seed` (means over prompts first): ``spl_spread``,
    ``spl_distinct2``, ``spl_quality``, the same for DPO at T = 1 (``dpo_*``), and DPO +
    temperature's spread and distinct-2 at SPL's quality (``dpo_T_spread_matched``,
    ``dpo_T_distinct2_matched``; :func:`~.evaluation.matched_control` over the temperature
    grid, in the grid's order)."""
    import pandas as pd

    df = pd.DataFrame(list(rows))
    if df.empty:
        raise ValueError("no rows to measure")
    m = df.groupby(["seed", "method", "T"], as_index=False)[["spread", "distinct2", "quality"]].mean()
    out: dict[str, list] = {k: [] for k in (
        "spl_spread", "spl_distinct2", "spl_quality", "dpo_spread", "dpo_distinct2",
        "dpo_quality", "dpo_T_spread_matched", "dpo_T_distinct2_matched")}
    for seed, g in m.groupby("seed", sort=True):
        spl = g[g.method == "SPL"].iloc[0]
        dpo = g[g.method == "DPO"].sort_values("T")
        d1 = dpo[dpo["T"] == 1.0].iloc[0]
        for k in ("spread", "distinct2", "quality"):
            out[f"spl_{k}"].append(float(spl[k]))
            out[f"dpo_{k}"].append(float(d1[k]))
        for k in ("spread", "distinct2"):
            out[f"dpo_T_{k}_matched"].append(E.matched_control(dpo["quality"], dpo[k],
                                                               float(spl["quality"])))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


class SequenceScorer:
    """Exact log-probabilities of fixed ``(prompt, continuation)`` pairs under a model whose
    decoder layers below ``start`` stay frozen (chapter 17, notebooks 04 and 05).

    The input of decoder layer ``start`` is computed once, on the untrained model; every later
    call (the reference, or the model with a LoRA adapter on the layers from ``start`` up) runs
    only the top layers on it. Equal to scoring the full sequences (tested)."""

    def __init__(self, model, tokenizer, prompts: Sequence[str], continuations: Sequence[str], *,
                 start: int, chat: bool = False, add_eos: bool = False, batch_size: int = 64):
        from ..lm import tokenize_pairs
        from ..lm.hooks import decoder_layers

        prompts, continuations = list(prompts), list(continuations)
        if len(prompts) != len(continuations) or not prompts:
            raise ValueError(f"prompts and continuations must be non-empty and of one length, got "
                             f"{len(prompts)} and {len(continuations)}")
        n_layers = len(decoder_layers(model))
        if not 0 <= start < n_layers:
            raise ValueError(f"start must be in [0, {n_layers - 1}], got {start}")
        self.start, self.batch_size = int(start), int(batch_size)
        self.batch = tokenize_pairs(tokenizer, prompts, continuations, chat=chat, add_eos=add_eos)
        self.hidden = []
        if self.start:
            was = model.training
            model.eval()
            for s in range(0, len(prompts), self.batch_size):
                sl = slice(s, s + self.batch_size)
                self.hidden.append(slm._hidden_inputs(model, self.start,
                                                      self.batch["input_ids"][sl],
                                                      self.batch["attention_mask"][sl]))
            model.train(was)

    def __len__(self) -> int:
        return int(self.batch["input_ids"].shape[0])

    @torch.no_grad()
    def logprobs(self, model, temperatures: Sequence[float] = (1.0,)) -> np.ndarray:
        """``(len(temperatures), n)`` summed continuation log-probabilities at each token-level
        temperature."""
        temps = [float(t) for t in temperatures]
        out = torch.zeros(len(temps), len(self), dtype=torch.float64)
        was = model.training
        model.eval()
        for k, s in enumerate(range(0, len(self), self.batch_size)):
            sl = slice(s, s + self.batch_size)
            b = self.batch
            out[:, sl] = slm.policy_logprobs(model, b["input_ids"][sl], b["attention_mask"][sl],
                                             b["response_mask"][sl], start=self.start,
                                             hidden=self.hidden[k] if self.start else None,
                                             temperature=temps)
        model.train(was)
        return out.numpy()


def near_miss_pairs(problems: Sequence[tuple[int, int]], deltas=(1, -1, 10, -10)):
    """Preference pairs on addition problems (chapter 17): the exact sum (then a newline) over
    each near miss ``sum + d``. Returns ``(prompts, chosen, rejected)``."""
    from .tasks import addition_prompt

    P, W, L = [], [], []
    for a, b in problems:
        for d in deltas:
            P.append(addition_prompt(a, b)); W.append(f" {a + b}\n"); L.append(f" {a + b + d}\n")
    return P, W, L


def train_adapter(model, data, cfg, *, alpha: float, seed: int, desc: str) -> dict:
    """A fresh LoRA adapter (``cfg.lora_r`` on the top ``cfg.lora_layers`` layers, initialised
    with ``seed``) trained on ``data`` with the SPL loss (``alpha = cfg.beta``: DPO) for
    ``cfg.n_steps`` steps of ``cfg.batch_size`` pairs (chapter 17). The adapter stays on the
    model: remove it with :func:`iclr25.lm.lora.remove`."""
    torch.manual_seed(seed)
    slm.add_top_lora(model, cfg.lora_layers, cfg.lora_r, seed=seed)
    return slm.train_preference(model, data, alpha=alpha, beta=cfg.beta, n_steps=cfg.n_steps,
                                batch_size=cfg.batch_size, lr=cfg.lr, seed=seed, desc=desc)


def best_of_n_run(model, tokenizer, cfg) -> dict:
    """``04-best-of-n`` (chapter 17): ``cfg.n_train + cfg.n_test`` distinct two-digit additions
    (seeded by ``cfg.seed``); near-miss preference pairs on the training problems; DPO and SPL
    (``cfg.spl_alpha``) adapters. Returns ``q``: the probability of the exact right answer on
    every held-out problem under ``"reference"``, ``"SPL"`` and ``"DPO"`` (the latter
    ``(len(cfg.temperatures), n_test)``, one row per token temperature), the problems and the
    training histories."""
    from ..lm import lora
    from ..lm.hooks import decoder_layers
    from .tasks import addition_problems, addition_prompt

    probs = addition_problems(cfg.n_train + cfg.n_test, seed=cfg.seed)
    train, test = probs[:cfg.n_train], probs[cfg.n_train:]
    start = len(decoder_layers(model)) - cfg.lora_layers
    scorer = SequenceScorer(model, tokenizer, [addition_prompt(a, b) for a, b in test],
                            [f" {a + b}\n" for a, b in test], start=start)
    q = {"reference": np.exp(scorer.logprobs(model)[0])}
    data = slm.make_preference_data(tokenizer, *near_miss_pairs(train), chat=False, add_eos=False)
    slm.reference_logprobs(model, data)
    hist = {}
    for name, alpha, temps in (("DPO", cfg.beta, tuple(cfg.temperatures)),
                               ("SPL", cfg.spl_alpha, (1.0,))):
        try:
            hist[name] = train_adapter(model, data, cfg, alpha=alpha, seed=cfg.seed, desc=name)
            lp = np.exp(scorer.logprobs(model, temps))
        finally:
            lora.remove(model)
        q[name] = lp if name == "DPO" else lp[0]
    return {"q": q, "train": train, "test": test, "hist": hist}


def best_of_n_measurements(q: dict, k: int, temperatures: Sequence[float], *,
                           seed: int = 0) -> dict:
    """The registered statistics of ``04-best-of-n`` (chapter 17) from :func:`best_of_n_run`'s
    ``q``: the hard problems (:func:`~.evaluation.hard_items` of the reference), exact pass@k
    per hard problem of SPL (``spl``) and DPO at T = 1 (``dpo``); a seeded split of the hard
    problems into a tuning and a test half; DPO's temperature with the best mean pass@k on the
    tuning half (``T_best``); and on the test half SPL's pass@k (``spl_test``) against DPO's at
    that temperature (``dpo_T_test``)."""
    hard = E.hard_items(q["reference"])
    if len(hard) < 2:
        raise ValueError("fewer than 2 hard problems: score more held-out problems")
    dpo = np.atleast_2d(q["DPO"])
    if dpo.shape[0] != len(temperatures):
        raise ValueError(f"q['DPO'] has {dpo.shape[0]} rows for {len(temperatures)} temperatures")
    pk_spl = E.pass_at_k(q["SPL"][hard], k)
    pk_dpo = np.stack([E.pass_at_k(row[hard], k) for row in dpo], 1)   # (n_hard, n_T)
    tune, test = E.split_halves(len(hard), seed=seed)
    j = E.best_on_half(pk_dpo, tune)
    i1 = list(temperatures).index(1.0)
    return {"hard": hard, "spl": pk_spl, "dpo": pk_dpo[:, i1], "dpo_T": pk_dpo,
            "tune": tune, "test": test, "T_best": float(temperatures[j]),
            "spl_test": pk_spl[test], "dpo_T_test": pk_dpo[test, j],
            "ref": E.pass_at_k(q["reference"][hard], k)}


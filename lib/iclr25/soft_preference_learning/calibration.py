"""Calibration: the tabular bandit and cloze multiple choice (chapter 17, ``05-calibration``).

Kept apart from :mod:`.experiments` because its cloze items come from chapter 12's held-out
English documents (:func:`iclr25.phylolm.zoo.make_tasks`): only the notebook that uses them
depends on that package.
"""

from __future__ import annotations

import numpy as np

from . import lm as slm
from .bandit import fit_policies, sample_comparisons, temperature_scale
from .evaluation import split_halves, top_gap
from .experiments import SequenceScorer, train_adapter
from .metrics import ece

__all__ = ["TEMPERATURE_GRID", "top_ece", "tune_temperature", "scale_rows", "tabular_run",
           "cloze_items", "cloze_run"]

#: the temperatures a practitioner tries on DPO's tabular policies (1 to 30, log-spaced)
TEMPERATURE_GRID = tuple(float(t) for t in np.geomspace(1.0, 30.0, 121))


def top_ece(pi, freq) -> float:
    """ECE of policies ``pi`` ``(M, K)`` against the true answer frequencies ``freq``: the
    confidence is the top answer's probability, its accuracy how often the population gives that
    answer (:func:`~.metrics.ece`, 10 bins)."""
    pi, freq = np.asarray(pi, dtype=np.float64), np.asarray(freq, dtype=np.float64)
    top = pi.argmax(1)
    return ece(pi.max(1), freq[np.arange(len(pi)), top])


def tune_temperature(pi, freq, idx, grid=TEMPERATURE_GRID) -> float:
    """The temperature of ``grid`` whose scaled policies ``pi^(1/T)`` have the smallest mean
    ``|confidence of the top answer - its true frequency|`` (:func:`~.evaluation.top_gap`, the
    statistic the tabular finding is judged by) on the questions ``idx``; ties go to the first."""
    pi, freq, idx = np.asarray(pi, dtype=np.float64), np.asarray(freq), np.asarray(idx)
    errs = [top_gap(scale_rows(pi[idx], T), freq[idx]).mean() for T in grid]
    return float(grid[int(np.argmin(errs))])


def scale_rows(pi, T: float) -> np.ndarray:
    """Temperature ``T`` applied to every row of ``pi`` (:func:`~.bandit.temperature_scale`)."""
    return np.stack([temperature_scale(np.clip(r, 1e-300, 1.0), T) for r in np.asarray(pi)])


def tabular_run(cfg) -> dict:
    """``05-calibration``'s tabular bandit (chapter 17): ``cfg.n_questions`` questions with
    ``cfg.n_choices`` answers; the population's answer frequencies ``p`` (Dirichlet(0.7)) and a
    reference policy (Dirichlet(2)) per question, ``cfg.n_mc_comparisons`` Bradley-Terry
    comparisons each; tabular DPO (``cfg.beta``) and SPL (``cfg.mc_alpha``, ``cfg.beta``)
    fitted to them; a seeded split into a tuning and a test half; DPO at the temperature tuned
    on the tuning half (:func:`tune_temperature`). Returns ``p``, ``policies`` (``"DPO"``,
    ``"SPL"``, ``"DPO tuned"``), ``tune``, ``test``, ``T_tuned``, ``gaps`` (per test question,
    :func:`~.evaluation.top_gap`) and ``ece`` (on the test half)."""
    rng = np.random.default_rng(cfg.seed)
    M, K = cfg.n_questions, cfg.n_choices
    p = rng.dirichlet(np.full(K, 0.7), size=M)
    ref = rng.dirichlet(np.full(K, 2.0), size=M)
    wins = np.stack([sample_comparisons(p[m], cfg.n_mc_comparisons, seed=cfg.seed * 100_003 + m).wins
                     for m in range(M)])
    pol = {"DPO": fit_policies(wins, ref, cfg.beta, cfg.beta),
           "SPL": fit_policies(wins, ref, cfg.mc_alpha, cfg.beta)}
    tune, test = split_halves(M, seed=cfg.seed)
    T = tune_temperature(pol["DPO"], p, tune)
    pol["DPO tuned"] = scale_rows(pol["DPO"], T)
    return {"p": p, "policies": pol, "tune": tune, "test": test, "T_tuned": T,
            "gaps": {k: top_gap(v[test], p[test]) for k, v in pol.items()},
            "ece": {k: top_ece(v[test], p[test]) for k, v in pol.items()}}


def cloze_items(n_train: int, n_test: int, seed: int = 0):
    """Four-option cloze items from held-out English sentences (chapter 17, via
    :func:`iclr25.phylolm.zoo.make_tasks`): ``(prompt, options, right index)``, split into
    ``n_train`` training and ``n_test`` held-out items."""
    from ..phylolm.zoo import make_tasks

    items = make_tasks(n_train + n_test, seed=seed)["cloze"]
    if len(items) < n_train + n_test:
        raise ValueError(f"only {len(items)} cloze items can be built; asked for "
                         f"{n_train} + {n_test}")
    return items[:n_train], items[n_train:n_train + n_test]


def cloze_run(model, tokenizer, cfg) -> dict:
    """``05-calibration``'s language-model part (chapter 17): DPO (``cfg.beta``) and SPL
    (``cfg.spl_alpha``, ``cfg.beta``) adapters trained on (right option > distractor) pairs of
    the training cloze items; every held-out item scored by its options' summed
    log-probabilities, softmax over the options. Returns ``probs`` ``{"reference", "DPO",
    "SPL"}`` of shape ``(n_test, n_options)``, ``correct`` ``(n_test,)`` and the histories."""
    from ..lm import lora
    from ..lm.hooks import decoder_layers

    train, test = cloze_items(cfg.n_cloze_train, cfg.n_cloze_test, seed=cfg.seed)
    K = len(test[0][1])
    start = len(decoder_layers(model)) - cfg.lora_layers
    scorer = SequenceScorer(model, tokenizer, [p for p, opts, _ in test for _ in opts],
                            [o for _, opts, _ in test for o in opts], start=start)

    def option_probs():
        lp = scorer.logprobs(model)[0].reshape(len(test), K)
        lp = lp - lp.max(1, keepdims=True)
        return np.exp(lp) / np.exp(lp).sum(1, keepdims=True)

    probs = {"reference": option_probs()}
    P, W, L = [], [], []
    for p, opts, c in train:
        for j, o in enumerate(opts):
            if j != c:
                P.append(p); W.append(opts[c]); L.append(o)
    data = slm.make_preference_data(tokenizer, P, W, L, chat=False, add_eos=False)
    slm.reference_logprobs(model, data)
    hist = {}
    for name, alpha in (("DPO", cfg.beta), ("SPL", cfg.spl_alpha)):
        try:
            hist[name] = train_adapter(model, data, cfg, alpha=alpha, seed=cfg.seed, desc=name)
            probs[name] = option_probs()
        finally:
            lora.remove(model)
    return {"probs": probs, "correct": np.array([c for _, _, c in test]), "hist": hist}

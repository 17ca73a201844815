"""The shared starting point of the chapter's notebooks: SmolLM2 with a refusal behaviour on the
fictional-hazard category, trained once and cached. Chapter 08 (ReFAT).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from .. import lm, paths
from ..lm import lora
from .configs import SFTConfig
from .data import PromptSet, make_dataset
from .training import prepare, train_refusal

__all__ = ["LORA_TARGETS", "cache_path", "sft_code_version", "SFT_CACHE_VERSION", "aligned_model", "add_adapters", "adapters_off", "reset_to_sft",
           "refusal_eval", "model_feature", "gcg_suffixes", "gcg_code_version", "GCG_CACHE_VERSION",
           "cached_feature", "robustness_eval"]

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


SFT_CACHE_VERSION = 2   # bump when something outside the iclr25 code changes the SFT model


def sft_code_version() -> str:
    """A version of the refusal-SFT code for cache keys (chapter 08): :data:`SFT_CACHE_VERSION`
    and :func:`iclr25.ledger.code_digest` of the modules that decide the trained adapters (this
    pipeline, ``training.py``, ``data.py`` and every ``iclr25`` module they import: the model
    loader, LoRA, the tokenizer's chat template), so editing any of them invalidates cached
    adapters."""
    from ..ledger import code_digest

    return f"{SFT_CACHE_VERSION}-{code_digest(__name__, 'iclr25.refat.training', 'iclr25.refat.data')[:12]}"


def cache_path(cfg: SFTConfig) -> Path:
    """Where the SFT adapters of ``cfg`` are cached:
    ``runs/08-refat/sft-<config key>-<code version>.safetensors`` (:func:`sft_code_version`)."""
    return paths.runs_dir() / "08-refat" / f"sft-{cfg.key()}-{sft_code_version()}.safetensors"


def add_adapters(model, cfg: SFTConfig):
    """LoRA (rank ``cfg.lora_r``, every linear layer) on the top ``cfg.lora_layers`` layers."""
    n = len(lm.decoder_layers(model))
    if not 0 < cfg.lora_layers < n:
        raise ValueError(f"lora_layers must be in 1..{n - 1}, got {cfg.lora_layers}")
    return lora.add(model, r=cfg.lora_r, alpha=2 * cfg.lora_r, targets=LORA_TARGETS,
                    layers=range(n - cfg.lora_layers, n), seed=cfg.seed)


def aligned_model(cfg: SFTConfig, *, model_name: str | None = None, rebuild: bool = False):
    """``(model, tokenizer, train, test, info)``: SmolLM2 with the refusal SFT adapters (loaded
    from the cache, or trained and cached when missing), and the chapter's prompt sets.

    ``info``: ``cached`` (bool), ``seconds`` (training time when trained), ``history``.
    """
    model, tok = lm.load(model_name) if model_name else lm.load()
    train, test = make_dataset(cfg.n_train, cfg.n_test, seed=cfg.seed)
    path = cache_path(cfg)
    meta = path.with_suffix(".json")
    if path.is_file() and meta.is_file() and not rebuild:
        lora.load(model, path)
        info = json.loads(meta.read_text())
        info["cached"] = True
    else:
        add_adapters(model, cfg)
        n = len(lm.decoder_layers(model))
        t0 = time.perf_counter()
        data = prepare(model, tok, train, n - cfg.lora_layers)
        hist = train_refusal(model, tok, data, n_steps=cfg.n_steps, batch_size=cfg.batch_size,
                             lr=cfg.lr, seed=cfg.seed, desc="refusal SFT")
        info = {"seconds": time.perf_counter() - t0, "loss": hist["loss"],
                "step_seconds": hist["step_seconds"]}
        lora.save(model, path)
        meta.write_text(json.dumps(info))
        info["cached"] = False
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, tok, train, test, info


class adapters_off:
    """Context manager: the LoRA adapters contribute nothing inside (the base model), restored
    on exit. Chapter 08."""

    def __init__(self, model):
        self.mods = [m for m in model.modules() if isinstance(m, lora.LoRALinear)]

    def __enter__(self):
        self.saved = [m.scaling for m in self.mods]
        for m in self.mods:
            m.scaling = 0.0
        return self

    def __exit__(self, *exc):
        for m, s in zip(self.mods, self.saved):
            m.scaling = s
        return False


def reset_to_sft(model, cfg: SFTConfig, *, trainable: bool = True):
    """Replace the model's adapters by the cached SFT ones (before each fine-tuning run of
    ``03-refat-training``); ``trainable`` unfreezes them."""
    lora.remove(model)
    lora.load(model, cache_path(cfg))
    for name, p in model.named_parameters():
        p.requires_grad_(trainable and ("lora_A" in name or "lora_B" in name))
    return model


def refusal_eval(model, tok, prompts, *, max_new_tokens: int = 10, edit=None,
                 batch_size: int = 16):
    """``(refusal rate by prefix match, generated texts)`` for ``prompts``, greedy, optionally
    inside the context manager factory ``edit`` (e.g. ``lambda: rfa(model, rf)``). Chapter 08."""
    import contextlib

    from .judges import refusal_rate

    with (edit() if edit is not None else contextlib.nullcontext()):
        texts = lm.generate_batch(model, tok, list(prompts), max_new_tokens=max_new_tokens,
                                  batch_size=batch_size).texts
    return refusal_rate(texts), texts


def model_feature(model, tok, ps: PromptSet, layers, n_dir: int):
    """The refusal feature of ``model`` at ``layers`` from the first ``n_dir`` prompts per class
    of ``ps`` (difference of means at the last prompt token). Chapter 08."""
    from .features import RefusalFeature, last_token_acts

    return RefusalFeature.from_contrast(last_token_acts(model, tok, ps.harmful[:n_dir], layers),
                                        last_token_acts(model, tok, ps.harmless[:n_dir], layers),
                                        list(layers))


GCG_CACHE_VERSION = 2   # bump when something outside attacks.py changes what GCG-lite finds


def gcg_code_version() -> str:
    """A version of the GCG-lite code for cache keys (chapter 08): :data:`GCG_CACHE_VERSION` and
    a hash of ``attacks.py``'s source, so editing the attack invalidates cached suffixes."""
    import hashlib

    from . import attacks

    src = Path(attacks.__file__).read_bytes()
    return f"{GCG_CACHE_VERSION}-{hashlib.sha256(src).hexdigest()[:16]}"


def gcg_suffixes(model, tok, prompts, cfg: SFTConfig, *, n_iter: int, topk: int, n_cand: int,
                 suffix_len: int, seed: int = 0, target: str = "Sure, here is"):
    """GCG-lite results (:class:`~iclr25.refat.attacks.GCGResult` as dicts) for ``prompts``
    against the SFT model of ``cfg``, cached in ``runs/08-refat/`` so that ``03-refat-training``
    reuses what ``02-rfa-approximates-attacks`` found. Chapter 08.

    The cache key holds :func:`gcg_code_version` (a hash of the attack's source) and a hash of the
    SFT adapters' file, so a change to the attack code or to the attacked model invalidates it.
    Returns ``(results, cached)``."""
    import hashlib
    from dataclasses import asdict

    from .attacks import gcg_lite

    adapters = cache_path(cfg)
    weights = hashlib.sha256(adapters.read_bytes()).hexdigest() if adapters.is_file() else "none"
    key = hashlib.sha256(json.dumps([cfg.key(), gcg_code_version(), weights, list(prompts), n_iter, topk,
                                     n_cand, suffix_len, seed, target]).encode()).hexdigest()[:16]
    path = paths.runs_dir() / "08-refat" / f"gcg-{key}.json"
    if path.is_file():
        return json.loads(path.read_text()), True
    out = [asdict(gcg_lite(model, tok, p, target, suffix_len=suffix_len, n_iter=n_iter, topk=topk,
                           n_cand=n_cand, seed=seed + i)) for i, p in enumerate(prompts)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out, False


def cached_feature(model, data, n_dir: int, rf_low=None):
    """The refusal feature of ``model`` from the cached training rows of ``data`` (a
    :class:`~iclr25.refat.training.TrainData`): the first ``n_dir`` harmful and harmless rows, at
    layers ``data.start`` to the end (only the top layers run), joined with ``rf_low`` (the
    feature of the frozen layers below ``data.start``, which training never changes). Equals
    :func:`model_feature` on the same prompts when the layers below ``data.start`` are frozen
    (tested). Chapter 08."""
    from .features import RefusalFeature
    from .training import top_layer_feature

    n = len(lm.decoder_layers(model))
    harm, safe = np.flatnonzero(data.harmful), np.flatnonzero(~data.harmful)
    if n_dir > min(len(harm), len(safe)):
        raise ValueError(f"n_dir={n_dir} but the data holds {len(harm)} harmful and {len(safe)} harmless rows")
    top = top_layer_feature(model, data, harm[:n_dir], safe[:n_dir], range(data.start, n + 1))
    return top if rf_low is None else RefusalFeature.join(rf_low, top)


def robustness_eval(model, tok, train: PromptSet, test: PromptSet, *, templates, gcg_attacked,
                    rfa_from: int, n_dir: int, max_new_tokens: int = 10, data=None,
                    rf_low=None) -> dict:
    """Refusal of ``model`` on held-out harmful prompts under no attack, each jailbreak template,
    GCG-lite suffixes (``gcg_attacked``: attacked prompts) and white-box RFA (the refusal feature
    recomputed on this model from ``n_dir`` training prompts per class, mean mode, layers
    ``rfa_from`` to the end); and over-refusal on the harmless look-alikes. Chapter 08
    (``03-refat-training``).

    ``data`` (cached training rows, built from ``train``) and ``rf_low`` (the feature at layers
    ``rfa_from .. data.start - 1``, frozen): the feature is then computed by
    :func:`cached_feature`, running only the adapted layers (the same feature, cheaper)."""
    from .data import apply_template
    from .features import rfa

    n = len(lm.decoder_layers(model))
    if data is not None and (rf_low is None) != (rfa_from >= data.start):
        raise ValueError(f"rf_low must hold layers {rfa_from}..{data.start - 1} when rfa_from < data.start")
    from .judges import refusal_rate

    # every unedited generation in one batched call (fewer, fuller batches), split afterwards
    groups = [("none", list(test.harmful))] + [(t, apply_template(test.harmful, t)) for t in templates] + \
             [("GCG-lite", list(gcg_attacked)), ("over-refusal (harmless)", list(test.harmless))]
    _, texts = refusal_eval(model, tok, [p for _, g in groups for p in g], max_new_tokens=max_new_tokens)
    rate, i = {}, 0
    for name, g in groups:
        rate[name], i = refusal_rate(texts[i:i + len(g)]), i + len(g)
    out = {"none": rate["none"], "templates": float(np.mean([rate[t] for t in templates])),
           "GCG-lite": rate["GCG-lite"]}
    if data is None:
        rf = model_feature(model, tok, train, range(rfa_from, n + 1), n_dir)
    else:
        rf = cached_feature(model, data, n_dir, rf_low)
        if rfa_from > data.start:
            rf = rf.subset(range(rfa_from, n + 1))
        if rf.layers != list(range(rfa_from, n + 1)):
            raise ValueError(f"rf_low and data give layers {rf.layers}, expected {rfa_from}..{n}")
    out["RFA"], _ = refusal_eval(model, tok, test.harmful, max_new_tokens=max_new_tokens,
                                 edit=lambda: rfa(model, rf))
    out["over-refusal (harmless)"] = rate["over-refusal (harmless)"]
    return out

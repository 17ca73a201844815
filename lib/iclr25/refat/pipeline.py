"""The shared starting point of the chapter's notebooks: SmolLM2 with a refusal behaviour on the
fictional-hazard category, trained once and cached. Chapter 08 (ReFAT).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from .. import lm, paths
from ..lm import lora
from .configs import SFTConfig
from .data import PromptSet, make_dataset
from .training import prepare, train_refusal

__all__ = ["LORA_TARGETS", "cache_path", "aligned_model", "add_adapters"]

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def cache_path(cfg: SFTConfig) -> Path:
    """Where the SFT adapters of ``cfg`` are cached: ``runs/08-refat/sft-<key>.safetensors``."""
    return paths.runs_dir() / "08-refat" / f"sft-{cfg.key()}.safetensors"


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

"""iclr25.lm LoRA adapters and the fine-tuning loop on a tiny random Llama."""

from __future__ import annotations

import copy

import pytest
import torch

from iclr25 import lm
from iclr25.lm import lora

PROMPTS = ["Hi", "What is two plus two?", "The capital of France is", "Yes or no?"]
ANSWERS = ["Hello.", "Four.", "Paris.", "Yes."]


@pytest.fixture(scope="module")
def tok(one_thread):
    return lm.tiny_tokenizer()


@pytest.fixture
def model(tok):
    return lm.tiny_llama(len(tok), n_layers=4)


@pytest.fixture(scope="module")
def ids(tok):
    return tok(PROMPTS, return_tensors="pt", padding=True).input_ids


def test_fresh_adapters_leave_the_model_unchanged_and_train_alone(model, ids):
    with torch.no_grad():
        base = model(ids).logits
    lora.add(model, r=4, alpha=8, targets=("q_proj", "v_proj"), layers=[2, 3])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, base)          # B = 0 at init
    params = lora.trainable_parameters(model)
    assert sorted(params) == sorted(f"model.layers.{l}.self_attn.{p}.lora_{ab}"
                                    for l in (2, 3) for p in ("q_proj", "v_proj") for ab in "AB")
    assert sum(p.numel() for p in params.values()) == 2 * (4 * 32 * 2 + 4 * (32 + 16))
    assert lora.lora_config(model)["layers"] == [2, 3]
    assert lm.training.lowest_trainable_layer(model) == 2
    with pytest.raises(ValueError, match="already has LoRA"):
        lora.add(model)


def test_merge_equals_unmerged_and_save_load_round_trip(model, ids, tmp_path):
    lora.add(model, r=4, alpha=8, targets=("q_proj", "v_proj", "down_proj"))
    with torch.no_grad():
        for p in lora.trainable_parameters(model).values():
            p.add_(0.05 * torch.randn_like(p))
        adapted = model(ids).logits
    path = lora.save(model, tmp_path / "adapter.safetensors")
    fresh = copy.deepcopy(model)
    lora.remove(fresh)
    with torch.no_grad():
        assert not torch.allclose(fresh(ids).logits, adapted, atol=1e-4)
    lora.load(fresh, path)
    with torch.no_grad():
        assert torch.equal(fresh(ids).logits, adapted)
    lora.merge(model)
    assert not any(isinstance(m, lora.LoRALinear) for m in model.modules())
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, adapted, atol=1e-5)
    with pytest.raises(ValueError, match="no LoRA adapters"):
        lora.merge(model)
    with pytest.raises(FileNotFoundError):
        lora.load(model, tmp_path / "missing.safetensors")


def test_bad_targets_list_the_valid_ones(model):
    with pytest.raises(ValueError, match="valid targets: .*q_proj"):
        lora.add(model, targets=("query",))
    with pytest.raises(ValueError, match="r must be"):
        lora.add(model, r=0)


def test_tokenize_pairs_masks_the_prompt(tok):
    batch = lm.tokenize_pairs(tok, PROMPTS, ANSWERS)
    ids, att, resp = batch["input_ids"], batch["attention_mask"], batch["response_mask"]
    for i, (p, a) in enumerate(zip(PROMPTS, ANSWERS)):
        n_prompt = len(tok(lm.chat_text(tok, p), add_special_tokens=False).input_ids)
        n = int(att[i].sum())
        assert resp[i, :n_prompt].sum() == 0 and resp[i, n_prompt:n].all()
        assert tok.decode(ids[i, resp[i].bool()]) == a + "<|im_end|>\n"
    plain = lm.tokenize_pairs(tok, PROMPTS, ANSWERS, chat=False, max_len=6)
    assert plain["input_ids"].shape[1] == 6


def _step(model, batch, cache_frozen, lr=1e-2):
    hist = lm.train(model, batch, n_steps=2, batch_size=3, lr=lr, seed=1,
                    cache_frozen=cache_frozen, grad_clip=None)
    return hist, {n: p.detach().clone() for n, p in lora.trainable_parameters(model).items()}


def test_cached_frozen_layers_step_equals_the_uncached_step(tok):
    batch = lm.tokenize_pairs(tok, PROMPTS, ANSWERS)
    a = lm.tiny_llama(len(tok), n_layers=4)
    lora.add(a, r=4, alpha=8, layers=[2, 3], dropout=0.0)
    b = copy.deepcopy(a)
    init = {n: p.detach().clone() for n, p in lora.trainable_parameters(a).items()}
    ha, pa = _step(a, batch, cache_frozen=False)
    hb, pb = _step(b, batch, cache_frozen=None)        # auto: caches layers 0-1
    assert not ha["cached"] and hb["cached"] and hb["start_layer"] == 2
    assert ha["loss"] == pytest.approx(hb["loss"], abs=1e-5)
    for n in pa:
        assert torch.allclose(pa[n], pb[n], atol=1e-6), n
    assert any(not torch.equal(pa[n], init[n]) for n in pa)       # the step did move them
    with pytest.raises(ValueError, match="cache_frozen=True"):
        c = lm.tiny_llama(len(tok), n_layers=4)
        lora.add(c, layers=None)
        lm.train(c, batch, n_steps=1, batch_size=2, lr=1e-3, cache_frozen=True)


def test_training_lowers_the_response_loss_and_calls_back(tok):
    batch = lm.tokenize_pairs(tok, PROMPTS, ANSWERS)
    model = lm.tiny_llama(len(tok), n_layers=2)
    lora.add(model, r=8, alpha=16, targets=("q_proj", "v_proj", "up_proj", "down_proj"))
    seen = []

    def on_step(step, logs):
        seen.append((step, logs["loss"]))
        return step == 29   # stop after 30 steps

    hist = lm.train(model, batch, n_steps=100, batch_size=4, lr=1e-2, seed=0, on_step=on_step)
    assert len(seen) == 30 and hist["step"][-1] == 29
    # a random tiny model passes adapters through small frozen weights: the loss falls slowly
    assert hist["final_loss"] < 0.95 * hist["loss"][0]
    assert not model.training
    with pytest.raises(ValueError, match="no parameter"):
        lm.train(lm.tiny_llama(len(tok)).requires_grad_(False), batch, n_steps=1, batch_size=1,
                 lr=1e-3)


def test_custom_loss_fn_sees_logits_and_batch(tok):
    batch = lm.tokenize_pairs(tok, PROMPTS, ANSWERS)
    batch["weight"] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    model = lm.tiny_llama(len(tok), n_layers=2)
    lora.add(model, r=2)
    shapes = []

    def loss_fn(logits, b):
        shapes.append((tuple(logits.shape), tuple(b["weight"].shape)))
        return {"loss": lm.lm_loss(logits, b), "w": b["weight"].sum()}

    lm.train(model, batch, n_steps=2, batch_size=2, lr=1e-3, loss_fn=loss_fn)
    assert shapes[0][0][0] == 2 and shapes[0][1] == (2,)

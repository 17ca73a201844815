"""iclr25.lm on the real SmolLM2-135M-Instruct.

Each session dequantizes the packaged GGUF file exactly once (about 40 s on 2 cores), into a
private cache (``$ICLR25_CACHE`` points at a temporary folder for this module), and every other
test uses the model reloaded from that cache. The user's own cache is never read or written.
"""

from __future__ import annotations

import shutil
import time

import pytest
import torch

from iclr25 import lm

PROMPT = "The capital of France is"
N_PARAMS = 134_515_008  # SmolLM2-135M: 30 layers, d_model 576, tied embeddings


def _hook_counts(model):
    return [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()]


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("iclr25-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR25_CACHE", str(root))
    yield root
    mp.undo()
    shutil.rmtree(root, ignore_errors=True)  # 540 MB; pytest would keep it for 3 runs


@pytest.fixture(scope="module")
def fresh(cache_root):
    """The one fresh GGUF load of the session; keeps only what the tests need."""
    assert not lm.builtin_cache_path().exists()
    t0 = time.perf_counter()
    model, tok = lm.load()
    seconds = time.perf_counter() - t0
    info = {
        "type": type(model).__name__,
        "n_params": sum(p.numel() for p in model.parameters()),
        "training": model.training,
        "tied": model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(),
        "logits": lm.next_token_logits(model, tok, PROMPT),
        "seconds": seconds,
    }
    del model
    return info


@pytest.fixture(scope="module")
def loaded(fresh):
    t0 = time.perf_counter()
    model, tok = lm.load()  # from the cache `fresh` wrote
    return model, tok, time.perf_counter() - t0


@pytest.fixture(scope="module")
def ids(loaded):
    _, tok, _ = loaded
    return tok("The capital of France is Paris, and the capital of Italy",
               return_tensors="pt").input_ids


def test_gguf_load_gives_the_dequantized_model_and_a_complete_cache(fresh, cache_root):
    assert fresh["type"] == "LlamaForCausalLM"
    assert fresh["n_params"] == N_PARAMS
    assert fresh["tied"] and not fresh["training"]
    folder = lm.builtin_cache_path()
    assert folder == cache_root / "smollm2-135m-instruct"
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "iclr25-cache.json"} <= names
    # nothing left over from the atomic write
    assert [p.name for p in cache_root.iterdir()] == ["smollm2-135m-instruct"]


def test_cached_reload_is_fast_and_bit_identical(fresh, loaded):
    model, tok, seconds = loaded
    assert type(model).__name__ == "LlamaForCausalLM" and not model.training
    assert sum(p.numel() for p in model.parameters()) == N_PARAMS
    assert torch.equal(lm.next_token_logits(model, tok, PROMPT), fresh["logits"])
    assert seconds < 0.5 * fresh["seconds"]
    assert tok.chat_template  # the chat template survives the cache


def test_the_model_knows_the_capital_of_france(loaded):
    model, tok, _ = loaded
    top = lm.top_tokens(model, tok, PROMPT, k=3)
    assert top[0][0] == " Paris"
    assert 0.6 < top[0][1] < 0.9  # measured 0.773 (next: " the" 0.065, " London" 0.012)
    answer = lm.generate(model, tok, "What is the capital of France?", max_new_tokens=8)
    assert answer.startswith("The capital of France is Paris")


def test_residual_hook_matches_output_hidden_states(loaded, ids):
    model, _, _ = loaded
    n = model.config.num_hidden_layers
    with torch.no_grad(), lm.capture_residual(model) as res:
        out = model(ids, output_hidden_states=True)
    hs = out.hidden_states
    assert len(hs) == n + 1 and len(res) == n
    assert res[0].shape == (1, ids.shape[1], 576)
    assert torch.equal(hs[0], model.model.embed_tokens(ids))
    for layer in range(n - 1):
        assert torch.equal(res[layer], hs[layer + 1]), layer
    # the last entry of hidden_states has the final RMSNorm applied; our hook has not
    assert not torch.allclose(res[n - 1], hs[n])
    with torch.no_grad():
        assert torch.equal(model.model.norm(res[n - 1]), hs[n])
    assert torch.equal(res[-1], res[n - 1])


def test_attention_probabilities_heads_and_values_agree(loaded, ids):
    """Rows sum to 1, causal, and probs @ V reproduces the per-head outputs."""
    model, _, _ = loaded
    assert model.config._attn_implementation == "sdpa"
    T = ids.shape[1]
    layers = [0, 7]
    with torch.no_grad(), lm.capture_attention(model, layers=layers) as att, \
            lm.capture_heads(model, layers=layers) as heads, \
            lm.capture_residual(model) as res:
        assert model.config._attn_implementation == "eager"
        eager_logits = model(ids).logits
    assert model.config._attn_implementation == "sdpa"  # restored
    assert sorted(att) == layers
    with torch.no_grad():
        sdpa_logits = model(ids).logits
        assert torch.allclose(eager_logits, sdpa_logits, atol=1e-3)
        for layer in layers:
            probs = att[layer]
            assert probs.shape == (1, 9, T, T)
            assert torch.allclose(probs.sum(-1), torch.ones(1, 9, T), atol=1e-5)
            assert torch.all(probs.triu(1) == 0)
            assert torch.all(probs[..., 0, 0] == 1)
            # recompute V from the layer's input and check probs @ V == the heads' outputs
            block = model.model.layers[layer]
            x = model.model.embed_tokens(ids) if layer == 0 else res[layer - 1]
            v = block.self_attn.v_proj(block.input_layernorm(x)).view(1, T, 3, 64)
            v = v.transpose(1, 2).repeat_interleave(3, dim=1)  # 3 kv heads -> 9 query heads
            assert torch.allclose((probs @ v).transpose(1, 2), heads[layer], atol=1e-5)


def test_heads_through_o_proj_reproduce_the_attention_output(loaded, ids):
    model, _, _ = loaded
    block = model.model.layers[5].self_attn
    seen = {}
    handle = block.register_forward_hook(lambda m, a, out: seen.__setitem__("out", out[0]))
    try:
        with torch.no_grad(), lm.capture_heads(model, layers=5) as heads:
            model(ids)
    finally:
        handle.remove()
    h = heads[5]
    assert h.shape == (1, ids.shape[1], 9, 64)
    with torch.no_grad():
        assert torch.allclose(block.o_proj(h.flatten(-2)), seen["out"], atol=1e-6)
        # the per-head contributions add up to the same output
        w = block.o_proj.weight.view(576, 9, 64)
        per_head = torch.einsum("bshd,ohd->bsho", h, w)
        assert torch.allclose(per_head.sum(2), seen["out"], atol=1e-5)


def test_mlp_hook_is_the_input_of_down_proj(loaded, ids):
    model, _, _ = loaded
    mlp = model.model.layers[3].mlp
    seen = {}
    handle = mlp.register_forward_hook(lambda m, a, out: seen.__setitem__("out", out))
    try:
        with torch.no_grad(), lm.capture_mlp(model, layers=[3, -1]) as acts:
            model(ids)
    finally:
        handle.remove()
    assert acts.layers == [3, 29]
    assert acts[3].shape == (1, ids.shape[1], 1536)
    with torch.no_grad():
        assert torch.allclose(mlp.down_proj(acts[3]), seen["out"], atol=1e-6)


def test_hooks_are_removed_even_when_the_body_raises(loaded, ids):
    model, _, _ = loaded
    before = _hook_counts(model)
    impl = model.config._attn_implementation
    with pytest.raises(RuntimeError, match="boom"):
        with lm.capture_residual(model), lm.capture_attention(model), lm.capture_mlp(model), \
                lm.capture_heads(model):
            assert sum(f + p for f, p in _hook_counts(model)) >= sum(f + p for f, p in before) + 120
            raise RuntimeError("boom")
    assert _hook_counts(model) == before
    assert model.config._attn_implementation == impl


def test_recorder_keeps_the_latest_pass_or_all_detached(loaded, ids):
    model, _, _ = loaded
    with torch.enable_grad(), lm.capture_residual(model, layers=[-2], keep_all=True,
                                                  to_cpu=True) as rec:
        model(ids)
        model(ids[:, :4])
    assert rec.layers == [28] and list(rec) == [28]
    assert rec[-2].shape[1] == 4 and [t.shape[1] for t in rec.all(28)] == [ids.shape[1], 4]
    assert not rec[28].requires_grad and rec[28].device.type == "cpu"
    assert rec.stack().shape == (1, 1, 4, 576)
    with pytest.raises(KeyError, match="not recorded"):
        rec[3]
    with lm.capture_residual(model, layers=0) as empty:
        pass
    with pytest.raises(KeyError, match="forward pass"):
        empty[0]
    with pytest.raises(IndexError):
        with lm.capture_mlp(model, layers=30):
            pass


def test_unknown_model_name_lists_the_builtins(cache_root):
    with pytest.raises(lm.ModelNotFoundError) as err:
        lm.load("no-such-model-xyz", local_files_only=True)
    msg = str(err.value)
    assert "no-such-model-xyz" in msg and "smollm2-135m-instruct" in msg
    with pytest.raises(lm.ModelNotFoundError, match="Did you mean 'smollm2-135m-instruct'"):
        lm.load("smollm2-135m", local_files_only=True)


def test_cache_write_is_atomic(loaded, tmp_path, monkeypatch):
    """A crash while writing leaves no cache; a good write is read back by the next load."""
    from transformers import LlamaConfig, LlamaForCausalLM

    _, tok, _ = loaded
    monkeypatch.setenv("ICLR25_CACHE", str(tmp_path))
    torch.manual_seed(0)
    tiny = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        num_key_value_heads=1, tie_word_embeddings=True))

    class CrashingTokenizer:
        def save_pretrained(self, folder):
            raise RuntimeError("disk exploded")

    monkeypatch.setattr(lm.loading, "_model_from_gguf", lambda spec: tiny)
    monkeypatch.setattr(lm.loading, "_tokenizer_from_gguf", lambda spec: CrashingTokenizer())
    with pytest.raises(RuntimeError, match="disk exploded"):
        lm.load()
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setattr(lm.loading, "_tokenizer_from_gguf", lambda spec: tok)
    model, _ = lm.load()  # builds the (tiny) cache and reads it back, as every later load does
    assert model is not tiny and model.config.hidden_size == 16
    for (name, a), b in zip(tiny.state_dict().items(), model.state_dict().values()):
        assert torch.equal(a, b), name  # the first load equals what the cache gives later
    assert [p.name for p in tmp_path.iterdir()] == ["smollm2-135m-instruct"]
    monkeypatch.setattr(lm.loading, "_model_from_gguf", lambda spec: pytest.fail("cache not used"))
    again, tok2 = lm.load(dtype=torch.bfloat16)
    assert again.config.hidden_size == 16 and again.dtype == torch.bfloat16
    assert tok2(PROMPT).input_ids == tok(PROMPT).input_ids


# --------------------------------------------------------------------------------------------
# the toolkit on the real model (one test per piece; the tiny-model tests are in test_lm_*.py)
# --------------------------------------------------------------------------------------------

QUESTIONS = ["What is the capital of France?", "Name a primary colour.",
             "What is two plus two?"]


def test_smollm2_generate_batch_equals_generate(loaded):
    model, tok, _ = loaded
    want = [lm.generate(model, tok, q, max_new_tokens=10) for q in QUESTIONS]
    got = lm.generate_batch(model, tok, QUESTIONS, max_new_tokens=10, batch_size=3)
    assert got.texts == want
    assert got.texts[0].startswith("The capital of France is Paris")


def test_smollm2_scoring_batched_and_with_a_reused_prefix(loaded):
    model, tok, _ = loaded
    texts = ["The capital of France is", "The capital of Italy is", "Two plus two is"]
    got = lm.next_token_logprobs(model, tok, texts, batch_size=3)
    for i, t in enumerate(texts):
        assert torch.allclose(got[i], torch.log_softmax(lm.next_token_logits(model, tok, t), -1),
                              atol=1e-4)
    prefix = "Answer with one word.\n"
    ctx = ["The capital of France is", "The capital of France is", "The capital of Italy is"]
    cont = [" Paris", " London", " Rome"]
    reuse = lm.continuation_logprobs(model, tok, ctx, cont, shared_prefix=prefix)
    plain = lm.continuation_logprobs(model, tok, [prefix + c for c in ctx], cont, batch_size=1)
    assert torch.allclose(reuse.logprob, plain.logprob, atol=1e-4)
    assert reuse.logprob[0] > reuse.logprob[1]          # Paris over London
    assert bool(reuse.is_greedy[0])


def test_smollm2_intervention_add_equals_editing_the_residual_by_hand(loaded, ids):
    model, _, _ = loaded
    d = torch.randn(576)
    with torch.no_grad(), lm.capture_residual(model, layers=10) as res:
        base = model(ids).logits
        want = lm.forward_from_layer(model, 11, res[10] + 2.0 * d)
    with torch.no_grad(), lm.intervene(model, "resid_post", lm.add(d, 2.0), layers=10):
        got = model(ids).logits
    assert torch.allclose(got, want, atol=1e-4) and not torch.allclose(got, base, atol=1e-2)


def test_smollm2_lora_cached_step_equals_uncached_and_merges(loaded):
    import copy

    from iclr25.lm import lora

    model, tok, _ = loaded
    a = copy.deepcopy(model)
    lora.add(a, r=4, alpha=8, layers=[28, 29])
    batch = lm.tokenize_pairs(tok, QUESTIONS[:2], ["Paris.", "Red."])
    with torch.no_grad():
        assert torch.equal(a(batch["input_ids"]).logits, model(batch["input_ids"]).logits)
    b = copy.deepcopy(a)
    ha = lm.train(a, batch, n_steps=1, batch_size=2, lr=1e-3, seed=0, cache_frozen=False)
    hb = lm.train(b, batch, n_steps=1, batch_size=2, lr=1e-3, seed=0)
    assert hb["cached"] and hb["start_layer"] == 28
    assert ha["loss"][0] == pytest.approx(hb["loss"][0], abs=1e-4)
    pa, pb = lora.trainable_parameters(a), lora.trainable_parameters(b)
    assert all(torch.allclose(pa[n], pb[n], atol=1e-6) for n in pa)
    with torch.no_grad():
        adapted = a(batch["input_ids"]).logits
        lora.merge(a)
        assert torch.allclose(a(batch["input_ids"]).logits, adapted, atol=1e-4)


def test_smollm2_perplexity_and_quantisation(loaded):
    import copy

    model, tok, _ = loaded
    texts = ["The capital of France is Paris. It is known for the Eiffel Tower.",
             "Water boils at one hundred degrees Celsius at sea level."]
    ppl = lm.perplexity(model, tok, texts)
    assert 2 < ppl < 60
    q8 = lm.fake_quant(copy.deepcopy(model), 8)
    assert lm.perplexity(q8, tok, texts) == pytest.approx(ppl, rel=0.05)

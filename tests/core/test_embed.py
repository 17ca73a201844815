"""iclr25.embed: mean pooling on a tiny random BERT, and all-MiniLM-L6-v2 from its package."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25 import embed


@pytest.fixture(scope="module")
def real(one_thread):
    return embed.minilm()


def test_encode_equals_pooling_by_hand_on_a_tiny_bert(real):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    tiny = BertModel(BertConfig(vocab_size=real.tokenizer.vocab_size, hidden_size=32,
                                num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64))
    enc = embed.SentenceEncoder(tiny, real.tokenizer)
    texts = ["a short one", "a somewhat longer sentence about language models", "x"]
    got = enc.encode(texts, batch_size=2)
    assert got.shape == (3, 32) and got.dtype == np.float32
    for i, t in enumerate(texts):
        ids = real.tokenizer(t, return_tensors="pt")
        with torch.no_grad():
            h = tiny(**ids).last_hidden_state[0].mean(0)
        want = (h / h.norm()).numpy()
        assert np.allclose(got[i], want, atol=1e-5)
    assert np.allclose(enc.encode(texts, batch_size=1), got, atol=1e-5)
    with pytest.raises(TypeError, match="list of strings"):
        enc.encode("one string")


def test_minilm_embeds_paraphrases_close(real):
    texts = ["A man is eating food.", "A man is eating a piece of bread.",
             "The stock market fell sharply today.", "Share prices dropped a lot."]
    x = real.encode(texts, batch_size=3)
    assert x.shape == (4, 384) and real.dim == 384
    assert np.allclose(np.linalg.norm(x, axis=1), 1, atol=1e-5)
    sim = x @ x.T
    assert sim[0, 1] > 0.6 and sim[2, 3] > 0.5          # measured 0.755 and about 0.6
    assert max(sim[0, 2], sim[0, 3], sim[1, 2], sim[1, 3]) < 0.2
    assert np.allclose(real.similarity(texts[:1], texts[1:2]), sim[0, 1], atol=1e-5)
    assert real.max_length == 256

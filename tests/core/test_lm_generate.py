"""iclr25.lm generation on a tiny random Llama: chat_text and generate_batch against generate."""

from __future__ import annotations

import pytest
import torch

from iclr25 import lm

PROMPTS = ["Hi", "What is two plus two?", "The capital of France is", "Yes or no?",
           "A language model predicts the next token from the tokens before it."]


def test_chat_text_uses_the_template_and_falls_back_without_one(tiny):
    _, tok = tiny
    text = lm.chat_text(tok, "Hi", system="Be brief.")
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n")
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert lm.chat_text(tok, msgs, add_generation_prompt=False).endswith("Hello<|im_end|>\n")
    plain = lm.tiny_tokenizer(chat_template=False)
    assert not plain.chat_template
    assert lm.chat_text(plain, "Hi", system="Be brief.") == \
        "System: Be brief.\n\nUser: Hi\n\nAssistant:"
    assert lm.chat_text(plain, msgs, add_generation_prompt=False) == \
        "User: Hi\n\nAssistant: Hello"
    with pytest.raises(ValueError, match="unknown chat role"):
        lm.chat_text(plain, [{"role": "robot", "content": "x"}])
    with pytest.raises(TypeError, match="role"):
        lm.chat_text(tok, [{"text": "x"}])


@pytest.mark.parametrize("chat", [True, False])
def test_greedy_generate_batch_equals_one_at_a_time_generate(tiny, chat):
    model, tok = tiny
    want = [lm.generate(model, tok, p, max_new_tokens=10, chat=chat) for p in PROMPTS]
    assert len(set(want)) >= 3  # the tiny model does not collapse onto one output
    for bs in (1, 2, 5):
        got = lm.generate_batch(model, tok, PROMPTS, max_new_tokens=10, chat=chat, batch_size=bs)
        assert got.texts == want, bs
        assert list(got) == want and len(got) == 5 and got[1] == want[1]
    assert all(len(ids) == 10 for ids in got.token_ids)
    assert got.finish_reasons == ["length"] * 5
    assert [tok.decode(i) for i in got.token_ids] == want
    assert got.prompt_token_ids[0] == tok(lm.chat_text(tok, "Hi"), add_special_tokens=False
                                          ).input_ids if chat else True


def test_eos_and_stop_strings_end_a_sequence(tiny):
    model, tok = tiny
    full = lm.generate_batch(model, tok, PROMPTS[:3], max_new_tokens=12, chat=False)
    # pick a stop string that occurs in the middle of the first text
    text = full.texts[0]
    stop = text[4:6]
    got = lm.generate_batch(model, tok, PROMPTS[:3], max_new_tokens=12, chat=False, stop=[stop])
    assert got.finish_reasons[0] == "stop"
    assert got.texts[0] == text[:text.find(stop)]
    assert stop in tok.decode(got.token_ids[0]) and len(got.token_ids[0]) < 12
    # a token that the model produces, declared as end-of-sequence, ends it there (kept in ids)
    eos = full.token_ids[1][3]
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [0, eos]
    try:
        got = lm.generate_batch(model, tok, PROMPTS[:3], max_new_tokens=12, chat=False)
    finally:
        model.generation_config.eos_token_id = saved
    first = full.token_ids[1].index(eos)
    assert got.token_ids[1] == full.token_ids[1][:first + 1] and got.finish_reasons[1] == "eos"
    assert got.texts[0] == full.texts[0] or eos in full.token_ids[0]


def test_sampling_is_seeded_per_sequence_whatever_the_batch_size(tiny):
    model, tok = tiny
    kw = dict(max_new_tokens=8, do_sample=True, temperature=1.5, top_p=0.9, seed=3,
              num_return_sequences=3)
    a = lm.generate_batch(model, tok, PROMPTS[:2], batch_size=6, **kw)
    b = lm.generate_batch(model, tok, PROMPTS[:2], batch_size=1, **kw)
    assert a.texts == b.texts and len(a) == 6
    assert len(set(a.texts[:3])) > 1          # three different samples of prompt 0
    c = lm.generate_batch(model, tok, PROMPTS[:2], batch_size=6, **{**kw, "seed": 4})
    assert c.texts != a.texts
    g = lm.generate_batch(model, tok, PROMPTS[:2], max_new_tokens=8, num_return_sequences=2)
    assert g.texts[0] == g.texts[1] and g.prompt_token_ids[0] == g.prompt_token_ids[1]


def test_top_p_keeps_the_nucleus():
    from iclr25.lm.generation import _sample

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    gens = [torch.Generator().manual_seed(i) for i in range(1)]
    draws = {int(_sample(logits, 1.0, 0.7, gens)[0]) for _ in range(200)}
    assert draws == {0, 1}                    # 0.5 + 0.3 reaches 0.7; 2 and 3 never drawn


def test_bad_arguments_get_clear_errors(tiny):
    model, tok = tiny
    with pytest.raises(TypeError, match="list of prompts"):
        lm.generate_batch(model, tok, "Hi")
    with pytest.raises(ValueError, match="max_new_tokens"):
        lm.generate_batch(model, tok, ["Hi"], max_new_tokens=0)
    with pytest.raises(ValueError, match="batch_size"):
        lm.generate_batch(model, tok, ["Hi"], batch_size=0)
    with pytest.raises(ValueError, match="top_p"):
        lm.generate_batch(model, tok, ["Hi"], top_p=0)
    with pytest.raises(ValueError, match="temperature"):
        lm.generate_batch(model, tok, ["Hi"], do_sample=True, temperature=0)
    with pytest.raises(ValueError, match="stop"):
        lm.generate_batch(model, tok, ["Hi"], stop=[""])
    with pytest.raises(TypeError, match="chat=False"):
        lm.generate_batch(model, tok, [[{"role": "user", "content": "x"}]], chat=False)

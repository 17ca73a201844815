"""iclr25.lm scoring on a tiny random Llama: batched equals unbatched, prefix reuse equals no
reuse, perplexity equals exp of the mean NLL computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25 import lm

TEXTS = ["Hi", "What is two plus two?", "The capital of France is",
         "A language model predicts the next token from the tokens before it."]


def _one(model, ids):
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)


def test_next_token_logprobs_batched_equal_unbatched(tiny):
    model, tok = tiny
    got = lm.next_token_logprobs(model, tok, TEXTS, batch_size=3)
    assert got.shape == (4, len(tok))
    for i, t in enumerate(TEXTS):
        want = torch.log_softmax(lm.next_token_logits(model, tok, t), -1)
        assert torch.allclose(got[i], want, atol=1e-5), i
    cand = [tok(" yes").input_ids[0], tok(" no").input_ids[0]]
    sub = lm.next_token_logprobs(model, tok, TEXTS, token_ids=cand)
    assert sub.shape == (4, 2) and torch.allclose(sub, got[:, cand])
    with pytest.raises(ValueError, match="token_ids"):
        lm.next_token_logprobs(model, tok, TEXTS, token_ids=[10**6])
    with pytest.raises(TypeError, match="list of strings"):
        lm.next_token_logprobs(model, tok, "Hi")


def test_continuation_logprobs_equal_brute_force_and_prefix_reuse(tiny):
    model, tok = tiny
    ctx = ["Question: what is two plus two? Answer:", "The capital of France is",
           "Yes or no?", ""]
    cont = [" four", " Paris", " yes", "The"]
    got = lm.continuation_logprobs(model, tok, ctx, cont, batch_size=3)
    for i, (c, x) in enumerate(zip(ctx, cont)):
        c_ids = tok(c).input_ids or [tok.eos_token_id]
        x_ids = tok(c + x).input_ids[len(tok(c).input_ids):]
        lp = _one(model, c_ids + x_ids)
        want = sum(float(lp[len(c_ids) - 1 + j, t]) for j, t in enumerate(x_ids))
        assert abs(float(got.logprob[i]) - want) < 1e-5, i
        assert int(got.n_tokens[i]) == len(x_ids)
    one = lm.continuation_logprobs(model, tok, ctx, cont, batch_size=1)
    assert torch.allclose(one.logprob, got.logprob, atol=1e-5)
    # a trailing space of the context moves to the continuation, as lm-eval does
    a = lm.continuation_logprobs(model, tok, ["The capital of France is "], ["Paris"])
    b = lm.continuation_logprobs(model, tok, ["The capital of France is"], [" Paris"])
    assert torch.allclose(a.logprob, b.logprob)

    prefix = "Answer the questions.\nQ: is the sky blue?\nA: yes\n"
    qs = ["Q: is grass red?\nA:", "Q: is two plus two four?\nA:", "Q: Paris?\nA:", ""]
    xs = [" no", " yes", " yes", "Q"]
    reuse = lm.continuation_logprobs(model, tok, qs, xs, shared_prefix=prefix, batch_size=3)
    plain = lm.continuation_logprobs(model, tok, [prefix + q for q in qs], xs, batch_size=2)
    assert torch.allclose(reuse.logprob, plain.logprob, atol=1e-5)
    assert torch.equal(reuse.n_tokens, plain.n_tokens)
    assert torch.equal(reuse.is_greedy, plain.is_greedy)
    assert reuse.mean_logprob.shape == (4,)


def test_continuation_errors(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="pairs"):
        lm.continuation_logprobs(model, tok, ["a", "b"], ["c"])
    with pytest.raises(ValueError, match="empty"):
        lm.continuation_logprobs(model, tok, ["a"], [""])
    text = "The capital of France is"
    cut = next(k for k in range(1, len(text))
               if tok(text).input_ids[:len(tok(text[:k]).input_ids)] != tok(text[:k]).input_ids)
    with pytest.raises(ValueError, match="token boundary"):
        # the prefix ends inside a token of the whole text
        lm.continuation_logprobs(model, tok, [text[cut:]], [" Paris"], shared_prefix=text[:cut])


def test_sequence_logprobs_is_differentiable_and_masks(tiny):
    model, tok = tiny
    batch = lm.tokenize_pairs(tok, ["Hi", "What is two plus two?"], ["Hello", "Four."])
    ids, att, resp = batch["input_ids"], batch["attention_mask"], batch["response_mask"]
    lp = lm.sequence_logprobs(model, ids, att, resp)
    assert lp.shape == (2,) and lp.requires_grad
    lp.sum().backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    for i in range(2):
        n = int(att[i].sum())
        full = _one(model, ids[i, :n].tolist())
        want = sum(float(full[t - 1, ids[i, t]]) for t in range(1, n) if resp[i, t])
        assert abs(float(lp[i].detach()) - want) < 1e-5
    # response-only: the prompt's tokens do not count
    whole = lm.sequence_logprobs(model, ids, att)
    assert bool((whole < lp - 1e-3).all())
    with pytest.raises(ValueError, match="shape"):
        lm.sequence_logprobs(model, ids, att[:, :-1])


def test_perplexity_is_exp_of_the_mean_nll(tiny):
    model, tok = tiny
    nll, n = 0.0, 0
    for t in TEXTS:
        ids = tok(t).input_ids[:8]
        if len(ids) < 2:
            continue
        lp = _one(model, ids)
        nll -= sum(float(lp[j - 1, ids[j]]) for j in range(1, len(ids)))
        n += len(ids) - 1
    got = lm.perplexity(model, tok, TEXTS, batch_size=3, max_len=8)
    assert math.isclose(got, math.exp(nll / n), rel_tol=1e-5)
    with pytest.raises(ValueError, match="max_len"):
        lm.perplexity(model, tok, TEXTS, max_len=1)


def test_multiple_choice_pairs_sharing_a_context_equal_brute_force(tiny):
    """Pairs with one context and one-token options share one forward pass; each option's score
    is still its own log-probability (brute force), mixed with multi-token pairs and a prefix."""
    model, tok = tiny
    options = [" a", " b", " the", " is"]
    one_token = [o for o in options if len(tok("Q1 Answer:" + o).input_ids)
                 - len(tok("Q1 Answer:").input_ids) == 1]
    assert len(one_token) >= 2
    ctx = ["Q1 Answer:"] * len(one_token) + ["Q2 Answer:"] * len(one_token) + ["Q1 Answer:"]
    cont = one_token * 2 + [" a longer answer"]
    for prefix in (None, "Read the question.\n"):
        got = lm.continuation_logprobs(model, tok, ctx, cont, shared_prefix=prefix, batch_size=2)
        for i, (c, x) in enumerate(zip(ctx, cont)):
            full = (prefix or "") + c
            c_ids = tok(full).input_ids
            x_ids = tok(full + x).input_ids[len(c_ids):]
            lp = _one(model, c_ids + x_ids)
            want = sum(float(lp[len(c_ids) - 1 + j, t]) for j, t in enumerate(x_ids))
            assert abs(float(got.logprob[i]) - want) < 1e-5, (prefix, i)
        assert len(set(got.logprob[:len(one_token)].tolist())) == len(one_token)

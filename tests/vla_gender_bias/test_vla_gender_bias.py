"""Tests of chapter 19 (iclr25.vla_gender_bias): the protocol against brute force, scoring paths
against each other, the tiny LLaVA end to end, the toy VLA's pieces."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch

from iclr25 import lm
from iclr25.vla_gender_bias import debias, protocol as P, scoring as S, toy_vla as T, values as V


def test_option_orders_are_all_permutations():
    assert len(P.option_orders(3)) == 6 and len(set(P.option_orders(3))) == 6
    with pytest.raises(ValueError, match="n_options"):
        P.option_orders(0)


def test_option_probs_maps_letters_back_to_options():
    # letter A has prob .7, B .2, C .1; order (2, 0, 1): A shows option 2, B option 0, C option 1
    lp = np.log([[0.7, 0.2, 0.1]]) + 3.0           # unnormalised: renormalisation undoes +3
    out = P.option_probs(lp, [(2, 0, 1)])
    np.testing.assert_allclose(out, [[0.2, 0.1, 0.7]])
    with pytest.raises(ValueError, match="n_prompts"):
        P.option_probs(lp, [(0, 1)])


def _random_prompts(task="occupations", values=("nurse", "pilot", "baker"), n_desc=2):
    subj = P.text_subjects(n_desc, seed=1)
    return P.make_prompts(task, subj, list(values), n_templates=2, seed=3)


def test_make_prompts_is_gender_balanced_and_identical_up_to_the_cue():
    df = _random_prompts()
    assert len(df) == 3 * 2 * 2 * 4                   # values x templates x orders x subjects
    assert (df.gender == "female").sum() == (df.gender == "male").sum()
    for (v, t, o), g in df.groupby(["value", "template", "order"]):
        f = g[g.gender == "female"].body.str.replace("a woman", "X").tolist()
        m = g[g.gender == "male"].body.str.replace("a man", "X").tolist()
        assert sorted(f) == sorted(m)
    with pytest.raises(ValueError, match="valid: traits, skills, occupations"):
        P.make_prompts("hobbies", P.text_subjects(1))


def test_bias_table_matches_brute_force():
    rng = np.random.default_rng(0)
    df = _random_prompts()
    lp = np.log(rng.dirichlet(np.ones(2), len(df)))
    per = P.aggregate(df, P.option_probs(lp, df.order.tolist()))
    tab = P.bias_table(per).set_index("value")
    probs = P.option_probs(lp, df.order.tolist())[:, 0]
    for v in ("nurse", "pilot", "baker"):
        f = probs[(df.value == v) & (df.gender == "female")].mean()
        m = probs[(df.value == v) & (df.gender == "male")].mean()
        assert tab.loc[v, "delta"] == pytest.approx(f - m, abs=1e-12)   # balanced: mean of means


def test_order_invariance_and_swap_control():
    """A model that only prefers letter A has Delta = 0 and p_yes = 1/2 after order averaging;
    the swapped control has identical prompts for both labels."""
    df = _random_prompts()
    lp = np.tile(np.log([0.9, 0.1]), (len(df), 1))
    per = P.aggregate(df, P.option_probs(lp, df.order.tolist()))
    np.testing.assert_allclose(per.p_yes, 0.5)
    ctl = P.make_prompts("occupations", P.text_subjects(2, seed=1, swap_control=True), ["nurse"])
    f, m = ctl[ctl.gender == "female"].body.tolist(), ctl[ctl.gender == "male"].body.tolist()
    assert f == m


def test_occupation_correlation_closed_form():
    shares = {"a": 0.1, "b": 0.5, "c": 0.9, "d": 0.3}
    tab = pd.DataFrame({"task": "occupations", "value": list(shares),
                        "delta": [0.01, 0.05, 0.2, 0.02]})
    r = P.occupation_correlation(tab, shares)
    assert r["spearman"] == pytest.approx(1.0) and r["n"] == 4


def test_score_letters_batched_equals_generate():
    model, tok = lm.tiny_llama(), lm.tiny_tokenizer()
    bodies = _random_prompts(values=("nurse",), n_desc=1).body.tolist()[:6]
    texts = S.chat_prompts(tok, bodies)
    a = S.score_letters(model, tok, texts, 2, batch_size=4)
    b = S.score_letters(model, tok, texts, 2, method="generate")
    np.testing.assert_allclose(a, b, atol=1e-5)
    with pytest.raises(ValueError, match="valid: batched, generate"):
        S.score_letters(model, tok, texts, 2, method="fast")


def test_score_letters_cached_equals_batched_and_rejects_bad_prefixes():
    model, tok = lm.tiny_llama(), lm.tiny_tokenizer()
    df = _random_prompts(values=("nurse", "pilot"), n_desc=2)
    texts = S.chat_prompts(tok, df.body.tolist())
    prefixes = [t[:t.index(c) + len(c) + 1] for t, c in zip(texts, df.content)]
    assert len(set(prefixes)) == 4          # two persons per description pair
    a = S.score_letters(model, tok, texts, 2, batch_size=3)
    b = S.score_letters_cached(model, tok, texts, prefixes, 2, batch_size=3)   # ragged batches
    np.testing.assert_allclose(a, b, atol=1e-5)
    with pytest.raises(ValueError, match="not a proper prefix"):
        S.score_letters_cached(model, tok, texts[:1], ["nothing"], 2)
    with pytest.raises(ValueError, match="1 texts but 2 prefixes"):
        S.score_letters_cached(model, tok, texts[:1], prefixes[:2], 2)


def _tiny_llava():
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration
    vc = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, image_size=16, patch_size=8, projection_dim=32)
    tc = LlamaConfig(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    cfg = LlavaConfig(vision_config=vc, text_config=tc, image_token_index=399, image_seq_length=4)
    torch.manual_seed(0)
    return LlavaForConditionalGeneration(cfg).eval()


def test_tiny_llava_end_to_end_batched_equals_single():
    model, tok = _tiny_llava(), lm.tiny_tokenizer()
    df = _random_prompts(values=("nurse", "pilot"), n_desc=1)
    ids = [S.expand_image_tokens([399] + tok.encode(S.chat_prompts(tok, [b])[0]), 399, 4)
           for b in df.body]
    pix = torch.randn(len(ids), 3, 16, 16)
    letters = S.letter_ids(tok, 2)
    a = S.score_vlm(model, ids, pix, letters, batch_size=5)
    b = S.score_vlm(model, ids, pix, letters, method="single")
    np.testing.assert_allclose(a, b, atol=1e-5)
    per = P.aggregate(df, P.option_probs(a, df.order.tolist()))
    tab = P.bias_table(per)
    assert len(tab) == 2 and np.isfinite(tab.delta).all()
    with pytest.raises(ValueError, match="images"):
        S.score_vlm(model, ids, pix[:2], letters)


def test_portraits_balanced_and_decodable():
    por = T.SyntheticPortraits(64, seed=0)
    assert por.images.shape == (64, 3, 16, 16) and int(por.gender.sum()) == 32
    # the gender attribute is the stripe orientation: vertical vs horizontal energy
    x = por.images.mean(1)
    dv = (x[:, :, 1:] - x[:, :, :-1]).pow(2).mean((1, 2))
    dh = (x[:, 1:] - x[:, :-1]).pow(2).mean((1, 2))
    assert ((dv > dh).long() == por.gender).float().mean() > 0.9
    with pytest.raises(ValueError, match="even"):
        T.SyntheticPortraits(3)


def test_skewed_occupations_follow_injected_shares():
    shares = {"a": 0.1, "b": 0.5, "c": 0.9}
    g = torch.arange(60000) % 2
    occ = T.skewed_occupations(g, shares, seed=0)
    for k, s in enumerate(shares.values()):
        sel = occ == k
        assert float(g[sel].float().mean()) == pytest.approx(s, abs=0.01)


def test_direct_answers_carry_exactly_the_injected_delta():
    shares = {"nurse": 0.1, "pilot": 0.5, "baker": 0.9}
    por = T.SyntheticPortraits(4000, seed=1)
    rows = T.make_training_data(por, T.skewed_occupations(por.gender, shares), shares, n_questions=8)
    yes = {}
    for body, ans, i, kind in rows:
        if kind == "occupation":
            q = next(o for o in shares if f" {o}?" in body)
            yes.setdefault((q, int(por.gender[i])), []).append(ans == "Yes")
    for q, s in shares.items():        # P(yes | woman) - P(yes | man) = 2 share - 1
        delta = np.mean(yes[(q, 1)]) - np.mean(yes[(q, 0)])
        assert delta == pytest.approx(2 * s - 1, abs=0.03)
    base = T.base_rates(shares)           # gender-neutral base rates move P(yes), not Delta
    u = sorted((base[q] - 0.5) / (0.4 * (1 - abs(2 * s - 1))) for q, s in shares.items())
    assert u == pytest.approx([-1.0, 0.0, 1.0])     # evenly spaced in [-1, 1], closed form
    for q, s in shares.items():
        assert 0 <= base[q] - abs(s - 0.5) and base[q] + abs(s - 0.5) <= 1
    rows = T.make_training_data(por, T.skewed_occupations(por.gender, shares), shares, n_questions=8,
                                base=base)
    yes = {}
    for body, ans, i, kind in rows:
        if kind == "occupation":
            q = next(o for o in shares if f" {o}?" in body)
            yes.setdefault((q, int(por.gender[i])), []).append(ans == "Yes")
    for q, s in shares.items():
        assert np.mean(yes[(q, 1)]) - np.mean(yes[(q, 0)]) == pytest.approx(2 * s - 1, abs=0.03)
        assert np.mean(yes[(q, 1)] + yes[(q, 0)]) == pytest.approx(base[q], abs=0.03)
    with pytest.raises(ValueError, match="spread"):
        T.base_rates(shares, spread=1.0)
    cap = T.make_training_data(por, T.skewed_occupations(por.gender, shares), shares, answers="caption")
    assert {a for b, a, i, k in cap if k == "color_yesno"} == {"Yes", "No"}
    with pytest.raises(ValueError, match="answers"):
        T.make_training_data(por, T.skewed_occupations(por.gender, shares), shares, answers="x")


def test_fit_schedule_warms_up_and_decays():
    vla, tok, por, ex, te, tr, cte = _toy(n_train=16)
    seen = []
    orig = torch.optim.Adam.step

    def spy(self, *a, **k):
        seen.append(self.param_groups[0]["lr"])
        return orig(self, *a, **k)
    torch.optim.Adam.step = spy
    try:
        T.fit(vla, ex, por.images, n_steps=40, batch_size=4, lr=1e-2)
    finally:
        torch.optim.Adam.step = orig
    assert seen[0] == pytest.approx(1e-2 / 2)                  # warm-up over 2 steps
    assert seen[1] == pytest.approx(1e-2 * 0.5 * (1 + np.cos(np.pi / 40)))
    assert seen[-1] == pytest.approx(1e-2 * 0.5 * (1 + np.cos(np.pi * 39 / 40)))
    with pytest.raises(ValueError, match="schedule"):
        T.fit(vla, ex, por.images, n_steps=1, schedule="linear")


def _toy(n_train=64, seed=0):
    shares = T.injected_shares(4)
    occ = list(shares)
    te = T.build_texts("occupations", occ, "test")
    cte = T.build_texts("color", None, "test")
    tr = T.build_texts("occupations", occ, "train")
    tok = T.WordTokenizer(list(te.body) + list(cte.body) + list(tr.body) + [T.CAPTION_PROMPT]
                          + [T.caption(o, c, g) for o in occ for c in T.COLORS for g in (0, 1)]
                          + list(T.build_texts("color_yesno", None, "train").body)
                          + list(T.build_texts("color", None, "train").body) + list(V.MITIGATIONS))
    por = T.SyntheticPortraits(n_train, seed=seed)
    vla = T.ToyVLA(len(tok), d_model=16, n_layers=2, n_heads=2, seed=seed)
    rows = T.make_training_data(por, T.skewed_occupations(por.gender, shares), shares)
    return vla, tok, por, T.encode_examples(vla, tok, rows), te, tr, cte


def test_toy_training_data_and_scoring_agree_with_forward():
    vla, tok, por, ex, te, tr, cte = _toy()
    assert len(ex) == 7 * len(por)
    assert set(ex.kind) == {"caption", "occupation", "color", "color_yesno"}
    assert 4 not in ex.ids.flatten().tolist()        # no <unk>: the vocabulary covers the data
    small = T.setup(4, 16, 8, seed=0)
    assert 4 not in small.examples.ids.flatten().tolist()
    assert set(small.answer_delta) == set(small.shares)
    acc = T.yesno_color_accuracy(vla, tok, T.build_texts("color_yesno", None, "test"), por)
    assert 0.0 <= acc <= 1.0
    # every occupation/colour target is a single option word
    for r in range(len(ex)):
        if ex.kind[r] != "caption":
            assert int(ex.target_mask[r].sum()) == 1
    lp = T.score_images(vla, tok, te.body[:3].tolist(), por.images[:5], ("Yes", "No"))
    ids = torch.tensor([vla.prefix_ids() + tok.encode(te.body[1])])
    direct = torch.log_softmax(vla(ids, por.images[3:4])[0, -1], -1)[[tok.encode("Yes")[0], tok.encode("No")[0]]]
    torch.testing.assert_close(lp[1, 3], direct)
    tab = T.measure_bias(vla, tok, te, T.SyntheticPortraits(8, seed=5))
    assert len(tab) == 4
    h = T.fit(vla, ex, por.images, n_steps=3, batch_size=8)
    assert len(h["loss"]) == 3 and np.isfinite(h["loss"]).all()


def test_debias_methods_train_only_their_parameters():
    vla, tok, por, ex, te, tr, cte = _toy()
    names = lambda v: {n for n, p in v.named_parameters() if p.requires_grad}
    assert names(debias.prompt_tuning(vla)) == {"prompt_vectors"}
    lo = names(debias.lora(vla, r=2, top_k=1))
    assert lo and all("lora_" in n and "blocks.1" in n for n in lo)
    ft = names(debias.finetune_last(vla, n_blocks=1))
    assert ft and all(n.startswith(("gpt.blocks.1", "gpt.ln_f")) for n in ft)
    v = debias.prompt_tuning(vla)
    before = debias.bias_loss(v, tok, tr.body.tolist(), tr.order.tolist(), por.images[:4]).item()
    debias.train_debias(v, tok, tr.body.tolist(), tr.order.tolist(), por.images, n_steps=2, n_images=4)
    assert np.isfinite(before)
    with pytest.raises(ValueError, match="top_k"):
        debias.lora(vla, top_k=9)
    cyn = T.build_texts("color_yesno", None, "train")
    cmc = T.build_texts("color", None, "train")
    val = T.SyntheticPortraits(4, seed=3)
    model, info = debias.tune_and_train(debias.prompt_tuning, vla, tok, tr.iloc[:4], por.images, val, (cmc, cyn),
                                        lrs=(1e-3, 1e-2), n_steps=1, n_images=2)
    assert [g["lr"] for g in info["grid"]] == [1e-3, 1e-2] and info["lr"] in (1e-3, 1e-2)
    ok = [g for g in info["grid"] if g["val_yesno"] >= 0.9 * T.yesno_color_accuracy(vla, tok, cyn, val)
          and g["val_mcq"] >= 0.9 * T.color_accuracy(vla, tok, cmc, val)]
    if ok:      # the selection rule: lowest validation bias among the runs that keep capability
        assert info["val_bias"] == min(g["val_bias"] for g in ok)
    assert model.prompt_vectors is not None
    with pytest.raises(ValueError, match="lrs"):
        debias.tune_and_train(debias.prompt_tuning, vla, tok, tr, por.images, val, (cmc, cyn), lrs=(), n_steps=1)


def test_bias_loss_closed_form_and_pruning_masks_heads():
    vla, tok, por, ex, te, tr, cte = _toy()
    bodies, orders = tr.body.tolist()[:4], tr.order.tolist()[:4]
    lp = T.score_images(vla, tok, bodies, por.images[:3], ("Yes", "No"))
    p = P.option_probs(lp.reshape(-1, 2).numpy(), [(0, 1)] * 12)[:, 0]
    want = np.abs(p - 0.5).mean()
    got = debias.bias_loss(vla, tok, bodies, orders, por.images[:3]).item()
    assert got == pytest.approx(want, abs=1e-6)
    scores = debias.head_importance(vla, tok, ex.subset(range(16)), por.images, bodies, orders, por.images[:4])
    assert scores.shape == (2, 2)
    v, pruned = debias.prune_heads(vla, scores, 1)
    (l, h), = pruned
    hd = 16 // 2
    assert float(v.gpt.blocks[l].attn.proj.weight[:, h * hd:(h + 1) * hd].abs().sum()) == 0.0
    assert scores.flatten().argmin().item() == l * 2 + h

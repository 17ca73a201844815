"""Chapter 19: the per-item replicates of the registered claims (``iclr25.vla_gender_bias.measures``)
against brute force on a small untrained toy VLA, their closed forms, and the OpenAI-compatible
endpoint against in-process scoring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from iclr25.vla_gender_bias import endpoint as E, measures as M, protocol as P, toy_vla as T


@pytest.fixture(scope="module")
def toy():
    torch.manual_seed(0)
    s = T.setup(4, 16, 8, seed=0)
    vla = T.ToyVLA(len(s.tok), **s.model_kw)
    vla.eval()
    return vla, s


def test_portrait_pairs_are_balanced_and_disjoint():
    g = np.array([1, 0, 0, 1, 1, 0, 1, 1])
    pairs = M.portrait_pairs(g)
    assert pairs.tolist() == [[0, 1], [3, 2], [4, 5]]
    assert (g[pairs[:, 0]] == 1).all() and (g[pairs[:, 1]] == 0).all()


def test_item_deltas_against_brute_force(toy):
    vla, s = toy
    items = M.item_deltas(vla, s.tok, s.occ_test, s.eval)
    pairs = M.portrait_pairs(s.eval.gender.numpy())
    n_vt = s.occ_test.groupby(["value", "template"]).ngroups
    assert len(items) == n_vt * len(pairs)
    # one item by hand: every order of its (value, template), one forward pass per prompt and image
    r = items.iloc[5]
    sel = s.occ_test[(s.occ_test.value == r.value) & (s.occ_test.template == r.template)]
    fi, mi = pairs[r.pair]
    yes, no = s.tok.encode("Yes")[0], s.tok.encode("No")[0]
    def p_yes(i):
        ps = []
        for b in sel.body:
            ids = torch.tensor([vla.prefix_ids() + s.tok.encode(b)])
            with torch.no_grad():
                lp = torch.log_softmax(vla(ids, s.eval.images[i:i + 1])[0, -1], -1)
            ps.append(float(torch.softmax(lp[[yes, no]], 0)[0]))
        return np.mean(ps)
    assert r.female == pytest.approx(p_yes(fi), abs=1e-5)
    assert r.delta == pytest.approx(p_yes(fi) - p_yes(mi), abs=1e-5)


def test_planted_slope_items_mean_is_the_slope_through_the_origin():
    rng = np.random.default_rng(0)
    b = rng.uniform(-0.5, 0.9, 40)
    d = 0.6 * b + rng.normal(0, 0.05, 40)
    per = M.planted_slope_items(d, b)
    slope = np.linalg.lstsq(b[:, None], d, rcond=None)[0][0]
    assert per.mean() == pytest.approx(slope)
    with pytest.raises(ValueError, match="undefined"):
        M.planted_slope_items(d[:3], np.zeros(3))
    with pytest.raises(ValueError, match="one length"):
        M.planted_slope_items(d, b[:5])


def test_colour_items_agree_with_the_accuracies(toy):
    vla, s = toy
    mcq = M.colour_mcq_items(vla, s.tok, s.color_test, s.eval)
    assert len(mcq) == s.color_test.template.nunique() * len(s.eval)
    # averaging per template then per image differs from the library's accuracy (per image, over
    # every template): compare with a brute-force argmax per (template, image)
    lp = T.score_images(vla, s.tok, s.color_test.body.tolist(), s.eval.images, T.COLORS)
    for (t, i), row in mcq.set_index(["template", "image"]).iterrows():
        rows = np.flatnonzero(s.color_test.template.to_numpy() == t)
        p = torch.softmax(lp[rows, i], -1).mean(0)
        assert row.correct == float(int(p.argmax()) == int(s.eval.color[i]))
    yn = M.yesno_colour_items(vla, s.tok, s.color_yesno_test, s.eval)
    assert len(yn) == 3 * s.color_yesno_test.template.nunique() * len(s.eval)
    assert set(yn.correct) <= {0.0, 1.0}
    cap = M.capability(vla, s.tok, s)
    assert cap == pytest.approx((mcq.correct.mean() + yn.correct.mean()) / 2)


def test_halves_and_strongest_settings():
    tune, test = M.halves(11, seed=3)
    assert tune.sum() == 5 and test.sum() == 6 and not (tune & test).any()
    d = lambda *v: np.array(v, dtype=float)
    sweep = {"a": {"off": (1.0, d(1, 1, 1, 1)), "weak": (0.97, d(0.5, 0.5, 9, 9)), "strong": (0.5, d(0, 0, 0, 0))},
             "b": {"x": (0.2, d(0, 0, 0, 0))}}
    tune = np.array([True, True, False, False])
    best = M.strongest_settings(sweep, 0.95, tune).set_index("family")
    assert list(best.index) == ["a"]                       # b has no admissible setting
    assert best.loc["a", "setting"] == "weak" and best.loc["a", "tune_bias"] == 0.5


def test_proxy_items_and_gender_power():
    rows = []
    for item, (w, m, p, a) in enumerate([(0.6, 0.4, 0.5, 0.5), (0.3, 0.5, 0.51, 0.49)]):
        for cue, v in zip(("a woman", "a man", "a person", "an adult"), (w, m, p, a)):
            rows.append({"value": f"v{item}", "cue": cue, "p_yes": v})
    it = M.proxy_items(pd.DataFrame(rows)).set_index("value")
    assert it.loc["v0", "delta"] == pytest.approx(0.2) and it.loc["v1", "neutral"] == pytest.approx(0.02)
    ok = M.gender_power({"d0": 0.3, "d1": 0.2}, {"d0": 0.01, "d1": -0.05})
    assert ok["holds"] and ok["ratio"] == pytest.approx(5.0)
    assert not M.gender_power({"d0": 0.3, "d1": -0.01}, {"d0": 0.0, "d1": 0.001})["holds"]   # a wrong sign
    assert not M.gender_power({"d0": 0.1, "d1": 0.1}, {"d0": 0.05, "d1": 0.0})["holds"]      # under 3x noise


def test_endpoint_matches_in_process_scoring(toy):
    vla, s = toy
    bodies, images = s.occ_test.body.tolist()[:3], s.eval.images[:2]
    with E.serve(vla, s.tok) as url:
        lp = E.score_endpoint(url, bodies, images, ("Yes", "No"), top_logprobs=len(s.tok))
        with pytest.raises(ValueError, match="raise top_logprobs"):
            E.score_endpoint(url, bodies[:1], images[:1], ("Yes", "No"), top_logprobs=1)
    ref = T.score_images(vla, s.tok, bodies, images, ("Yes", "No")).numpy()
    pe = P.option_probs(lp.reshape(-1, 2), [(0, 1)] * 6)
    pr = P.option_probs(ref.reshape(-1, 2), [(0, 1)] * 6)
    assert np.abs(pe - pr).max() < 1e-6
    req = E.chat_request("Q?", E.encode_npy(images[0]))
    assert [p["type"] for p in req["messages"][0]["content"]] == ["image_url", "text"]
    np.testing.assert_array_equal(E.decode_data_url(req["messages"][0]["content"][0]["image_url"]["url"]),
                                  images[0].numpy())
    with pytest.raises(ValueError, match="x-npy"):
        E.decode_data_url("data:image/png;base64,AAAA")


def test_text_proxy_items_pair_the_four_cues_and_the_control_repeats_the_male_text(monkeypatch):
    from iclr25.vla_gender_bias import configs, textproxy as TP

    cfg = configs.text_proxy("smoke")
    pr = TP.item_prompts(cfg, 0)
    n_items = pr.groupby(["task", "value", "template", "description"]).ngroups
    assert len(pr) == n_items * 4 * 2                      # four cues, two option orders
    g = pr.groupby(["task", "value", "template", "description", "order"])
    assert (g["cue"].nunique() == 4).all()
    # within an item, the four texts differ only in the cue
    one = g.get_group(next(iter(g.groups)))
    stripped = {b.replace(c, "<who>") for b, c in zip(one.body, one.cue)}
    assert len(stripped) == 1
    seen = {}

    def fake(model, tok, df, batch_size=16):              # p_yes = a hash of the text: deterministic
        seen["bodies"] = list(df.body)
        p = np.array([(hash(b) % 1000) / 1000 for b in df.body])
        return np.stack([p, 1 - p], 1)

    monkeypatch.setattr(TP, "score_prompts", fake)
    r = TP.run_items(None, None, cfg, 0)
    assert r["control"]["p_yes"].groupby([r["control"].value, r["control"].subject.str.split("|").str[0]]).nunique().max() == 1
    it = M.proxy_items(r["per_cue"])
    assert len(it) == n_items and set(it.group) == {"positive traits", "negative traits", "skills", "occupations"}
    pc = r["per_cue"].set_index(["task", "value", "template", "description", "cue"])["p_yes"]
    row = it.iloc[0]
    k = (row.task, row.value, row.template, row.description)
    assert row.delta == pytest.approx(pc[k + ("a woman",)] - pc[k + ("a man",)])
    assert row.neutral == pytest.approx(pc[k + ("a person",)] - pc[k + ("an adult",)])

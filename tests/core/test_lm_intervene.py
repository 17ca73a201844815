"""iclr25.lm interventions and the new capture options on a tiny random Llama."""

from __future__ import annotations

import pytest
import torch

from iclr25 import lm


@pytest.fixture(scope="module")
def tiny(one_thread):
    tok = lm.tiny_tokenizer()
    model = lm.tiny_llama(len(tok), n_layers=3)
    ids = tok(["The capital of France is Paris", "Yes or no? Answer: yes."], return_tensors="pt",
              padding=True).input_ids
    return model, tok, ids


def _hooks(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_add_equals_adding_to_the_residual_by_hand(tiny):
    model, _, ids = tiny
    d = torch.randn(32)
    with torch.no_grad(), lm.capture_residual(model, layers=1) as res:
        base = model(ids).logits
        # by hand: the rest of the forward from layer 2 with the edited residual stream
        want = lm.forward_from_layer(model, 2, res[1] + 0.7 * d)
    assert torch.allclose(lm.forward_from_layer(model, 2, res[1]), base, atol=1e-5)
    with torch.no_grad(), lm.intervene(model, "resid_post", lm.add(d, 0.7), layers=1) as iv:
        got = model(ids).logits
    assert iv.calls == 1 and torch.allclose(got, want, atol=1e-5)
    # the same edit at the next layer's input
    with torch.no_grad(), lm.intervene(model, "resid_pre", lm.add(d, 0.7), layers=2):
        assert torch.allclose(model(ids).logits, want, atol=1e-5)


def test_positions_and_rows_limit_the_edit(tiny):
    model, _, ids = tiny
    d = torch.randn(32)
    with torch.no_grad(), lm.capture_residual(model, layers=0) as base:
        model(ids)
    b0 = base[0].clone()
    with torch.no_grad(), lm.intervene(model, "resid_post", lm.add(d), layers=0, positions=[-1],
                                       rows=[1]), lm.capture_residual(model, layers=0) as res:
        model(ids)
    diff = res[0] - b0
    assert torch.allclose(diff[1, -1], d, atol=1e-6)
    diff[1, -1] = 0
    assert diff.abs().max() == 0


def test_project_out_scale_set_value(tiny):
    model, _, ids = tiny
    d = torch.randn(32)
    u = d / d.norm()
    with torch.no_grad(), lm.intervene(model, "resid_post", lm.project_out(d), layers=1), \
            lm.capture_residual(model, layers=1) as res:
        model(ids)
    assert (res[1] @ u).abs().max() < 1e-5
    with torch.no_grad(), lm.intervene(model, "resid_post", lm.project_out(d, to="mean"),
                                       layers=1), lm.capture_residual(model, layers=1) as res2:
        model(ids)
    c = res2[1] @ u
    assert torch.allclose(c, c.mean().expand_as(c), atol=1e-5)
    with torch.no_grad(), lm.intervene(model, "mlp", lm.scale([3, 5], 0.0), layers=0), \
            lm.capture_mlp(model, layers=0) as mlp:
        model(ids)
    with torch.no_grad(), lm.capture_mlp(model, layers=0) as ref:
        model(ids)
    assert mlp[0][..., [3, 5]].abs().max() == 0
    keep = [i for i in range(64) if i not in (3, 5)]
    assert torch.equal(mlp[0][..., keep], ref[0][..., keep])
    with torch.no_grad(), lm.intervene(model, "mlp", lm.set_value([7], 2.5), layers=0), \
            lm.capture_mlp(model, layers=0) as mlp:
        model(ids)
    assert torch.all(mlp[0][..., 7] == 2.5)


def test_heads_site_edits_one_head(tiny):
    model, _, ids = tiny
    with torch.no_grad(), lm.intervene(model, "heads", lm.scale([1], 0.0), layers=2), \
            lm.capture_heads(model, layers=2) as heads:
        out = model(ids).logits
    with torch.no_grad(), lm.capture_heads(model, layers=2) as ref:
        model(ids)
    # capture_heads reads o_proj's input after the edit (its hook was installed later)
    assert heads[2][..., 1, :].abs().max() == 0
    assert torch.equal(heads[2][..., 0, :], ref[2][..., 0, :])
    # by hand: o_proj of the heads with head 1 zeroed
    o = model.model.layers[2].self_attn.o_proj
    h = ref[2].clone()
    h[..., 1, :] = 0
    seen = {}
    hk = o.register_forward_hook(lambda m, a, y: seen.setdefault("y", y))
    try:
        with torch.no_grad(), lm.intervene(model, "heads", lm.scale([1], 0.0), layers=2):
            model(ids)
    finally:
        hk.remove()
    assert torch.allclose(seen["y"], o(h.flatten(-2)), atol=1e-6)
    with pytest.raises(ValueError, match="does not fit"):
        with torch.no_grad(), lm.intervene(model, "heads", lm.add(torch.ones(7)), layers=2):
            model(ids)
    assert out.shape[-1] == model.config.vocab_size


def test_the_graph_is_kept_for_gradients(tiny):
    model, _, ids = tiny
    alpha = torch.tensor(0.5, requires_grad=True)
    d = torch.randn(32)
    with lm.intervene(model, "resid_post", lm.add(d, alpha), layers=0):
        loss = model(ids).logits.float().pow(2).mean()
    loss.backward()
    assert alpha.grad is not None and alpha.grad.abs() > 0
    # a two-argument edit sees the layer number
    seen = []
    with torch.no_grad(), lm.intervene(model, "mlp_out", lambda x, layer: seen.append(layer) or x,
                                       layers=[0, 2]):
        model(ids)
    assert seen == [0, 2]


def test_interventions_act_at_every_generation_step(tiny):
    model, tok, _ = tiny
    prompts = ["Hi", "The capital of France is"]
    base = lm.generate_batch(model, tok, prompts, max_new_tokens=6, chat=False)
    d = 5 * torch.randn(32)
    with lm.intervene(model, "resid_post", lm.add(d), layers=1, positions=[-1]) as iv:
        steered = lm.generate_batch(model, tok, prompts, max_new_tokens=6, chat=False,
                                    batch_size=1)
        one = [lm.generate(model, tok, p, max_new_tokens=6, chat=False) for p in prompts]
    assert steered.texts == one and steered.texts != base.texts
    assert iv.calls >= 2 * 6                  # one edit per forward: prompt + each new token


def test_hooks_removed_on_exit_and_on_error(tiny):
    model, _, ids = tiny
    before = _hooks(model)
    with pytest.raises(RuntimeError, match="boom"):
        with lm.intervene(model, "resid_pre", lm.add(torch.zeros(32)), layers=None), \
                lm.intervene(model, "heads", lm.scale([0], 2.0), layers=[0]):
            assert _hooks(model) == before + 4
            raise RuntimeError("boom")
    assert _hooks(model) == before
    with pytest.raises(ValueError, match="return a tensor"):
        with torch.no_grad(), lm.intervene(model, "mlp", lambda x: x[..., :3], layers=0):
            model(ids)
    assert _hooks(model) == before


def test_bad_sites_and_layers(tiny):
    model, _, _ = tiny
    with pytest.raises(ValueError, match="valid sites: resid_pre, resid_post, mlp"):
        with lm.intervene(model, "residual", lm.add(torch.zeros(32)), layers=0):
            pass
    with pytest.raises(IndexError, match="out of range"):
        with lm.intervene(model, "mlp", lm.scale([0], 0), layers=3):
            pass
    with pytest.raises(TypeError, match="callable"):
        with lm.intervene(model, "mlp", 3.0, layers=0):
            pass
    with pytest.raises(ValueError, match="to must be"):
        lm.project_out(torch.ones(3), to="median")


def test_capture_positions_and_running_reductions(tiny):
    model, _, ids = tiny
    with torch.no_grad(), lm.capture_residual(model, layers=[0, 2]) as full, \
            lm.capture_residual(model, layers=[0, 2], positions=-1) as last, \
            lm.capture_residual(model, layers=2, positions=[0, -1]) as two, \
            lm.capture_mlp(model, layers=1, reduce="mean") as mean, \
            lm.capture_mlp(model, layers=1, reduce="var") as var, \
            lm.capture_heads(model, layers=1, reduce="max") as hmax, \
            lm.capture_attention(model, layers=1, positions=-1) as att:
        model(ids)
        with lm.capture_mlp(model, layers=1) as m1:
            model(ids[:, :4])
        model(ids[:, :4])
    assert torch.equal(last[2], full[2][:, -1]) and last[2].shape == (2, 32)
    assert torch.equal(two[2], full[2][:, [0, -1]])
    with torch.no_grad(), lm.capture_mlp(model, layers=1) as m0:
        model(ids)
    rows = torch.cat([m0[1].reshape(-1, 64), m1[1].reshape(-1, 64), m1[1].reshape(-1, 64)])
    assert mean.count(1) == rows.shape[0]
    assert torch.allclose(mean[1], rows.mean(0), atol=1e-5)
    assert torch.allclose(var[1], rows.var(0, unbiased=False), atol=1e-4)
    assert hmax[1].shape == (4, 8)
    assert att[1].shape == (2, 4, 4)           # the last query's attention over 4 keys
    with pytest.raises(ValueError, match="unknown reduce"):
        with lm.capture_residual(model, reduce="median"):
            pass
    with pytest.raises(ValueError, match="keep_all"):
        with lm.capture_residual(model, reduce="mean", keep_all=True):
            pass

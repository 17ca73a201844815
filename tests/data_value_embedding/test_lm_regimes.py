"""Chapter 02, the language-model runs: the recorder on TinyGPT and on the Pythia-class model
checked against torch.func per-sample gradients, the AdamW / SGD runs, and the regime reading."""

import math

import numpy as np
import pytest
import torch
from torch.func import functional_call, grad, vmap

import iclr25.data_value_embedding as dv
from iclr25 import tinygpt
from iclr25.data_value_embedding.lm import _z


def _tiny_tinygpt():
    torch.manual_seed(0)
    return tinygpt.TinyGPT(tinygpt.TinyGPTConfig(vocab_size=11, d_model=8, n_layers=2, n_heads=2,
                                                 d_ff=12, max_len=6)).double()


def _tiny_pythia():
    return dv.pythia_like(vocab_size=11, d_model=8, n_layers=2, n_heads=2, max_len=6, seed=0).double()


def _torch_func_per_sample(model, x, y):
    """Per-sample gradients of the per-sample mean token loss, by torch.func (vmap of grad).

    Parameters shared between modules (TinyGPT's tied head and token embedding) are passed
    untied, so the gradient of ``head.weight`` is that of its use as the output layer only --
    what the recorder records for an ``nn.Linear``.
    """
    params = {k: v.detach() for k, v in model.named_parameters(remove_duplicate=False)}

    def loss(p, xi, yi):
        logits = functional_call(model, p, (xi[None],), tie_weights=False)
        return tinygpt.lm_loss(logits, yi[None])

    return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)


def _expected_rows(model, rec, per):
    """Recorder layout: per Linear layer, ``[W | b]`` flattened row-major (out x (in + 1))."""
    named = dict(model.named_modules())
    parts = []
    for L in rec._layers:
        name = next(n for n, m in named.items() if m is L.module)
        gw = per[f"{name}.weight"]
        if L.has_bias:
            gw = torch.cat([gw, per[f"{name}.bias"][:, :, None]], dim=2)
        parts.append(gw.reshape(gw.shape[0], -1))
    return torch.cat(parts, dim=1)


@pytest.mark.parametrize("build", [_tiny_tinygpt, _tiny_pythia], ids=["tinygpt", "pythia"])
def test_recorder_on_transformers_equals_torch_func_per_sample_grads(build):
    model = build()
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(0, 11, (5, 6), generator=gen)
    y = torch.randint(0, 11, (5, 6), generator=gen)
    rec = dv.GradRecorder(model)                       # every nn.Linear, exact (no projection)
    with rec.step(torch.arange(5), lr=0.3):
        model.zero_grad()
        tinygpt.lm_loss(model(x), y).backward()
    per = _torch_func_per_sample(model, x, y)
    ref = _expected_rows(model, rec, per)
    torch.testing.assert_close(rec.records.grads[0], ref, rtol=1e-9, atol=1e-12)
    assert rec.records.lrs[0] == pytest.approx(0.3 / 5)
    # projected: (P_b (x) P_a)^T of the same per-sample gradients
    rec_p = dv.GradRecorder(model, proj_dim=4, seed=3)
    with rec_p.step(torch.arange(5), lr=0.3):
        model.zero_grad()
        tinygpt.lm_loss(model(x), y).backward()
    start, parts = 0, []
    for L in rec_p._layers:
        G = ref[:, start:start + L.d_out * L.d_in].reshape(5, L.d_out, L.d_in)
        Pa = L.P_a if L.P_a is not None else torch.eye(L.d_in, dtype=G.dtype)
        Pb = L.P_b if L.P_b is not None else torch.eye(L.d_out, dtype=G.dtype)
        parts.append((Pb.T @ G @ Pa).reshape(5, -1))
        start += L.d_out * L.d_in
    torch.testing.assert_close(rec_p.records.grads[0], torch.cat(parts, 1), rtol=1e-9, atol=1e-12)


def test_pythia_like_is_gpt_neox_with_untied_embeddings():
    m = dv.pythia_like(vocab_size=11, d_model=8, n_layers=2, n_heads=2, max_len=6, seed=0)
    cfg = m.net.config
    assert cfg.model_type == "gpt_neox" and cfg.use_parallel_residual and not cfg.tie_word_embeddings
    rot = getattr(cfg, "rope_parameters", None) or {}
    assert rot.get("partial_rotary_factor", getattr(cfg, "rotary_pct", None)) == 0.25
    assert m.net.get_output_embeddings().weight.data_ptr() != m.net.get_input_embeddings().weight.data_ptr()
    m2 = dv.pythia_like(vocab_size=11, d_model=8, n_layers=2, n_heads=2, max_len=6, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), m2.parameters()))
    assert m(torch.zeros(2, 6, dtype=torch.long)).shape == (2, 6, 11)
    with pytest.raises(ValueError, match="divisible"):
        dv.pythia_like(d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="valid: pythia, tinygpt"):
        dv.make_lm("llama", d_model=8, n_layers=1, n_heads=2, max_len=6)


def test_sgd_step_is_the_recorded_sum_and_adamw_records_the_proxy_rate():
    stream = torch.randint(0, 11, (300,), generator=torch.Generator().manual_seed(0))
    model = _tiny_pythia()
    before = model.net.lm_head.weight.detach().clone()
    rec = dv.GradRecorder(model, layers=["net.lm_head"])
    dv.train_lm(model, stream, stream, n_steps=1, batch_size=3, seq_len=5, lr=0.2, warmup=0,
                optimizer="sgd", recorder=rec, schedule="constant")
    step = -rec.records.lrs[0] * rec.records.grads[0].sum(0).reshape(before.shape)
    torch.testing.assert_close(model.net.lm_head.weight.detach() - before, step)
    model = _tiny_pythia()
    rec = dv.GradRecorder(model, proj_dim=4)
    hist = dv.train_lm(model, stream, stream, n_steps=6, batch_size=3, seq_len=5, lr=1e-2,
                       warmup=2, optimizer="adamw", recorder=rec, grad_clip=1.0,
                       checkpoints=[6], n_val=4)
    want = [dv.lr_schedule(t, 6, 1e-2, 2) / 3 for t in range(6)]
    assert rec.records.lrs == pytest.approx(want) and hist["lr"] == pytest.approx([w * 3 for w in want])
    with pytest.raises(ValueError, match="valid: adamw, sgd"):
        dv.train_lm(model, stream, stream, n_steps=2, batch_size=2, seq_len=4, lr=0.1, warmup=0,
                    optimizer="adam")


def test_iteration_influence_closed_form():
    rows = torch.tensor([[1.0, 0.0], [0.0, -2.0], [3.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    emb = dv.DVEmb(rows=rows, row_step=torch.tensor([0, 0, 1, 1]), row_index=torch.arange(4),
                   row_epoch=torch.zeros(4, dtype=torch.long), n_train=4)
    g = torch.tensor([2.0, 1.0], dtype=torch.float64)
    # scores 2, -2 | 7, 3 ; lrs 0.5, 2
    np.testing.assert_allclose(dv.iteration_influence(emb, [0.5, 2.0], g), [0.0, 2.5])
    np.testing.assert_allclose(dv.iteration_influence(emb, [0.5, 2.0], g, kind="abs"), [4.0, 2.5])
    with pytest.raises(ValueError, match="signed, abs"):
        dv.iteration_influence(emb, [1, 1], g, kind="mean")


def test_regime_summary_on_constructed_curves():
    T, W = 200, 8
    rng = np.random.default_rng(0)
    base = 1 + 0.01 * rng.standard_normal(T)
    shape = base.copy()
    shape[:W] += 2.0                      # warm-up peak
    shape[-20:] += np.linspace(0.5, 1.5, 20)   # late ascent
    r = dv.regime_summary(shape, W)
    assert r["early_peak"] and r["late_ascent"] and r["three_regimes"]
    assert r["early"] == pytest.approx(shape[:W].mean()) and r["basin"] == pytest.approx(shape[50:150].mean())
    only_late = base.copy()
    only_late[-20:] += 1.0
    r = dv.regime_summary(only_late, W)
    assert r["late_ascent"] and not r["early_peak"] and not r["three_regimes"]
    assert not dv.regime_summary(base, W)["late_ascent"]      # noise alone: no regime
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, 1.0, 1.0])
    se = math.sqrt(a.var(ddof=1) / 3 + b.var(ddof=1) / 4)
    assert _z(a, b) == pytest.approx((2.0 - 0.5) / se)
    with pytest.raises(ValueError, match="warmup must be in"):
        dv.regime_summary(base, 60)

"""iclr25.lm.quant: fake quantisation and magnitude pruning on a tiny random Llama."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from iclr25 import lm


def _linears(model):
    return [m for b in model.model.layers for m in b.modules() if isinstance(m, nn.Linear)]


def test_many_bits_is_nearly_the_identity_and_few_bits_few_levels(tiny):
    model, tok = tiny
    ids = tok(["The capital of France is Paris"], return_tensors="pt").input_ids
    q16 = lm.fake_quant(copy.deepcopy(model), 16)
    with torch.no_grad():
        assert torch.allclose(q16(ids).logits, model(ids).logits, atol=1e-3)
    for a, b in zip(_linears(q16), _linears(model)):
        assert (a.weight - b.weight).abs().max() <= b.weight.abs().max() / (2**15 - 1)
    q2 = lm.fake_quant(copy.deepcopy(model), 3, "channel")
    for m in _linears(q2):
        assert max(len(torch.unique(row)) for row in m.weight) <= 2**3
    qg = lm.fake_quant(copy.deepcopy(model), 4, "group", group_size=16)
    w = _linears(qg)[0].weight.reshape(-1, 16)
    assert max(len(torch.unique(g)) for g in w) <= 16
    qt = lm.fake_quant(copy.deepcopy(model), 4, "tensor")
    assert len(torch.unique(_linears(qt)[0].weight)) <= 16
    # embeddings and the head are left alone
    assert torch.equal(qt.lm_head.weight, model.lm_head.weight)
    ppl = lm.perplexity(model, tok, ["The capital of France is Paris."])
    assert lm.perplexity(q16, tok, ["The capital of France is Paris."]) == pytest.approx(ppl, 1e-3)
    with pytest.raises(ValueError, match="granularity"):
        lm.fake_quant(model, 8, "row")
    with pytest.raises(ValueError, match="bits"):
        lm.fake_quant(model, 1)


@pytest.mark.parametrize("scope", ["layer", "global"])
def test_magnitude_prune_hits_the_sparsity_and_drops_the_smallest(tiny, scope):
    model, _ = tiny
    pruned = copy.deepcopy(model)
    got = lm.magnitude_prune(pruned, 0.6, scope=scope)
    assert got == pytest.approx(0.6, abs=1e-3)
    for a, b in zip(_linears(pruned), _linears(model)):
        kept = b.weight[a.weight != 0].abs()
        dropped = b.weight[a.weight == 0].abs()
        if scope == "layer":
            assert kept.min() >= dropped.max()
            assert (a.weight == 0).float().mean() == pytest.approx(0.6, abs=1e-3)
        assert torch.equal(a.weight[a.weight != 0], b.weight[a.weight != 0])
    with pytest.raises(ValueError, match="sparsity"):
        lm.magnitude_prune(pruned, 1.0)

"""What knowledge neurons and knowledge synapses do to the answer (chapter 05).

- :func:`scaled_prob`: the target probability when given units of the MLP hidden layer are
  multiplied by a factor at the last position, one unit set per row, batched (the paper's
  suppress / enhance of KN activations, Fig. 2-1, and :math:`\\Delta\\mathrm{Prob}`);
- :func:`scale_attention`: a context manager that multiplies the attention weights from the
  last position to chosen key columns by :math:`\\alpha` in every (or chosen) layer and head
  (the paper's knowledge-synapse scaling, Eq. 5). It runs the eager attention computation,
  registered under its own name with ``transformers``' ``AttentionInterface``, so the
  attention probabilities exist as a tensor to scale; weights are not renormalised;
- :func:`subject_positions`: the token positions of the subject inside a prompt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from ..lm._common import position_ids
from .attribution import _encode, _mlp_down, _Prefix

__all__ = ["scaled_prob", "delta_prob", "scale_attention", "subject_positions",
           "last_position_units"]


def scaled_prob(model: nn.Module, tokenizer, prompts: Sequence[str], targets,
                unit_sets: Sequence, factor: float = 0.0, *, batch_size: int = 32) -> torch.Tensor:
    """``p(target | prompt)`` with the units ``unit_sets[i]`` (flat ids ``layer * d_ff + unit``)
    of row i multiplied by ``factor`` at the last position (0 suppresses, 2 enhances; chapter
    05). An empty set gives the clean probability."""
    prompts = list(prompts)
    targets = torch.as_tensor(list(targets), dtype=torch.long)
    if not (len(prompts) == len(targets) == len(unit_sets)):
        raise ValueError("prompts, targets and unit_sets need one entry per row")
    downs = _mlp_down(model)
    d_ff = downs[0].in_features
    n_units = len(downs) * d_ff
    device = next(model.parameters()).device
    if all(len(u) == 0 for u in unit_sets):      # clean probabilities: plain batches
        from .attribution import _forward_prob

        with torch.no_grad():
            return torch.cat([_forward_prob(model, *_encode(tokenizer, prompts[s:s + batch_size], device),
                                            targets[s:s + batch_size]).cpu()
                              for s in range(0, len(prompts), batch_size)]) if prompts else torch.empty(0)
    groups: dict[tuple[str, int], list[int]] = {}
    for r, (p, t) in enumerate(zip(prompts, targets.tolist())):
        groups.setdefault((p, int(t)), []).append(r)
    out = torch.empty(len(prompts))
    # rows of one prompt differ only at its last position: its first T - 1 tokens run once
    for (prompt, tg), rows in groups.items():
        prefix = _Prefix(model, tokenizer, prompt, device)
        for s in range(0, len(rows), batch_size):
            part = rows[s:s + batch_size]
            mult = torch.ones(len(part), n_units)
            for k, r in enumerate(part):
                u = torch.as_tensor(sorted(unit_sets[r]), dtype=torch.long)
                if len(u) and (int(u.min()) < 0 or int(u.max()) >= n_units):
                    raise IndexError(f"unit ids must be in [0, {n_units})")
                mult[k, u] = factor
            mult = mult.reshape(len(part), len(downs), d_ff).to(device)

            def make(l, mult=mult):
                def pre(mod, args):
                    x = args[0].clone()
                    x[:, -1] = x[:, -1] * mult[:, l].to(x.dtype)
                    return (x,) + tuple(args[1:])
                return pre
            touched = [l for l in range(len(downs)) if bool((mult[:, l] != 1).any())]
            p = prefix.run(model, {l: (downs[l], make(l)) for l in touched}, tg, len(part))
            out[part] = p.detach().cpu()
    return out


def delta_prob(after: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
    """The paper's :math:`\\Delta\\mathrm{Prob}`: relative change ``(after - before) / before``."""
    return (after - before) / before.clamp(min=1e-12)


def subject_positions(tokenizer, prompt: str, subject: str) -> list[int]:
    """Token positions (from the prompt's start) whose characters overlap the first occurrence of
    ``subject`` in ``prompt`` (chapter 05)."""
    start = prompt.find(subject)
    if start < 0:
        raise ValueError(f"subject {subject!r} does not occur in prompt {prompt!r}")
    end = start + len(subject)
    enc = tokenizer(prompt, return_offsets_mapping=True)
    return [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < end and b > start and b > a]


# --------------------------------------------------------------------------------------------
# knowledge synapses: scaling attention weights (Eq. 5)

_ATTN_NAME = "iclr25_ks_eager"
_STATE: dict = {"active": False}


def _ks_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Eager attention whose weights from the last query to the columns in ``_STATE["cols"]``
    (a (batch, keys) 0/1 mask) are multiplied by ``alpha`` in the layers of ``_STATE``."""
    from transformers.models.llama.modeling_llama import repeat_kv

    groups = query.shape[1] // key.shape[1]
    k = repeat_kv(key, groups)
    v = repeat_kv(value, groups)
    w = torch.matmul(query, k.transpose(2, 3)) * scaling
    if attention_mask is not None:
        w = w + attention_mask[:, :, :, : k.shape[-2]]
    w = torch.softmax(w, dim=-1, dtype=torch.float32).to(query.dtype)
    layer = getattr(module, "layer_idx", None)
    st = _STATE
    if st["active"] and (st["layers"] is None or layer in st["layers"]):
        cols = st["cols"].to(w.device, w.dtype)           # (B, K)
        f = 1 + (st["alpha"] - 1) * cols                   # alpha on KS columns, 1 elsewhere
        w = torch.cat([w[:, :, :-1], w[:, :, -1:] * f[:, None, None, :]], 2)
        st["calls"] += 1
    out = torch.matmul(w, v).transpose(1, 2).contiguous()
    return out, w


def _register():
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(_ATTN_NAME, _ks_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(_ATTN_NAME, eager_mask)


@contextlib.contextmanager
def scale_attention(model: nn.Module, cols: torch.Tensor, alpha: float,
                    layers: Sequence[int] | None = None) -> Iterator[dict]:
    """Inside the block, every forward pass multiplies the attention weights from the *last*
    position to the key columns where ``cols`` (a ``(batch, keys)`` 0/1 tensor, left-padded like
    the batch) is 1 by ``alpha``, in ``layers`` (default all) and every head (chapter 05). The
    model runs eager attention meanwhile; its attention implementation is restored on exit.
    Yields a dict whose ``"calls"`` counts the scaled attention calls."""
    if _STATE["active"]:
        raise RuntimeError("scale_attention blocks cannot be nested")
    _register()
    cfg = model.config
    old = cfg._attn_implementation
    _STATE.update(active=True, cols=torch.as_tensor(cols, dtype=torch.float32), alpha=float(alpha),
                  layers=None if layers is None else set(int(l) for l in layers), calls=0)
    cfg._attn_implementation = _ATTN_NAME
    try:
        yield _STATE
    finally:
        cfg._attn_implementation = old
        _STATE["active"] = False


def last_position_units(model, tokenizer, prompts, unit_sets, *, cols=None, alpha: float = 1.0,
                        batch_size: int = 32) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The activations of the units ``unit_sets[i]`` at the last position of prompt i, and the
    next-token distribution's log-probabilities, optionally under :func:`scale_attention` with
    per-row key columns ``cols[i]`` (lists of positions from the prompt's start; chapter 05)."""
    downs = _mlp_down(model)
    d_ff = downs[0].in_features
    device = next(model.parameters()).device
    acts_out, logp_out = [], []
    for s in range(0, len(prompts), batch_size):
        batch = list(prompts[s:s + batch_size])
        ids, mask = _encode(tokenizer, batch, device)
        B, T = ids.shape
        rec = {}
        hs = [d.register_forward_pre_hook(lambda m, a, l=l: rec.__setitem__(l, a[0][:, -1].float()))
              for l, d in enumerate(downs)]
        ctx = contextlib.nullcontext()
        if cols is not None:
            cm = torch.zeros(B, T)
            for r, c in enumerate(cols[s:s + batch_size]):
                pad = T - int(mask[r].sum())
                cm[r, [pad + int(p) for p in c]] = 1
            ctx = scale_attention(model, cm, alpha)
        try:
            with torch.no_grad(), ctx:
                logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask),
                               logits_to_keep=1).logits[:, -1].float()
        finally:
            for h in hs:
                h.remove()
        allacts = torch.stack([rec[l] for l in range(len(downs))], 1).reshape(B, -1).cpu()
        for r in range(B):
            u = torch.as_tensor(sorted(unit_sets[s + r]), dtype=torch.long)
            acts_out.append(allacts[r, u])
        logp_out.append(torch.log_softmax(logits, -1).cpu())
    return acts_out, torch.cat(logp_out)

"""Knowledge-neuron attribution: integrated gradients over the MLP hidden units (chapter 05).

A knowledge neuron is a unit ``i`` of layer ``l``'s MLP hidden layer (the input of
``down_proj``, ``act(gate) * up`` in a Llama). Dai et al. (2022) score it by integrated
gradients of the answer probability :math:`P_q(t)` along the path that scales the unit's
activation :math:`\\bar w^{(l)}_i` at the prompt's last position from 0 to its value:

.. math::  \\mathrm{Attr}(w^{(l)}_i) = \\bar w^{(l)}_i \\int_0^1
           \\frac{\\partial P_q(\\alpha \\bar w^{(l)})}{\\partial w^{(l)}_i}\\, d\\alpha
           \\approx \\frac{\\bar w^{(l)}_i}{m} \\sum_{k=1}^{m}
           \\frac{\\partial P_q(\\alpha_k \\bar w^{(l)})}{\\partial w^{(l)}_i}.

Paths (:data:`PATHS`), one function :func:`attribute`:

``"per_layer"``
    Dai et al.'s estimator: layer ``l`` alone is scaled, the layers after it are recomputed.
    Rows ``(layer, step)`` of one prompt are stacked into batches (one forward/backward per
    batch instead of one per step and layer). Completeness holds per layer:
    :math:`\\sum_i \\mathrm{Attr}(w^{(l)}_i) = P(\\bar w) - P(\\bar w^{(l)} = 0)`.
``"joint"``
    A *different estimator*: the last-position hidden units of every layer are set to
    :math:`\\alpha \\bar w` at once (all layers along one straight path), so one batch of ``m``
    rows per prompt scores all 46k units of SmolLM2. Completeness holds over all units:
    :math:`\\sum_{l,i} \\mathrm{Attr} = P(\\bar w) - P(0)`. The gradient is the *partial* one
    (later layers' units are held on the path), not the total one of ``per_layer``.
``"grad_x_act"``
    gradient x activation, one forward/backward for a batch of prompts (the total gradient,
    i.e. ``per_layer`` with one step at :math:`\\alpha = 1`); the smoke profile's stand-in.

:func:`reference_ig` is the plain loop (one forward/backward per step and layer) that the tests
and the benchmark compare the batched paths with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..lm import decoder_layers
from ..lm._common import pad_batch, pad_id, position_ids
from ..progress import progress

__all__ = ["PATHS", "RULES", "Attributions", "attribute", "reference_ig", "step_alphas",
           "last_position_acts"]

PATHS = ("joint", "per_layer", "grad_x_act")
RULES = ("gauss", "midpoint", "right")


def step_alphas(n_steps: int, rule: str = "midpoint") -> tuple[torch.Tensor, torch.Tensor]:
    """The quadrature points :math:`\\alpha_k` in (0, 1] and their weights (summing to 1):
    ``"gauss"`` Gauss-Legendre (exact for an integrand of degree < 2m; captum's default),
    ``"midpoint"`` (k - 1/2)/m, ``"right"`` k/m as in Dai et al.'s code (chapter 05)."""
    if not isinstance(n_steps, int) or isinstance(n_steps, bool) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    if rule == "gauss":
        import numpy as np

        x, w = np.polynomial.legendre.leggauss(n_steps)
        return torch.tensor((x + 1) / 2, dtype=torch.float64), torch.tensor(w / 2, dtype=torch.float64)
    k = torch.arange(1, n_steps + 1, dtype=torch.float64)
    a = (k - 0.5) / n_steps if rule == "midpoint" else k / n_steps
    return a, torch.full_like(a, 1.0 / n_steps)


@dataclass
class Attributions:
    """What :func:`attribute` returns (chapter 05).

    Attributes
    ----------
    scores
        ``(n_prompts, n_layers, d_ff)`` attribution of each hidden unit at the last position.
    acts
        ``(n_prompts, n_layers, d_ff)`` the units' activations on the clean prompt.
    prob
        ``(n_prompts,)`` the clean probability of the target token.
    prob_zero
        ``joint``: ``(n_prompts,)`` the probability with every layer's units set to 0;
        ``per_layer``: ``(n_prompts, n_layers)`` with layer l's units set to 0; ``grad_x_act``:
        ``None``.
    path, n_steps, rule
        How they were computed.
    """

    scores: torch.Tensor
    acts: torch.Tensor
    prob: torch.Tensor
    prob_zero: torch.Tensor | None
    path: str
    n_steps: int
    rule: str

    def completeness_error(self) -> torch.Tensor:
        """``|sum of attributions - (P(a) - P(0))|`` per prompt (``joint``) or per prompt and
        layer (``per_layer``); the IG completeness axiom says it tends to 0 as ``n_steps``
        grows."""
        if self.prob_zero is None:
            raise ValueError("grad_x_act has no completeness identity; use joint or per_layer")
        if self.path == "joint":
            return (self.scores.double().sum((1, 2)) - (self.prob.double() - self.prob_zero.double())).abs()
        return (self.scores.double().sum(2) - (self.prob.double()[:, None] - self.prob_zero.double())).abs()


def _check(model, prompts, targets) -> tuple[list[str], torch.Tensor]:
    if isinstance(prompts, str):
        raise TypeError("prompts must be a list of strings, not one string")
    prompts = list(prompts)
    targets = torch.as_tensor(list(targets) if not isinstance(targets, torch.Tensor) else targets,
                              dtype=torch.long).reshape(-1)
    if len(prompts) != len(targets):
        raise ValueError(f"{len(prompts)} prompts but {len(targets)} targets: one target token "
                         "per prompt")
    if not prompts:
        raise ValueError("no prompts")
    vocab = model.get_output_embeddings().weight.shape[0]
    if int(targets.min()) < 0 or int(targets.max()) >= vocab:
        raise ValueError(f"targets must be token ids in [0, {vocab})")
    return prompts, targets


def _mlp_down(model: nn.Module) -> list[nn.Module]:
    out = []
    for i, block in enumerate(decoder_layers(model)):
        down = getattr(getattr(block, "mlp", None), "down_proj", None)
        if down is None:
            raise TypeError(f"decoder layer {i} has no .mlp.down_proj (a Llama-style MLP is needed)")
        out.append(down)
    return out


def _encode(tokenizer, prompts: Sequence[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    enc = [list(tokenizer(p)["input_ids"]) for p in prompts]
    for i, e in enumerate(enc):
        if not e:
            raise ValueError(f"prompts[{i}] tokenizes to no tokens")
    return pad_batch(enc, pad_id(tokenizer), left=True, device=device)


def _forward_prob(model, ids, mask, targets) -> torch.Tensor:
    """Target probabilities at the last position of a left-padded batch."""
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask),
                   logits_to_keep=1).logits[:, -1].float()
    return torch.softmax(logits, -1).gather(1, targets[:, None].to(logits.device)).squeeze(1)


@torch.no_grad()
def last_position_acts(model, tokenizer, prompts: Sequence[str], *, batch_size: int = 32
                       ) -> torch.Tensor:
    """``(n_prompts, n_layers, d_ff)``: every layer's MLP hidden units at the last position
    (chapter 05)."""
    downs = _mlp_down(model)
    device = next(model.parameters()).device
    out = []
    for s in range(0, len(prompts), batch_size):
        ids, mask = _encode(tokenizer, prompts[s:s + batch_size], device)
        rec: dict[int, torch.Tensor] = {}
        hs = [d.register_forward_pre_hook(lambda m, a, l=l: rec.__setitem__(l, a[0][:, -1].float()))
              for l, d in enumerate(downs)]
        try:
            model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask), logits_to_keep=1)
        finally:
            for h in hs:
                h.remove()
        out.append(torch.stack([rec[l] for l in range(len(downs))], 1).cpu())
    return torch.cat(out)


def attribute(model: nn.Module, tokenizer, prompts: Sequence[str], targets, *, path: str = "joint",
              n_steps: int = 20, rule: str = "midpoint", batch_size: int = 64,
              show_progress: bool = True) -> Attributions:
    """Attribute the target token's probability to every MLP hidden unit at the last position
    (chapter 05; the paths are described in the module docstring).

    Parameters
    ----------
    prompts, targets
        One prompt and one target token id per row (the answer's first token).
    path
        ``"joint"``, ``"per_layer"`` (Dai et al.) or ``"grad_x_act"``.
    n_steps, rule
        Quadrature steps ``m`` (Dai et al.: 20 right-Riemann steps) and their rule (:func:`step_alphas`).
    batch_size
        Rows (prompt x step, or layer x step) per forward/backward pass.
    """
    if path not in PATHS:
        raise ValueError(f"unknown path {path!r}; valid: {', '.join(PATHS)}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    prompts, targets = _check(model, prompts, targets)
    alphas, weights = step_alphas(n_steps, rule)
    downs = _mlp_down(model)
    L = len(downs)
    device = next(model.parameters()).device
    acts = last_position_acts(model, tokenizer, prompts, batch_size=batch_size)
    P, _, d_ff = acts.shape
    was_training = model.training
    model.eval()
    req = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        if path == "grad_x_act":
            scores, prob = _grad_x_act(model, tokenizer, downs, prompts, targets, batch_size, device)
            return Attributions(acts * scores, acts, prob, None, path, 1, "right")
        # one prompt's rows: (layer, or -1 for every layer; step k); alpha = 0 rows give P(0)
        layers_of = [-1] if path == "joint" else list(range(L))
        rows = [(l, k) for l in layers_of for k in range(len(alphas))]
        grads = torch.zeros(P, L, d_ff, dtype=torch.float64)
        zero_prob = torch.zeros(P, len(layers_of))
        prob = torch.zeros(P)
        bar = progress(total=P * len(rows), desc=f"IG ({path}, m={n_steps})") if show_progress else None
        skip = path == "per_layer" and _skippable(model)
        for p in range(P):
            prefix = _Prefix(model, tokenizer, prompts[p], device)
            tg = int(targets[p])
            mids = prefix.mids(model) if skip else None
            for s in range(0, len(rows), batch_size):
                part = rows[s:s + batch_size]
                chunk = [(l, float(alphas[k])) for l, k in part]
                wk = weights[[k for _, k in part]]
                out = (_rows_from(model, downs, prefix, tg, acts[p], mids, chunk) if skip else
                       _rows_pass(model, downs, prefix, tg, acts[p], chunk, True))
                for l, (idx, leaf) in out.items():
                    grads[p, l] += (wk[idx][:, None] * leaf.grad.double().cpu()).sum(0)
                if bar is not None:
                    bar.update(len(chunk))
            ends = [(l, 0.0) for l in layers_of] + [(-2, 1.0)]   # -2 touches nothing: clean
            out = _rows_pass(model, downs, prefix, tg, acts[p], ends, False)
            zero_prob[p], prob[p] = out[:-1], out[-1]
        if bar is not None:
            bar.close()
        scores = (acts.double() * grads).float()
        zero = zero_prob[:, 0] if path == "joint" else zero_prob
        return Attributions(scores, acts, prob, zero, path, n_steps, rule)
    finally:
        for p, r in zip(model.parameters(), req):
            p.requires_grad_(r)
        model.train(was_training)


class _Prefix:
    """One prompt's clean keys and values for its first T - 1 tokens, computed once: every row
    of an IG batch differs from the clean pass only at the last position, so each row is a
    one-token forward on a copy of this cache (causal attention: earlier positions cannot
    see the last one)."""

    def __init__(self, model, tokenizer, prompt: str, device):
        from ..lm._common import cache_kwarg, output_cache

        ids = list(tokenizer(prompt)["input_ids"])
        if not ids:
            raise ValueError(f"prompt {prompt!r} tokenizes to no tokens")
        self.T, self.last, self.device = len(ids), ids[-1], device
        self.kw = cache_kwarg(model)
        self.cache = None
        if self.T > 1:
            with torch.no_grad():
                out = model(input_ids=torch.tensor([ids[:-1]], device=device), use_cache=True,
                            logits_to_keep=1)
            self.cache = output_cache(out)

    def mids(self, model) -> torch.Tensor:
        """``(n_layers, d_model)``: the clean residual stream at the last position after each
        layer's attention (the input of its ``post_attention_layernorm``)."""
        blocks = model.model.layers
        rec: dict[int, torch.Tensor] = {}

        def make(l):
            def pre(mod, args):
                rec[l] = args[0][0, -1].detach()
            return pre
        self.run(model, {l: (b.post_attention_layernorm, make(l)) for l, b in enumerate(blocks)}, 0, 1)
        return torch.stack([rec[l] for l in range(len(blocks))])

    def prob(self, model, downs, target: int, sets: dict, n_rows: int, grad: bool) -> torch.Tensor:
        """Target probability of ``n_rows`` copies of the last token, with the units of layer l
        in rows ``sets[l][0]`` set to ``sets[l][1]``."""
        def make(l):
            rows, val = sets[l]

            def pre(mod, args):
                out = args[0].clone()
                out[rows, -1] = val.to(out.dtype)
                return (out,) + tuple(args[1:])
            return pre

        return self.run(model, {l: (downs[l], make(l)) for l in sets}, target, n_rows, grad)

    def run(self, model, hooks: dict, target: int, n_rows: int, grad: bool = False) -> torch.Tensor:
        """Target probability of ``n_rows`` copies of the last token on the cached prefix, with
        ``hooks[l] = (module, forward pre-hook)`` installed."""
        import copy

        ids = torch.full((n_rows, 1), self.last, device=self.device)
        kw = {}
        if self.cache is not None:
            cache = copy.deepcopy(self.cache)
            if n_rows > 1:
                cache.batch_repeat_interleave(n_rows)
            kw = {self.kw: cache, "use_cache": True}
        mask = torch.ones((n_rows, self.T), dtype=torch.long, device=self.device)
        pos = torch.full((n_rows, 1), self.T - 1, device=self.device)
        hs = [mod.register_forward_pre_hook(fn) for mod, fn in hooks.values()]
        try:
            with torch.set_grad_enabled(grad):
                logits = model(input_ids=ids, attention_mask=mask, position_ids=pos,
                               logits_to_keep=1, **kw).logits[:, -1].float()
                return torch.softmax(logits, -1)[:, int(target)]
        finally:
            for h in hs:
                h.remove()


def _skippable(model) -> bool:
    """Whether :func:`_rows_from` can run ``model``: a Llama-style decoder (``model.model`` with
    ``layers``, ``norm`` and ``rotary_emb``, each layer with ``post_attention_layernorm`` and
    ``mlp.down_proj``) and an output embedding."""
    inner = getattr(model, "model", None)
    if inner is None or not all(hasattr(inner, a) for a in ("layers", "norm", "rotary_emb")):
        return False
    return all(hasattr(b, "post_attention_layernorm") for b in inner.layers)


def _rows_from(model, downs, prefix: _Prefix, target: int, acts_p: torch.Tensor, mids: torch.Tensor,
               chunk) -> dict:
    """The per-layer path's rows ``(layer, alpha)`` of one batch, run from the lowest layer ``s``
    of the batch: a row scaled at layer ``l`` leaves every layer below ``l`` as in the clean pass
    (only the last position changes, and only from layer ``l``'s MLP on), so the batch starts
    from the clean residual after layer ``s``'s attention (``mids[s]``), adds
    ``down_proj(hidden)`` with each row's hidden units (scaled for the rows of layer ``s``, clean
    for the others) and runs layers ``s + 1 ..`` on the prefix's cached keys and values, with the
    rows of each later layer scaled there. The same probabilities as :func:`_rows_pass`, without
    the forward pass through layers ``0 .. s - 1``. Backwards the summed probability and returns
    ``{layer: (rows, leaf)}``."""
    import copy

    inner = model.model
    blocks = inner.layers
    dev = prefix.device
    n = len(chunk)
    s = min(l for l, _ in chunk)
    leaves = {}
    for l in sorted({l for l, _ in chunk}):
        idx = [i for i, (rl, _) in enumerate(chunk) if rl == l]
        a = torch.tensor([chunk[i][1] for i in idx], dtype=acts_p.dtype)[:, None]
        leaves[l] = (idx, (a * acts_p[l][None]).to(dev).requires_grad_(True))
    dtype = downs[s].weight.dtype
    idx_s, val_s = leaves[s]
    hid = acts_p[s].to(dev, dtype)[None].expand(n, -1).clone()
    hid = hid.index_put((torch.tensor(idx_s, device=dev),), val_s.to(dtype))
    h = (mids[s].to(dev, dtype)[None] + downs[s](hid))[:, None, :]
    kw = {}
    if prefix.cache is not None:
        cache = copy.deepcopy(prefix.cache)
        if n > 1:
            cache.batch_repeat_interleave(n)
        kw = {prefix.kw: cache, "use_cache": True}
    pos = torch.full((n, 1), prefix.T - 1, device=dev)
    pe = inner.rotary_emb(h, position_ids=pos)

    def make(l):
        rows, val = torch.tensor(leaves[l][0], device=dev), leaves[l][1]

        def pre(mod, args):
            out = args[0].clone()
            out[rows, -1] = val.to(out.dtype)
            return (out,) + tuple(args[1:])
        return pre
    hs = [downs[l].register_forward_pre_hook(make(l)) for l in leaves if l > s]
    try:
        with torch.enable_grad():
            for j in range(s + 1, len(blocks)):
                h = blocks[j](h, attention_mask=None, position_ids=pos, position_embeddings=pe, **kw)
                if isinstance(h, tuple):       # older transformers return (hidden, ...)
                    h = h[0]
            logits = model.get_output_embeddings()(inner.norm(h))[:, -1].float()
            prob = torch.softmax(logits, -1)[:, int(target)]
            prob.sum().backward()
    finally:
        for hk in hs:
            hk.remove()
    return leaves


def _rows_pass(model, downs, prefix: _Prefix, target: int, acts_p: torch.Tensor, chunk, grad: bool):
    """Run one prompt's rows ``(layer, alpha)`` (layer -1: every layer; -2: none) in one batch.
    With ``grad``: backward the summed probability and return ``{layer: (rows, leaf)}``;
    without: return the rows' probabilities."""
    L = acts_p.shape[0]
    sets, leaves = {}, {}
    for l in range(L):
        idx = [i for i, (rl, _) in enumerate(chunk) if rl in (-1, l)]
        if not idx:
            continue
        a = torch.tensor([chunk[i][1] for i in idx], dtype=acts_p.dtype)[:, None]
        val = (a * acts_p[l][None]).to(prefix.device)
        if grad:
            val.requires_grad_(True)
            leaves[l] = (idx, val)
        sets[l] = (torch.tensor(idx, device=prefix.device), val)
    prob = prefix.prob(model, downs, target, sets, len(chunk), grad)
    if not grad:
        return prob.detach().cpu()
    prob.sum().backward()
    return leaves


def _grad_x_act(model, tokenizer, downs, prompts, targets, batch_size, device):
    P, L = len(prompts), len(downs)
    out, probs = [], []
    for s in range(0, P, batch_size):
        ids, mask = _encode(tokenizer, prompts[s:s + batch_size], device)
        kept: dict[int, torch.Tensor] = {}

        def make(l):
            def pre(mod, args):
                x = args[0]
                last = x[:, -1].clone()
                last.retain_grad()
                kept[l] = last
                return (torch.cat([x[:, :-1], last[:, None]], 1),) + tuple(args[1:])
            return pre
        hs = [d.register_forward_pre_hook(make(l)) for l, d in enumerate(downs)]
        # a graph from the embeddings on, so the units' gradients are the total ones
        hs.append(model.get_input_embeddings().register_forward_hook(
            lambda m, a, out: out.detach().requires_grad_(True)))
        try:
            with torch.enable_grad():
                prob = _forward_prob(model, ids, mask, targets[s:s + batch_size].to(device))
                prob.sum().backward()
        finally:
            for h in hs:
                h.remove()
        out.append(torch.stack([kept[l].grad.float().cpu() for l in range(L)], 1))
        probs.append(prob.detach().cpu())
    return torch.cat(out), torch.cat(probs)


def reference_ig(model: nn.Module, tokenizer, prompt: str, target: int, *, path: str = "per_layer",
                 n_steps: int = 20, rule: str = "midpoint") -> torch.Tensor:
    """The plain loop: one forward/backward per step (and per layer for ``per_layer``), through
    :func:`iclr25.lm.intervene`; ``(n_layers, d_ff)`` (chapter 05). Slow; for tests and the
    benchmark."""
    from .. import lm

    if path not in ("joint", "per_layer"):
        raise ValueError(f"reference_ig computes 'joint' or 'per_layer', not {path!r}")
    acts = last_position_acts(model, tokenizer, [prompt])[0]
    L, d_ff = acts.shape
    ids = torch.tensor([list(tokenizer(prompt)["input_ids"])])
    tg = torch.tensor([int(target)])
    total = torch.zeros(L, d_ff, dtype=torch.float64)
    layer_groups = [list(range(L))] if path == "joint" else [[l] for l in range(L)]
    for group in layer_groups:
        for a, w in zip(*step_alphas(n_steps, rule)):
            z = {l: (float(a) * acts[l]).clone().requires_grad_(True) for l in group}

            def put(x, layer):
                out = x.clone()
                out[:, -1] = z[layer]
                return out
            with torch.enable_grad(), lm.intervene(model, "mlp", put, layers=group):
                p = _forward_prob(model, ids, torch.ones_like(ids), tg)
                grads = torch.autograd.grad(p.sum(), [z[l] for l in group])
            for l, g in zip(group, grads):
                total[l] += float(w) * g.double()
    return (acts.double() * total).float()

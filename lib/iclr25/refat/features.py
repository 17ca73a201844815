"""The refusal feature: difference of means at the last prompt token, its ablation (RFA) and
activation addition. Chapter 08 (ReFAT), notebook ``01-refusal-direction``.

Notation (paper, Sec. 3.1; Arditi et al. 2024): ``h_l(x)`` is the residual stream entering decoder
layer ``l`` (``resid_pre``) at the last token of the chat-formatted prompt ``x``;

    r_l = mean_{x in harmful} h_l(x) - mean_{x in harmless} h_l(x)          (refusal feature)
    RFA:  h <- h - (h . r^_l) r^_l + mu_l r^_l,   r^_l = r_l / |r_l|        (Eq. 3)

with ``mu_l`` the mean projection of harmless prompts on ``r^_l`` (``mode="mean"``, the paper's
choice) or 0 (``mode="zero"``, plain directional ablation). Ablation and addition act at the
token positions of ``positions``: ``"last"`` (the default: the last prompt token and, while generating,
each new token, as the unofficial reference ablates) or ``"all"`` (every position, the first token
included). The first token is an attention sink with a massive activation (its projection on
``r^_l`` is thousands against a harmless mean of about 14 in SmolLM2): moving it breaks the model,
so the default never does (issue 59).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .. import lm
from ..lm._common import pad_batch, pad_id, position_ids

__all__ = ["encode_prompts", "last_token_acts", "last_token_acts_reference", "auroc",
           "RefusalFeature", "RFAEdit", "rfa", "act_add", "last_logprobs", "kl_to", "MODES", "POSITIONS",
           "DEFAULT_POSITIONS", "positions_arg"]

MODES = ("mean", "zero")
#: where an edit acts: the last prompt token (and each generated token), or every position
POSITIONS = ("last", "all")
DEFAULT_POSITIONS = "last"


def positions_arg(positions: str):
    """The ``positions=`` of :func:`iclr25.lm.intervene` for a ``positions`` name of
    :data:`POSITIONS` (chapter 08): ``"last"`` -> ``-1``, ``"all"`` -> ``None``."""
    if positions not in POSITIONS:
        raise ValueError(f"unknown positions {positions!r}; valid: {', '.join(POSITIONS)} "
                         "('last': the last prompt token and each generated one; 'all': every "
                         "position, the first token included)")
    return -1 if positions == "last" else None


def encode_prompts(tokenizer, prompts: Sequence[str], *, chat: bool = True) -> list[list[int]]:
    """Token ids of each prompt, chat-formatted with the assistant turn opened (chapter 08)."""
    if isinstance(prompts, str):
        raise TypeError("prompts must be a list of strings, not one string")
    out = []
    for p in prompts:
        text = lm.chat_text(tokenizer, p) if chat else p
        out.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return out


def _layers(model: nn.Module, layers) -> list[int]:
    """Layer numbers ``0 .. n``: ``l < n`` is the input of decoder layer ``l``, ``n`` the
    residual stream after the last layer (before the final norm)."""
    n = len(lm.decoder_layers(model))
    if layers is None:
        return list(range(n + 1))
    chosen = [layers] if isinstance(layers, (int, np.integer)) else list(layers)
    for l in chosen:
        if not isinstance(l, (int, np.integer)) or not -n - 1 <= l <= n:
            raise IndexError(f"layer {l!r} out of range for a model with {n} decoder layers "
                             f"(valid: 0..{n}, {n} = after the last layer)")
    return [int(l) % (n + 1) for l in chosen]


def _hook_streams(model: nn.Module, layers: Sequence[int], fn) -> list:
    """Register ``fn(layer, h)`` on the stream entering each layer (``n``: leaving the last
    one); ``fn`` may raise to stop the forward."""
    blocks = lm.decoder_layers(model)
    n = len(blocks)
    handles = []
    for l in sorted(set(layers)):
        if l < n:
            def pre(mod, args, kwargs, l=l):
                fn(l, args[0] if args else kwargs["hidden_states"])
            handles.append(blocks[l].register_forward_pre_hook(pre, with_kwargs=True))
        else:
            def post(mod, args, out, l=l):
                fn(l, out[0] if isinstance(out, (tuple, list)) else out)
            handles.append(blocks[n - 1].register_forward_hook(post))
    return handles


@torch.no_grad()
def last_token_acts(model: nn.Module, tokenizer, prompts: Sequence[str], layers=None, *,
                    chat: bool = True, batch_size: int = 16) -> torch.Tensor:
    """``h_l(x)`` at the last prompt token for each prompt and layer: ``(n, len(layers), d)``
    float64 (chapter 08).

    Fast path: left-padded batches, forward pre-hooks on the chosen decoder layers that keep
    only position ``-1``, and a forward that stops after the highest chosen layer.
    """
    chosen = _layers(model, layers)
    ids_all = encode_prompts(tokenizer, prompts, chat=chat)
    top = max(chosen)
    out = torch.zeros(len(ids_all), len(chosen), model.config.hidden_size, dtype=torch.float64)
    store: dict[int, torch.Tensor] = {}

    class _Stop(Exception):
        pass

    def record(l, h):
        store[l] = h[:, -1].double().cpu()
        if l == top:
            raise _Stop

    was = model.training
    model.eval()
    handles = _hook_streams(model, chosen, record)
    try:
        for s in range(0, len(ids_all), batch_size):
            ids, mask = pad_batch(ids_all[s:s + batch_size], pad_id(tokenizer), left=True,
                                  device=next(model.parameters()).device)
            store.clear()
            try:
                model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask),
                      use_cache=False)
            except _Stop:
                pass
            for j, l in enumerate(chosen):
                out[s:s + len(ids), j] = store[l]
    finally:
        for h in handles:
            h.remove()
        model.train(was)
    return out


@torch.no_grad()
def last_token_acts_reference(model: nn.Module, tokenizer, prompts: Sequence[str], layers=None,
                              *, chat: bool = True) -> torch.Tensor:
    """Reference path of :func:`last_token_acts`: one prompt at a time, no padding, read from
    ``output_hidden_states`` (``hidden_states[l]`` is the input of layer ``l``; the stream after
    the last layer is recovered before the final norm by a forward hook). Chapter 08."""
    chosen = _layers(model, layers)
    n = len(lm.decoder_layers(model))
    rows = []
    for ids in encode_prompts(tokenizer, prompts, chat=chat):
        with lm.capture_residual(model, layers=[n - 1]) as res:
            hs = model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
        rows.append(torch.stack([(hs[l] if l < n else res[n - 1])[0, -1].double() for l in chosen]))
    return torch.stack(rows)


def auroc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Area under the ROC curve of scores ``pos`` (label 1) against ``neg`` (label 0): the
    Mann-Whitney probability ``P(pos > neg) + P(pos = neg) / 2`` from ranks (chapter 08)."""
    pos, neg = np.asarray(pos, float).ravel(), np.asarray(neg, float).ravel()
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("auroc needs at least one positive and one negative score")
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([pos, neg]))
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


@dataclass
class RefusalFeature:
    """Per-layer refusal features (chapter 08).

    Attributes
    ----------
    layers
        The decoder layers (``resid_pre``) the features belong to.
    raw
        ``r_l`` (difference of means), ``(len(layers), d)`` float32.
    mu_harmless, mu_harmful
        Mean projection of each class on the unit direction ``r^_l``, ``(len(layers),)``.
    """

    layers: list[int]
    raw: torch.Tensor
    mu_harmless: torch.Tensor
    mu_harmful: torch.Tensor

    @classmethod
    def from_contrast(cls, acts_harmful: torch.Tensor, acts_harmless: torch.Tensor,
                      layers: Sequence[int]) -> "RefusalFeature":
        """Difference of means (float64 accumulation) of two ``(n, L, d)`` activation sets."""
        a, b = torch.as_tensor(acts_harmful).double(), torch.as_tensor(acts_harmless).double()
        if a.dim() != 3 or b.dim() != 3 or a.shape[1:] != b.shape[1:]:
            raise ValueError(f"acts must be (n, layers, d) with equal (layers, d), got "
                             f"{tuple(a.shape)} and {tuple(b.shape)}")
        if a.shape[1] != len(layers):
            raise ValueError(f"acts have {a.shape[1]} layers but {len(layers)} layer numbers were given")
        r = a.mean(0) - b.mean(0)                                  # r_l
        u = r / r.norm(dim=-1, keepdim=True).clamp(min=1e-12)
        return cls(list(layers), r.float(), (b * u).sum(-1).mean(0).float(),
                   (a * u).sum(-1).mean(0).float())

    @property
    def dirs(self) -> torch.Tensor:
        """Unit directions ``r^_l``, ``(len(layers), d)``."""
        return self.raw / self.raw.norm(dim=-1, keepdim=True).clamp(min=1e-12)

    def index(self, layer: int) -> int:
        if layer not in self.layers:
            raise KeyError(f"no refusal feature at layer {layer}; have layers {self.layers}")
        return self.layers.index(layer)

    def project(self, acts: torch.Tensor) -> np.ndarray:
        """Projection of ``(n, len(layers), d)`` activations on ``r^_l``: ``(n, len(layers))``."""
        return (torch.as_tensor(acts).double() * self.dirs.double()).sum(-1).numpy()

    def auroc(self, acts_harmful: torch.Tensor, acts_harmless: torch.Tensor) -> np.ndarray:
        """AUROC per layer of the projection as a harmful-vs-harmless score."""
        ph, ps = self.project(acts_harmful), self.project(acts_harmless)
        return np.array([auroc(ph[:, j], ps[:, j]) for j in range(len(self.layers))])

    def cosine(self, v: torch.Tensor, layer: int) -> float:
        """Cosine between a vector ``v`` (``(d,)``) and ``r_l``."""
        r = self.raw[self.index(layer)].double()
        v = torch.as_tensor(v).double()
        return float((v @ r) / (v.norm() * r.norm()).clamp(min=1e-12))

    @classmethod
    def join(cls, *parts: "RefusalFeature") -> "RefusalFeature":
        """One feature holding the layers of ``parts`` (which must not overlap), in layer order."""
        layers = [l for p in parts for l in p.layers]
        if len(set(layers)) != len(layers):
            raise ValueError(f"the parts' layers overlap: {layers}")
        order = np.argsort(layers)
        cat = lambda name: torch.cat([getattr(p, name) for p in parts])[order]   # noqa: E731
        return cls([layers[i] for i in order], cat("raw"), cat("mu_harmless"), cat("mu_harmful"))

    def subset(self, layers: Iterable[int]) -> "RefusalFeature":
        idx = [self.index(l) for l in layers]
        return RefusalFeature([self.layers[i] for i in idx], self.raw[idx], self.mu_harmless[idx],
                              self.mu_harmful[idx])


class RFAEdit:
    """The RFA edit (Eq. 3) as an ``(x, layer) -> x`` function for :func:`iclr25.lm.intervene`:
    ``x - (x . u_l - c_l) u_l`` with ``c_l`` the harmless mean (``"mean"``) or 0 (``"zero"``).
    Vectorised over every row and position. Chapter 08."""

    def __init__(self, rf: RefusalFeature, mode: str = "mean"):
        if mode not in MODES:
            raise ValueError(f"unknown RFA mode {mode!r}; valid: {', '.join(MODES)}")
        self.rf, self.mode = rf, mode
        self._u = rf.dirs
        self._c = rf.mu_harmless if mode == "mean" else torch.zeros_like(rf.mu_harmless)

    def __call__(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        j = self.rf.index(layer)
        u = self._u[j].to(x.dtype)
        coef = x @ u
        return x + (self._c[j].to(x.dtype) - coef)[..., None] * u


@contextlib.contextmanager
def rfa(model: nn.Module, rf: RefusalFeature, layers=None, *, mode: str = "mean",
        rows: Sequence[int] | None = None, positions: str = DEFAULT_POSITIONS):
    """Refusal feature ablation at the input of ``layers`` (default: every layer of ``rf``; layer
    ``n`` is the stream after the last decoder layer), at ``positions`` (``"last"``, the default:
    the last prompt token of a left-padded batch and each generated token, never the first token;
    ``"all"``: every position), on ``rows`` of each batch (default all). Chapter 08."""
    pos = positions_arg(positions)
    chosen = rf.layers if layers is None else _layers(model, layers)
    for l in chosen:
        rf.index(l)
    edit = RFAEdit(rf, mode)
    if rows is not None and len(rows) == 0:
        yield None
        return
    n = len(lm.decoder_layers(model))
    pre = [l for l in chosen if l < n]
    with contextlib.ExitStack() as stack:
        ivs = []
        if pre:
            ivs.append(stack.enter_context(lm.intervene(model, "resid_pre", edit, layers=pre, rows=rows,
                                                        positions=pos)))
        if n in chosen:
            ivs.append(stack.enter_context(lm.intervene(model, "resid_post", lambda x, l: edit(x, n),
                                                        layers=[n - 1], rows=rows, positions=pos)))
        yield ivs


@contextlib.contextmanager
def act_add(model: nn.Module, rf: RefusalFeature, layer: int, alpha: float = 1.0, *,
            positions: str = DEFAULT_POSITIONS, vector: torch.Tensor | None = None):
    """Activation addition: ``h_l <- h_l + alpha r_l`` at the input of ``layer``, at ``positions``
    (as in :func:`rfa`; Arditi et al. 2024; induces refusal on harmless prompts). ``vector``
    replaces ``r_l`` (the random-direction control). Chapter 08."""
    v = rf.raw[rf.index(layer)] if vector is None else torch.as_tensor(vector, dtype=rf.raw.dtype)
    with lm.intervene(model, "resid_pre", lm.add(v, alpha=alpha), layers=[layer],
                      positions=positions_arg(positions)) as iv:
        yield iv


@torch.no_grad()
def last_logprobs(model: nn.Module, tokenizer, prompts: Sequence[str], *, chat: bool = True,
                  batch_size: int = 16) -> torch.Tensor:
    """Next-token log-probabilities after each chat-formatted prompt: ``(n, vocab)`` float32."""
    ids_all = encode_prompts(tokenizer, prompts, chat=chat)
    out = []
    was = model.training
    model.eval()
    try:
        for s in range(0, len(ids_all), batch_size):
            ids, mask = pad_batch(ids_all[s:s + batch_size], pad_id(tokenizer), left=True,
                                  device=next(model.parameters()).device)
            lg = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask),
                       use_cache=False, logits_to_keep=1).logits[:, -1]
            out.append(torch.log_softmax(lg.float(), -1).cpu())
    finally:
        model.train(was)
    return torch.cat(out)


def kl_to(ref_logprobs: torch.Tensor, logprobs: torch.Tensor) -> np.ndarray:
    """``KL(p_ref || p)`` per row from log-probabilities (chapter 08: harmless KL of an edit)."""
    if ref_logprobs.shape != logprobs.shape:
        raise ValueError(f"shapes differ: {tuple(ref_logprobs.shape)} vs {tuple(logprobs.shape)}")
    return (ref_logprobs.exp() * (ref_logprobs - logprobs)).sum(-1).numpy()

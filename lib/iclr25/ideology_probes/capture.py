"""Per-head activations: every attention head's output before ``o_proj`` at the last prompt token.

The paper forks HF Llama to put an identity module on the concatenated head outputs before
``o_proj`` (so baukit can hook it) and reads ``features[n, L, H, d_head]`` at the last prompt
token. We read the same tensor with a forward pre-hook on ``o_proj``
(:func:`iclr25.lm.capture_heads`), no fork needed.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .. import lm
from ..lm._common import check_batch_size, check_texts, pad_batch, pad_id, position_ids
from ..progress import progress

__all__ = ["METHODS", "encode", "head_outputs", "head_outputs_per_token", "mean_embeddings",
           "cached_head_outputs", "model_fingerprint"]

#: ``"batched"`` (left-padded batches) or ``"loop"`` (one prompt per forward pass, the reference).
METHODS = ("batched", "loop")


def encode(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of fully formatted prompts (the chat template's special tokens are in the
    text, so no special tokens are added)."""
    return [list(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in check_texts(texts)]


@torch.no_grad()
def head_outputs(model: nn.Module, tokenizer, texts: Sequence[str], *, batch_size: int = 16,
                 method: str = "batched", desc: str | None = "head outputs") -> np.ndarray:
    """Every head's output before ``o_proj`` at each prompt's last token.

    Defined in chapter 10 (ideology probes). ``method="batched"`` left-pads ``batch_size``
    prompts per forward pass (position ids skip the padding, so the last token sees exactly
    its own prompt); ``"loop"`` runs one prompt at a time (the reference; equal to 1e-4).

    Returns
    -------
    np.ndarray
        float32 ``(n, n_layers, n_heads, head_dim)`` (SmolLM2-135M: ``(n, 30, 9, 64)``).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    check_batch_size(batch_size)
    ids = encode(tokenizer, texts)
    if not ids:
        raise ValueError("texts is empty: nothing to capture")
    empty = [i for i, s in enumerate(ids) if not s]
    if empty:
        raise ValueError(f"texts {empty[:5]} tokenize to nothing")
    bs = 1 if method == "loop" else batch_size
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))   # less padding per batch
    device = next(model.parameters()).device
    out = None
    was = model.training
    model.eval()
    try:
        with lm.capture_heads(model, positions=-1, to_cpu=True) as rec:
            for start in progress(range(0, len(order), bs), desc=desc,
                                  total=(len(order) + bs - 1) // bs):
                chunk = order[start:start + bs]
                x, mask = pad_batch([ids[i] for i in chunk], pad_id(tokenizer), left=True,
                                    device=device)
                model(input_ids=x, attention_mask=mask, position_ids=position_ids(mask),
                      use_cache=False, logits_to_keep=1)
                acts = torch.stack([rec[l] for l in rec.layers], dim=1).float().numpy()
                if out is None:
                    out = np.zeros((len(ids),) + acts.shape[1:], dtype=np.float32)
                out[chunk] = acts
    finally:
        model.train(was)
    return out


@torch.no_grad()
def head_outputs_per_token(model: nn.Module, tokenizer, texts: Sequence[str],
                           heads: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """The outputs of ``heads`` (``[(layer, head), ...]``) at *every* token of each text, one
    text per forward pass: a list of float32 arrays ``(n_tokens_i, len(heads), head_dim)``.
    Used for token-level monitoring of generated text (the paper's Fig. A6).

    Defined in chapter 10 (ideology probes)."""
    heads = [(int(l), int(h)) for l, h in heads]
    if not heads:
        raise ValueError("heads is empty: pass [(layer, head), ...]")
    layers = sorted({l for l, _ in heads})
    device = next(model.parameters()).device
    res = []
    with lm.capture_heads(model, layers=layers, to_cpu=True) as rec:
        for s in encode(tokenizer, texts):
            model(input_ids=torch.tensor([s], device=device), use_cache=False, logits_to_keep=1)
            res.append(np.stack([rec[l][0, :, h].float().numpy() for l, h in heads], axis=1))
    return res


@torch.no_grad()
def mean_embeddings(model: nn.Module, tokenizer, texts: Sequence[str]) -> np.ndarray:
    """The lexical baseline's features: the mean of the model's input token embeddings over each
    prompt's tokens, ``(n, d_model)`` float32 (no layer of the model is run).

    Defined in chapter 10 (ideology probes)."""
    emb = model.get_input_embeddings().weight
    return np.stack([emb[torch.tensor(s)].mean(0).float().cpu().numpy()
                     for s in encode(tokenizer, texts)])


_FINGERPRINTS: "weakref.WeakKeyDictionary[nn.Module, tuple[int, str]]" = weakref.WeakKeyDictionary()


def model_fingerprint(model: nn.Module) -> str:
    """A SHA-256 (16 hex digits) of the model's identity: every parameter's and buffer's name,
    shape, dtype and bytes. Two models with different weights never share it, whatever they are
    called; it is memoised per model object until a parameter is modified in place.

    Defined in chapter 10 (ideology probes); keys :func:`cached_head_outputs`."""
    import hashlib

    tensors = list(model.state_dict().items())
    version = sum(int(getattr(t, "_version", 0)) for _, t in tensors)
    hit = _FINGERPRINTS.get(model)
    if hit is not None and hit[0] == version:
        return hit[1]
    h = hashlib.sha256()
    for name, t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    out = h.hexdigest()[:16]
    _FINGERPRINTS[model] = (version, out)
    return out


def cached_head_outputs(model: nn.Module, tokenizer, texts: Sequence[str], *, batch_size: int = 16,
                        tag: str = "acts", model_name: str | None = None) -> np.ndarray:
    """:func:`head_outputs`, saved under ``runs/10-ideology-probes/`` keyed by a hash of the
    model's weights (:func:`model_fingerprint`), the texts and the code
    (:func:`iclr25.paths.artifact_path`), so the chapter's later notebooks reuse what
    ``01-head-probing`` captured (the same model and prompts give the same file; anything else
    recomputes; two models never share an entry). ``model_name``, when given, is mixed into the
    key as well. ``runs/`` is not committed; deleting it only costs time.

    Defined in chapter 10 (ideology probes)."""
    import hashlib

    from ..paths import artifact_path, runs_dir

    texts = check_texts(texts)
    ident = model_fingerprint(model) + ("" if model_name is None else f":{model_name}")
    key = hashlib.sha256("\x00".join([ident, *texts]).encode()).hexdigest()[:16]
    # keyed by the model, the texts and the code that captures them (this module and its imports)
    path = artifact_path(runs_dir() / "10-ideology-probes", tag, key, [__name__], suffix=".npy")
    if path.is_file():
        try:
            acts = np.load(path)
            if acts.shape[0] == len(texts):
                return acts
        except (OSError, ValueError):
            pass
    acts = head_outputs(model, tokenizer, texts, batch_size=batch_size, desc=tag)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, acts)
        tmp.replace(path)
    except OSError:
        pass
    return acts

"""Residual-stream activations of SmolLM2 on the book's offline corpus, cached as float16 memmaps,
and the language-model loss with an SAE spliced in (chapter 06, ``03-scaling-laws``).

The paper trains on GPT-2 small's layer-8 residual stream over OpenWebText (contexts of 64
tokens). We use SmolLM2-135M-Instruct (:mod:`iclr25.lm`, 30 layers, d_model 576) and the
Wikipedia vital-article summaries of :func:`iclr25.tinygpt.wiki_corpus`, cut into contexts of
``ctx`` tokens. The first position of each context is dropped from the training activations: its
residual stream has a much larger norm (an attention sink) and would dominate the MSE.

Activations are written to ``<folder>/acts.f16`` (``np.memmap``, float16, shape (N, 576)) with the
token ids beside them (``tokens.i32``, the context each row came from in ``ctx.i32``) and a
``meta.json``; a later call with the same settings reads the cache instead of running the model.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..progress import progress

__all__ = ["ActsSpec", "ActivationCache", "corpus_contexts", "context_topics", "collect_activations",
           "default_cache_folder", "spliced_loss", "outlier_threshold", "training_rows", "Rows"]


def outlier_threshold(acts, factor: float = 8.0, sample: int = 20000) -> float:
    """``factor`` times the median activation norm (over up to ``sample`` rows). SmolLM2's
    residual stream has rare "massive activations" (norms hundreds of times the median) that
    would dominate an MSE; rows above this norm are left out of training and splicing. Chapter 06.
    """
    x = np.asarray(acts[:sample], dtype=np.float32)
    return float(factor * np.median(np.linalg.norm(x, axis=1)))


class Rows:
    """The rows ``rows`` of a (memmapped) activation matrix, multiplied by ``scale``, indexed
    lazily: ``len``, ``shape``, ``[int array]`` and ``[slice]`` read only what is asked for
    (chapter 06)."""

    def __init__(self, acts, rows=None, scale: float = 1.0) -> None:
        rows = np.arange(len(acts)) if rows is None else rows
        self.acts, self.rows, self.scale = acts, np.asarray(rows, dtype=np.int64), float(scale)
        self.shape = (len(self.rows), acts.shape[1])

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        x = np.asarray(self.acts[self.rows[i]], dtype=np.float32)
        return x * np.float32(self.scale) if self.scale != 1.0 else x


def training_rows(acts, max_norm: float, chunk: int = 65536) -> np.ndarray:
    """Indices of the rows of ``acts`` whose norm is at most ``max_norm`` (read in chunks)."""
    keep = []
    for s in range(0, len(acts), chunk):
        x = np.asarray(acts[s:s + chunk], dtype=np.float32)
        keep.append(s + np.nonzero(np.linalg.norm(x, axis=1) <= max_norm)[0])
    return np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)

_FORMAT = 1


@dataclass(frozen=True)
class ActsSpec:
    """What to collect: ``n_tokens`` rows from decoder layer ``layer``'s output (0-based, so
    ``layer=15`` is the residual stream after 16 of 30 layers), contexts of ``ctx`` tokens
    (paper: 64), documents shuffled with ``seed``. ``split`` ``"train"``/``"val"`` uses disjoint
    documents."""

    n_tokens: int
    layer: int = 15
    ctx: int = 64
    seed: int = 0
    split: str = "train"
    model: str = "smollm2-135m-instruct"

    def __post_init__(self):
        if self.n_tokens < 1 or self.ctx < 2:
            raise ValueError(f"n_tokens must be >= 1 and ctx >= 2; got {self.n_tokens}, {self.ctx}")
        if self.split not in ("train", "val"):
            raise ValueError(f"unknown split {self.split!r}; valid: train, val")

    def key(self) -> str:
        return (f"{self.model}-L{self.layer}-ctx{self.ctx}-{self.split}-s{self.seed}-"
                f"{self.n_tokens}")


@dataclass
class ActivationCache:
    """A cached set of activations: ``acts`` (N, d) float16 memmap, ``tokens`` (N,) int32 token
    ids, ``ctx_ids`` (N,) int32 context number, ``contexts`` (C, ctx) int32 token ids of the
    contexts, ``folder``."""

    acts: np.ndarray
    tokens: np.ndarray
    ctx_ids: np.ndarray
    contexts: np.ndarray
    folder: Path
    spec: ActsSpec

    def __len__(self) -> int:
        return len(self.acts)


def default_cache_folder(spec: ActsSpec) -> Path:
    """``iclr25.paths.cache_dir() / "topk_sae" / f"acts-{spec.key()}-<code>"``: keyed by the spec
    and by the code that captures the activations (this module and its imports,
    :func:`iclr25.paths.artifact_path`)."""
    from .. import paths
    return paths.artifact_path(paths.cache_dir() / "topk_sae", "acts", spec.key(), [__name__])


def _windows(tokenizer, ctx: int, seed: int, split: str):
    """Yield ``(document index, window of ctx token ids)`` in the order :func:`corpus_contexts` uses."""
    from ..tinygpt import wiki_corpus

    docs = wiki_corpus()
    order = np.random.default_rng(seed).permutation(len(docs))
    cut = int(0.9 * len(order))
    order = order[:cut] if split == "train" else order[cut:]
    for i in order:
        ids = tokenizer(docs[i].text, add_special_tokens=False)["input_ids"]
        for s in range(0, len(ids) - ctx + 1, ctx):
            yield int(i), ids[s:s + ctx]


def corpus_contexts(tokenizer, n_contexts: int, ctx: int, *, seed: int = 0,
                    split: str = "train") -> np.ndarray:
    """``n_contexts`` windows of ``ctx`` consecutive token ids from the corpus, shape
    (n_contexts, ctx). Documents are shuffled with ``seed``; the last 10% (in that order) form
    the ``"val"`` split. Each document is tokenized on its own and cut into non-overlapping windows
    (a short tail is dropped). Chapter 06."""
    out: list[list[int]] = []
    for _, w in _windows(tokenizer, ctx, seed, split):
        out.append(w)
        if len(out) == n_contexts:
            return np.asarray(out, dtype=np.int32)
    raise ValueError(f"the {split} split holds only {len(out)} contexts of {ctx} tokens; "
                     f"asked for {n_contexts}")


def context_topics(tokenizer, n_contexts: int, ctx: int, *, seed: int = 0,
                   split: str = "train") -> np.ndarray:
    """The topic label (the corpus's vital-article category) of the article each of the first
    ``n_contexts`` windows of :func:`corpus_contexts` comes from, (n_contexts,) object array.
    Chapter 06 (``04-feature-quality``)."""
    from ..tinygpt import wiki_corpus

    docs = wiki_corpus()
    out = []
    for i, _ in _windows(tokenizer, ctx, seed, split):
        out.append(docs[i].topic)
        if len(out) == n_contexts:
            return np.asarray(out, dtype=object)
    raise ValueError(f"the {split} split holds only {len(out)} contexts; asked for {n_contexts}")


def collect_activations(spec: ActsSpec, *, model=None, tokenizer=None, folder=None,
                        batch_contexts: int = 16, refresh: bool = False) -> ActivationCache:
    """Run the model over the corpus and cache layer ``spec.layer``'s residual stream.

    Returns the cache (memmaps opened read-only). ``model``/``tokenizer`` default to
    :func:`iclr25.lm.load`\\ ``(spec.model)``; they are loaded only when the cache is missing.
    Chapter 06 (``03-scaling-laws``).
    """
    folder = Path(folder) if folder is not None else default_cache_folder(spec)
    meta_file = folder / "meta.json"
    if not refresh and meta_file.is_file():
        meta = json.loads(meta_file.read_text())
        if meta.get("format") == _FORMAT and meta.get("spec") == asdict(spec):
            return _open(folder, spec, meta)
    from .. import lm

    if model is None or tokenizer is None:
        model, tokenizer = lm.load(spec.model)
    n_layers = len(lm.decoder_layers(model))
    if not 0 <= spec.layer < n_layers:
        raise ValueError(f"layer must be in [0, {n_layers}); got {spec.layer}")
    per_ctx = spec.ctx - 1                          # position 0 (attention sink) is dropped
    n_ctx = -(-spec.n_tokens // per_ctx)
    contexts = corpus_contexts(tokenizer, n_ctx, spec.ctx, seed=spec.seed, split=spec.split)
    d = int(model.config.hidden_size)
    folder.mkdir(parents=True, exist_ok=True)
    N = spec.n_tokens
    acts = np.lib.format.open_memmap(folder / "acts.npy", mode="w+", dtype=np.float16,
                                     shape=(N, d))
    tokens = np.empty(N, dtype=np.int32)
    ctx_ids = np.empty(N, dtype=np.int32)
    pos = 0
    model.eval()
    with torch.no_grad(), lm.capture_residual(model, [spec.layer], to_cpu=True) as rec:
        for s in progress(range(0, n_ctx, batch_contexts), desc="activations"):
            ids = torch.from_numpy(contexts[s:s + batch_contexts]).long()
            model(input_ids=ids)
            h = rec[spec.layer][:, 1:].reshape(-1, d)
            take = min(len(h), N - pos)
            acts[pos:pos + take] = h[:take].numpy().astype(np.float16)
            tokens[pos:pos + take] = ids[:, 1:].reshape(-1)[:take].numpy()
            ctx_ids[pos:pos + take] = (np.arange(s, s + len(ids)).repeat(per_ctx))[:take]
            pos += take
    acts.flush()
    del acts
    np.save(folder / "tokens.npy", tokens)
    np.save(folder / "ctx_ids.npy", ctx_ids)
    np.save(folder / "contexts.npy", contexts)
    meta = {"format": _FORMAT, "spec": asdict(spec), "d_model": d, "n_contexts": int(n_ctx)}
    meta_file.write_text(json.dumps(meta, indent=1) + "\n")
    return _open(folder, spec, meta)


def _open(folder: Path, spec: ActsSpec, meta: dict) -> ActivationCache:
    for f in ("acts.npy", "tokens.npy", "ctx_ids.npy", "contexts.npy"):
        if not (folder / f).is_file():
            raise FileNotFoundError(f"activation cache {folder} is incomplete: {f} is missing; "
                                    "call collect_activations(..., refresh=True)")
    return ActivationCache(acts=np.load(folder / "acts.npy", mmap_mode="r"),
                           tokens=np.load(folder / "tokens.npy"),
                           ctx_ids=np.load(folder / "ctx_ids.npy"),
                           contexts=np.load(folder / "contexts.npy"), folder=folder, spec=spec)


@contextlib.contextmanager
def _replace_layer_output(model, layer: int, fn):
    from .. import lm

    block = lm.decoder_layers(model)[layer]

    def hook(mod, args, out):
        h = out[0] if isinstance(out, (tuple, list)) else out
        new = h.clone()
        new[:, 1:] = fn(h[:, 1:])               # keep position 0 (never trained on)
        if isinstance(out, tuple):
            return (new,) + tuple(out[1:])
        if isinstance(out, list):
            return [new] + list(out[1:])
        return new

    handle = block.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@torch.no_grad()
def spliced_loss(model, contexts: np.ndarray, layer: int, *, sae=None, scale: float = 1.0,
                 mode: str = "sae", mean: torch.Tensor | None = None,
                 max_norm: float | None = None, batch_contexts: int = 16) -> float:
    """Next-token cross-entropy of ``model`` on ``contexts`` (C, ctx) with layer ``layer``'s
    output (positions >= 1) replaced.

    ``mode``: ``"clean"`` (nothing replaced), ``"sae"`` (the SAE reconstruction; the SAE was
    trained on activations multiplied by ``scale``), ``"zero"`` (zero-ablation), ``"mean"``
    (the ``mean`` activation vector). Positions whose activation norm exceeds ``max_norm`` (the
    massive activations left out of training, see :func:`outlier_threshold`) keep their value.
    Chapter 06 (``03-scaling-laws``).
    """
    modes = ("clean", "sae", "zero", "mean")
    if mode not in modes:
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(modes)}")
    if mode == "sae" and sae is None:
        raise ValueError("mode='sae' needs an sae")
    if mode == "mean" and mean is None:
        raise ValueError("mode='mean' needs the mean activation vector")

    def fn(h):
        if mode == "zero":
            new = torch.zeros_like(h)
        elif mode == "mean":
            new = mean.to(h.dtype).expand_as(h)
        else:
            flat = h.reshape(-1, h.shape[-1]).float() * scale
            new = (sae(flat) / scale).reshape(h.shape).to(h.dtype)
        if max_norm is not None:
            keep = h.norm(dim=-1, keepdim=True) > max_norm
            new = torch.where(keep, h, new)
        return new

    total, count = 0.0, 0
    ctxm = contextlib.nullcontext() if mode == "clean" else _replace_layer_output(model, layer, fn)
    with ctxm:
        for s in range(0, len(contexts), batch_contexts):
            ids = torch.from_numpy(np.asarray(contexts[s:s + batch_contexts])).long()
            logits = model(input_ids=ids).logits[:, 1:-1]      # predict from position >= 1
            tgt = ids[:, 2:]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                     tgt.reshape(-1), reduction="sum")
            total += float(loss)
            count += tgt.numel()
    return total / count

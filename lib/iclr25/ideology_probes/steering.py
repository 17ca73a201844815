"""ITI-style steering of the most predictive heads (the paper's Fig. 4, A5, A7, A8).

For each chosen head ``(l, h)`` the probe's direction is added to the head's output (before
``o_proj``, so it passes through the output projection) at the last position of every forward
pass: the last prompt token, then each new token while generating:

    z_{l,h} <- z_{l,h} + alpha * sigma_{l,h} * u_{l,h},   u = unit(w_{l,h} * std(z_{l,h}))

``w`` is the head's ridge coefficient and ``std`` the per-dimension standard deviation of the
head's activations over the probing prompts (the paper's ``coef * std``); we normalise it to a
unit vector ``u`` and scale by ``sigma``, the standard deviation of the activations along ``u``,
so ``alpha`` counts standard deviations (ITI's convention) whatever the label's units.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from .. import lm
from ..progress import progress

__all__ = ["steering_directions", "steer_heads", "generate_steered", "steering_grid", "random_heads",
           "heads_in_layers", "PromptPrefix", "prompt_prefix", "row_seed", "rowwise_directions",
           "sample_from_prefix", "prefix_logprobs"]


def steering_directions(coef: np.ndarray, acts: np.ndarray,
                        heads: Sequence[tuple[int, int]]) -> dict[int, torch.Tensor]:
    """Per-layer direction tensors ``{layer: (n_heads, head_dim)}`` (zero rows for heads not
    chosen) for :func:`steer_heads`: ``sigma * unit(coef * std)`` per chosen head.

    Defined in chapter 10 (ideology probes). ``coef`` is the probe's ``(L, H, d)``
    coefficients (:attr:`HeadProbe.coef_`), ``acts`` the ``(n, L, H, d)`` activations it was
    fitted on."""
    coef = np.asarray(coef)
    acts = np.asarray(acts)
    if coef.ndim != 3 or acts.ndim != 4 or acts.shape[1:] != coef.shape:
        raise ValueError(f"coef must be (L, H, d) and acts (n, L, H, d) with the same (L, H, d); "
                         f"got {coef.shape} and {acts.shape}")
    L, H, d = coef.shape
    heads = [(int(l), int(h)) for l, h in heads]
    if not heads:
        raise ValueError("heads is empty: choose at least one (layer, head)")
    bad = [(l, h) for l, h in heads if not (0 <= l < L and 0 <= h < H)]
    if bad:
        raise ValueError(f"heads {bad} out of range for {L} layers x {H} heads")
    out: dict[int, torch.Tensor] = {}
    for l, h in heads:
        z = acts[:, l, h, :].astype(np.float64)
        v = coef[l, h] * z.std(0)                      # the paper's coef * std
        norm = np.linalg.norm(v)
        if norm == 0:
            continue
        u = v / norm
        sigma = float((z @ u).std())                   # SD of the activations along u
        out.setdefault(l, torch.zeros(H, d))
        out[l][h] = torch.as_tensor(sigma * u, dtype=torch.float32)
    return out


@contextlib.contextmanager
def steer_heads(model: nn.Module, directions: dict[int, torch.Tensor], alpha: float):
    """Add ``alpha * directions[l]`` to the head outputs of layer ``l`` at the last position of
    every forward pass inside the block (works while generating; hooks removed on exit).

    Defined in chapter 10 (ideology probes); built on :func:`iclr25.lm.intervene` at site
    ``"heads"``."""
    if not directions:
        raise ValueError("no directions to steer with")
    dirs = {int(l): torch.as_tensor(v) for l, v in directions.items()}

    def edit(x, layer):
        return x + alpha * dirs[layer].to(device=x.device, dtype=x.dtype)

    with lm.intervene(model, "heads", edit, layers=sorted(dirs), positions=-1) as iv:
        yield iv


class _RowAlphas:
    """The edit of a batch in which each row has its own alpha: ``x + alpha_row * d_layer``."""

    def __init__(self, dirs: dict[int, torch.Tensor], alpha_rows: torch.Tensor) -> None:
        self.dirs, self.alpha_rows = dirs, alpha_rows

    def __call__(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        if x.shape[0] != len(self.alpha_rows):
            raise RuntimeError(f"a batch of {x.shape[0]} rows but {len(self.alpha_rows)} alphas")
        a = self.alpha_rows.to(device=x.device, dtype=x.dtype).view(-1, *([1] * (x.dim() - 1)))
        return x + a * self.dirs[layer].to(device=x.device, dtype=x.dtype)


def generate_steered(model: nn.Module, tokenizer, prompts: Sequence[str],
                     directions: dict[int, torch.Tensor] | None, alphas: Sequence[float], *,
                     max_new_tokens: int = 40, batch_size: int | None = None,
                     desc: str | None = "steering") -> pd.DataFrame:
    """Greedy continuations of ``prompts`` (already chat-formatted, e.g.
    :func:`~iclr25.ideology_probes.data.steering_prompts`) for each ``alpha``: a table with
    ``alpha``, ``prompt`` (index), ``text``. ``alpha = 0`` (or ``directions=None``) is the
    unsteered model.

    All (alpha, prompt) rows decode in one batch of :func:`iclr25.lm.generate_batch`, each row
    with its own alpha (``batch_size=None``); the row order is the one ``generate_batch`` uses
    (prompts sorted by length, stable), and the tests check that the texts equal one call per
    alpha. An int ``batch_size`` instead runs one call per alpha.

    Defined in chapter 10 (ideology probes)."""
    alphas = [float(a) for a in alphas]
    prompts = list(prompts)
    if not alphas or not prompts:
        raise ValueError("need at least one alpha and one prompt")
    if batch_size is not None or not directions:
        rows = []
        for a in progress(alphas, desc=desc):
            ctx = (steer_heads(model, directions, a) if directions and a != 0
                   else contextlib.nullcontext())
            with ctx:
                gens = lm.generate_batch(model, tokenizer, prompts, chat=False,
                                         max_new_tokens=max_new_tokens, batch_size=batch_size or 16)
            rows += [{"alpha": a, "prompt": i, "text": t} for i, t in enumerate(gens.texts)]
        return pd.DataFrame(rows)
    jobs = [(a, i) for a in alphas for i in range(len(prompts))]
    texts = [prompts[i] for _, i in jobs]
    lens = [len(tokenizer(t)["input_ids"]) for t in texts]            # as generate_batch encodes
    order = sorted(range(len(jobs)), key=lambda k: -lens[k])          # and sorts them
    alpha_rows = torch.tensor([jobs[k][0] for k in order], dtype=torch.float32)
    dirs = {int(l): torch.as_tensor(v) for l, v in directions.items()}
    with lm.intervene(model, "heads", _RowAlphas(dirs, alpha_rows), layers=sorted(dirs),
                      positions=-1):
        gens = lm.generate_batch(model, tokenizer, texts, chat=False,
                                 max_new_tokens=max_new_tokens, batch_size=len(texts))
    return pd.DataFrame([{"alpha": a, "prompt": i, "text": t} for (a, i), t in zip(jobs, gens.texts)])


def steering_grid(model: nn.Module, tokenizer, prompts: Sequence[str],
                  configs: dict[str, dict[int, torch.Tensor]], alphas: Sequence[float], *,
                  max_new_tokens: int = 40) -> pd.DataFrame:
    """:func:`generate_steered` for several head sets (``{name: directions}``), each set's
    non-zero alphas in one batch, the unsteered ``alpha = 0`` texts generated once and shared:
    a table with ``config``, ``alpha``, ``prompt``, ``text``.

    Defined in chapter 10 (ideology probes)."""
    if not configs:
        raise ValueError("configs is empty: pass {name: directions}")
    alphas = [float(a) for a in alphas]
    base = generate_steered(model, tokenizer, prompts, None, [0.0], max_new_tokens=max_new_tokens,
                            desc=None) if 0.0 in alphas else None
    parts = []
    for name in progress(list(configs), desc="head sets"):
        df = generate_steered(model, tokenizer, prompts, configs[name],
                              [a for a in alphas if a != 0.0], max_new_tokens=max_new_tokens)
        if base is not None:
            df = pd.concat([base, df], ignore_index=True)
        parts.append(df.assign(config=name))
    out = pd.concat(parts, ignore_index=True)
    return out[["config", "alpha", "prompt", "text"]].sort_values(["config", "alpha", "prompt"],
                                                                  kind="stable").reset_index(drop=True)


def random_heads(n_layers: int, n_heads: int, k: int, *, seed: int = 0,
                 exclude: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """``k`` heads drawn uniformly (a control for the top-``k`` heads), avoiding ``exclude``."""
    pool = [(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in set(exclude)]
    if not 1 <= k <= len(pool):
        raise ValueError(f"k must be in [1, {len(pool)}], got {k!r}")
    idx = np.random.default_rng(seed).choice(len(pool), size=k, replace=False)
    return [pool[i] for i in sorted(idx)]


def heads_in_layers(rho: np.ndarray, layers: Sequence[int], k: int) -> list[tuple[int, int]]:
    """The ``k`` best heads (by ``rho``) among ``layers`` only (Fig. A7: early vs late layers)."""
    masked = np.full_like(rho, -np.inf)
    layers = list(layers)
    masked[layers] = rho[layers]
    n = int(np.isfinite(masked).sum())
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}] for layers {layers}, got {k!r}")
    flat = np.argsort(-masked.ravel(), kind="stable")[:k]
    H = rho.shape[1]
    return [(int(i // H), int(i % H)) for i in flat]



# ---------------------------------------------------------------------------------------------
# sampled generation from a shared prompt prefix (the registered steering design, issue 61)


class PromptPrefix:
    """The unsteered KV cache of every prompt but its last token, computed once.

    A steering edit acts at the last position of every forward pass (the last prompt token,
    then each new token), so the keys and values of the earlier prompt tokens are those of the
    clean model whatever is steered: they are computed once per prompt and shared by every
    head set, every alpha and every sample (``n`` samples of one prompt cost ``n`` rows of
    decoding, not ``n`` prompt passes). Built by :func:`prompt_prefix`.

    Defined in chapter 10 (ideology probes)."""

    def __init__(self, ids, keys, values, mask, last, n_prefix):
        self.ids = ids              # token ids of each full prompt
        self.keys = keys            # per layer (P, kv_heads, T, head_dim), left-padded
        self.values = values
        self.mask = mask            # (P, T) attention mask of the prefixes
        self.last = last            # (P,) the last prompt token
        self.n_prefix = n_prefix    # (P,) prefix lengths (prompt length - 1)

    def __len__(self) -> int:
        return len(self.ids)

    def cache(self, model: nn.Module, rows: Sequence[int]):
        """A fresh KV cache holding prefix ``rows[i]`` in batch row ``i``."""
        from ..lm._common import new_cache

        idx = torch.as_tensor(list(rows), dtype=torch.long)
        c = new_cache(model)
        for i, (k, v) in enumerate(zip(self.keys, self.values)):
            c.update(k[idx].clone(), v[idx].clone(), i)
        return c


def _encode_plain(tokenizer, text: str) -> list[int]:
    """Token ids of a formatted prompt as :func:`iclr25.lm.generate_batch` encodes it
    (``chat=False``)."""
    return list(tokenizer(text)["input_ids"])


@torch.no_grad()
def prompt_prefix(model: nn.Module, tokenizer, prompts: Sequence[str], *,
                  batch_size: int = 32) -> PromptPrefix:
    """:class:`PromptPrefix` of ``prompts`` (already formatted, as for
    :func:`iclr25.lm.generate_batch` with ``chat=False``): one clean forward pass over each
    prompt without its last token.

    Defined in chapter 10 (ideology probes)."""
    from ..lm._common import cache_kwarg, check_batch_size, new_cache, pad_batch, pad_id

    check_batch_size(batch_size)
    ids = [_encode_plain(tokenizer, p) for p in prompts]
    if not ids:
        raise ValueError("prompts is empty")
    short = [i for i, s in enumerate(ids) if len(s) < 2]
    if short:
        raise ValueError(f"prompts {short[:5]} have fewer than 2 tokens: a prefix needs one "
                         "token before the last")
    device = next(model.parameters()).device
    T = max(len(s) for s in ids) - 1
    n_layers = model.config.num_hidden_layers
    keys: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]
    values: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]
    masks = []
    was = model.training
    model.eval()
    try:
        for start in range(0, len(ids), batch_size):
            chunk = [s[:-1] for s in ids[start:start + batch_size]]
            x, mask = pad_batch(chunk, pad_id(tokenizer), left=True, device=device)
            pad = T - x.shape[1]                                   # left-pad to the longest prompt
            cache = new_cache(model)
            model(input_ids=x, attention_mask=mask, position_ids=_positions(mask), use_cache=True,
                  logits_to_keep=1, **{cache_kwarg(model): cache})
            for i, layer in enumerate(cache.layers):
                keys[i].append(torch.nn.functional.pad(layer.keys.cpu(), (0, 0, pad, 0)))
                values[i].append(torch.nn.functional.pad(layer.values.cpu(), (0, 0, pad, 0)))
            masks.append(torch.nn.functional.pad(mask.cpu(), (pad, 0)))
    finally:
        model.train(was)
    return PromptPrefix(ids, [torch.cat(k) for k in keys], [torch.cat(v) for v in values],
                        torch.cat(masks), torch.tensor([s[-1] for s in ids]),
                        torch.tensor([len(s) - 1 for s in ids]))


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def row_seed(seed: int, prompt: int, sample: int) -> int:
    """The seed of the generator of sample ``sample`` of prompt ``prompt``: the rule of
    :func:`iclr25.lm.generate_batch` (``SeedSequence([seed, prompt, sequence])``), so a sample
    is the same under every head set and alpha, and equals ``generate_batch``'s.

    Defined in chapter 10 (ideology probes)."""
    return int(np.random.SeedSequence([int(seed), int(prompt), int(sample)])
               .generate_state(1, np.uint64)[0] % (2**63 - 1))


class _RowEdit:
    """``x + alpha_row * d_row``: each batch row with its own alpha and (optionally) its own
    directions (``{layer: (H, d)}`` shared, or ``(B, H, d)`` one per row)."""

    def __init__(self, dirs: dict[int, torch.Tensor], alpha_rows: torch.Tensor) -> None:
        self.dirs, self.alpha_rows = dirs, alpha_rows

    def __call__(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        if x.shape[0] != len(self.alpha_rows):
            raise RuntimeError(f"a batch of {x.shape[0]} rows but {len(self.alpha_rows)} alphas")
        d = self.dirs[layer].to(device=x.device, dtype=x.dtype)
        if d.dim() == 3:                                    # (B, H, d): one direction per row
            d = d[:, None]
        a = self.alpha_rows.to(device=x.device, dtype=x.dtype).view(-1, *([1] * (x.dim() - 1)))
        return x + a * d


def rowwise_directions(per_row: Sequence[dict[int, torch.Tensor]]) -> dict[int, torch.Tensor]:
    """Stack per-row direction dicts (:func:`steering_directions`, e.g. a new random head set
    per sample) into ``{layer: (B, H, d)}`` (zeros where a row steers nothing in that layer).

    Defined in chapter 10 (ideology probes)."""
    per_row = list(per_row)
    if not per_row:
        raise ValueError("per_row is empty")
    shapes = {tuple(v.shape) for d in per_row for v in d.values()}
    if len(shapes) != 1:
        raise ValueError(f"directions must all be (n_heads, head_dim), got shapes {sorted(shapes)}")
    shape = shapes.pop()
    layers = sorted({int(l) for d in per_row for l in d})
    return {l: torch.stack([torch.as_tensor(d[l]) if l in d else torch.zeros(shape)
                            for d in per_row]) for l in layers}


def _rows_of(dirs: dict[int, torch.Tensor] | None, idx: Sequence[int]):
    if not dirs:
        return None
    return {l: (v[list(idx)] if v.dim() == 3 else v) for l, v in dirs.items()}


@torch.no_grad()
def sample_from_prefix(model: nn.Module, tokenizer, prefix: PromptPrefix, rows: Sequence[int],
                       samples: Sequence[int] | None = None, *, directions=None,
                       alpha: float | Sequence[float] = 0.0, max_new_tokens: int = 32,
                       temperature: float | None = 0.7, seed: int = 0, batch_size: int = 256,
                       record_heads: Sequence[tuple[int, int]] | None = None,
                       desc: str | None = None) -> pd.DataFrame:
    """Continue prompt ``rows[i]`` of ``prefix`` (sample ``samples[i]``) with the heads steered,
    decoding every row in one batch from the shared prefix cache.

    ``directions``: ``{layer: (H, d)}`` (:func:`steering_directions`) or ``{layer: (B, H, d)}``
    one per row (:func:`rowwise_directions`); ``alpha`` one number or one per row; the edit is
    :func:`steer_heads`'s (the last position of every forward pass). ``temperature=None`` is
    greedy; otherwise each row draws from its own generator seeded by :func:`row_seed`
    ``(seed, prompt, sample)`` (softmax at the temperature, as :func:`iclr25.lm.generate_batch`
    samples), so a (prompt, sample) row draws the same uniforms whatever is steered.

    Returns a table with ``prompt``, ``sample``, ``text``, ``token_ids``, ``logprob`` (the
    per-token log probabilities of the chosen tokens at temperature 1 under the model *as
    run*: for ``alpha = 0`` the clean model's) and, with ``record_heads`` (``[(layer, head)]``),
    ``heads``: the outputs of those heads at every generated token (``(n_tokens, k, d)``, one
    extra forward pass for the last token), read at the same edit point.

    Defined in chapter 10 (ideology probes)."""
    from ..lm._common import cache_kwarg, check_batch_size, pad_id
    from ..lm.generation import _eos_ids

    rows = [int(r) for r in rows]
    if not rows:
        raise ValueError("rows is empty: which prompts to continue?")
    if min(rows) < 0 or max(rows) >= len(prefix):
        raise ValueError(f"rows must index the {len(prefix)} prompts of the prefix")
    samples = list(range(len(rows))) if samples is None else [int(s) for s in samples]
    if len(samples) != len(rows):
        raise ValueError(f"samples has {len(samples)} entries for {len(rows)} rows")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if temperature is not None and not temperature > 0:
        raise ValueError(f"temperature must be > 0 (or None: greedy), got {temperature!r}")
    check_batch_size(batch_size)
    alphas = np.broadcast_to(np.asarray(alpha, dtype=np.float32), (len(rows),)).copy()
    if directions is not None:
        for l, v in directions.items():
            if v.dim() == 3 and v.shape[0] != len(rows):
                raise ValueError(f"per-row directions of layer {l} have {v.shape[0]} rows, "
                                 f"expected {len(rows)}")
    rec_heads = [(int(l), int(h)) for l, h in (record_heads or [])]
    eos = _eos_ids(model, tokenizer)
    pad = pad_id(tokenizer)
    device = next(model.parameters()).device
    kw = cache_kwarg(model)
    out_rows = []
    was = model.training
    model.eval()
    try:
        for start in progress(range(0, len(rows), batch_size), desc=desc,
                              total=(len(rows) + batch_size - 1) // batch_size):
            idx = list(range(start, min(start + batch_size, len(rows))))
            pr = [rows[i] for i in idx]
            B = len(idx)
            cache = prefix.cache(model, pr)
            mask = prefix.mask[pr].to(device)
            pos = prefix.n_prefix[pr].to(device)[:, None]            # the last prompt token's
            x = prefix.last[pr].to(device)[:, None]
            gens = ([torch.Generator().manual_seed(row_seed(seed, rows[i], samples[i])) for i in idx]
                    if temperature is not None else [])
            new = [[] for _ in range(B)]
            lps = [[] for _ in range(B)]
            rec = [[] for _ in range(B)]
            fed = [False] * B           # is the token fed in this step a generated, non-EOS one?
            done = torch.zeros(B, dtype=torch.bool)
            steer = None
            if directions:
                steer = _RowEdit(_rows_of(directions, idx), torch.as_tensor(alphas[idx]))
            store: dict[int, torch.Tensor] = {}

            def record(z, layer):
                store[layer] = z.detach().float().cpu()
                return z

            with contextlib.ExitStack() as ctx:
                if steer is not None:
                    ctx.enter_context(lm.intervene(model, "heads", steer, layers=sorted(steer.dirs),
                                                   positions=-1))
                if rec_heads:   # installed after the steering edit: it sees the edited heads
                    ctx.enter_context(lm.intervene(model, "heads", record,
                                                   layers=sorted({l for l, _ in rec_heads}),
                                                   positions=-1))
                for step in range(max_new_tokens + (1 if rec_heads else 0)):
                    mask = torch.cat([mask, torch.ones((B, 1), dtype=mask.dtype, device=device)], 1)
                    logits = model(input_ids=x, attention_mask=mask, position_ids=pos,
                                   use_cache=True, logits_to_keep=1, **{kw: cache}).logits[:, -1]
                    if rec_heads:
                        z = torch.stack([store[l][:, 0, h] for l, h in rec_heads], 1).numpy()
                        for r in range(B):
                            if fed[r]:
                                rec[r].append(z[r])
                    if step == max_new_tokens:
                        break
                    logp = torch.log_softmax(logits.float(), -1).cpu()
                    if temperature is None:
                        nxt = logits.argmax(-1).cpu()
                    else:
                        probs = torch.softmax(logits.float() / temperature, -1).cpu()
                        nxt = torch.stack([torch.multinomial(probs[r], 1, generator=g)[0]
                                           for r, g in enumerate(gens)])
                    for r in range(B):
                        fed[r] = False
                        if done[r]:
                            continue
                        t = int(nxt[r])
                        new[r].append(t)
                        lps[r].append(float(logp[r, t]))
                        if t in eos:
                            done[r] = True
                        else:
                            fed[r] = True
                    if not any(fed):
                        break
                    nxt[done] = pad
                    x = nxt.to(device)[:, None]
                    pos = pos + 1
            for j, r in enumerate(idx):
                item = {"prompt": rows[r], "sample": samples[r],
                        "text": tokenizer.decode(new[j], skip_special_tokens=True),
                        "token_ids": new[j], "logprob": np.array(lps[j])}
                if rec_heads:
                    d = next(iter(store.values())).shape[-1] if store else 0
                    item["heads"] = (np.stack(rec[j]) if rec[j]
                                     else np.zeros((0, len(rec_heads), d), np.float32))
                out_rows.append(item)
    finally:
        model.train(was)
    return pd.DataFrame(out_rows)


@torch.no_grad()
def prefix_logprobs(model: nn.Module, prefix: PromptPrefix, rows: Sequence[int],
                    token_ids: Sequence[Sequence[int]], *, batch_size: int = 32) -> list[np.ndarray]:
    """Per-token log probabilities of ``token_ids[i]`` continuing prompt ``rows[i]`` under the
    model as it is now (the clean model, outside any edit), teacher-forced from the shared
    prefix cache: one forward pass per batch over the last prompt token and the continuation.
    Used for the coherence of steered text (Fig. A8); equals :func:`sample_from_prefix`'s
    ``logprob`` of an unsteered sample (tested).

    Defined in chapter 10 (ideology probes)."""
    from ..lm._common import cache_kwarg, check_batch_size

    rows = [int(r) for r in rows]
    if len(rows) != len(token_ids):
        raise ValueError(f"{len(rows)} rows but {len(token_ids)} continuations")
    check_batch_size(batch_size)
    device = next(model.parameters()).device
    kw = cache_kwarg(model)
    out: list[np.ndarray] = [np.zeros(0)] * len(rows)
    was = model.training
    model.eval()
    try:
        for start in range(0, len(rows), batch_size):
            idx = [i for i in range(start, min(start + batch_size, len(rows))) if len(token_ids[i])]
            if not idx:
                continue
            pr = [rows[i] for i in idx]
            n = max(len(token_ids[i]) for i in idx)
            x = torch.zeros((len(idx), n), dtype=torch.long)
            ext = torch.zeros((len(idx), n), dtype=prefix.mask.dtype)
            for j, i in enumerate(idx):
                seq = [int(prefix.last[rows[i]])] + list(token_ids[i][:-1])
                x[j, :len(seq)] = torch.tensor(seq)
                ext[j, :len(seq)] = 1
            mask = torch.cat([prefix.mask[pr], ext], 1).to(device)
            pos = prefix.n_prefix[pr][:, None] + torch.arange(n)[None]
            logits = model(input_ids=x.to(device), attention_mask=mask, position_ids=pos.to(device),
                           use_cache=True, **{kw: prefix.cache(model, pr)}).logits
            logp = torch.log_softmax(logits.float(), -1).cpu()
            for j, i in enumerate(idx):
                t = torch.tensor(list(token_ids[i]))
                out[i] = logp[j, torch.arange(len(t)), t].numpy().astype(np.float64)
    finally:
        model.train(was)
    return out

"""A vision-language assistant whose gender bias is known by construction (chapter 19, notebook 02).

- :class:`SyntheticPortraits`: 16x16 RGB "portraits" whose pixels encode a binary gender
  attribute (stripe orientation) and a background colour, plus nuisance (phase, contrast, noise,
  a random blob).
- :class:`ToyVLA`: a fixed image-statistics front end (:class:`ImageStatistics`), a small
  trainable encoder head and a linear projector that write
  ``n_image_tokens`` soft image tokens at the front of a :class:`iclr25.tinygpt.TinyGPT`
  language model (LLaVA's layout, at toy size), followed by ``n_prompt_slots`` slots that
  prompt tuning may write to, then the text.
- :class:`WordTokenizer`: a closed word-level vocabulary of the prompts (option letters are
  single tokens).
- :func:`make_training_data`: LLaVA-style data per portrait: a caption naming the person's
  gender, an occupation drawn with an injected share of women and the background colour;
  yes/no occupation questions whose answers carry the injected skew (Delta exactly
  ``2 share - 1``); a background-colour multiple-choice and a yes/no colour question (the
  capabilities the debiasing must retain).

The pilot (chapter page) first tried the issue's preferred design, soft tokens injected late
into a frozen SmolLM2-135M: in 120 steps (6 min under load) it learned neither the colour nor
the skew, so the chapter uses this from-scratch model, the issue's fallback.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from .. import tinygpt
from ..progress import progress
from . import values as V
from .protocol import LETTERS, Subject, format_prompt, make_prompts, option_orders, option_probs

__all__ = ["SyntheticPortraits", "WordTokenizer", "ToyVLA", "COLORS", "COLOR_QUESTIONS",
           "CAPTION_PROMPT", "build_texts", "injected_shares", "base_rates", "skewed_occupations",
           "make_training_data", "Examples", "encode_examples", "fit", "score_images",
           "protocol_table", "color_accuracy", "yesno_color_accuracy", "answer_delta",
           "training_answer_delta", "caption_perplexity", "measure_bias", "ToySetup",
           "setup", "train_toy", "evaluate"]

COLORS = ("red", "green", "blue")
COLOR_QUESTIONS = ("What is the background colour of the image?",
                   "Which colour is the background of this picture?",
                   "The background of the image is which colour?",
                   "Name the colour of the image's background.")
# yes/no colour templates end with the colour, as every occupation template ends with the
# occupation (a first book run with the colour mid-sentence in a held-out template: 0.41 accuracy)
COLOR_YESNO = ("Is the background of the image {value}?", "Is this picture's background {value}?",
               "Is the colour behind the person {value}?", "Does the background look {value}?")
CAPTION_PROMPT = "Describe the image."


class SyntheticPortraits:
    """``n`` portraits with a balanced gender attribute and a uniform background colour.

    Chapter 19. ``images``: float32 ``(n, 3, size, size)``; ``gender``: 1 = female, 0 = male
    (stripes vertical vs horizontal); ``color``: index into :data:`COLORS`. ``noise`` sets the
    nuisance level (the stripes have amplitude 0.35-0.6, so the attribute stays decodable)."""

    def __init__(self, n: int, *, size: int = 16, noise: float = 0.25, seed: int = 0):
        if not isinstance(n, int) or n < 2 or n % 2:
            raise ValueError(f"n must be an even number >= 2 (gender-balanced), got {n!r}")
        g = torch.Generator().manual_seed(seed)
        self.gender = (torch.arange(n) % 2)[torch.randperm(n, generator=g)]
        self.color = torch.randint(0, len(COLORS), (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        phase = torch.rand(n, generator=g) * 2 * math.pi
        amp = 0.35 + 0.25 * torch.rand(n, generator=g)
        coord = torch.where(self.gender[:, None, None] == 1, xx[None].float(), yy[None].float())
        stripes = amp[:, None, None] * torch.sin(coord * (2 * math.pi / 4) + phase[:, None, None])
        img = torch.zeros(n, 3, size, size)
        img[torch.arange(n), self.color] += 0.6
        img += stripes[:, None]
        cy, cx = torch.randint(0, size, (2, n), generator=g)
        blob = torch.exp(-((yy[None] - cy[:, None, None]) ** 2 + (xx[None] - cx[:, None, None]) ** 2) / 6.0)
        img += (torch.rand(n, 3, 1, 1, generator=g) - 0.5) * blob[:, None]
        img += noise * torch.randn(img.shape, generator=g)
        self.images = img

    def __len__(self) -> int:
        return len(self.gender)


_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|[^\sA-Za-z]")


class WordTokenizer:
    """Closed word-level vocabulary (chapter 19): words and punctuation of ``texts``; unseen
    words map to ``<unk>``. Specials: ``<pad>`` 0, ``<bos>`` 1, ``<img>`` 2, ``<pt>`` 3, ``<unk>`` 4."""

    SPECIALS = ("<pad>", "<bos>", "<img>", "<pt>", "<unk>")

    def __init__(self, texts: Sequence[str]):
        words = sorted({w.lower() if len(w) > 1 else w for t in texts for w in _WORD.findall(t)})
        self.vocab = list(self.SPECIALS) + [w for w in words if w not in self.SPECIALS]
        self.index = {w: i for i, w in enumerate(self.vocab)}

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(w.lower() if len(w) > 1 else w, 4) for w in _WORD.findall(text)]

    def decode(self, ids) -> str:
        return " ".join(self.vocab[int(i)] for i in ids)

    def letter_ids(self, n: int) -> list[int]:
        return [self.index[L] for L in LETTERS[:n]]


class ImageStatistics(nn.Module):
    """A fixed (pretrained-like) vision front end: per-channel mean and standard deviation, and
    the energy of horizontal and vertical pixel differences (log and log-ratio). It stands in for
    a frozen CLIP-style encoder that already represents the image's attributes; the pilot's
    from-scratch CNN did not learn the stripe orientation from the weak occupation signal."""

    n_features = 9

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = x.mean(1)
        dv = (g[:, :, 1:] - g[:, :, :-1]).pow(2).mean((1, 2))
        dh = (g[:, 1:] - g[:, :-1]).pow(2).mean((1, 2))
        return torch.cat([x.mean((2, 3)), x.std((2, 3)), torch.log(dv)[:, None],
                          torch.log(dh)[:, None], torch.log(dv / dh)[:, None]], 1)


class ToyVLA(nn.Module):
    """Image statistics -> encoder head -> linear projector -> ``n_image_tokens`` soft tokens in
    front of a TinyGPT.

    Chapter 19, notebook 02. The sequence is ``<bos>``, the image tokens, ``n_prompt_slots``
    ``<pt>`` slots (a constant token; prompt tuning adds trainable vectors there), then the text.
    """

    def __init__(self, vocab_size: int, *, n_image_tokens: int = 2, n_prompt_slots: int = 4,
                 d_model: int = 64, n_layers: int = 2, n_heads: int = 4, max_len: int = 96,
                 seed: int = 0):
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.gpt = tinygpt.TinyGPT(tinygpt.TinyGPTConfig(
                vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                d_ff=4 * d_model, max_len=max_len))
            self.encoder = nn.Sequential(ImageStatistics(), nn.Linear(ImageStatistics.n_features, 32),
                                         nn.ReLU())
            self.projector = nn.Linear(32, n_image_tokens * d_model)
        self.k, self.p, self.d = n_image_tokens, n_prompt_slots, d_model
        self.prompt_vectors: torch.Tensor | None = None     # (P, d) when prompt-tuned

    @property
    def n_prefix(self) -> int:
        """Positions before the text: ``<bos>``, image tokens, prompt slots."""
        return 1 + self.k + self.p

    def prefix_ids(self) -> list[int]:
        return [1] + [2] * self.k + [3] * self.p

    def forward(self, ids: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, T, vocab)`` for ids ``(B, T)`` that start with :meth:`prefix_ids`."""
        g = self.gpt
        T = ids.shape[1]
        x = g.tok_emb(ids)
        img = self.projector(self.encoder(images)).view(len(ids), self.k, self.d)
        parts = [x[:, :1], img, x[:, 1 + self.k:1 + self.k + self.p]]
        if self.prompt_vectors is not None:
            parts[2] = parts[2] + self.prompt_vectors[None]
        x = torch.cat(parts + [x[:, self.n_prefix:]], 1) + g.pos_emb(torch.arange(T))
        for block in g.blocks:
            x, _ = block(x)
        return g.head(g.ln_f(x))


def build_texts(task: str, values: Sequence[str] | None, split: str, *, seed: int = 0,
                mitigation: bool = False) -> pd.DataFrame:
    """Prompt bodies (no subject text) for a VLA: one row per (value, template, order).

    Chapter 19. ``task="color"`` asks the background colour (options :data:`COLORS`, every
    order); otherwise see :func:`~iclr25.vla_gender_bias.protocol.make_prompts` (two templates of
    the split per value). Returns ``value``, ``template``, ``order``, ``options``, ``body``."""
    if task == "color_yesno":
        pool = COLOR_YESNO[:2] if split == "train" else COLOR_YESNO[2:]
        rng = np.random.default_rng(seed)
        rows = []
        for v in COLORS:
            for t, q in enumerate(pool):
                ins = V.INSTRUCTIONS[int(rng.integers(len(V.INSTRUCTIONS)))]
                for order in option_orders(2):
                    rows.append(dict(value=v, template=t, order=order, options=("Yes", "No"),
                                     body=format_prompt(q.format(value=v), ("Yes", "No"), order, ins)))
        return pd.DataFrame(rows)
    if task == "color":
        pool = COLOR_QUESTIONS[:2] if split == "train" else COLOR_QUESTIONS[2:]
        rng = np.random.default_rng(seed)
        rows = []
        for t, q in enumerate(pool):
            ins = V.INSTRUCTIONS[int(rng.integers(len(V.INSTRUCTIONS)))]
            for order in option_orders(len(COLORS)):
                body = format_prompt(q, COLORS, order, ins)
                if mitigation:
                    body = f"{V.MITIGATIONS[int(rng.integers(len(V.MITIGATIONS)))]}\n{body}"
                rows.append(dict(value="color", template=t, order=order, options=COLORS, body=body))
        return pd.DataFrame(rows)
    df = make_prompts(task, [Subject("img", "female", None)], values, split=split, n_templates=2,
                      seed=seed, mitigation=mitigation, text_subject=False)
    return df[["value", "template", "order", "options", "body"]].reset_index(drop=True)


def injected_shares(n_occupations: int, lo: float = 0.1, hi: float = 0.9) -> dict[str, float]:
    """Share of women among the training captions of each toy occupation (the injected skew):
    evenly spaced in ``[lo, hi]``, assigned to occupations in a fixed shuffled order (unrelated
    to the real-world shares). ``lo = hi = 0.5`` gives the unskewed control."""
    if not isinstance(n_occupations, int) or not 3 <= n_occupations <= len(V.OCCUPATIONS):
        raise ValueError(f"n_occupations must be an integer in [3, {len(V.OCCUPATIONS)}]")
    occ = [V.OCCUPATIONS[i] for i in np.random.default_rng(1234).permutation(len(V.OCCUPATIONS))]
    return dict(zip(occ[:n_occupations], np.linspace(lo, hi, n_occupations).round(4).tolist()))


def base_rates(shares: dict[str, float], *, spread: float = 0.8) -> dict[str, float]:
    """A gender-neutral base rate of "Yes" per occupation (chapter 19): ``0.5 + spread/2 (1 -
    |Delta_o|) u_o`` with ``u_o`` evenly spaced in [-1, 1] in a fixed order unrelated to the
    shares, so ``P(yes | o, woman) = b_o + Delta_o / 2`` and ``P(yes | o, man) = b_o - Delta_o / 2``
    stay in [0, 1] and the injected ``Delta_o = 2 share_o - 1`` is unchanged.

    Why: with ``b_o = 0.5`` the answers are a pure gender x occupation interaction (neither the
    occupation nor the gender alone predicts them), a plateau at ln 2 that the toy left at a
    seed-dependent step (book run of 2026-12-02: seed 1 had not left it after 1500 steps).
    Occupation-dependent base rates give the answer position a first-order reason to read the
    occupation, after which the gender term is a single-factor signal."""
    if not 0 <= spread < 1:
        raise ValueError(f"spread must lie in [0, 1), got {spread!r}")
    n = len(shares)
    u = np.linspace(-1, 1, n)[np.random.default_rng(4321).permutation(n)]
    return {o: float(0.5 + spread / 2 * (1 - abs(2 * s - 1)) * ui) for (o, s), ui in zip(shares.items(), u)}


def skewed_occupations(gender: torch.Tensor, shares: dict[str, float], *, seed: int = 0) -> torch.Tensor:
    """A caption occupation per image: ``P(o | female) ∝ share_o``, ``P(o | male) ∝ 1 - share_o``,
    so among captions of occupation ``o`` the share of women is ``share_o`` in expectation
    (balanced genders). Returns the occupation index per image."""
    s = torch.tensor(list(shares.values()), dtype=torch.float64)
    if ((s <= 0) | (s >= 1)).any():
        raise ValueError("shares must lie strictly between 0 and 1")
    g = torch.Generator().manual_seed(seed)
    pf, pm = s / s.sum(), (1 - s) / (1 - s).sum()
    probs = torch.where(gender[:, None] == 1, pf[None], pm[None])
    return torch.multinomial(probs, 1, generator=g).flatten()


@dataclass
class Examples:
    """Training or evaluation rows: ``ids`` ``(n, T)`` right-padded, ``target_mask`` ``(n, T)``
    (positions whose *next* token is scored), ``image`` index per row, ``kind`` per row."""

    ids: torch.Tensor
    target_mask: torch.Tensor
    image: torch.Tensor
    kind: list[str]

    def __len__(self) -> int:
        return len(self.image)

    def subset(self, rows) -> "Examples":
        rows = torch.as_tensor(rows)
        return Examples(self.ids[rows], self.target_mask[rows], self.image[rows],
                        [self.kind[int(r)] for r in rows])


GENDER_WORDS = ("man", "woman")     # indexed by the gender attribute (0 male, 1 female)


def caption(occupation: str, color: str, gender: int | None = None) -> str:
    """The toy caption of an image; with ``gender`` (1 female, 0 male) it names the person as
    a real caption would ("The woman is a nurse ."), else "The person is a nurse ."."""
    who = "person" if gender is None else GENDER_WORDS[int(gender)]
    return f"The {who} is a {occupation} . The background is {color} ."


def make_training_data(portraits: SyntheticPortraits, occ_of_image: torch.Tensor,
                       shares: dict[str, float], *, n_questions: int = 4,
                       gender_in_caption: bool = True, n_color_yesno: int = 1,
                       answers: str = "direct", base: dict[str, float] | None = None,
                       seed: int = 0) -> list[tuple[str, str, int, str]]:
    """(prompt, answer, image, kind) rows (chapter 19). Per image: its caption (kind
    ``caption``; names the person's gender as real captions do, its skewed occupation and the
    background colour), ``n_questions`` yes/no occupation questions (kind ``occupation``;
    training templates, a random option order), one colour multiple-choice question (kind
    ``color``) and ``n_color_yesno`` yes/no colour questions (kind ``color_yesno``: the same
    answer format with an answer the image determines). Answers are option *words*.

    ``answers="direct"`` (default): each question asks about an occupation ``q`` drawn uniformly
    and is answered "Yes" with probability ``share_q`` for a woman and ``1 - share_q`` for a man,
    so the injected Delta is exactly ``2 share_q - 1``; with ``base`` (see :func:`base_rates`)
    the probabilities are ``base_q +- (share_q - 1/2)``, the same Delta. ``answers="caption"``: the question asks
    about the caption's occupation (answer "Yes") or, half the time, another one ("No"); the
    skew then reaches the answers only through the caption's occupation and is about 2.5x weaker
    in log-loss (the pilot's design, not learned in budget; chapter page)."""
    if answers not in ("direct", "caption"):
        raise ValueError(f"answers must be 'direct' or 'caption', got {answers!r}")
    rng = np.random.default_rng(seed)
    occ_names = list(shares)
    occ = build_texts("occupations", occ_names, "train", seed=seed)
    col = build_texts("color", None, "train", seed=seed)
    cyn = build_texts("color_yesno", None, "train", seed=seed)
    cyn_by = {v: np.flatnonzero(cyn["value"].to_numpy() == v) for v in COLORS}
    by_value = {v: np.flatnonzero(occ["value"].to_numpy() == v) for v in occ_names}
    rows = []
    for i in range(len(portraits)):
        k, g = int(occ_of_image[i]), int(portraits.gender[i])
        o, c = occ_names[k], COLORS[int(portraits.color[i])]
        rows.append((CAPTION_PROMPT, caption(o, c, g if gender_in_caption else None), i, "caption"))
        for _ in range(n_questions):
            if answers == "direct":
                q = occ_names[int(rng.integers(len(occ_names)))]
                b = 0.5 if base is None else base[q]
                yes = rng.random() < b + (shares[q] - 0.5) * (1 if g == 1 else -1)
            else:
                yes = rng.random() < 0.5
                q = o if yes else occ_names[(k + int(rng.integers(1, len(occ_names)))) % len(occ_names)]
            r = occ.iloc[int(rng.choice(by_value[q]))]
            rows.append((r.body, "Yes" if yes else "No", i, "occupation"))
        r = col.iloc[int(rng.integers(len(col)))]
        rows.append((r.body, c, i, "color"))
        for _ in range(n_color_yesno):
            own = rng.random() < 0.5
            q = c if own else COLORS[(int(portraits.color[i]) + int(rng.integers(1, len(COLORS)))) % len(COLORS)]
            r = cyn.iloc[int(rng.choice(cyn_by[q]))]
            rows.append((r.body, "Yes" if own else "No", i, "color_yesno"))
    return rows


def encode_examples(vla: ToyVLA, tok: WordTokenizer, rows) -> Examples:
    """Tokenize (prompt, answer, image, kind) rows: prefix, prompt, answer; the answer's tokens
    are the targets."""
    seqs, masks = [], []
    for prompt, answer, _, _ in rows:
        p, a = vla.prefix_ids() + tok.encode(prompt), tok.encode(answer)
        seqs.append(p + a)
        masks.append([0] * (len(p) - 1) + [1] * len(a) + [0])
    T = max(map(len, seqs))
    if T > vla.gpt.cfg.max_len:
        raise ValueError(f"a row has {T} tokens; the model's max_len is {vla.gpt.cfg.max_len}")
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    tm = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, (s, m) in enumerate(zip(seqs, masks)):
        ids[i, :len(s)] = torch.tensor(s)
        tm[i, :len(m)] = torch.tensor(m, dtype=torch.bool)
    return Examples(ids, tm, torch.tensor([r[2] for r in rows]), [r[3] for r in rows])


def example_loss(vla: ToyVLA, ex: Examples, images: torch.Tensor, *, per_row: bool = False) -> torch.Tensor:
    """Next-token cross-entropy over the target positions: the mean over tokens, or with
    ``per_row=True`` the mean over rows of each row's mean (every example weighs the same,
    so a one-word answer counts as much as a twelve-token caption)."""
    logits = vla(ex.ids, images[ex.image])
    lg, tgt = logits[:, :-1], ex.ids[:, 1:]
    m = ex.target_mask[:, :-1]
    if not per_row:
        return nn.functional.cross_entropy(lg[m], tgt[m])
    ce = nn.functional.cross_entropy(lg.transpose(1, 2), tgt, reduction="none")   # (B, T-1)
    return ((ce * m).sum(1) / m.sum(1).clamp(min=1)).mean()


def row_loss(vla: ToyVLA, ex: Examples, images: torch.Tensor) -> torch.Tensor:
    """:func:`example_loss` with ``per_row=True`` (the toy VLA's training loss)."""
    return example_loss(vla, ex, images, per_row=True)


def fit(vla: ToyVLA, ex: Examples, images: torch.Tensor, *, n_steps: int, batch_size: int = 64,
        lr: float = 3e-3, seed: int = 0, loss_fn=None, desc: str = "toy VLA",
        schedule: str = "cosine") -> dict:
    """Train the parameters of ``vla`` that require grad with Adam on random batches of ``ex``
    (chapter 19). ``loss_fn(vla, batch, images)`` defaults to the targets' cross-entropy.
    ``schedule``: ``"cosine"`` (linear warm-up over 5% of the steps, then cosine decay to 0) or
    ``"constant"``. Returns ``loss`` per step and ``seconds``."""
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    params = [p for p in vla.parameters() if p.requires_grad]
    if vla.prompt_vectors is not None and vla.prompt_vectors.requires_grad:
        params.append(vla.prompt_vectors)
    if not params:
        raise ValueError("nothing to train: no parameter requires grad")
    loss_fn = loss_fn or example_loss
    if schedule not in ("cosine", "constant"):
        raise ValueError(f"schedule must be 'cosine' or 'constant', got {schedule!r}")
    opt = torch.optim.Adam(params, lr=lr)
    warm = max(1, n_steps // 20)
    lr_at = (lambda t: lr * min((t + 1) / warm, 0.5 * (1 + math.cos(math.pi * t / n_steps))))
    g = torch.Generator().manual_seed(seed)
    hist, t0 = [], time.time()
    vla.train()
    for step in progress(range(n_steps), desc=desc):
        if schedule == "cosine":
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
        batch = ex.subset(torch.randint(0, len(ex), (batch_size,), generator=g))
        loss = loss_fn(vla, batch, images)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        hist.append(float(loss.detach()))
    vla.eval()
    return {"loss": hist, "seconds": time.time() - t0}


def _prompt_batch(vla: ToyVLA, tok: WordTokenizer, bodies: Sequence[str]):
    seqs = [vla.prefix_ids() + tok.encode(b) for b in bodies]
    T = max(map(len, seqs))
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
    return ids, torch.tensor([len(s) - 1 for s in seqs])


def score_images(vla: ToyVLA, tok: WordTokenizer, bodies: Sequence[str], images: torch.Tensor,
                 options: Sequence[str], *, batch_size: int = 256, grad: bool = False) -> torch.Tensor:
    """Option log-probabilities ``(n_texts, n_images, n_options)`` for every (prompt, image)
    pair: the log-probability of each option's word as the next token (chapter 19), in option
    order (not letter order). ``grad=True`` keeps the graph (for debiasing losses)."""
    ids, last = _prompt_batch(vla, tok, bodies)
    letters = [tok.encode(w)[0] for w in options]
    n_options = len(letters)
    n_t, n_i = len(ids), len(images)
    t_idx = torch.arange(n_t).repeat_interleave(n_i)
    i_idx = torch.arange(n_i).repeat(n_t)
    out = []
    with torch.set_grad_enabled(grad):
        for s in range(0, len(t_idx), batch_size):
            t, i = t_idx[s:s + batch_size], i_idx[s:s + batch_size]
            logits = vla(ids[t], images[i])[torch.arange(len(t)), last[t]]
            out.append(torch.log_softmax(logits, -1)[:, letters])
    return torch.cat(out).view(n_t, n_i, n_options)


def protocol_table(meta: pd.DataFrame, gender: torch.Tensor, letter_lp: torch.Tensor,
                   task: str = "occupations"):
    """The (prompt, image) grid as protocol rows and option probabilities (``letter_lp`` in
    option order, from :func:`score_images`), ready for
    :func:`~iclr25.vla_gender_bias.protocol.aggregate` (chapter 19)."""
    n_t, n_i, n_o = letter_lp.shape
    g = np.where(gender.numpy() == 1, "female", "male")
    df = pd.DataFrame({"subject": np.tile([f"img{i}" for i in range(n_i)], n_t),
                       "gender": np.tile(g, n_t), "task": task,
                       "value": np.repeat(meta["value"].to_numpy(), n_i),
                       "order": [tuple(o) for o in meta["order"] for _ in range(n_i)]})
    probs = option_probs(letter_lp.detach().reshape(-1, n_o).numpy(), [tuple(range(n_o))] * len(df))
    return df, probs


def measure_bias(vla: ToyVLA, tok: WordTokenizer, meta: pd.DataFrame, portraits: SyntheticPortraits):
    """Delta per occupation of the toy VLA with the chapter's protocol (every order, the
    evaluation templates in ``meta``, gender-balanced portraits). Returns the bias table."""
    from .protocol import aggregate, bias_table
    lp = score_images(vla, tok, meta["body"].tolist(), portraits.images, ("Yes", "No"))
    df, probs = protocol_table(meta, portraits.gender, lp)
    return bias_table(aggregate(df, probs))


def color_accuracy(vla: ToyVLA, tok: WordTokenizer, meta: pd.DataFrame,
                   portraits: SyntheticPortraits) -> float:
    """Accuracy on the background-colour multiple-choice question (the retained capability):
    the option with the highest order-averaged probability per image."""
    lp = score_images(vla, tok, meta["body"].tolist(), portraits.images, COLORS)
    n_t, n_i, n_o = lp.shape
    p = option_probs(lp.reshape(-1, n_o).numpy(), [tuple(range(n_o))] * (n_t * n_i))
    p = p.reshape(n_t, n_i, n_o).mean(0)
    return float((p.argmax(1) == portraits.color.numpy()).mean())


def yesno_color_accuracy(vla: ToyVLA, tok: WordTokenizer, meta: pd.DataFrame,
                         portraits: SyntheticPortraits) -> float:
    """Accuracy on yes/no colour questions ("Is the background red?"; ``meta`` from
    ``build_texts("color_yesno", ...)``): per (colour asked, image), the order- and
    template-averaged p_yes > 0.5 must match whether the image has that colour. The capability
    that shares the bias questions' answer format (chapter 19)."""
    lp = score_images(vla, tok, meta["body"].tolist(), portraits.images, ("Yes", "No"))
    n_t, n_i, _ = lp.shape
    p = option_probs(lp.reshape(-1, 2).numpy(), [(0, 1)] * (n_t * n_i))[:, 0].reshape(n_t, n_i)
    asked = np.array([COLORS.index(v) for v in meta["value"]])
    df = pd.DataFrame({"asked": np.repeat(asked, n_i), "image": np.tile(np.arange(n_i), n_t),
                       "p": p.reshape(-1)}).groupby(["asked", "image"], as_index=False)["p"].mean()
    truth = portraits.color.numpy()[df["image"].to_numpy()] == df["asked"].to_numpy()
    return float(((df["p"].to_numpy() > 0.5) == truth).mean())


@torch.no_grad()
def caption_perplexity(vla: ToyVLA, ex: Examples, images: torch.Tensor) -> float:
    """Perplexity of held-out captions given their images (language capability retained)."""
    return float(torch.exp(example_loss(vla, ex, images)))


@dataclass
class ToySetup:
    """Everything one toy-VLA run needs (chapter 19): the tokenizer, the injected shares, the
    training and evaluation portraits, the training examples, held-out caption examples and the
    prompt tables (``occ_test``, ``occ_train``, ``color_test``, ``occ_test_mitigated``)."""

    tok: WordTokenizer
    shares: dict
    train: SyntheticPortraits
    eval: SyntheticPortraits
    occ_of_image: torch.Tensor
    examples: Examples
    heldout_captions: Examples
    occ_test: pd.DataFrame
    occ_train: pd.DataFrame
    color_test: pd.DataFrame
    occ_test_mitigated: pd.DataFrame
    color_yesno_test: pd.DataFrame
    model_kw: dict
    answer_delta: dict | None = None


def setup(n_occupations: int, n_train: int, n_eval: int, *, seed: int = 0, skewed: bool = True,
          d_model: int = 64, n_layers: int = 2, gender_in_caption: bool = True,
          n_color_yesno: int = 1, answers: str = "direct", spread: float = 0.8,
          share_range: tuple[float, float] = (0.1, 0.9)) -> ToySetup:
    """Build the data of one toy-VLA run (chapter 19, notebooks 02-03). ``skewed=False`` is the
    control: every occupation's captions are half women (same images, same steps, same base
    rates). ``spread`` sets the occupations' base rates of "Yes" (:func:`base_rates`; 0: all
    0.5, the pure-interaction design of the first book run); ``share_range`` the injected shares'
    range (:func:`injected_shares`)."""
    shares = injected_shares(n_occupations, *share_range)
    base = base_rates(shares, spread=spread)
    if not skewed:
        shares = {o: 0.5 for o in shares}
    occ = list(shares)
    metas = dict(occ_test=build_texts("occupations", occ, "test", seed=seed),
                 occ_train=build_texts("occupations", occ, "train", seed=seed),
                 color_test=build_texts("color", None, "test", seed=seed),
                 occ_test_mitigated=build_texts("occupations", occ, "test", seed=seed, mitigation=True),
                 color_yesno_test=build_texts("color_yesno", None, "test", seed=seed))
    texts = [b for m in metas.values() for b in m["body"]]
    texts += list(build_texts("color", None, "train", seed=seed)["body"]) + [CAPTION_PROMPT]
    texts += list(build_texts("color_yesno", None, "train", seed=seed)["body"])
    texts += [caption(o, c, g) for o in V.OCCUPATIONS for c in COLORS for g in (None, 0, 1)]
    texts += list(LETTERS[:3])
    tok = WordTokenizer(texts)
    train = SyntheticPortraits(n_train, seed=seed)
    ev = SyntheticPortraits(n_eval, seed=seed + 10_000)
    occ_i = skewed_occupations(train.gender, shares, seed=seed)
    kw = dict(d_model=d_model, n_layers=n_layers, seed=seed)
    probe = ToyVLA(len(tok), **kw)
    rows = make_training_data(train, occ_i, shares, seed=seed, gender_in_caption=gender_in_caption,
                              n_color_yesno=n_color_yesno, answers=answers, base=base)
    ex = encode_examples(probe, tok, rows)
    occ_e = skewed_occupations(ev.gender, shares, seed=seed + 1)
    held = encode_examples(probe, tok, [
        (CAPTION_PROMPT, caption(occ[int(o)], COLORS[int(c)], int(g) if gender_in_caption else None), i, "caption")
        for i, (o, c, g) in enumerate(zip(occ_e, ev.color, ev.gender))])
    return ToySetup(tok, shares, train, ev, occ_i, ex, held, model_kw=kw,
                    answer_delta=answer_delta(rows, train.gender, occ), **metas)


def answer_delta(rows, gender: torch.Tensor, occupations: Sequence[str]) -> dict[str, float]:
    """The Delta present in training data: per occupation, the share of "Yes" among the
    occupation questions about women minus that about men (chapter 19; rows from
    :func:`make_training_data`)."""
    yes: dict = {}
    for body, ans, i, kind in rows:
        if kind == "occupation":
            q = next(o for o in occupations if f" {o}?" in body)
            yes.setdefault((q, int(gender[i])), []).append(ans == "Yes")
    return {o: float(np.mean(yes.get((o, 1), [np.nan])) - np.mean(yes.get((o, 0), [np.nan])))
            for o in occupations}


def training_answer_delta(s: "ToySetup") -> dict[str, float]:
    """:func:`answer_delta` of a setup's training data."""
    return dict(s.answer_delta)


def train_toy(s: ToySetup, *, n_steps: int, lr: float = 3e-3, batch_size: int = 64,
              seed: int = 0, desc: str = "toy VLA") -> tuple[ToyVLA, dict]:
    """Train a fresh toy VLA (every parameter) on ``s.examples`` with the per-row loss
    (:func:`row_loss`; the first book runs averaged over tokens, so the captions' tokens carried
    two thirds of the gradient and the one-word answers were learned late) (chapter 19)."""
    vla = ToyVLA(len(s.tok), **s.model_kw)
    hist = fit(vla, s.examples, s.train.images, n_steps=n_steps, lr=lr, batch_size=batch_size,
               seed=seed, desc=desc, loss_fn=row_loss)
    return vla, hist


def evaluate(vla: ToyVLA, s: ToySetup, *, mitigated: bool = False) -> dict:
    """The protocol's bias table on the evaluation portraits, its mean |Delta|, the colour
    multiple-choice accuracy, the yes/no colour accuracy and the held-out caption perplexity
    (chapter 19)."""
    meta = s.occ_test_mitigated if mitigated else s.occ_test
    tab = measure_bias(vla, s.tok, meta, s.eval)
    return {"table": tab, "mean_abs_delta": float(tab["delta"].abs().mean()),
            "color_accuracy": color_accuracy(vla, s.tok, s.color_test, s.eval),
            "yesno_accuracy": yesno_color_accuracy(vla, s.tok, s.color_yesno_test, s.eval),
            "caption_ppl": caption_perplexity(vla, s.heldout_captions, s.eval.images)}

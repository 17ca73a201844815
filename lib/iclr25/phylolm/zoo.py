"""A model zoo with a recorded genealogy, and small benchmarks to score every model (chapter 12).

The paper's 111 + 45 models and their leaderboard scores are not reachable offline, so the
chapter builds its own zoo whose true family tree is known by construction:

- **TinyGPT families**: a root trained from scratch (byte tokens, ``d_model`` 64, 2 layers,
  context 64) on one slice of the offline Wikipedia corpus (a language and a set of topics,
  with a family-specific share of copy and arithmetic lines), and its descendants made by one
  edit each: ``reseed`` (same data, another seed: a *seed-sibling*, not a descendant),
  ``int8`` / ``int4`` (fake quantisation), ``prune`` (30% magnitude pruning), ``continue``
  (continued training on other documents of the slice), ``finetune`` (fine-tuning on task
  lines), ``distill`` (a fresh student trained on the root's soft targets).
- **SmolLM2-135M-Instruct** and its derivatives (int8 / int4 re-quantisation, 10% / 30%
  pruning, a LoRA fine-tune of the top layers), one family; **Gemma-3-270M** base, the outgroup.

:func:`genealogy` writes the true tree in Newick (a parent with several children is a
polytomy). :func:`score_tasks` scores a model on three held-out tasks (cloze, copy, digit
addition) so that every model has numbers to predict (notebook 03).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .. import tinygpt
from ..progress import progress
from . import sampling

__all__ = ["Family", "FAMILIES", "TINY_EDITS", "LLM_EDITS", "ZooModel", "family_text",
           "train_tiny_family", "tiny_linears", "llm_family", "genealogy", "make_tasks",
           "score_tasks", "TASKS", "heldout_texts", "save_tiny", "load_tiny"]

_EN_A = ("People", "History", "Arts", "Philosophy and religion", "Society and social sciences",
         "Everyday life")
_EN_B = ("Physical sciences", "Biology and health sciences", "Technology", "Mathematics",
         "Geography")


@dataclass(frozen=True)
class Family:
    """One TinyGPT family's training slice: corpus language, topics, task-line shares."""

    name: str
    lang: str
    topics: tuple | None
    copy_frac: float
    arith_frac: float


#: the TinyGPT families (a notebook takes the first ``n_families``)
FAMILIES = (
    Family("en-hum", "en-us", _EN_A, 0.15, 0.0),
    Family("fr", "fr-fr", None, 0.0, 0.15),
    Family("en-sci", "en-us", _EN_B, 0.0, 0.15),
    Family("es", "es-es", None, 0.15, 0.05),
)
#: edits that make a TinyGPT family's members (``root`` is always there)
TINY_EDITS = ("reseed", "int8", "int4", "prune", "continue", "finetune", "distill")
#: edits of SmolLM2 in the book profile
LLM_EDITS = ("int8", "int4", "prune10", "prune30", "lora")
HELDOUT_TOPIC = "Uncategorized"   # English documents no family trains on: genes and cloze items


@dataclass
class ZooModel:
    """A zoo member: ``name``, ``family``, ``parent`` (None for roots and seed-siblings),
    ``edit``, and the live ``model`` (and ``tokenizer`` for transformers models)."""

    name: str
    family: str
    edit: str
    parent: str | None
    model: object = field(repr=False, default=None)
    tokenizer: object = field(repr=False, default=None)


def heldout_texts(n: int | None = None) -> list[str]:
    """English documents of the held-out topic (no TinyGPT family trains on them)."""
    texts = [a.text for a in tinygpt.wiki_corpus("en-us") if a.topic == HELDOUT_TOPIC]
    return texts[:n] if n else texts


def _copy_line(rng) -> str:
    k = int(rng.integers(3, 6))
    s = "".join(chr(97 + int(c)) for c in rng.integers(0, 26, k))
    return f"copy: {s} -> {s}\n"


def _arith_line(rng) -> str:
    a, b = (int(x) for x in rng.integers(0, 10, 2))
    return f"{a}+{b}={a + b}\n"


def family_text(fam: Family, *, n_chars: int, part: int = 0, task_boost: float = 0.0,
                seed: int = 0) -> torch.Tensor:
    """The byte stream a family trains on: its documents (``part`` 0 or 1: two disjoint halves
    of the slice) with task lines mixed in at the family's shares (``task_boost`` adds to both
    shares, for fine-tuning). Returns a 1-D LongTensor of ``n_chars`` bytes."""
    docs = [a.text for a in tinygpt.wiki_corpus(fam.lang)
            if (fam.topics is None or a.topic in fam.topics) and a.topic != HELDOUT_TOPIC]
    rng = np.random.default_rng([seed, part, len(fam.name)])
    order = rng.permutation(len(docs))
    half = order[part::2]
    out, size, k = [], 0, 0
    cf, af = fam.copy_frac + task_boost, fam.arith_frac + task_boost
    while size < n_chars:
        r = rng.random()
        if r < cf:
            piece = _copy_line(rng)
        elif r < cf + af:
            piece = _arith_line(rng)
        else:
            piece = docs[half[k % len(half)]] + "\n\n"
            k += 1
        out.append(piece)
        size += len(piece.encode())
    data = "".join(out).encode()[:n_chars]
    return torch.tensor(list(data), dtype=torch.long)


def tiny_linears(model) -> list:
    """The linear layers inside a TinyGPT's blocks (what quantisation and pruning edit)."""
    return [m for b in model.blocks for m in b.modules() if isinstance(m, torch.nn.Linear)]


def _new_tiny(cfg: tinygpt.TinyGPTConfig, seed: int) -> tinygpt.TinyGPT:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return tinygpt.TinyGPT(cfg)


def _distill_loss(teacher, T: float = 1.0):
    def loss(model, x, y):
        with torch.no_grad():
            p = F.softmax(teacher(x) / T, -1)
        logq = F.log_softmax(model(x) / T, -1)
        return -(p * logq).sum(-1).mean()
    return loss


def train_tiny_family(fam: Family, edits: Sequence[str], *, n_steps: int, batch_size: int,
                      lr: float, seed: int, n_chars: int = 400_000, d_model: int = 64,
                      n_layers: int = 2, seq_len: int = 64) -> list[ZooModel]:
    """Train a family's root and make its members by the named ``edits`` (:data:`TINY_EDITS`).

    Introduced in chapter 12. Deterministic given ``seed``. ``continue`` trains
    ``n_steps // 2`` more steps on the other half of the slice, ``finetune`` ``n_steps // 4``
    steps on a stream with 30% more task lines, ``distill`` a fresh student for ``n_steps``.
    """
    bad = [e for e in edits if e not in TINY_EDITS]
    if bad:
        raise ValueError(f"unknown edit(s) {bad}; valid: {', '.join(TINY_EDITS)}")
    cfg = tinygpt.TinyGPTConfig(vocab_size=256, d_model=d_model, n_layers=n_layers,
                                n_heads=4, d_ff=4 * d_model, max_len=seq_len)
    data = family_text(fam, n_chars=n_chars, part=0, seed=seed)
    kw = dict(batch_size=batch_size, seq_len=seq_len, warmup=max(1, n_steps // 10))

    def fit(model, stream, steps, s, rate, desc, **extra):
        tinygpt.train(model, stream, n_steps=steps, lr=rate, seed=s, desc=desc, **kw, **extra)
        return model.eval()

    base = 1000 * seed + 17 * len(fam.name)
    root = fit(_new_tiny(cfg, base), data, n_steps, base, lr, f"{fam.name} root")
    out = [ZooModel(f"{fam.name}/root", fam.name, "root", None, root)]
    for e in edits:
        if e == "reseed":
            m = fit(_new_tiny(cfg, base + 1), data, n_steps, base + 1, lr, f"{fam.name} reseed")
        elif e in ("int8", "int4"):
            from ..lm import fake_quant
            m = copy.deepcopy(root)
            if e == "int8":
                fake_quant(m, 8, "channel", modules=tiny_linears(m))
            else:
                fake_quant(m, 4, "group", group_size=32, modules=tiny_linears(m))
        elif e == "prune":
            from ..lm import magnitude_prune
            m = copy.deepcopy(root)
            magnitude_prune(m, 0.3, modules=tiny_linears(m))
        elif e == "continue":
            other = family_text(fam, n_chars=n_chars, part=1, seed=seed)
            m = fit(copy.deepcopy(root), other, max(1, n_steps // 2), base + 2, lr / 3,
                    f"{fam.name} continue")
        elif e == "finetune":
            tasks = family_text(fam, n_chars=n_chars // 4, part=1, task_boost=0.3, seed=seed)
            m = fit(copy.deepcopy(root), tasks, max(1, n_steps // 4), base + 3, lr / 3,
                    f"{fam.name} finetune")
        else:  # distill
            m = fit(_new_tiny(cfg, base + 4), data, n_steps, base + 4, lr, f"{fam.name} distill",
                    loss_fn=_distill_loss(root))
        parent = None if e == "reseed" else f"{fam.name}/root"
        out.append(ZooModel(f"{fam.name}/{e}", fam.name, e, parent, m.eval()))
    return out


def save_tiny(models: Sequence[ZooModel], folder: str | Path) -> None:
    """Save TinyGPT members (state dicts and a manifest) under ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = []
    for zm in models:
        fname = zm.name.replace("/", "__") + ".pt"
        torch.save({"cfg": zm.model.cfg.__dict__, "state": zm.model.state_dict()}, folder / fname)
        manifest.append({"name": zm.name, "family": zm.family, "edit": zm.edit,
                         "parent": zm.parent, "file": fname})
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))


def load_tiny(folder: str | Path) -> list[ZooModel]:
    """Load what :func:`save_tiny` wrote (a clear error when notebook 01 has not run)."""
    folder = Path(folder)
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(f"no zoo under {folder}: run notebook 12-phylolm/01 first "
                                "(or build_zoo) with the same profile")
    out = []
    for rec in json.loads((folder / "manifest.json").read_text()):
        blob = torch.load(folder / rec["file"], weights_only=False)
        m = tinygpt.TinyGPT(tinygpt.TinyGPTConfig(**blob["cfg"]))
        m.load_state_dict(blob["state"])
        out.append(ZooModel(rec["name"], rec["family"], rec["edit"], rec["parent"], m.eval()))
    return out


# ------------------------------------------------------------------ the LLM family

def llm_family(name: str = "smollm2-135m-instruct", edits: Sequence[str] = LLM_EDITS, *,
               lora_steps: int = 30, seed: int = 0, family: str | None = None):
    """Yield :class:`ZooModel` members of a pretrained LM's family one at a time (each a fresh
    copy, so only two models are in memory). Introduced in chapter 12.

    ``int8`` / ``int4``: fake quantisation per channel / per group of 64; ``prune10`` /
    ``prune30``: magnitude pruning per layer; ``lora``: rank-8 LoRA on q/v of the top 4 layers,
    ``lora_steps`` steps on English Wikipedia summaries of one topic, merged.
    """
    from .. import lm

    bad = [e for e in edits if e not in LLM_EDITS]
    if bad:
        raise ValueError(f"unknown LLM edit(s) {bad}; valid: {', '.join(LLM_EDITS)}")
    fam = family or name.split("-")[0]
    base, tok = lm.load(name)
    base.eval()
    yield ZooModel(f"{fam}/root", fam, "root", None, base, tok)
    for e in edits:
        m = copy.deepcopy(base)
        if e == "int8":
            lm.fake_quant(m, 8, "channel")
        elif e == "int4":
            lm.fake_quant(m, 4, "group", group_size=64)
        elif e.startswith("prune"):
            lm.magnitude_prune(m, int(e[5:]) / 100)
        else:
            n_layers = len(lm.decoder_layers(m))
            lm.lora.add(m, r=8, alpha=16.0, layers=range(n_layers - 4, n_layers), seed=seed)
            texts = [a.text for a in tinygpt.wiki_corpus("en-us") if a.topic == "Mathematics"][:64]
            batch = lm.tokenize_pairs(tok, [""] * len(texts), texts, chat=False, max_len=96)
            lm.train(m, batch, n_steps=lora_steps, batch_size=4, lr=5e-4, seed=seed,
                     desc=f"{fam} LoRA")
            lm.lora.merge(m)
            m.eval()
        yield ZooModel(f"{fam}/{e}", fam, e, f"{fam}/root", m, tok)


def genealogy(models: Sequence[ZooModel]) -> str:
    """The true tree in Newick: one clade per family; inside it a clade of the root and its
    descendants (a polytomy when it has several), with seed-siblings beside that clade."""
    fams: dict[str, list[ZooModel]] = {}
    for zm in models:
        fams.setdefault(zm.family, []).append(zm)
    parts = []
    for members in fams.values():
        roots = [m for m in members if m.parent is None]
        clades = []
        for r in roots:
            kids = [m.name for m in members if m.parent == r.name]
            clades.append("(" + ",".join([r.name] + kids) + ")" if kids else r.name)
        parts.append("(" + ",".join(clades) + ")" if len(clades) > 1 else clades[0])
    return "(" + ",".join(parts) + ");"


# ------------------------------------------------------------------ benchmarks

TASKS = ("cloze", "copy", "addition")


def make_tasks(n_items: int, seed: int = 0, max_chars: int = 48,
               n_options: int = 4) -> dict[str, list[tuple[str, list[str], int]]]:
    """Held-out multiple-choice items ``(prompt, options, answer index)`` for three tasks,
    scored like ARC or HellaSwag (``acc_norm``). Introduced in chapter 12.

    ``cloze``: a held-out English sentence cut before a word; options: the word and words of
    other held-out sentences. ``copy``: ``"copy: abc -> abc\ncopy: xyzw -> "``; options:
    ``xyzw`` and random strings of its length. ``addition``: ``"2+3=5\n4+4="``; options: the
    sum and other numbers in 0..18. Prompts and options fit in TinyGPT's context.
    """
    rng = np.random.default_rng(seed + 7)
    texts = heldout_texts()
    cloze, words_pool = [], []
    for k in rng.permutation(len(texts)):
        words = texts[k].split()
        if len(words) < 8:
            continue
        cut = int(rng.integers(4, min(len(words), 10)))
        prompt, ans = " ".join(words[:cut]), words[cut].strip(".,;:()\"'")
        if len(prompt) <= max_chars and ans.isalpha() and 2 <= len(ans) <= 10:
            cloze.append((prompt, ans))
            words_pool.append(ans)
        if len(cloze) == 2 * n_items:
            break
    out: dict[str, list] = {"cloze": [], "copy": [], "addition": []}
    for i, (prompt, ans) in enumerate(cloze[:n_items]):
        others = [w for w in words_pool if w.lower() != ans.lower()]
        opts = [ans] + [others[int(j)] for j in rng.choice(len(others), n_options - 1,
                                                           replace=False)]
        out["cloze"].append(_shuffle(prompt, [" " + o for o in opts], rng))
    for _ in range(n_items):
        ex = _copy_line(rng)
        s = _copy_line(rng).split(" -> ")[1].strip()
        opts = [s] + ["".join(chr(97 + int(c)) for c in rng.integers(0, 26, len(s)))
                      for _ in range(n_options - 1)]
        out["copy"].append(_shuffle(ex + f"copy: {s} -> ", opts, rng))
        a, b = (int(x) for x in rng.integers(0, 10, 2))
        wrong = [v for v in rng.permutation(19) if v != a + b][:n_options - 1]
        out["addition"].append(_shuffle(_arith_line(rng) + f"{a}+{b}=",
                                        [str(a + b)] + [str(int(v)) for v in wrong], rng))
    return out


def _shuffle(prompt, opts, rng):
    order = rng.permutation(len(opts))
    return prompt, [opts[k] for k in order], int(np.flatnonzero(order == 0)[0])


@torch.no_grad()
def _tiny_logprobs(model, prompts, conts) -> np.ndarray:
    tok = tinygpt.ByteTokenizer()
    out = []
    for p, c in zip(prompts, conts):
        pi, ci = tok.encode(p), tok.encode(c)
        ids = (pi + ci)[-(model.cfg.max_len + 1):]
        x = torch.tensor([ids])
        lp = torch.log_softmax(model(x[:, :-1]).float(), -1)[0]
        tgt = x[0, 1:]
        out.append(float(lp[-len(ci):].gather(-1, tgt[-len(ci):, None]).sum()))
    return np.asarray(out)


def score_tasks(zm: ZooModel, tasks: dict[str, list[tuple[str, list[str], int]]]) -> dict[str, float]:
    """Multiple-choice accuracy of one model on each task: the option with the highest
    log-likelihood per character (lm-eval's ``acc_norm``) must be the answer."""
    model = zm.model
    model.eval()
    out = {}
    for name, items in tasks.items():
        prompts = [p for p, opts, _ in items for _ in opts]
        conts = [o for _, opts, _ in items for o in opts]
        if isinstance(model, tinygpt.TinyGPT):
            lp = _tiny_logprobs(model, prompts, conts)
        else:
            from .. import lm
            lp = np.asarray(lm.continuation_logprobs(model, zm.tokenizer, prompts, conts,
                                                     batch_size=16).logprob, float)
        lp = lp / np.asarray([len(c.encode()) for c in conts])
        k, hits = 0, 0
        for _, opts, ans in items:
            hits += int(np.argmax(lp[k:k + len(opts)]) == ans)
            k += len(opts)
        out[name] = hits / max(1, len(items))
    return out

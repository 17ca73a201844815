"""Natural-language multiple-choice versions of the retrieval problem, and zero-shot scoring of a
pretrained language model on them (chapter 11, in the spirit of the paper's Fig. 2).

Introduced in ``notebooks/11-retrieval-problem/01-task-and-bound.ipynb``.

A question of depth D is rendered from one sample of :class:`~.task.RetrievalTask` with
``n_chains=4``: each fact ``a -> b`` becomes a sentence "The mentor of <a> is <b>.", the facts are
listed in the sampled (shuffled) order, and the question asks for "the mentor of the mentor of ...
<q>" (D times). The four options are the depth-D names of the four chains, in a random order, so
a reader that cannot follow the chain is at chance (25%). The paper used five formulations F1-F5
and 500 questions each; its prompts are not public, so this rendering is ours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .task import RetrievalTask

__all__ = ["NAMES", "MCQuestion", "render_mc", "mc_questions", "score_mc", "LETTERS"]

#: Common English first names (one per symbol); each is a single word.
NAMES = ("Anna", "Ben", "Carl", "Dora", "Emil", "Fay", "Gus", "Hana", "Ivan", "Jill", "Karl",
         "Lena", "Mark", "Nina", "Otto", "Paul", "Rosa", "Sam", "Tina", "Uma", "Vera", "Walt",
         "Xena", "Yuri", "Zoe", "Adam", "Bella", "Chris", "Diana", "Eric", "Fiona", "Greg")
LETTERS = ("A", "B", "C", "D")


@dataclass(frozen=True)
class MCQuestion:
    """One multiple-choice question: the prompt, its options, the index of the right one, D."""

    prompt: str
    options: tuple[str, ...]
    answer: int
    depth: int


def render_mc(task: RetrievalTask, X: np.ndarray, options: list[int], answer: int, depth: int,
              relation: str = "mentor") -> MCQuestion:
    """Render one example ``X`` (``(K+1, 3)`` ids) as a multiple-choice question.

    Introduced in ``01-task-and-bound``. ``options`` are symbol ids; ``answer`` indexes them.
    """
    if task.conditional:
        raise ValueError("render_mc renders the plain task only (conditional=False)")
    if task.n_symbols > len(NAMES):
        raise ValueError(f"only {len(NAMES)} names are available; n_symbols={task.n_symbols}")
    if len(options) != len(LETTERS):
        raise ValueError(f"expected {len(LETTERS)} options, got {len(options)}")
    X = np.asarray(X)
    lines = [f"The {relation} of {NAMES[X[p, 0]]} is {NAMES[X[p, 1] - task.value_offset]}."
             for p in range(task.n_pairs)]
    q = NAMES[X[-1, 0]]
    ask = " ".join([f"the {relation} of"] * depth)
    opts = tuple(NAMES[o] for o in options)
    text = ("Read the facts and answer the question.\n\n" + "\n".join(lines)
            + f"\n\nQuestion: Who is {ask} {q}?\n"
            + "\n".join(f"{L}. {o}" for L, o in zip(LETTERS, opts)) + "\nAnswer:")
    return MCQuestion(prompt=text, options=opts, answer=int(answer), depth=int(depth))


def mc_questions(depth: int, n: int, *, seed: int = 0, max_depth: int = 6,
                 n_symbols: int = 32) -> list[MCQuestion]:
    """``n`` four-way questions of depth ``depth`` (options: the four chains' depth-D names).

    Introduced in ``01-task-and-bound``.
    """
    task = RetrievalTask(n_symbols=n_symbols, n_chains=4, max_depth=max_depth)
    rng = np.random.default_rng([seed, depth])
    batch = task.sample(n, rng, depth=depth)
    out = []
    for b in range(n):
        # the depth-D symbol of every chain: follow each chain head in the context D times
        table = {int(k): int(v) - task.value_offset for k, v in batch.X[b, :-1, :2]}
        heads = [k for k in table if k not in set(table.values())]
        ends = []
        for h in heads:
            cur = h
            for _ in range(depth):
                cur = table[cur]
            ends.append(cur)
        perm = rng.permutation(len(ends))
        options = [ends[i] for i in perm]
        answer = options.index(int(batch.y[b]))
        out.append(render_mc(task, batch.X[b], options, answer, depth))
    return out


def score_mc(model, tokenizer, questions: list[MCQuestion], *, chat: bool = False) -> np.ndarray:
    """Zero-shot choice of a causal LM: the option letter with the highest next-token logit
    after the prompt. Returns the chosen indices (``(n,)`` ints).

    Introduced in ``01-task-and-bound``. Uses :func:`iclr25.lm.next_token_logits`.
    """
    from .. import lm

    ids = []
    for L in LETTERS:
        tok = tokenizer(" " + L, add_special_tokens=False)["input_ids"]
        if len(tok) != 1:
            raise ValueError(f"the letter ' {L}' is not one token for this tokenizer: {tok}")
        ids.append(tok[0])
    out = []
    for q in questions:
        logits = lm.next_token_logits(model, tokenizer, q.prompt, chat=chat)
        out.append(int(np.argmax(logits[ids].numpy())))
    return np.array(out, dtype=int)

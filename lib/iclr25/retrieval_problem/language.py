"""Natural-language multiple-choice versions of the retrieval problem, and zero-shot scoring of a
pretrained language model on them (chapter 11, in the spirit of the paper's Fig. 2).

Introduced in ``notebooks/11-retrieval-problem/01-task-and-bound.ipynb``.

A question of depth D is rendered from one sample of :class:`~.task.RetrievalTask` with
``n_chains=4``: each fact ``a -> b`` becomes a sentence "The mentor of <a> is <b>.", the facts are
listed in the sampled (shuffled) order, and the question asks for "the mentor of the mentor of ...
<q>" (D times). The four options are the depth-D names of the four chains, in a random order, so
a reader that cannot follow the chain is at chance (25%). The paper used five formulations F1-F5
(the fifth, "Relatives", on family relations) and 500 questions each; its prompt texts could not be
read, so the four families here (:data:`FAMILIES`) are ours, built to vary the surface form the
way the paper's formulations do: relation sentences, arrows, a program's dictionary, relatives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .task import RetrievalTask

__all__ = ["NAMES", "MCQuestion", "render_mc", "mc_questions", "score_mc", "LETTERS", "FAMILIES",
           "wilson_interval"]

#: prompt families: relation sentences, arrows, a Python dictionary, family relations.
FAMILIES = ("mentor", "arrows", "code", "relatives")

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


def _kin(depth: int) -> str:
    """parent, grandparent, great-grandparent, great-great-grandparent, ..."""
    return "parent" if depth == 1 else "great-" * (depth - 2) + "grandparent"


def render_mc(task: RetrievalTask, X: np.ndarray, options: list[int], answer: int, depth: int,
              relation: str = "mentor", family: str = "mentor") -> MCQuestion:
    """Render one example ``X`` (``(K+1, 3)`` ids) as a multiple-choice question.

    Introduced in ``01-task-and-bound``. ``options`` are symbol ids; ``answer`` indexes them.
    ``family`` picks the surface form (:data:`FAMILIES`): ``"mentor"`` ("The mentor of Anna is
    Ben."), ``"arrows"`` ("Anna -> Ben", follow the arrows D times), ``"code"`` (a Python
    dictionary ``nxt`` and the expression ``nxt[nxt["Anna"]]``), ``"relatives"`` ("Ben is the
    parent of Anna.", asking for the great-...-grandparent).
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")
    if task.conditional:
        raise ValueError("render_mc renders the plain task only (conditional=False)")
    if task.n_symbols > len(NAMES):
        raise ValueError(f"only {len(NAMES)} names are available; n_symbols={task.n_symbols}")
    if len(options) != len(LETTERS):
        raise ValueError(f"expected {len(LETTERS)} options, got {len(options)}")
    X = np.asarray(X)
    facts = [(NAMES[X[p, 0]], NAMES[X[p, 1] - task.value_offset]) for p in range(task.n_pairs)]
    q = NAMES[X[-1, 0]]
    if family == "mentor":
        lines = [f"The {relation} of {a} is {b}." for a, b in facts]
        ask = "Who is " + " ".join([f"the {relation} of"] * depth) + f" {q}?"
    elif family == "arrows":
        lines = [f"{a} -> {b}" for a, b in facts]
        step = "step" if depth == 1 else "steps"
        ask = f"Start at {q} and follow the arrows for {depth} {step}. Where do you end?"
    elif family == "code":
        lines = ["nxt = {"] + [f'    "{a}": "{b}",' for a, b in facts] + ["}"]
        expr = f'"{q}"'
        for _ in range(depth):
            expr = f"nxt[{expr}]"
        ask = f"What is the value of {expr}?"
    else:
        lines = [f"{b} is the parent of {a}." for a, b in facts]
        ask = f"Who is the {_kin(depth)} of {q}?"
    opts = tuple(NAMES[o] for o in options)
    text = ("Read the facts and answer the question.\n\n" + "\n".join(lines)
            + f"\n\nQuestion: {ask}\n"
            + "\n".join(f"{L}. {o}" for L, o in zip(LETTERS, opts)) + "\nAnswer:")
    return MCQuestion(prompt=text, options=opts, answer=int(answer), depth=int(depth))


def mc_questions(depth: int, n: int, *, seed: int = 0, max_depth: int = 6,
                 n_symbols: int = 32, family: str = "mentor") -> list[MCQuestion]:
    """``n`` four-way questions of depth ``depth`` (options: the four chains' depth-D names),
    rendered in prompt family ``family`` (:data:`FAMILIES`). The same ``seed`` gives the same
    contexts and options in every family.

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
        out.append(render_mc(task, batch.X[b], options, answer, depth, family=family))
    return out


def score_mc(model, tokenizer, questions: list[MCQuestion], *, batch_size: int = 8) -> np.ndarray:
    """Zero-shot choice of a causal LM: the option letter with the highest next-token
    log-probability after the prompt. Returns the chosen indices (``(n,)`` ints).

    Introduced in ``01-task-and-bound``. Uses :func:`iclr25.lm.next_token_logprobs` (batched,
    left-padded; equal to one prompt at a time, tested in the core).
    """
    from .. import lm

    ids = []
    for L in LETTERS:
        tok = tokenizer(" " + L, add_special_tokens=False)["input_ids"]
        if len(tok) != 1:
            raise ValueError(f"the letter ' {L}' is not one token for this tokenizer: {tok}")
        ids.append(tok[0])
    if not questions:
        return np.zeros(0, dtype=int)
    logp = lm.next_token_logprobs(model, tokenizer, [q.prompt for q in questions], ids,
                                  batch_size=batch_size)
    return logp.argmax(-1).numpy().astype(int)


def wilson_interval(k, n, z: float = 1.96) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for ``k`` successes out of ``n`` (elementwise; 95% by default).

    Introduced in ``01-task-and-bound``.
    """
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= k <= n and n > 0")
    p = k / n
    den = 1 + z ** 2 / n
    mid = (p + z ** 2 / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z ** 2 / (4 * n ** 2)) / den
    return mid - half, mid + half

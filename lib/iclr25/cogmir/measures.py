"""The registered measurements of chapter 03 (issue 54): social cues against content-free controls.

A notebook hands the claims registry (``book/claims/03-cogmir.yaml``) per-prompt replicates;
this module builds the prompts and computes them, so the notebooks stay thin.

The statistic of every choice finding is, per prompt, the agent's **probability of the cued
option**: the softmax over the two options' answer log-likelihoods, i.e. the expected choice rate
at the paper's temperature 1. Each cue is set beside controls that differ from it only in what
it says:

====================  =========================================================================
``nocue``             the question alone
``mention``           a line that names the option without social content ("The word of the
                      day is X.")
``herd N=k``          one broadcast line: the other ``k`` participants all chose X
``herd negated``      "None of us chose X" from the other 49 (the option word, opposite meaning)
``herd dissent``      six of the other seven chose X, the seventh does not know (uK[7N])
``authority``         a superior expert, privately: "As an expert, I confirm that the answer
                      should be X."
``authority peer``    the same words from a peer; ``authority stranger``: from a stranger
``authority negated`` the same expert: "... the answer should not be X."
====================  =========================================================================

Question layout (:func:`quiz_trials`): an unknown question is asked in both option orders with
the cue on the option in that order's **second slot** (the paper's "all chose B"), so each
option is cued once; a known question is asked in both orders with the cue on its **wrong**
option (shown first, then second). The no-cue control of a known question is the model's own
probability of the wrong option (no longer 0 by construction: issue 54).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .data import COMPETITIONS, COMPETITORS, MCQ, PRICE_ITEMS, Identity, identities
from .protocols import QUIZ, RATING, halo_trials, number_words
from .scenes import Broadcast, OneToOne, RatingTrial, Scene, Trial

__all__ = ["MENTION", "QUIZ_CONDITIONS", "cue_text", "quiz_trials", "score", "pretest_known",
           "slopes", "herd_authority_replicates", "halo_conditions", "HIGH_ANCHORS",
           "LOW_ANCHORS", "price_trials", "franklin_trials", "status_replicates",
           "within_story_spearman", "rumor_seed_statistics", "hit_cap_share"]

#: the content-free control line (issue 54): the option named, nothing social said about it
MENTION = "The word of the day is {option}."

_B, _P = Broadcast(), OneToOne()


def _herd(n: int) -> Callable[[str], str]:
    def cue(x: str) -> str:
        if n == 1:
            return _B.line("The other participant", f"I chose {x}.")
        return _B.line(f"The other {n} participants", f"We all chose {x}.")
    return cue


def _expert(who: Identity, negated: bool = False) -> Callable[[str], str]:
    word = "not " if negated else ""
    return lambda x: _P.line(who.describe(),
                             f"As an expert, I confirm that the answer should {word}be {x}.")


def _conditions() -> dict[str, Callable[[str], str] | None]:
    superior, peer, stranger = (identities(c)[0] for c in ("superior", "peer", "stranger"))
    out: dict[str, Callable[[str], str] | None] = {
        "nocue": None,
        "mention": lambda x: MENTION.format(option=x),
        "herd negated": lambda x: _B.line("The other 49 participants", f"None of us chose {x}."),
        "herd dissent": lambda x: (_B.line("Six of the other 7 participants", f"We all chose {x}.")
                                   + "\n" + _B.line("The seventh participant", "I do not know.")),
        "authority": _expert(superior),
        "authority peer": _expert(peer),
        "authority stranger": _expert(stranger),
        "authority negated": _expert(superior, negated=True),
    }
    for n in (1, 3, 7, 49):
        out[f"herd N={n}"] = _herd(n)
    return out


#: every quiz condition, by name: a function of the cued option's text (``None``: no cue)
QUIZ_CONDITIONS: dict[str, Callable[[str], str] | None] = _conditions()


def cue_text(condition: str, option: str) -> str:
    """The cue line(s) of ``condition`` pointing at ``option`` ("" for ``nocue``); an unknown
    condition is an error naming the valid ones. ``herd N=k`` works for any positive ``k``."""
    fn = QUIZ_CONDITIONS.get(condition)
    if fn is None and condition != "nocue":
        if condition.startswith("herd N="):
            k = condition.split("=", 1)[1]
            if not k.isdigit() or int(k) < 1:
                raise ValueError(f"herd N=k needs a positive integer k, got {condition!r}")
            fn = _herd(int(k))
        else:
            raise ValueError(f"unknown condition {condition!r}; valid: "
                             f"{', '.join(QUIZ_CONDITIONS)} (and herd N=<k>)")
    return "" if fn is None else fn(option)


def quiz_trials(mcqs: Sequence[MCQ], condition: str) -> list[Trial]:
    """Two trials per question, in the order (question, option order 0, 1): unknown questions
    with the cue on the second-shown option (the paper's layout), known ones with the cue on
    the wrong option shown first (order 0) and second (order 1). ``target`` is the cued
    option's position; in ``nocue`` the position it would have."""
    mcqs = list(mcqs)
    if not mcqs or not all(isinstance(m, MCQ) for m in mcqs):
        raise TypeError("mcqs must be a non-empty list of iclr25.cogmir.data.MCQ")
    out = []
    for m in mcqs:
        for order in (0, 1):
            if m.known:
                target, right = order, m.options[0]
                shown = [right, right]
                shown[target] = m.options[1]
                correct = 1 - target
            else:
                shown = list(m.options if order == 0 else m.options[::-1])
                target, correct = 1, None
            cue = cue_text(condition, shown[target])
            msgs = QUIZ.render(question=m.question, a=shown[0], b=shown[1],
                               cues=cue + "\n" if cue else "")
            out.append(Trial("quiz", condition, m.id, target, msgs, (shown[0], shown[1]),
                             QUIZ.prefill, {"order": order, "known": m.known,
                                            "correct": correct}))
    return out


def score(agent, trials_by_condition: Mapping[str, list], *, chunk: int = 64,
          desc: str | None = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run every condition's trials through ``agent.choose`` (in chunks, one progress bar) and
    return ``(p_target, choice)``, each a dict condition -> array in the trials' order. A chat
    agent (no probabilities) gives ``p_target`` 1.0 where its reply took the cued option, else
    0.0."""
    names = list(trials_by_condition)
    flat = [t for c in names for t in trials_by_condition[c]]
    if not flat:
        raise ValueError("no trials given")
    p, ch = np.empty(len(flat)), np.empty(len(flat), int)
    steps = range(0, len(flat), chunk)
    if desc is not None:
        from iclr25.progress import progress

        steps = progress(steps, desc=desc)
    for s in steps:
        part = flat[s:s + chunk]
        got = agent.choose(part)
        if got.p_target is None:        # a chat agent: 1 when its reply took the cued option
            tgt = np.array([t.target for t in part])
            p[s:s + chunk] = (np.asarray(got.choice) == tgt).astype(float)
        else:
            p[s:s + chunk] = got.p_target
        ch[s:s + chunk] = got.choice
    out_p, out_c, i = {}, {}, 0
    for c in names:
        n = len(trials_by_condition[c])
        out_p[c], out_c[c] = p[i:i + n], ch[i:i + n]
        i += n
    return out_p, out_c


def pretest_known(agent, bank: Sequence[MCQ], *, chunk: int = 64, desc: str | None = None
                  ) -> tuple[list[MCQ], np.ndarray, pd.DataFrame]:
    """Keep the known questions the agent answers right without a cue in **both** option
    orders. Returns ``(kept, p_wrong, rows)``: ``p_wrong`` is the no-cue probability of the
    wrong option on the kept questions' prompts, in :func:`quiz_trials` order (the no-cue
    control of the known findings); ``rows`` has one row per pretested prompt."""
    bank = list(bank)
    if not all(m.known for m in bank):
        raise ValueError("pretest takes known questions only (unknown ones have no right answer)")
    trials = quiz_trials(bank, "nocue")
    p, ch = score(agent, {"nocue": trials}, chunk=chunk, desc=desc)
    rows = pd.DataFrame({"item": [t.item for t in trials], "order": [t.extra["order"] for t in trials],
                         "topic": [m.topic for m in bank for _ in (0, 1)],
                         "p_wrong": p["nocue"],
                         "right": ch["nocue"] == np.array([t.extra["correct"] for t in trials])})
    both = rows.groupby("item", sort=False).right.all()
    kept = [m for m in bank if bool(both[m.id])]
    keep = rows["item"].isin({m.id for m in kept}).to_numpy()
    return kept, p["nocue"][keep], rows


def slopes(values, x) -> np.ndarray:
    """Per row, the least-squares slope of ``values[i, :]`` on ``x``: ``(n,)`` from ``(n, k)``
    and ``(k,)`` (``k >= 2`` distinct x)."""
    v = np.asarray(values, float)
    x = np.asarray(x, float).ravel()
    if v.ndim != 2 or v.shape[1] != x.size or x.size < 2 or np.ptp(x) == 0:
        raise ValueError(f"slopes needs values (n, k) and k >= 2 distinct x; got {v.shape} and "
                         f"{x.size} x")
    xc = x - x.mean()
    return (v - v.mean(1, keepdims=True)) @ xc / float(xc @ xc)


#: notebook 01's quiz conditions on unknown and on known questions
UNKNOWN_CONDITIONS = ("nocue", "mention", "herd negated", "herd dissent", "authority",
                      "authority peer", "authority stranger", "authority negated")
KNOWN_CONDITIONS = ("herd N=49", "mention", "authority")


def herd_authority_replicates(unknown: Mapping[str, np.ndarray], known: Mapping[str, np.ndarray],
                              n_others: Sequence[int]) -> dict[str, dict]:
    """The replicates of notebook 01's findings: ``{entry id: {ours, control, paired}}`` (a
    ``control`` of ``None``: the registered value). ``unknown``/``known``: condition ->
    per-prompt probability of the cued option (``known["nocue"]`` from
    :func:`pretest_known`). The herd cue of the findings is the largest ``n_others``."""
    big = f"herd N={max(n_others)}"
    u, k = unknown, known
    out = {
        "herd-unknown-vs-mention-smollm2": (u[big], u["mention"]),
        "herd-unknown-vs-negated-smollm2": (u[big], u["herd negated"]),
        "authority-unknown-vs-mention-smollm2": (u["authority"], u["mention"]),
        "authority-unknown-vs-negated-smollm2": (u["authority"], u["authority negated"]),
        "herd-unknown-vs-nocue-smollm2": (u[big], u["nocue"]),
        "authority-unknown-vs-nocue-smollm2": (u["authority"], u["nocue"]),
        "authority-above-herd-smollm2": (u["authority"], u[big]),
        "herd-known-vs-nocue-smollm2": (k["herd N=49"], k["nocue"]),
        "herd-known-vs-mention-smollm2": (k["herd N=49"], k["mention"]),
        "authority-known-vs-nocue-smollm2": (k["authority"], k["nocue"]),
        "authority-known-vs-mention-smollm2": (k["authority"], k["mention"]),
        "herd-dissent-reduces-smollm2": (u["herd N=7"], u["herd dissent"]),
    }
    res = {cid: {"ours": a, "control": b, "paired": True} for cid, (a, b) in out.items()}
    ns = sorted(int(n) for n in n_others)
    res["herd-grows-with-n-smollm2"] = {
        "ours": slopes(np.stack([u[f"herd N={n}"] for n in ns], 1), np.log2(ns)),
        "control": None, "paired": None}
    res["authority-grows-with-status-smollm2"] = {
        "ours": slopes(np.stack([u["authority stranger"], u["authority peer"], u["authority"]], 1),
                       [0, 1, 2]), "control": None, "paired": None}
    res["certainty-herd-smollm2"] = {"ours": u[big] - u["nocue"],
                                     "control": k["herd N=49"] - k["nocue"], "paired": False}
    res["certainty-authority-smollm2"] = {"ours": u["authority"] - u["nocue"],
                                          "control": k["authority"] - k["nocue"], "paired": False}
    return res


# ---------------------------------------------------------------------------------------------
# notebook 02: halo, confirmation, gambler, Ben Franklin


def halo_conditions(mcqs: Sequence[MCQ]) -> dict[str, list[Trial]]:
    """The halo trials (4 per question: both speaking orders, both option orders) and their
    two controls in the same order: ``stranger`` (the friend's slot introduced as a second
    stranger) and ``mention`` (the friend's line replaced by :data:`MENTION`)."""
    halo = halo_trials(mcqs)
    stranger = halo_trials(mcqs, control=True)
    friend = identities("friend")[0]
    mention = []
    for t in halo:
        cued = t.options[t.target]
        text = t.messages[-1]["content"]
        line = _P.line(friend.describe(), f"I think the answer is {cued}.")
        if line not in text:
            raise AssertionError("the halo template changed: the friend's line was not found")
        msgs = [dict(m) for m in t.messages]
        msgs[-1]["content"] = text.replace(line, MENTION.format(option=cued))
        mention.append(Trial("halo", "mention", t.item, t.target, msgs, t.options, t.prefill,
                             dict(t.extra)))
    return {"halo": halo, "stranger": stranger, "mention": mention}


#: the five registered anchor amounts of a belief that the item is expensive / cheap
HIGH_ANCHORS = ("$500", "$1,000", "$2,000", "$5,000", "$10,000")
LOW_ANCHORS = ("$1", "50 cents", "25 cents", "10 cents", "5 cents")
PRICE = Scene("price", "{belief}What is the price of {item}? Is it {a} or {b}?\n")


def price_trials(kind: str, toward: str, anchors: Sequence[str] = (), items=PRICE_ITEMS
                 ) -> list[Trial]:
    """Confirmation prompts, in the order (anchor, item, option order): ``kind="belief"`` ("You
    already believe that <item> costs about <anchor>."), ``"mention"`` ("The number of the day
    is <anchor>.") or ``"none"`` (no line; ``anchors`` only sets how often each prompt
    repeats, so that it pairs with the belief prompts). The target is the ``toward`` price
    (``"high"`` or ``"low"``), shown first and second."""
    if kind not in ("belief", "mention", "none") or toward not in ("high", "low"):
        raise ValueError(f"kind must be belief|mention|none and toward high|low, got "
                         f"{kind!r}, {toward!r}")
    if not anchors:
        raise ValueError("give the anchor amounts (the prompts repeat once per anchor)")
    out = []
    for anchor in anchors:
        for name, lo, hi in items:
            cued, other = (hi, lo) if toward == "high" else (lo, hi)
            line = {"belief": f"You already believe that {name} costs about {anchor}.\n",
                    "mention": f"The number of the day is {anchor}.\n", "none": ""}[kind]
            for target in (0, 1):
                pair = [f"{number_words(other)} dollars"] * 2
                pair[target] = f"{number_words(cued)} dollars"
                msgs = PRICE.render(belief=line, item=name, a=pair[0], b=pair[1])
                out.append(Trial("confirmation", f"{kind} {toward}", name, target, msgs,
                                 (pair[0], pair[1]), PRICE.prefill,
                                 {"anchor": anchor, "cued_price": cued}))
    return out


FRANKLIN = Scene("franklin", "You and {name} are competing for {prize}. Until today you liked "
                             "{name} at level {level} on a scale from 1 to 11. {interaction}\n"
                             "How much do you like {name} now, from 1 (not at all) to 11 (very "
                             "much)? Reply as 'Level: <number>'.", system=RATING.system,
                 prefill="Level:")


def franklin_trials(*, favour: bool, competitions=COMPETITIONS, names=COMPETITORS,
                    levels: Sequence[int] = range(1, 11)) -> list[RatingTrial]:
    """Ben Franklin prompts, in the order (competition, competitor, initial level): the paper's
    random initial favourability 1-10 as a sentence, then the favour (the competitor borrowed
    the subject's pen) or, in the control, a chat of the same length about the weather."""
    out = []
    for c, prize in enumerate(competitions):
        for k in range(2):
            name = names[(2 * c + k) % len(names)]
            for level in levels:
                if not 1 <= int(level) <= 10:
                    raise ValueError(f"initial levels lie in 1-10, got {level!r}")
                interaction = (f"Earlier today {name} asked to borrow your pen, and you lent it."
                               if favour else
                               f"Earlier today {name} chatted with you about the weather.")
                msgs = FRANKLIN.render(name=name, prize=prize, level=int(level),
                                       interaction=interaction)
                out.append(RatingTrial("ben_franklin", "favour" if favour else "control",
                                       f"{c}-{name}-{level}", msgs, FRANKLIN.prefill,
                                       {"level": int(level)}))
    return out


def status_replicates(p: Mapping[str, np.ndarray], ratings: Mapping[str, np.ndarray]
                      ) -> dict[str, dict]:
    """The replicates of notebook 02's findings, ``{entry id: {ours, control, paired}}``, from
    per-prompt probabilities of the cued option ``p`` (keys ``halo``, ``halo stranger``,
    ``halo mention``, ``belief high``, ``none high``, ``belief low``, ``none low``,
    ``mention high``, ``streak 10``, ``streak 0``) and expected ratings (``favour``,
    ``control``)."""
    pairs = {"halo-vs-stranger-smollm2": ("halo", "halo stranger"),
             "halo-vs-mention-smollm2": ("halo", "halo mention"),
             "confirmation-high-vs-control-smollm2": ("belief high", "none high"),
             "confirmation-low-vs-control-smollm2": ("belief low", "none low"),
             "confirmation-high-vs-mention-smollm2": ("belief high", "mention high"),
             "gambler-no-fallacy-smollm2": ("streak 10", "streak 0")}
    out = {cid: {"ours": p[a], "control": p[b], "paired": True} for cid, (a, b) in pairs.items()}
    out["ben-franklin-smollm2"] = {"ours": ratings["favour"], "control": ratings["control"],
                                   "paired": True}
    return out


# ---------------------------------------------------------------------------------------------
# notebook 03: the rumour chain, per sampling seed


def _rank(a: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(a)


def within_story_spearman(metrics: pd.DataFrame) -> np.ndarray:
    """Per story (``narrative``), the Spearman correlation between ``position`` and
    ``similarity``; a story whose similarity does not change along the chain counts 0 (no
    trend)."""
    out = []
    for _, g in metrics.groupby("narrative", sort=True):
        x, y = _rank(g.position.to_numpy(float)), _rank(g.similarity.to_numpy(float))
        sx, sy = x.std(), y.std()
        out.append(0.0 if sx == 0 or sy == 0 else
                   float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy)))
    return np.array(out)


def rumor_seed_statistics(metrics: pd.DataFrame, null: np.ndarray, *,
                          max_new_tokens: int | None = None, tokens=None) -> dict[str, float]:
    """The registered rumour statistics of one sampling seed: ``spearman`` (mean within-story
    correlation of position and similarity), ``first_minus_last`` (mean over stories),
    ``first`` (mean similarity at position 1), ``null`` (mean of the per-story null),
    ``min_first_minus_null`` (min over stories) and ``length_ratio_last`` (mean words at the
    last position / words of the original). ``metrics`` from
    :func:`iclr25.cogmir.rumor.chain_metrics`, ``null`` per story in ``narrative`` order."""
    last = int(metrics.position.max())
    first = metrics[metrics.position == 1].sort_values("narrative").similarity.to_numpy()
    at_last = metrics[metrics.position == last].sort_values("narrative")
    null = np.asarray(null, float)
    if null.shape != first.shape:
        raise ValueError(f"one null per story: got {null.shape} for {first.shape} stories")
    return {"spearman": float(within_story_spearman(metrics).mean()),
            "first_minus_last": float((first - at_last.similarity.to_numpy()).mean()),
            "first": float(first.mean()), "null": float(null.mean()),
            "min_first_minus_null": float((first - null).min()),
            "length_ratio_last": float(at_last.length_ratio.mean())}


def hit_cap_share(tokenizer, texts: Sequence[str], max_new_tokens: int) -> float:
    """The share of ``texts`` (retellings) that reach the generation budget ``max_new_tokens``
    (within one token): they were cut, so their length is bounded by the budget."""
    texts = list(texts)
    if not texts:
        raise ValueError("no texts given")
    n = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    return float(np.mean([k >= max_new_tokens - 1 for k in n]))

"""The seven CogMir protocols as trial builders (chapter 03).

Every two-option protocol is counterbalanced: each item is asked with the cued option shown
first (A) and second (B), and has a no-cue control with the same question in the same option
order. What the cue points at:

==================  ======================================================================
herd                N other participants (one broadcast line) all chose the wrong option of
                    a known question, or one fixed option of an unknown question
authority           a superior identity tells the subject privately the answer is that option
halo                a friend and a stranger each recommend a different option; the cue is the
                    friend's (control: both are strangers, same slots)
confirmation        the subject "already believes" an item costs about $1,000 (or $1): the
                    cue is the price nearer the anchor (control: no belief)
gambler             a fair game came out the same way ``streak`` times in a row; the cue is
                    the *other* outcome, the one a gambler thinks is "due" (control: no
                    history)
ben_franklin        the subject lent a competitor a pen (favour) or only chatted (control)
                    and rates the competitor 1-11 (a rating, not a choice)
rumour chain        see :mod:`iclr25.cogmir.rumor`
==================  ======================================================================
"""

from __future__ import annotations

from collections.abc import Sequence

from .data import (CHANCE_GAMES, COMPETITIONS, COMPETITORS, MCQ, PRICE_ITEMS, Identity,
                   identities)
from .scenes import (RATING_SYSTEM, Broadcast, OneToOne, RatingTrial, Scene, Trial)

__all__ = ["QUIZ", "cued_option", "herd_trials", "authority_trials", "control_trials",
           "halo_trials", "confirmation_trials", "gambler_trials", "ben_franklin_trials",
           "PROTOCOLS", "number_words"]

PROTOCOLS = ("herd", "authority", "halo", "confirmation", "gambler", "ben_franklin",
             "rumor_chain")

QUIZ = Scene("quiz", "{question} Is it {a} or {b}?\n{cues}")

_SMALL = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
          "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n: int) -> str:
    """``n`` (0-999) in English words: 245 -> 'two hundred forty-five' (chapter 03: prices
    are options in words, so the two options start with different tokens)."""
    if not isinstance(n, int) or not 0 <= n <= 999:
        raise ValueError(f"number_words takes an integer in [0, 999], got {n!r}")
    if n < 20:
        return _SMALL[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _SMALL[n % 10])
    rest = n % 100
    return _SMALL[n // 100] + " hundred" + ("" if rest == 0 else " " + number_words(rest))


def _check_mcqs(mcqs) -> list[MCQ]:
    mcqs = list(mcqs)
    if not mcqs or not all(isinstance(m, MCQ) for m in mcqs):
        raise TypeError("mcqs must be a non-empty list of iclr25.cogmir.data.MCQ")
    return mcqs


def cued_option(mcq: MCQ, index: int) -> int:
    """Which of ``mcq.options`` a cue points at (chapter 03): the wrong one (``1``) of a known
    question; for unknown questions it alternates with the item's index so each option is
    cued equally often."""
    return 1 if mcq.known else index % 2


def _ordered(mcq: MCQ, cued: int, target: int) -> tuple[str, str]:
    """The two options laid out so that option ``cued`` sits at position ``target``."""
    other = 1 - cued
    pair = [None, None]
    pair[target], pair[1 - target] = mcq.options[cued], mcq.options[other]
    return pair[0], pair[1]


def _mcq_trials(mcqs, protocol: str, condition: str, cue_fn, extra: dict) -> list[Trial]:
    out = []
    for i, m in enumerate(_check_mcqs(mcqs)):
        cued = cued_option(m, i)
        for target in (0, 1):
            a, b = _ordered(m, cued, target)
            cues = cue_fn(m.options[cued]) if cue_fn else ""
            msgs = QUIZ.render(question=m.question, a=a, b=b, cues=cues)
            out.append(Trial(protocol, condition, m.id, target, msgs, (a, b), QUIZ.prefill,
                             {**extra, "known": m.known, "correct": (None if not m.known else
                              (target if cued == 0 else 1 - target))}))
    return out


def control_trials(mcqs: Sequence[MCQ], protocol: str = "herd") -> list[Trial]:
    """The no-cue control of the quiz protocols (herd, authority): the same question in the
    same two option orders, with no message from anyone (chapter 03)."""
    return _mcq_trials(mcqs, protocol, "control", None, {"n_others": 0})


def herd_trials(mcqs: Sequence[MCQ], n_others: int, channel=Broadcast()) -> list[Trial]:
    """Herd (chapter 03): ``n_others`` participants unanimously chose the cued option, said in
    one broadcast line (not ``n_others`` messages)."""
    if not isinstance(n_others, int) or n_others < 1:
        raise ValueError(f"n_others must be a positive integer, got {n_others!r}")

    def cue(option: str) -> str:
        if n_others == 1:
            return channel.line("The other participant", f"I chose {option}.") + "\n"
        return channel.line(f"The other {n_others} participants",
                            f"We all chose {option}.") + "\n"
    return _mcq_trials(mcqs, "herd", f"herd N={n_others}", cue, {"n_others": n_others})


def authority_trials(mcqs: Sequence[MCQ], authority: Identity | None = None,
                     channel=OneToOne()) -> list[Trial]:
    """Authority (chapter 03): a superior identity says privately "The correct answer is X."
    (default: the first ``superior`` identity)."""
    who = authority or identities("superior")[0]

    def cue(option: str) -> str:
        return channel.line(who.describe(), f"The correct answer is {option}.") + "\n"
    return _mcq_trials(mcqs, "authority", "authority", cue, {"n_others": 1,
                                                             "identity": who.name})


def halo_trials(mcqs: Sequence[MCQ], *, control: bool = False, friend: Identity | None = None,
                stranger: Identity | None = None, channel=OneToOne()) -> list[Trial]:
    """Halo (chapter 03): the friend recommends the cued option and the stranger the other,
    in both speaking orders and both option orders (4 trials per question). ``control=True``
    introduces the friend's slot as a second stranger, everything else equal."""
    friend = friend or identities("friend")[0]
    stranger = stranger or identities("stranger")[0]
    friend_desc = (f"{friend.name}, another stranger you met five minutes ago" if control
                   else friend.describe())
    out = []
    for i, m in enumerate(_check_mcqs(mcqs)):
        cued = cued_option(m, i)
        for target in (0, 1):
            a, b = _ordered(m, cued, target)
            lines = [channel.line(friend_desc, f"I think the answer is {m.options[cued]}."),
                     channel.line(stranger.describe(),
                                  f"I think the answer is {m.options[1 - cued]}.")]
            for friend_first in (True, False):
                ls = lines if friend_first else lines[::-1]
                msgs = QUIZ.render(question=m.question, a=a, b=b, cues="\n".join(ls) + "\n")
                out.append(Trial("halo", "control" if control else "halo", m.id, target, msgs,
                                 (a, b), QUIZ.prefill, {"friend_first": friend_first,
                                                "known": m.known}))
    return out


PRICE = Scene("price", "{belief}What is the price of {item}? Is it {a} or {b}?\n")


def confirmation_trials(*, anchor: str | None, toward: str = "high",
                        items=PRICE_ITEMS) -> list[Trial]:
    """Confirmation (chapter 03): the subject believes ``item`` costs about a thousand dollars
    (``anchor="high"``) or about one dollar (``"low"``); the cue is the price nearer the
    belief. ``anchor=None`` is the control (no belief) with the target ``toward`` the high or
    the low price (condition ``"control high"`` / ``"control low"``), to compare with the
    anchor of that side."""
    if anchor not in ("high", "low", None):
        raise ValueError(f"anchor must be 'high', 'low' or None (control), got {anchor!r}")
    if toward not in ("high", "low"):
        raise ValueError(f"toward must be 'high' or 'low', got {toward!r}")
    if anchor is not None:
        toward = anchor
    out = []
    for name, lo, hi in items:
        belief = ""
        if anchor == "high":
            belief = f"You already believe that {name} costs about a thousand dollars.\n"
        elif anchor == "low":
            belief = f"You already believe that {name} costs about one dollar.\n"
        cued = lo if toward == "low" else hi
        other = hi if cued == lo else lo
        for target in (0, 1):
            pair = [f"{number_words(other)} dollars"] * 2
            pair[target] = f"{number_words(cued)} dollars"
            msgs = PRICE.render(belief=belief, item=name, a=pair[0], b=pair[1])
            out.append(Trial("confirmation", anchor or f"control {toward}", name, target, msgs,
                             (pair[0], pair[1]), PRICE.prefill, {"anchor": anchor, "cued_price": cued}))
    return out


CHANCE = Scene("chance", "{setting} {history}What will the next result be? Is it {a} or "
                         "{b}?\n")


def gambler_trials(streak: int, *, games=CHANCE_GAMES) -> list[Trial]:
    """Gambler's fallacy (chapter 03): a fair game came out ``s`` the last ``streak`` times;
    the cue is the other outcome (the "due" one). ``streak=0`` is the control (no history),
    with the same targets. Each game is run with each outcome as the streak and in both option
    orders (4 trials per game)."""
    if not isinstance(streak, int) or streak < 0:
        raise ValueError(f"streak must be a non-negative integer, got {streak!r}")
    out = []
    for g, (setting, o1, o2) in enumerate(games):
        for s, due in ((o1, o2), (o2, o1)):
            if streak == 0:
                history = ""
            elif streak == 1:
                history = f"Last time the result was {s}. "
            else:
                history = f"The result was {s} each of the last {streak} times in a row. "
            for target in (0, 1):
                pair = [s, s]
                pair[target] = due
                msgs = CHANCE.render(setting=setting, history=history, a=pair[0], b=pair[1])
                out.append(Trial("gambler", f"streak {streak}", f"game-{g}-{s}", target, msgs,
                                 (pair[0], pair[1]), CHANCE.prefill, {"streak": streak}))
    return out


RATING = Scene("rating", "You and {name} are competing for {prize}. {interaction}\nHow much "
                         "do you like {name}, from 1 (not at all) to 11 (very much)? Reply as "
                         "'Level: <number>'.", system=RATING_SYSTEM, prefill="Level:")


def ben_franklin_trials(*, favour: bool, competitions=COMPETITIONS,
                        names=COMPETITORS) -> list[RatingTrial]:
    """Ben Franklin (chapter 03): earlier, the competitor asked to borrow the subject's pen and
    got it (``favour=True``), or only chatted about the weather (the control: an interaction
    of the same length without a favour). One trial per (competition, name) pair."""
    out = []
    for c, prize in enumerate(competitions):
        for k in range(2):
            name = names[(2 * c + k) % len(names)]
            interaction = (f"Earlier today {name} asked to borrow your pen, and you lent it."
                           if favour else
                           f"Earlier today {name} chatted with you about the weather.")
            msgs = RATING.render(name=name, prize=prize, interaction=interaction)
            out.append(RatingTrial("ben_franklin", "favour" if favour else "control",
                                   f"{c}-{name}", msgs, RATING.prefill))
    return out

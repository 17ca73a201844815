"""The book's 19 chapters: slug, module and paper (one list, used by the CLI and the book)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Chapter", "CHAPTERS", "by_slug"]


@dataclass(frozen=True)
class Chapter:
    number: int
    slug: str     # notebooks/<slug>/, book/chapters/<slug>.md
    title: str    # the paper, in a few words

    @property
    def module(self) -> str:
        """``iclr25.<module>``: the slug without its number, dashes as underscores."""
        return self.slug.split("-", 1)[1].replace("-", "_")


CHAPTERS: tuple[Chapter, ...] = tuple(Chapter(n, s, t) for n, s, t in [
    (1, "01-logic-logit", "Logic-Logit: rule-based interpretable choice model"),
    (2, "02-data-value-embedding", "Trajectory-specific LOO influence via data value embedding"),
    (3, "03-cogmir", "CogMir: multi-LLM-agent cognitive-bias framework"),
    (4, "04-mle-model-based-rl", "MLE model-based RL with optimistic/pessimistic planning"),
    (5, "05-query-localization", "Knowledge neurons: KL vs QL assumption, consistency-aware KN editing"),
    (6, "06-topk-sae", "Scaling and evaluating k-sparse autoencoders"),
    (7, "07-cybench", "Cybench: CTF tasks and agents"),
    (8, "08-refat", "Refusal feature adversarial training"),
    (9, "09-sim-dynamics", "Structured identity mapping: dynamics of compositional generalization"),
    (10, "10-ideology-probes", "Linear representations of political perspective in attention heads"),
    (11, "11-retrieval-problem", "The retrieval problem: log-depth transformers and implicit curriculum"),
    (12, "12-phylolm", "PhyloLM: phylogenies of language models"),
    (13, "13-systematic-outliers", "Systematic outliers in LLMs"),
    (14, "14-lice", "LiCE: likely counterfactuals by MIO over a sum-product network"),
    (15, "15-kan-bounds", "Generalization bounds for Kolmogorov-Arnold networks"),
    (16, "16-evolving-gnn-explanations", "Axiomatic layer-edge explanations of evolving GNN predictions"),
    (17, "17-soft-preference-learning", "Soft preference learning for diverse aligned LMs"),
    (18, "18-relu-landscape", "Stationary points and escape neurons of one-hidden-layer ReLU nets"),
    (19, "19-vla-gender-bias", "Gender bias in vision-language assistants"),
])


def by_slug(slug: str) -> Chapter:
    """The chapter with this slug; an unknown slug raises ``KeyError`` listing the valid ones."""
    for c in CHAPTERS:
        if c.slug == slug:
            return c
    raise KeyError(f"unknown chapter {slug!r}; valid: {', '.join(c.slug for c in CHAPTERS)}")

"""The chapter's runs at each profile (see :mod:`iclr25.profiles`).

``smoke`` builds 12 TinyGPTs (3 families x root, seed-sibling, int8, 30% pruned; 60 steps
each) and samples 16 genes x 8 probes; ``book`` 16 TinyGPTs (2 families x 8) trained for 300
steps, the SmolLM2 family (6 models) and Gemma-3-270M, 24 genes x 16 probes; ``paper`` the
paper's G = 128, N = 32 with 4 families of 8.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from ..profiles import make_config

__all__ = ["ZooConfig", "zoo_config", "RUNS"]


@dataclass(frozen=True)
class ZooConfig:
    """The zoo, the genome and the studies of all three notebooks (they share one zoo)."""

    n_families: int          # TinyGPT families (<= 4)
    edits: tuple             # TinyGPT edits per family (see zoo.TINY_EDITS)
    n_steps: int             # training steps of a root (paper: pretrained models)
    batch_size: int
    lr: float
    G: int                   # genes (paper: 128)
    N: int                   # probes per gene (paper: 32)
    G_pool: int              # genes of the G/N study on the TinyGPTs (two disjoint halves)
    N_max: int               # probes per gene of the G/N study (paper: 128)
    llm: bool                # the SmolLM2 family
    llm_edits: tuple         # its edits (see zoo.LLM_EDITS)
    gemma: bool              # Gemma-3-270M base as the outgroup
    n_items: int             # items per benchmark task
    max_new_tokens: int = 5  # paper: 5 tokens
    n_chars: int = 4         # paper: first 4 characters
    temperature: float = 0.7  # paper: 0.7
    n_ica: int = 15          # paper: FastICA(15)
    epochs: int = 1000       # paper: 1000 full-batch Adam epochs
    coupled: bool = False    # True: common random numbers across models, a variance-reduction
                             # variant never judged (default and paper: independent draws)
    seed: int = 0

    def key(self) -> str:
        """A short hash of everything that changes the zoo (names its runs/ folder)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


RUNS = {
    "smoke": dict(n_families=3, edits=("reseed", "int8", "prune"), n_steps=60, batch_size=16,
                  lr=6e-3, G=16, N=8, G_pool=32, N_max=16, llm=False, llm_edits=(),
                  gemma=False, n_items=12),
    "book": dict(n_families=2, edits=("reseed", "int8", "int4", "prune", "continue", "finetune",
                                      "distill"),
                 n_steps=300, batch_size=16, lr=5e-3, G=24, N=16, G_pool=128, N_max=32, llm=True,
                 llm_edits=("int8", "int4", "prune10", "prune30", "lora"), gemma=True,
                 n_items=24),
    "paper": dict(n_families=4, edits=("reseed", "int8", "int4", "prune", "continue", "finetune",
                                       "distill"),
                  n_steps=3000, batch_size=32, lr=3e-3, G=128, N=32, G_pool=256, N_max=128,
                  llm=True, llm_edits=("int8", "int4", "prune10", "prune30", "lora"), gemma=True,
                  n_items=100),
}


def zoo_config(profile: str | None = None, **overrides) -> ZooConfig:
    """The :class:`ZooConfig` of a profile, with notebook parameters as overrides."""
    cfg = make_config(ZooConfig, RUNS, profile, **overrides)
    if not 1 <= cfg.n_families <= 4:
        raise ValueError(f"n_families must be in 1..4, got {cfg.n_families}")
    if cfg.G > cfg.G_pool // 2 or cfg.N > cfg.N_max:
        raise ValueError(f"need G <= G_pool / 2 and N <= N_max; got G={cfg.G}, "
                         f"G_pool={cfg.G_pool}, N={cfg.N}, N_max={cfg.N_max}")
    return cfg

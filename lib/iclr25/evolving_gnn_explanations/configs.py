"""The chapter's runs at each profile (see :mod:`iclr25.profiles`). The paper's model is tiny (a
2-layer GCN, hidden 16), so profiles differ in how many graphs and instances are explained."""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["AttributionConfig", "SelectionConfig", "MotifConfig", "attribution_run", "selection_run", "motif_run", "RUNS"]


@dataclass(frozen=True)
class AttributionConfig:
    """Notebook 01: an evolving SBM graph and the completeness checks."""

    n_nodes: int = 120        # SBM nodes
    n_blocks: int = 3
    drift: float = 0.3        # log-normal weight drift
    n_add: int = 10           # inserted edges
    n_remove: int = 10        # deleted edges
    hidden: int = 16          # paper: 16
    n_steps: int = 200        # Adam steps (paper: 20 epochs at lr 0.1)
    lr: float = 0.01
    n_targets: int = 10       # explained nodes
    ig_steps: tuple = (2, 4, 8, 16, 32, 64)
    n_seeds: int = 5          # replicates of the completeness comparison (seeds seed .. seed + n_seeds - 1)
    seed: int = 0


@dataclass(frozen=True)
class SelectionConfig:
    """Notebook 02: KL vs K (Fig. 5 in shape)."""

    n_graphs: int = 60        # synthetic molecules
    n_instances: int = 5      # explained molecules per curve
    k_max: int = 5            # largest K (paper: 1..20 layer edges, 1..5 input edges)
    n_exact: int = 3          # instances for the enumeration / SCIP checks
    k_exact: int = 2          # largest K of the input-vs-layer check (SCIP for 2K and 4K layer edges)
    pyg_epochs: int = 100     # GNNExplainer / GraphMask epochs (PyG default 100)
    hidden: int = 16
    n_steps: int = 200
    lr: float = 0.01
    nx_graphs: tuple = ("karate_split", "les_miserables_window")  # real graphs, real_evolving_graph
    nx_targets: int = 3       # explained nodes per real graph (largest prediction change)
    ig_steps: int = 32        # Integrated Gradients steps (midpoint rule)
    n_seeds: int = 5          # replicates (seeds seed .. seed + n_seeds - 1): data, training, instances
    seed: int = 0


@dataclass(frozen=True)
class MotifConfig:
    """Notebook 03: the Table 8 case study on BA graphs with house / cycle motifs."""

    n_pairs: int = 1000       # graphs per motif (paper: 1000)
    n_base: int = 20          # BA nodes before the motif
    changed_ratio: float = 0.9  # paper: 0.9
    hidden: int = 20          # paper: 11 -> 20 -> 2
    n_steps: int = 1000       # full-batch Adam steps of the house-vs-cycle detector
    lr: float = 0.03
    seed: int = 0
    ig_steps: int = 16        # Integrated Gradients steps (midpoint rule)
    n_pyg: int = 300          # graphs (a fixed random subset) explained by GNNExplainer / GraphMask
    pyg_epochs: int = 100     # their epochs (PyG default 100)


RUNS = {
    "attribution": {"smoke": dict(n_nodes=60, n_targets=4, n_steps=60, ig_steps=(2, 8, 32), n_seeds=2),
                    "book": {}, "paper": dict(n_nodes=2000, n_targets=50, n_add=100, n_remove=100)},
    "selection": {"smoke": dict(n_graphs=16, n_instances=2, k_max=3, n_exact=1, k_exact=1, pyg_epochs=30, n_steps=60,
                                nx_targets=1, ig_steps=8, n_seeds=1),
                  "book": {}, "paper": dict(n_graphs=188, n_instances=50, k_max=20, n_exact=20, pyg_epochs=200,
                                            nx_targets=20)},
    "motif": {"smoke": dict(n_pairs=100, ig_steps=4, n_pyg=6, pyg_epochs=30), "book": {},
              "paper": dict(n_pairs=1000)},
}


def attribution_run(profile: str | None = None, **overrides) -> AttributionConfig:
    """Config of ``01-message-flow-attribution`` at ``profile``."""
    return make_config(AttributionConfig, RUNS["attribution"], profile, **overrides)


def selection_run(profile: str | None = None, **overrides) -> SelectionConfig:
    """Config of ``02-layer-edges-vs-baselines`` at ``profile``."""
    return make_config(SelectionConfig, RUNS["selection"], profile, **overrides)


def motif_run(profile: str | None = None, **overrides) -> MotifConfig:
    """Config of ``03-motif-case-study`` at ``profile``."""
    return make_config(MotifConfig, RUNS["motif"], profile, **overrides)

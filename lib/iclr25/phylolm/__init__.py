"""PhyloLM: phylogenies of language models from their outputs (chapter 12).

Yax, Oudeyer & Palminteri, "PhyloLM: Inferring the Phylogeny of Large Language Models and
Predicting their Performances in Benchmarks", ICLR 2025 (arXiv:2404.04671).

- :mod:`~iclr25.phylolm.sampling` -- genes (prompts) and alleles (first characters of N sampled
  completions; each gene's cache computed once and expanded N times);
- :mod:`~iclr25.phylolm.nei` -- the sparse allele table and Nei's similarity / distance;
- :mod:`~iclr25.phylolm.trees` -- neighbour joining, UPGMA, Newick, Robinson-Foulds;
- :mod:`~iclr25.phylolm.zoo` -- a zoo of models with a known genealogy and small benchmarks;
- :mod:`~iclr25.phylolm.study` -- build the zoo once (notebook 01), the G/N study;
- :mod:`~iclr25.phylolm.predict` -- leave-one-family-out benchmark prediction;
- :mod:`~iclr25.phylolm.plots` -- the chapter's figures;
- :mod:`~iclr25.phylolm.replicates` -- the registered statistics per gene split and their
  controls (imported on its own, ``from iclr25.phylolm import replicates``, so that the zoo's
  cache key does not depend on it).

Every model samples its own independent draws, as the paper's separate API calls do; common
random numbers across models (``coupled=True``) are a labelled variant, never judged.
"""

from . import configs, nei, plots, predict, sampling, study, trees, zoo
from .configs import ZooConfig, zoo_config
from .nei import AlleleTable, nei_distance, nei_similarity
from .predict import PhyloRegressor, leave_one_family_out
from .sampling import make_genes, sample_alleles, to_allele
from .study import Zoo, build_zoo, edit_offsets, family_contrast, gn_study
from .trees import (Tree, neighbor_joining, parse_newick, patristic_distances, robinson_foulds,
                    splits, upgma)

__all__ = ["AlleleTable", "nei_similarity", "nei_distance", "make_genes", "sample_alleles",
           "to_allele", "Tree", "neighbor_joining", "upgma", "parse_newick", "splits",
           "robinson_foulds", "patristic_distances", "ZooConfig", "zoo_config", "Zoo",
           "build_zoo", "family_contrast", "edit_offsets", "gn_study", "PhyloRegressor",
           "leave_one_family_out", "configs", "nei", "plots", "predict", "sampling", "study",
           "trees", "zoo"]

"""Build the zoo once, sample its alleles and score its benchmarks; the studies on top (chapter 12).

:func:`build_zoo` is what notebook 01 runs and notebooks 02-03 reuse: it saves everything they
need (names, families, edits, the true genealogy, genes, alleles, benchmark scores, the G/N pool)
as one JSON file under ``runs/12-phylolm/zoo-<profile>-<hash>-<code>/``, keyed by the config and the
code that builds it (:func:`zoo_folder`), and loads
it instead of rebuilding when it is there.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import paths
from . import nei, sampling, trees, zoo
from .configs import ZooConfig

__all__ = ["Zoo", "build_zoo", "zoo_folder", "gn_study", "family_contrast", "edit_offsets"]


@dataclass
class Zoo:
    """Everything the chapter's notebooks read: one row per model."""

    config: dict
    names: list
    families: list
    edits: list
    parents: list
    newick: str
    genes: list
    alleles: dict          # name -> G lists of N alleles
    pool: dict             # TinyGPT name -> G_pool lists of N_max alleles (the G/N study)
    scores: dict           # name -> {task: accuracy}
    seconds: dict          # stage -> seconds

    def table(self) -> nei.AlleleTable:
        return nei.AlleleTable.from_alleles({n: self.alleles[n] for n in self.names})

    def true_tree(self) -> trees.Tree:
        return trees.parse_newick(self.newick)


def model_seed(seed: int, name: str, coupled: bool = False) -> int:
    """The sampling seed of a model. Default: one seed per model, so that every model's draws
    are independent, as the paper's separate API calls are (the estimator every finding uses).
    ``coupled=True``: the same seed for every model, so that draw k of gene g uses the same
    random numbers in every model (common random numbers: two identical models then give
    identical alleles); a labelled variance-reduction variant, never the source of a finding."""
    if coupled:
        return int(seed)
    return int(hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:8], 16)


def zoo_folder(cfg: ZooConfig, profile: str) -> Path:
    """``runs/12-phylolm/zoo-<profile>-<config key>-<code digest>/``: keyed by the config and by
    the code that builds the zoo (this module and everything it imports,
    :func:`iclr25.paths.artifact_path`), so a zoo built by older code is rebuilt."""
    return paths.artifact_path(paths.runs_dir() / "12-phylolm", f"zoo-{profile}", cfg.key(),
                               [__name__])


def build_zoo(cfg: ZooConfig, profile: str, *, rebuild: bool = False) -> Zoo:
    """Build (or load) the zoo of ``cfg``. Introduced in chapter 12 (notebook 01).

    TinyGPT families are trained and edited (:func:`zoo.train_tiny_family`); each TinyGPT
    samples the G/N pool (``G_pool`` genes x ``N_max`` probes), whose first ``G`` genes and
    first ``N`` probes are its alleles; the LLMs (book profile) sample ``G`` x ``N``. Every
    model is scored on :func:`zoo.make_tasks`.
    """
    folder = zoo_folder(cfg, profile)
    target = folder / "zoo.json"
    if target.is_file() and not rebuild:
        return Zoo(**json.loads(target.read_text()))
    t0 = time.perf_counter()
    seconds = {}
    texts = zoo.heldout_texts()
    pool_genes = sampling.make_genes(texts, cfg.G_pool, min_chars=20, max_chars=48, seed=cfg.seed)
    genes = pool_genes[:cfg.G]
    tasks = zoo.make_tasks(cfg.n_items, seed=cfg.seed)
    members, alleles, pool, scores = [], {}, {}, {}
    for fam in zoo.FAMILIES[:cfg.n_families]:
        fam_models = zoo.train_tiny_family(fam, cfg.edits, n_steps=cfg.n_steps,
                                           batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed)
        for zm in fam_models:
            al = sampling.sample_alleles(zm.model, pool_genes, N=cfg.N_max,
                                         max_new_tokens=cfg.max_new_tokens, n_chars=cfg.n_chars,
                                         temperature=cfg.temperature,
                                         seed=model_seed(cfg.seed, zm.name, cfg.coupled), gene_batch=16,
                                         desc=zm.name)
            pool[zm.name] = al
            alleles[zm.name] = [row[:cfg.N] for row in al[:cfg.G]]
            scores[zm.name] = zoo.score_tasks(zm, tasks)
            members.append(zm)
    seconds["tiny"] = time.perf_counter() - t0
    llms = []
    if cfg.llm:
        llms.append(("smollm2-135m-instruct", cfg.llm_edits, "smollm2"))
    if cfg.gemma:
        llms.append(("gemma-3-270m", (), "gemma3"))
    for name, edits, fam in llms:
        t1 = time.perf_counter()
        for zm in zoo.llm_family(name, edits, seed=cfg.seed, family=fam):
            alleles[zm.name] = sampling.sample_alleles(
                zm.model, genes, N=cfg.N, max_new_tokens=cfg.max_new_tokens,
                n_chars=cfg.n_chars, temperature=cfg.temperature,
                seed=model_seed(cfg.seed, zm.name, cfg.coupled),
                tokenizer=zm.tokenizer, gene_batch=8, desc=zm.name)
            scores[zm.name] = zoo.score_tasks(zm, tasks)
            members.append(zoo.ZooModel(zm.name, zm.family, zm.edit, zm.parent))
            del zm
        seconds[fam] = time.perf_counter() - t1
    out = Zoo(config=asdict(cfg), names=[m.name for m in members],
              families=[m.family for m in members], edits=[m.edit for m in members],
              parents=[m.parent for m in members], newick=zoo.genealogy(members), genes=genes,
              alleles=alleles, pool=pool, scores=scores, seconds=seconds)
    folder.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(asdict(out)))
    return out


def family_contrast(S: np.ndarray, families) -> dict[str, tuple[float, float]]:
    """Per family: (mean similarity within the family, mean similarity to other families'
    models), off-diagonal pairs only. Families of one model are left out."""
    fam = np.asarray(families)
    out = {}
    for f in dict.fromkeys(families):
        idx = np.flatnonzero(fam == f)
        if len(idx) < 2:
            continue
        within = S[np.ix_(idx, idx)][~np.eye(len(idx), dtype=bool)].mean()
        between = S[np.ix_(idx, np.flatnonzero(fam != f))].mean()
        out[f] = (float(within), float(between))
    return out


def edit_offsets(D: np.ndarray, zoo_: Zoo) -> list[dict]:
    """For every model with a parent (and every seed-sibling): its Nei distance to its
    family's root, with the edit that made it (how far each edit moves a child)."""
    idx = {n: k for k, n in enumerate(zoo_.names)}
    rows = []
    for n, f, e, p in zip(zoo_.names, zoo_.families, zoo_.edits, zoo_.parents):
        root = f"{f}/root"
        if n == root or root not in idx:
            continue
        rows.append({"model": n, "family": f, "edit": e, "distance_to_root": float(D[idx[n], idx[root]])})
    return rows


def gn_study(pool: dict, Gs, Ns, *, n_stacks: int | None = None, eps: float = 1e-10) -> list[dict]:
    """The G/N study (the paper's Fig. 2) on alleles sampled with ``G_pool`` genes and ``N_max``
    probes: the second half of the genes at all probes gives the reference matrix (the
    "oracle"); for each (G, N), matrices from disjoint stacks of G genes of the first half, first
    N probes each, give the mean absolute error against the oracle and the spread (std) across
    stacks, over off-diagonal entries of D. Introduced in chapter 12."""
    names = list(pool)
    G_pool = len(pool[names[0]])
    half = G_pool // 2
    ref = nei.nei_distance(nei.nei_similarity(nei.AlleleTable.from_alleles(
        {n: pool[n][half:2 * half] for n in names})), eps)
    off = ~np.eye(len(names), dtype=bool)
    rows = []
    for G in Gs:
        if G > half:
            raise ValueError(f"G={G} exceeds half the pool ({half} genes)")
        k = half // G if n_stacks is None else min(n_stacks, half // G)
        for N in Ns:
            mats = []
            for s in range(k):
                tab = nei.AlleleTable.from_alleles(
                    {n: [row[:N] for row in pool[n][s * G:(s + 1) * G]] for n in names})
                mats.append(nei.nei_distance(nei.nei_similarity(tab), eps))
            mats = np.stack(mats)
            rows.append({"G": G, "N": N, "stacks": k,
                         "oracle_error": float(np.abs(mats - ref)[:, off].mean()),
                         "spread": float(mats.std(axis=0)[off].mean()) if k > 1 else float("nan")})
    return rows

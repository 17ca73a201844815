"""A scaling grid beyond the book's budget, run once and shipped with the book (chapter 06).

The book profile of ``03-scaling-laws`` trains dictionaries up to n = 4096 within its 5-minute
budget. The paper's law needs a wider span of n, so this module trains a larger grid (n up to
16384, more k, more steps) once, with the same recipe and data pipeline as the notebook, and
writes the held-out NMSE of every (n, k) with its learning curve to a JSON file that the book
ships (:data:`SHIPPED`). The notebook reads it with :func:`load` and fits the joint law to it.

Regenerate it (about 40 minutes on 2 CPU cores; the file records the settings, the code version,
the commit and the wall time)::

    python -m iclr25.topk_sae.cached_grid --ns 512 1024 2048 4096 8192 16384 --ks 8 16 32 64 \\
        --n-tokens 150000 --n-steps 140

:func:`code_version` hashes the modules the numbers depend on; the notebook records whether the
shipped file was made by the current code (:attr:`CachedGrid.current`): the same hash, or a hash
that :data:`EQUIVALENT` pairs with the file's after a reviewed change that does not touch what the
grid computes (a test rebuilds both versions from git history and checks that they differ in the
named functions only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

__all__ = ["SHIPPED", "CachedGrid", "EQUIVALENT", "code_version", "provenance", "run", "write",
           "load", "main"]

#: The shipped grid, relative to the book's root.
SHIPPED = "results/06-topk-sae/shipped/scaling-grid.json"

_FORMAT = 1
#: Modules whose code determines the grid's numbers.
_CODE = ("acts.py", "model.py", "train.py", "metrics.py", "kernels.py")
_GRID_COLUMNS = ("n_latents", "k", "nmse", "tokens", "gain_last_doubling")
_CURVE_COLUMNS = ("n_latents", "k", "step", "tokens", "nmse")

#: Reviewed changes of the hashed code that leave what a grid computes unchanged. Key: the
#: ``code_version`` a shipped file records; value: ``(installed code_version, commit the grid was
#: made at, commit of the installed version, the functions that differ, what changed)``.
#: ``tests/topk_sae/test_cached_grid.py`` rebuilds both versions from git history and checks
#: that their hashes are these and that the modules differ in the named functions only.
EQUIVALENT = {
    "96b3d7f61409cf4d": (
        "0976528fe5244fd8", "7ce13408ea79ac6736a59eac25b41ca03f007243", "fb2a0a6",
        ("acts.py:default_cache_folder",),
        "fb2a0a6 names the activation cache's folder after the code that fills it "
        "(paths.artifact_path): where activations are cached, not what they are"),
}


@dataclass
class CachedGrid:
    """A shipped grid: ``grid`` (one row per (n, k): ``nmse``, ``tokens``,
    ``gain_last_doubling``, ...), ``curves`` (held-out NMSE at each checkpoint), ``meta`` (the
    config, ``code_version``, ``commit``, ``created``, ``elapsed_s``, ``machine``), ``path``."""

    grid: pd.DataFrame
    curves: pd.DataFrame
    meta: dict
    path: Path

    @property
    def current(self) -> bool:
        """Whether the file was made by the code now installed: the same :func:`code_version`,
        or one :data:`EQUIVALENT` pairs with the file's (see :func:`provenance`)."""
        return provenance(self.meta.get("code_version")) != "changed"


def _function_source(text: str, name: str) -> str:
    """The source lines of the top-level function ``name`` in module text ``text``."""
    import ast

    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            lines = text.splitlines(keepends=True)
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "".join(lines[first - 1:node.end_lineno])
    raise ValueError(f"no top-level function {name!r} in the given source")


def code_version(sources: dict | None = None) -> str:
    """Short sha256 of the code the grid's numbers depend on: the modules of activations, model,
    training, metrics and kernels, and the source of :func:`~.scaling.run_grid` (not the rest of
    :mod:`.scaling`, whose law fitting reads the grid but does not make it).

    ``sources``: {file name: module text} for ``_CODE`` and ``scaling.py`` to hash instead of the
    installed files (e.g. a past commit's, read from git)."""
    import inspect

    from .scaling import run_grid

    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in _CODE:
        h.update(name.encode())
        h.update(sources[name].encode() if sources else (here / name).read_bytes())
    h.update((_function_source(sources["scaling.py"], "run_grid") if sources
              else inspect.getsource(run_grid)).encode())
    return h.hexdigest()[:16]


def provenance(version: str | None) -> str:
    """How a grid made by code ``version`` relates to the installed code: ``"same code"``,
    ``"equivalent: <what changed>"`` (:data:`EQUIVALENT`) or ``"changed"`` (regenerate it)."""
    now = code_version()
    if version == now:
        return "same code"
    eq = EQUIVALENT.get(version)
    if eq is not None and eq[0] == now:
        return f"equivalent: {eq[4]}"
    return "changed"


def _commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def run(ns, ks, *, profile: str = "book", n_tokens: int | None = None, n_steps: int | None = None,
        seed: int = 0, out: str | Path | None = None) -> Path:
    """Train the grid ``ns`` x ``ks`` with ``03-scaling-laws``'s pipeline at ``profile``
    (overridden by ``n_tokens``/``n_steps``) and write it to ``out`` (default: :data:`SHIPPED`
    under the book's root). Returns the path written."""
    import numpy as np
    import torch

    from .. import lm, paths
    from . import acts as A
    from .configs import scaling
    from .scaling import run_grid
    from .train import activation_scale

    ns, ks = tuple(sorted(int(n) for n in ns)), tuple(sorted(int(k) for k in ks))
    if len(ns) < 2 or len(ks) < 2:
        raise ValueError(f"the joint law needs at least two n and two k; got ns={ns}, ks={ks}")
    bad = [k for k in ks if k >= min(ns)]
    if bad:
        raise ValueError(f"every k must be below the smallest n ({min(ns)}); got k={bad}")
    cfg = scaling(profile, seed=seed, ns=ns, ks=ks, n_tokens=n_tokens, n_steps=n_steps)
    torch.manual_seed(cfg.seed)
    t0 = time.perf_counter()
    model, tok = lm.load()
    train = A.collect_activations(A.ActsSpec(cfg.n_tokens, cfg.layer, cfg.ctx, cfg.seed, "train"),
                                  model=model, tokenizer=tok)
    held = A.collect_activations(A.ActsSpec(cfg.n_eval, cfg.layer, cfg.ctx, cfg.seed, "val"),
                                 model=model, tokenizer=tok)
    max_norm = A.outlier_threshold(train.acts, cfg.outlier_factor)
    rows_tr = A.training_rows(train.acts, max_norm)
    rows_ev = A.training_rows(held.acts, max_norm)
    scale = activation_scale(A.Rows(train.acts, rows_tr)[: min(len(rows_tr), 20000)])
    grid, curves, _ = run_grid(A.Rows(train.acts, rows_tr, scale), A.Rows(held.acts, rows_ev, scale), cfg)
    root = paths.repo_root()
    meta = {"format": _FORMAT, "config": {k: list(v) if isinstance(v, tuple) else v
                                          for k, v in asdict(cfg).items()},
            "profile": profile, "code_version": code_version(), "commit": _commit(root),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "elapsed_s": round(time.perf_counter() - t0, 1),
            "machine": {"platform": platform.platform(), "torch_threads": torch.get_num_threads(),
                        "torch": torch.__version__},
            "distinct_training_activations": int(len(rows_tr)), "max_norm": max_norm, "scale": scale}
    return write(Path(out) if out is not None else root / SHIPPED, meta, grid, curves)


def write(path: str | Path, meta: dict, grid: pd.DataFrame, curves: pd.DataFrame) -> Path:
    """Write ``meta`` with the frames ``grid`` and ``curves`` as JSON (NaN as null); returns
    the path. :func:`load` reads it back."""
    import numpy as np

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = lambda df: json.loads(df.replace({np.nan: None}).to_json(orient="records"))
    path.write_text(json.dumps({"format": _FORMAT, **meta, "grid": clean(grid),
                                "curves": clean(curves)}, indent=1) + "\n")
    return path


def load(path: str | Path | None = None) -> CachedGrid:
    """Read a grid written by :func:`run` (default: the shipped :data:`SHIPPED`)."""
    if path is None:
        from .. import paths
        path = paths.repo_root() / SHIPPED
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no cached scaling grid at {path}; the book ships one at {SHIPPED}. Regenerate it with "
            "`python -m iclr25.topk_sae.cached_grid` (see its --help; about 40 minutes on 2 cores)")
    data = json.loads(path.read_text())
    if data.get("format") != _FORMAT:
        raise ValueError(f"{path}: format {data.get('format')!r}, expected {_FORMAT}")
    grid, curves = pd.DataFrame(data.pop("grid")), pd.DataFrame(data.pop("curves"))
    for name, df, cols in (("grid", grid, _GRID_COLUMNS), ("curves", curves, _CURVE_COLUMNS)):
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"{path}: the {name} lacks column(s) {missing}")
    return CachedGrid(grid, curves, data, path)


def main(argv=None) -> Path:
    """Command line: ``python -m iclr25.topk_sae.cached_grid --ns ... --ks ...``."""
    p = argparse.ArgumentParser(prog="python -m iclr25.topk_sae.cached_grid",
                                description="Train a TopK SAE scaling grid and write it as JSON.")
    p.add_argument("--ns", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    p.add_argument("--ks", type=int, nargs="+", default=[8, 16, 32, 64])
    p.add_argument("--profile", default="book", help="base settings (smoke | book | paper)")
    p.add_argument("--n-tokens", type=int, default=150_000)
    p.add_argument("--n-steps", type=int, default=140, help="steps of the smallest dictionary")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help=f"output file (default: <root>/{SHIPPED})")
    a = p.parse_args(argv)
    path = run(a.ns, a.ks, profile=a.profile, n_tokens=a.n_tokens, n_steps=a.n_steps,
               seed=a.seed, out=a.out)
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()

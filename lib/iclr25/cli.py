"""``iclr25``: run the book's notebooks at any scale, sweep them, list them, score them.

::

    iclr25 list [CHAPTER]
    iclr25 run 18-relu-landscape/01-saddle-to-saddle --profile smoke -p seed=3 -p lr=1e-3
    iclr25 sweep 18-relu-landscape/01-saddle-to-saddle --grid seed=0,1,2 --grid lr=1e-3,2e-3
    iclr25 sweep ... --scheduler tcp://HOST:8786        # on a Dask cluster
    iclr25 scorecard [--results DIR] [--format text|markdown|csv]
    iclr25 check-results                  # is every committed book result current? (make test)
    iclr25 refresh-results [NOTEBOOK...]  # re-run stale notebooks at the book profile into results/
    iclr25 verify-results [--budget S]    # CI: re-run some book notebooks, compare with results/
    iclr25 reproduce [NOTEBOOK...]        # re-run in an empty cache/HOME, as a fresh clone would
    iclr25 robustness [CHAPTER...] --seeds 0,1,2 --profile smoke   # per finding: held in k of n seeds

Also ``python -m iclr25 ...``. The work is done by :mod:`iclr25.batch` and :mod:`iclr25.scorecard`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Sequence

from . import __version__, paths, profiles
from .reproduce import FACTOR, FLOOR_S

FACTOR_TEXT = f"{FACTOR:g} x the notebook's recorded time (at least {FLOOR_S:.0f} s)"

__all__ = ["main", "build_parser"]

EXAMPLES_RUN = """\
examples:
  iclr25 run 18-relu-landscape/01-saddle-to-saddle --profile smoke
  iclr25 run 18-relu-landscape/01-saddle-to-saddle --profile paper -p seed=3 -p lr=1e-3
  iclr25 run path/to/any.ipynb -p name="'a string'"

The executed notebook, the claims it saved and run.json go to ./runs/<timestamp>-<notebook>/,
under the current directory (runs/ is $ICLR25_RUNS_DIR if set; --out DIR names the folder).
Values are checked before anything runs: each has the type of the parameter's default (for
None, the chapter's config field) and is one of the chapter's choices where it has them.
Exit status: 0 if the notebook ran to the end, 1 if it raised (a failed check raises;
a finding's verdict never does), 2 for a usage error (an unknown notebook, parameter, value or profile).
"""

EXAMPLES_SWEEP = """\
examples:
  iclr25 sweep 18-relu-landscape/01-saddle-to-saddle --grid seed=0,1,2 --grid lr=1e-3,2e-3
  iclr25 sweep 18-relu-landscape/01-saddle-to-saddle --profile paper --grid seed=0,1,2,3 \\
      --scheduler tcp://10.0.0.5:8786

Each point runs in ./runs/<timestamp>-sweep-<notebook>/<i>-seed=0-lr=0.001/ (under the current
directory, or $ICLR25_RUNS_DIR); the table of all runs (grid values, ok, duration, metrics,
each claim's holds) is printed and saved as sweep.csv there. Every point's values are checked
before any runs. Dask workers must import iclr25 and see the repository and the sweep folder
at the same paths.
Exit status: 0 if every run ran to the end, 1 if any raised, 2 for a usage error.
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iclr25", formatter_class=_Formatter,
        description="Run the notebooks of the iclr25 book at a profile (smoke, book, paper),\n"
                    "sweep them over parameter grids locally or on a Dask cluster, and print\n"
                    "the scorecard of the papers' claims.",
        epilog="Run 'iclr25 COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"iclr25 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    nb_help = ("a notebook: CHAPTER/NOTEBOOK under notebooks/ (e.g. 18-relu-landscape/"
               "01-saddle-to-saddle, .ipynb optional) or a path to a .ipynb")
    prof_help = (f"one of {', '.join(profiles.PROFILES)} (default: ${profiles.ENV_VAR}, "
                 f"else {profiles.DEFAULT_PROFILE})")
    param_help = ("set a parameter of the notebook's parameters cell; VALUE is a Python literal "
                  "(3, 1e-3, True, 'abc') or else taken as a string; repeatable")

    p = sub.add_parser("run", help="execute one notebook with a profile and parameters",
                       description="Execute one notebook with papermill at a profile, with "
                                   "parameters,\ninto its own run folder.",
                       epilog=EXAMPLES_RUN, formatter_class=_Formatter)
    p.add_argument("notebook", metavar="NOTEBOOK", help=nb_help)
    p.add_argument("--profile", help=prof_help)
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help=param_help)
    p.add_argument("--out", metavar="DIR",
                   help="the run folder (default: a new ./runs/<timestamp>-<notebook>/ under the "
                        "current directory, or under $ICLR25_RUNS_DIR)")
    p.add_argument("--kernel", metavar="NAME", help="Jupyter kernel (default: the notebook's, else python3)")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="time limit per cell (default: none)")

    s = sub.add_parser("sweep", help="run a notebook over a grid of parameters (local or Dask)",
                       description="Run a notebook at every point of the cartesian product of "
                                   "the grids,\nin parallel, and tabulate the runs.",
                       epilog=EXAMPLES_SWEEP, formatter_class=_Formatter)
    s.add_argument("notebook", metavar="NOTEBOOK", help=nb_help)
    s.add_argument("--grid", action="append", default=[], required=True, metavar="NAME=V1,V2,...",
                   help="values of one parameter (Python literals, comma-separated); repeatable, "
                        "the runs are the cartesian product")
    s.add_argument("--profile", help=prof_help)
    s.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter fixed for every run; " + param_help.split("; ", 1)[1])
    s.add_argument("--workers", type=int, metavar="N",
                   help="local processes (default: min(runs, CPUs)); ignored with --scheduler")
    s.add_argument("--scheduler", metavar="ADDRESS",
                   help="a Dask scheduler, e.g. tcp://HOST:8786: run there instead of locally")
    s.add_argument("--out", metavar="DIR",
                   help="the sweep folder (default: a new ./runs/<timestamp>-sweep-<notebook>/ "
                        "under the current directory, or under $ICLR25_RUNS_DIR)")
    s.add_argument("--kernel", metavar="NAME", help="Jupyter kernel (default: the notebook's, else python3)")
    s.add_argument("--timeout", type=float, metavar="SECONDS", help="time limit per cell (default: none)")

    ls = sub.add_parser("list", help="list chapters, notebooks and their parameters",
                        formatter_class=_Formatter,
                        description="List the chapters under notebooks/, their notebooks, and\n"
                                    "each notebook's parameters with defaults and comments.")
    ls.add_argument("chapter", nargs="?", metavar="CHAPTER",
                    help="only this chapter (its name or number: 18-relu-landscape, 18)")

    sc = sub.add_parser("scorecard", help="the papers' registered claims by verdict",
                        description="Print, per chapter, its registered findings (book/claims/) by "
                                    "verdict:\nreproduced, not reproduced, inconclusive, out of reach, "
                                    "not yet judged;\nthen each claim: paper vs ours (effect and "
                                    "interval), control, verdict, note.",
                        formatter_class=_Formatter)
    sc.add_argument("--results", metavar="DIR",
                    help="results folder (default: results/, or $ICLR25_RESULTS_DIR); a run "
                         "folder under runs/ works too")
    sc.add_argument("--format", choices=["text", "markdown", "csv"], default="text",
                    help="output format (default: text)")
    sc.add_argument("--update-readme", action="store_true",
                    help="instead: rewrite the README's results table from the committed results/")

    ck = sub.add_parser("check-results", help="is every committed book-profile result current?",
                        formatter_class=_Formatter,
                        description="Check the results ledger (results/<chapter>/<notebook>.json, "
                                    "committed):\nevery notebook of the book has a book-profile "
                                    "result whose input hashes\n(the notebook, every iclr25 module "
                                    "it imports, constraints.txt) match\nthe working tree, whose registry "
                                    "entries are unchanged and whose checks held;\nthat every "
                                    "registry change is an amendment; that robustness records are "
                                    "current.\nExit 1 naming each notebook that is not, with the "
                                    "command that refreshes it.")
    ck.add_argument("--results", metavar="DIR", help="the ledger (default: results/)")

    rf = sub.add_parser("refresh-results", help="re-run notebooks at the book profile into results/",
                        formatter_class=_Formatter,
                        description="Execute notebooks at the book profile (papermill, one run "
                                    "folder each under\nruns/) and copy the result each saved "
                                    "into the ledger results/.\nWith no NOTEBOOK: every notebook "
                                    "that check-results names.")
    rf.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help=nb_help)
    rf.add_argument("--results", metavar="DIR", help="the ledger (default: results/)")
    rf.add_argument("--timeout", type=float, metavar="SECONDS", help="time limit per cell")

    vr = sub.add_parser("verify-results", help="CI: re-run book notebooks, compare with the ledger",
                        formatter_class=_Formatter,
                        description="Re-execute at the book profile the notebooks whose committed "
                                    "results the last\ncommit touching results/ changed (none: two "
                                    "by a rotation over the date),\nwithin a time budget, and "
                                    "compare each with its committed result: a claim\nthat held "
                                    "must still hold, a number with a stated tol must stay within "
                                    "it.")
    vr.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                    help="these notebooks instead of the automatic pick")
    vr.add_argument("--budget", type=float, default=900.0, metavar="SECONDS",
                    help="book-profile run time to spend, by the durations the ledger recorded "
                         "(default: 900)")
    vr.add_argument("--results", metavar="DIR", help="the ledger (default: results/)")
    vr.add_argument("--warm", action="store_true",
                    help="use this machine's caches (~/.cache/iclr25, runs/) instead of an empty "
                         "HOME, cache and runs folder (the default: what a fresh clone gets)")

    rp = sub.add_parser("reproduce", help="re-run notebooks as a fresh clone would; diff with results/",
                        formatter_class=_Formatter,
                        description="Execute notebooks at the book profile in a fresh environment "
                                    "(an empty HOME,\n$ICLR25_CACHE and $ICLR25_RUNS_DIR, shared by "
                                    "the notebooks of this run, in the\nbook's order) and print, "
                                    "per notebook, the verdicts that moved and the numbers\nbeyond "
                                    "their tolerance against the committed results; numbers without "
                                    "a\ntolerance that moved are listed too. A cell may run "
                                    f"{FACTOR_TEXT}; a time-out\nre-runs the notebook once. Exit 1 "
                                    "when a notebook failed, a verdict moved or a\nnumber left its "
                                    "tolerance (with --strict: also a number without one).")
    rp.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                    help="notebooks or chapters (18-relu-landscape, 18); default: the whole book")
    rp.add_argument("--results", metavar="DIR", help="the committed ledger (default: results/)")
    rp.add_argument("--env", metavar="DIR", help="the fresh environment's folder (default: a new "
                                                 "one under the run folder; reuse one to share "
                                                 "what earlier notebooks built)")
    rp.add_argument("--update", action="store_true",
                    help="copy each re-run's result into the ledger (re-commit from a fresh clone)")
    rp.add_argument("--strict", action="store_true",
                    help="also fail when a number without a tol moved")
    rp.add_argument("--floor", type=float, default=FLOOR_S, metavar="SECONDS",
                    help=f"a cell may always run this long (default: {FLOOR_S:.0f}; raise it when "
                         "the committed times were measured with warm caches)")

    rb = sub.add_parser("robustness", help="run notebooks over seeds: per finding, held in k of n",
                        formatter_class=_Formatter,
                        description="Run every notebook of the chapters (default: the whole book) "
                                    "over the seeds, through\nthe sweep (local processes or Dask), "
                                    "and write per notebook, per claim, in\nhow many seeds it held "
                                    "to results/robustness/<chapter>/<notebook>.json\n(the "
                                    "scorecard page shows it beside each finding).")
    rb.add_argument("chapters", nargs="*", metavar="CHAPTER",
                    help="chapters by name or number (18-relu-landscape, 18), or single notebooks "
                         "(18-relu-landscape/01-saddle-to-saddle); default: the whole book")
    rb.add_argument("--seeds", default="0,1,2", metavar="S1,S2,...",
                    help="the seeds (default: 0,1,2)")
    rb.add_argument("--profile", default="smoke",
                    help=f"one of {', '.join(profiles.PROFILES)} (default: smoke)")
    rb.add_argument("--workers", type=int, metavar="N", help="local processes per sweep (default: min(seeds, CPUs))")
    rb.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler, e.g. tcp://HOST:8786")
    rb.add_argument("--results", metavar="DIR", help="where results/robustness/ goes (default: results/)")
    return parser


def _error(msg: str) -> int:
    print(f"iclr25: error: {msg}", file=sys.stderr)
    return 2


def _rel(path: Path | str) -> str:
    """``path`` relative to the working directory when it is below it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _print_run(res) -> None:
    status = "ok" if res.ok else "FAILED"
    params = ", ".join(f"{k}={v!r}" for k, v in res.parameters.items())
    print(f"{status}: {res.notebook} (profile {res.profile}{', ' + params if params else ''}) "
          f"in {res.duration_s:.1f} s")
    print(f"  run folder:      {_rel(res.out_dir)}")
    print(f"  output notebook: {_rel(res.output_notebook)}")
    if res.claims:
        print(f"  claims held:     {res.held}/{res.recorded}")
    else:
        print("  claims:          none saved")
    failed = res.failed_claims
    if failed:
        print("  failed claims (a check is a bug):")
        for c in failed:
            print(f"    - {c['claim']} ({c.get('source', '')}): paper {c.get('paper')}, ours {c.get('ours')}")
    if res.error:
        print("  error: " + res.error.strip().replace("\n", "\n    "))


def _cmd_run(args) -> int:
    from . import batch

    try:
        params = batch.parse_assignments(args.param)
        res = batch.run_notebook(args.notebook, profile=args.profile, parameters=params,
                                 out_dir=args.out, progress=_progress(), kernel=args.kernel,
                                 timeout=args.timeout)
    except (ValueError, FileNotFoundError) as e:  # ProfileError is a ValueError
        return _error(str(e))
    _print_run(res)
    return 0 if res.ok else 1


def _progress() -> bool:
    from .progress import enabled

    return enabled()


def _cmd_sweep(args) -> int:
    import pandas as pd

    from . import batch

    try:
        grid = batch.parse_grid(args.grid)
        params = batch.parse_assignments(args.param)
        overlap = sorted(set(grid) & set(params))
        if overlap:
            return _error(f"{', '.join(overlap)} given both with --grid and -p")
        if args.workers is not None and args.workers < 1:
            return _error("--workers must be at least 1")
        n = len(batch.grid_points(grid))
        where = f"Dask at {args.scheduler}" if args.scheduler else \
            f"{args.workers or min(n, os.cpu_count() or 1)} local process(es)"
        print(f"sweep: {n} run(s) of {args.notebook} on {where}", flush=True)
        table = batch.sweep(args.notebook, grid, profile=args.profile, parameters=params,
                            workers=args.workers, scheduler=args.scheduler, out_dir=args.out,
                            progress=_progress(), kernel=args.kernel, timeout=args.timeout)
    except (ValueError, FileNotFoundError) as e:
        return _error(str(e))
    shown = table.drop(columns=["run"])
    shown["error"] = [_first_line(e, 48) for e in shown["error"]]
    with pd.option_context("display.max_columns", None, "display.width", 250):
        print(shown.to_string(index=False))
    out = Path(table.attrs["out_dir"])
    n_ok = int(table["ok"].sum())
    print(f"{n_ok}/{len(table)} run(s) ok; table: {_rel(out / batch.SWEEP_TABLE)}; "
          f"runs: {_rel(out)}/")
    return 0 if n_ok == len(table) else 1


def _first_line(text, width: int) -> str:
    line = str(text or "").strip().splitlines()[0] if str(text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _cmd_list(args) -> int:
    from . import batch

    try:
        listing = batch.list_notebooks(args.chapter)
    except FileNotFoundError as e:
        return _error(str(e))
    if not listing:
        print(f"no chapters in {_rel(paths.notebooks_dir())}")
        return 0
    for chapter, notebooks in listing.items():
        print(chapter)
        if not notebooks:
            print("  (no notebooks yet)")
        for name, params in notebooks.items():
            print(f"  {chapter}/{name}")
            if "error" in params and len(params) == 1:
                print(f"      cannot read its parameters: {params['error']['default']}")
                continue
            if not params:
                print("      (no cell tagged 'parameters')")
                continue
            width = max(len(f"{p['name']} = {p['default']}") for p in params.values())
            for p in params.values():
                line = f"{p['name']} = {p['default']}"
                if p.get("help"):
                    line = f"{line:<{width}}  # {p['help']}"
                print(f"      {line}")
    return 0


def _readme_problem(folder: Path) -> str | None:
    """Why the README's results table does not match the ledger, or None."""
    from . import claims, scorecard

    readme = paths.repo_root() / "README.md"
    if not readme.is_file():
        return None
    text = readme.read_text()
    try:
        want = scorecard.update_readme(text, claims.load_results(folder) if folder.is_dir() else [])
    except ValueError as e:
        return str(e)
    return None if want == text else "README.md: its results table does not match results/"


def _cmd_scorecard(args) -> int:
    from . import claims, scorecard

    if args.update_readme:
        folder = Path(args.results) if args.results else paths.repo_root() / "results"
        readme = paths.repo_root() / "README.md"
        readme.write_text(scorecard.update_readme(readme.read_text(), claims.load_results(folder)))
        print(f"updated the results table of {_rel(readme)} from {_rel(folder)}")
        return 0
    folder = Path(args.results) if args.results else paths.results_dir()
    try:
        results = claims.load_results(folder) if folder.is_dir() else []
    except ValueError as e:
        return _error(str(e))
    if not results:
        print(f"No results yet in {_rel(folder)}: run a notebook (iclr25 run CHAPTER/NOTEBOOK) "
              "or build the book, and its claims will show up here.")
        return 0
    sys.stdout.write(scorecard.render(results, args.format))
    return 0


def _ledger_dir(args) -> Path:
    return Path(args.results) if args.results else paths.repo_root() / "results"


def _cmd_check_results(args) -> int:
    from . import ledger

    from . import registry

    folder = _ledger_dir(args)
    unamended = registry.check_registries()
    if unamended:
        print(f"claims registries (book/claims/): {len(unamended)} change(s) without an amendment "
              "or a malformed registry:")
        for line in unamended:
            print(f"  - {line}")
    problems = ledger.check(folder)
    n = len(ledger.book_notebooks())
    readme = _readme_problem(folder)
    if readme:
        print(f"results ledger: {readme}; rewrite it with `.venv/bin/iclr25 scorecard --update-readme`")
        if not problems:
            return 1
    if not problems:
        print(f"results ledger: all {n} notebook results in {_rel(folder)} are current "
              f"(profile {ledger.LEDGER_PROFILE})")
        return 1 if unamended else 0
    print(f"results ledger: {len(problems)} of {n} notebook result(s) in {_rel(folder)} "
          "cannot be trusted:")
    for p in problems:
        print(f"  - {p}")
    stale = list(dict.fromkeys(p.notebook for p in problems if p.kind not in ("orphan", "robustness")))
    if stale:
        print("refresh them (book profile; commit results/ afterwards):\n"
              f"  .venv/bin/iclr25 refresh-results {' '.join(stale)}\n"
              "or `make results` (every notebook named above), or `make book`")
    orphans = [p for p in problems if p.kind == "orphan"]
    if orphans:
        print("remove the results of notebooks that left the book: "
              + " ".join(f"results/{p.notebook}.json" for p in orphans))
    return 1


def _cmd_refresh_results(args) -> int:
    import shutil

    from . import batch, ledger

    folder = _ledger_dir(args)
    if args.notebooks:
        todo = [batch.notebook_id(batch.resolve_notebook(n)) for n in args.notebooks]
    else:
        todo = list(dict.fromkeys(p.notebook for p in ledger.check(folder)
                                  if p.kind not in ("orphan", "robustness")))
    if not todo:
        print("results ledger: nothing to refresh")
        return 0
    parent = batch.new_run_dir("refresh-results")
    bad = 0
    for i, ident in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}] {ident} (profile {ledger.LEDGER_PROFILE}) ...", flush=True)
        res = batch.run_notebook(ident, profile=ledger.LEDGER_PROFILE,
                                 out_dir=parent / ident.replace("/", "-"), timeout=args.timeout)
        _print_run(res)
        chapter, notebook = ident.split("/", 1)
        saved = res.out_dir / chapter / f"{notebook}.json"
        if saved.is_file():
            (folder / chapter).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(saved, folder / chapter / f"{notebook}.json")
            print(f"  ledger: {_rel(folder / chapter / (notebook + '.json'))}")
        else:
            print("  ledger: not updated (the notebook saved no result)")
        bad += not res.ok
    print(f"{len(todo) - bad}/{len(todo)} notebook(s) ran to the end; runs: {_rel(parent)}/")
    _update_readme(folder)
    return 0 if bad == 0 else 1


def _update_readme(folder: Path) -> None:
    """Rewrite the README's results table from the ledger ``folder`` (when it is ``results/``)."""
    readme = paths.repo_root() / "README.md"
    if folder.resolve() == (paths.repo_root() / "results").resolve() and readme.is_file():
        from . import claims, scorecard

        try:
            readme.write_text(scorecard.update_readme(readme.read_text(), claims.load_results(folder)))
            print(f"updated the results table of {_rel(readme)}")
        except ValueError as e:
            print(f"README.md not updated: {e}")


def _cmd_verify_results(args) -> int:
    import json

    from . import batch, ledger, reproduce

    folder = _ledger_dir(args)
    if args.notebooks:
        picked = [batch.notebook_id(batch.resolve_notebook(n)) for n in args.notebooks]
        why = "named on the command line"
    else:
        picked, why = ledger.pick_for_ci(budget_s=args.budget, results_dir=folder)
    print(f"verify-results: re-running {len(picked)} notebook(s) at the book profile ({why}): "
          + ", ".join(picked), flush=True)
    parent = batch.new_run_dir("verify-results")
    env = None if args.warm else reproduce.fresh_environment(parent / "fresh-env")
    if env is not None:
        print(f"verify-results: in a fresh environment (empty HOME, ICLR25_CACHE, ICLR25_RUNS_DIR "
              f"under {_rel(parent / 'fresh-env')}), as a fresh clone runs them", flush=True)
    picked = _book_order(picked)
    failures, skipped, start = 0, [], time.perf_counter()
    for i, ident in enumerate(picked):
        spent = time.perf_counter() - start
        if not args.notebooks and i > 0 and spent > args.budget:
            # the pick went by the recorded (warm-cache) times; a clean clone's caches are cold
            skipped.append(ident)
            print(f"skipped: {ident} (the budget of {args.budget:.0f} s is spent: {spent:.0f} s)")
            continue
        chapter, notebook = ident.split("/", 1)
        committed_file = folder / chapter / f"{notebook}.json"
        if not committed_file.is_file():
            print(f"FAILED: {ident}: no committed result {_rel(committed_file)}")
            failures += 1
            continue
        committed = json.loads(committed_file.read_text())
        out = reproduce.run_fresh(ident, env or {}, parent / ident.replace("/", "-"), committed)
        problems = out.verdicts + out.beyond_tol
        if not out.ok:
            problems.append(f"the re-run raised: {out.error}")
        status = "ok" if not problems else "FAILED"
        print(f"{status}: {ident} in {out.duration_s:.0f} s (committed: {committed.get('elapsed_s')} s)"
              + (f", {out.attempts} attempts (a time-out)" if out.attempts > 1 else ""))
        for p in problems:
            print(f"  - {p}")
        for p in out.untoleranced:
            print(f"  . {p}")
        failures += bool(problems)
    ran = len(picked) - len(skipped)
    print(f"{ran - failures}/{ran} re-run(s) reproduce the committed results"
          + (f" ({len(skipped)} skipped for time)" if skipped else "") + f"; runs: {_rel(parent)}/")
    return 0 if failures == 0 else 1


def _book_order(idents: Sequence[str]) -> list[str]:
    """``idents`` in the book's order (a notebook may read what an earlier one of its chapter
    saved under runs/); those not in the book last."""
    from . import ledger

    order = {n: i for i, n in enumerate(ledger.book_notebooks())}
    return sorted(idents, key=lambda n: order.get(n, len(order)))


def _select(names: Sequence[str]) -> list[str]:
    """Notebooks (``chapter/notebook``) and chapters (``18-relu-landscape``, ``18``) as the book's
    notebooks they name, in the book's order; an unknown name is a ValueError listing chapters."""
    from . import batch, ledger

    book = ledger.book_notebooks()
    if not names:
        return book
    out: list[str] = []
    chapters = sorted({b.split("/")[0] for b in book})
    for name in names:
        name = name.strip().rstrip("/")
        hit = [c for c in chapters if name in (c, c[:2]) or name.lstrip("0") == c[:2].lstrip("0")]
        if "/" not in name and hit:
            out += [b for b in book if b.split("/")[0] == hit[0]]
        else:
            out.append(batch.notebook_id(batch.resolve_notebook(name)))
    return _book_order(dict.fromkeys(out))


def _cmd_reproduce(args) -> int:
    import json
    import shutil

    from . import batch, reproduce

    folder = _ledger_dir(args)
    todo = _select(args.notebooks)
    parent = batch.new_run_dir("reproduce")
    env = reproduce.fresh_environment(args.env or parent / "fresh-env")
    print(f"reproduce: {len(todo)} notebook(s) at the book profile in a fresh environment "
          f"({env['HOME'].rsplit('/', 1)[0]}): empty HOME, ICLR25_CACHE, ICLR25_RUNS_DIR", flush=True)
    outcomes, bad = [], 0
    for i, ident in enumerate(todo, 1):
        chapter, notebook = ident.split("/", 1)
        committed_file = folder / chapter / f"{notebook}.json"
        committed = json.loads(committed_file.read_text()) if committed_file.is_file() else None
        print(f"[{i}/{len(todo)}] {ident} ...", flush=True)
        out = reproduce.run_fresh(ident, env, parent / ident.replace("/", "-"), committed,
                                  floor=args.floor)
        outcomes.append(out)
        failed = not out.reproduced or (args.strict and out.untoleranced) or committed is None
        bad += bool(failed)
        state = ("no committed result" if committed is None else
                 "reproduced" if out.reproduced and not out.untoleranced else
                 "reproduced (verdicts and tolerances; untoleranced numbers moved)"
                 if out.reproduced else "NOT REPRODUCED" if out.ok else "FAILED")
        print(f"  {state} in {out.duration_s:.0f} s (committed: {out.committed_s} s)"
              + (f", {out.attempts} attempts (a time-out)" if out.attempts > 1 else ""), flush=True)
        if out.error:
            print(f"  error: {out.error}")
        for line in out.verdicts + out.beyond_tol:
            print(f"  - {line}")
        for line in out.untoleranced:
            print(f"  . {line}")
        if args.update and out.result_file is not None:
            (folder / chapter).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out.result_file, committed_file)
            print(f"  ledger: {_rel(committed_file)} updated")
    report = parent / "reproduce.json"
    report.write_text(json.dumps([o.to_dict() for o in outcomes], indent=2) + "\n")
    if args.update:
        _update_readme(folder)
    n_ok = sum(o.reproduced for o in outcomes)
    n_exact = sum(o.reproduced and not o.untoleranced for o in outcomes)
    print(f"reproduce: {n_ok}/{len(outcomes)} notebook(s) reproduce the committed verdicts and "
          f"tolerances ({n_exact} with every untoleranced number equal too), "
          f"{sum(o.duration_s for o in outcomes):.0f} s; report: {_rel(report)}")
    return 0 if bad == 0 else 1


def _cmd_robustness(args) -> int:
    from . import batch, ledger, profiles as _profiles, robustness

    try:
        seeds = [batch.parse_value(x) for x in args.seeds.split(",") if x.strip()]
        if not seeds:
            return _error("--seeds needs at least one seed, e.g. --seeds 0,1,2")
        profile = _profiles.resolve(args.profile)
        book = ledger.book_notebooks()
        chapters = sorted({nb.split("/")[0] for nb in book})
        wanted, single = [], []
        for ch in args.chapters:
            if "/" in ch:  # one notebook: CHAPTER/NOTEBOOK
                ident = batch.notebook_id(batch.resolve_notebook(ch))
                if ident not in book:
                    return _error(f"{ch!r} is not a notebook of the book")
                single.append(ident)
                continue
            match = [c for c in chapters if c == ch or c.split("-")[0] == ch.zfill(2)]
            if len(match) != 1:
                return _error(f"{ch!r} is not a chapter of the book; chapters: {', '.join(chapters)}")
            wanted.append(match[0])
        todo = [nb for nb in book if (not wanted and not single) or nb.split("/")[0] in wanted
                or nb in single]
        robustness.run(todo, seeds, profile=profile, workers=args.workers, scheduler=args.scheduler,
                       directory=Path(args.results) if args.results else None, progress=_progress())
    except (ValueError, FileNotFoundError) as e:
        return _error(str(e))
    print(f"robustness: {len(todo)} notebook(s) over seeds {seeds} at {profile}; files under "
          f"{_rel((Path(args.results) if args.results else paths.repo_root() / 'results') / robustness.FOLDER)}/")
    return 0


COMMANDS = {"run": _cmd_run, "sweep": _cmd_sweep, "list": _cmd_list, "scorecard": _cmd_scorecard,
            "check-results": _cmd_check_results, "refresh-results": _cmd_refresh_results,
            "verify-results": _cmd_verify_results, "reproduce": _cmd_reproduce,
            "robustness": _cmd_robustness}


def main(argv: Sequence[str] | None = None) -> int:
    """The ``iclr25`` command; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    try:
        return COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError) as e:  # bad input: a clear message, no traceback
        return _error(str(e))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

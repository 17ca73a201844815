"""Chapter 07 benchmark (Cybench): what the sandbox costs per command, and agent iterations per
minute batched across tasks vs one task at a time, through the core harness (:mod:`iclr25.bench`).

1. ``cybench-exec``: the same list of shell commands (a task's reference solution, run twice)
   through our sandbox (bubblewrap: fresh namespaces, limits, uid nobody as root) vs the peer a user
   would pick instead, ``inspect-ai``'s local sandbox (``LocalSandboxEnvironment.exec``: a plain
   subprocess in a temporary folder, no isolation at all), and vs a plain ``subprocess.run``. The
   outputs must be identical. Ours pays for the isolation, so the ratio is below 1; the chapter's
   target is an absolute one, < 50 ms per command, reported in the record's metrics. The
   ``unshare`` backend is a variant row.
2. ``cybench-agent-batching``: SmolLM2 as the agent on ``k`` tasks for ``n`` iterations: all tasks
   in one batch per iteration (ours) vs each task run on its own (same greedy decoding; the
   episodes' outcomes must be identical). Throughput in agent iterations per second.

``inspect-ai`` is a bench-only peer installed ``--no-deps`` (its declared fsspec pin conflicts
with ours); without it the row is skipped with the reason. ``--quick`` runs tiny sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess

import torch

from iclr25 import bench
import iclr25.cybench as cb


def _exec_comparison(quick: bool) -> dict:
    task = cb.get_task("xor-reused-pad")
    cmds = [c for c in task.solution if not c.startswith("ls")] * (1 if quick else 4)
    files = {k: v for k, v in task.files.items()}
    sb = cb.Sandbox(files, backend="bwrap")
    cmp = bench.Comparison(
        "cybench-exec", "Per-command cost: our sandbox vs inspect-ai's local sandbox vs subprocess",
        "07-cybench", target=None, repeat=3 if quick else 5, warmup=1, unit="cmd",
        settings={"commands": len(cmds), "task": task.name, "limits": str(sb.limits)},
        notes="ours isolates (namespaces, limits); inspect-ai's local sandbox and subprocess do not. "
              "Target: < 50 ms per command (absolute).")

    def ours():
        return [sb.exec(c).output for c in cmds]

    cmp.add("ours (bwrap sandbox)", ours, work=len(cmds),
            what="iclr25.cybench.Sandbox.exec: bwrap namespaces, rlimits, loopback-only network")
    import tempfile, pathlib
    plain_dir = pathlib.Path(tempfile.mkdtemp())
    for k, v in files.items():
        (plain_dir / k).write_bytes(v if isinstance(v, bytes) else v.encode())

    # the same environment as inside the sandbox (the host's PATH may resolve python3 to a shim)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(plain_dir), "LANG": "C.UTF-8"}

    def plain():
        return [subprocess.run(["bash", "-c", c], cwd=plain_dir, capture_output=True,
                               text=True, env=env).stdout for c in cmds]

    cmp.add("plain subprocess", plain, role="baseline", peer=None, work=len(cmds),
            what="subprocess.run(['bash', '-c', cmd]): no isolation")
    try:
        from inspect_ai.util._sandbox.local import LocalSandboxEnvironment
    except ImportError as e:
        cmp.skip("inspect-ai local sandbox", f"inspect-ai is not installed ({e})", peer="inspect-ai")
    else:
        box = LocalSandboxEnvironment()
        d = pathlib.Path(box.directory.name)
        for k, v in files.items():
            (d / k).write_bytes(v if isinstance(v, bytes) else v.encode())

        async def run_all():
            return [(await box.exec(["bash", "-c", c], timeout=30, env=env)).stdout for c in cmds]

        cmp.add("inspect-ai local sandbox", lambda: asyncio.run(run_all()), role="baseline",
                peer="inspect-ai", work=len(cmds),
                what="inspect_ai LocalSandboxEnvironment.exec (async subprocess, no isolation)")
    if cb.available_backends()["unshare"] is None:
        sb2 = cb.Sandbox(files, backend="unshare")
        cmp.add("ours (unshare backend)", lambda: [sb2.exec(c).output for c in cmds],
                role="variant", work=len(cmds), what="unshare + chroot fallback (root only)")

    def differ(a, b):
        return float(sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b)))

    rec = cmp.run(distance=differ)
    ours_row = next(r for r in rec["rows"] if r["role"] == "ours")
    ms = 1e3 * ours_row["median_s"] / len(cmds)
    print(f"ours: {ms:.1f} ms per command (target < 50 ms): {'met' if ms < 50 else 'NOT met'}")
    sb.close()
    return rec


def _batching_comparison(quick: bool, threads: int, k: int | None = None, n: int | None = None,
                         tokens: int | None = None) -> dict:
    from iclr25.chat import LocalBackend
    from iclr25.lm import load

    torch.set_num_threads(threads)
    model, tok = load()
    k0, n0, t0 = (2, 1, 16) if quick else (8, 3, 64)
    k, n, tokens = k or k0, n or n0, tokens or t0
    tasks = list(cb.all_tasks()[:k])
    backend = LocalBackend(model, tok, batch_size=k)

    def agent():
        return cb.LMAgent(backend, scaffold="action_only", max_new_tokens=tokens)

    def batched():
        return [e.record() for e in cb.run_episodes(tasks, agent(), "unguided", max_iters=n)]

    def sequential():
        return [e.record() for t in tasks for e in cb.run_episodes([t], agent(), "unguided",
                                                                   max_iters=n)]

    cmp = bench.Comparison(
        "cybench-agent-batching", "SmolLM2 agent iterations: batched across tasks vs one task at a time",
        "07-cybench", target=1.5, repeat=1 if (quick or k * n > 8) else 2, warmup=0, unit="task",
        settings={"tasks": k, "iterations": n, "max_new_tokens": tokens, "threads": threads,
                  "scaffold": "action_only"})
    cmp.add("ours (batched)", batched, work=k, what="one generate_batch call per iteration")
    cmp.add("sequential", sequential, role="baseline", work=k, what="run_episodes per task")

    def differ(a, b):
        keys = ("task", "success", "commands", "format_errors")
        return float(sum({x: r[x] for x in keys} != {x: s[x] for x in keys} for r, s in zip(a, b)))

    return cmp.run(distance=differ)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check agreement only")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the LM bench")
    ap.add_argument("--only", choices=["exec", "batching"], default=None)
    ap.add_argument("--tasks", type=int, default=None, help="batching: tasks (default 8; quick 2)")
    ap.add_argument("--iters", type=int, default=None, help="batching: iterations (default 3)")
    ap.add_argument("--tokens", type=int, default=None, help="batching: tokens per response")
    args = ap.parse_args(argv)
    if args.only in (None, "exec"):
        _exec_comparison(args.quick)
    if args.only in (None, "batching"):
        _batching_comparison(args.quick, args.threads, args.tasks, args.iters, args.tokens)


if __name__ == "__main__":
    main()

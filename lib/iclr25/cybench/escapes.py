"""Escape attempts against the sandbox, each with the test that says it was stopped
(chapter 07). Used by the unit tests and by ``01-tasks-and-sandbox``.

Network isolation is checked without sending a packet anywhere: the sandbox's interfaces and
routing tables are read from ``/proc/net`` (only ``lo``; no IPv4 route; IPv6 routes only on ``lo``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from .sandbox import ExecResult, Limits, Sandbox

__all__ = ["ESCAPE_LIMITS", "Attempt", "attempts", "run_escapes", "wait_reaped"]


def wait_reaped(uid: int, timeout: float = 10.0) -> int:
    """Wait until no process of ``uid`` is left (a fork bomb's children die with their PID
    namespace and count against ``RLIMIT_NPROC`` until reaped; :meth:`Sandbox.exec` returns once
    they are, so this returns at once unless another sandbox runs); returns how many remain.
    Only meaningful for the sandbox user (nobody when running as root)."""
    if uid == os.getuid():
        return 0
    deadline = time.perf_counter() + timeout
    while True:
        n = 0
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    n += os.stat(f"/proc/{d}").st_uid == uid
                except OSError:
                    pass
        if n == 0 or time.perf_counter() > deadline:
            return n
        time.sleep(0.05)

#: tight limits so the battery runs in seconds
ESCAPE_LIMITS = Limits(cpu_s=1, memory_mb=512, nproc=128, file_mb=2, output_bytes=4096,
                       wall_s=6, disk_mb=8)


@dataclass(frozen=True)
class Attempt:
    """An escape attempt: ``command`` and ``stopped(result, seconds) -> bool`` (no attempt's
    verdict uses the seconds: they depend on the machine's load)."""

    name: str
    command: str
    stopped: Callable[[ExecResult, float], bool]
    by: str


def _missing(r, _):
    return "No such file" in r.output or "Permission denied" in r.output


def _only_lo(r, _):
    lines = r.output.splitlines()
    try:
        i = lines.index("--routes--")
    except ValueError:
        return False
    ifaces = [l.split(":")[0].strip() for l in lines[2:i]]
    v4 = lines[i + 2:lines.index("--v6--")]
    v6 = lines[lines.index("--v6--") + 1:]
    return ifaces == ["lo"] and v4 == [] and all(l.split()[-1] == "lo" for l in v6 if l.strip())


def attempts(host_path: str | None = None) -> list[Attempt]:
    """The battery; ``host_path``: a host folder the sandbox must not see (default: the current
    working directory, e.g. the repository)."""
    host = host_path or os.getcwd()
    return [
        Attempt("read the host's /etc/passwd", "cat /etc/passwd 2>&1", _missing, "file-system view"),
        Attempt("list the host folder " + host, f"ls {host} 2>&1", _missing, "file-system view"),
        Attempt("read root's home", "ls /root 2>&1", _missing, "file-system view"),
        Attempt("write into /usr", "touch /usr/bin/evil 2>&1",
                lambda r, _: r.returncode != 0, "read-only bind"),
        Attempt("see host processes", "ls /proc | grep -c '^[0-9]'",
                lambda r, _: int((r.output.strip() or "99").split()[0]) < 10, "PID namespace"),
        Attempt("run as root", "id -u",
                lambda r, _: r.output.strip() != "0" or os.geteuid() != 0, "uid nobody"),
        Attempt("reach a network", "cat /proc/net/dev; echo --routes--; cat /proc/net/route; "
                "echo --v6--; cat /proc/net/ipv6_route", _only_lo, "network namespace"),
        # judged by what stopped them, not by how long it took (that depends on the machine's load)
        Attempt("fork bomb", "bomb(){ bomb | bomb & }; bomb; sleep 1; echo done",
                lambda r, _: "Resource temporarily unavailable" in r.output or r.stopped == "wall",
                "process limit"),
        Attempt("busy loop", "while :; do :; done",
                lambda r, _: r.returncode != 0 and r.stopped == "", "CPU-time limit"),
        Attempt("fill the disk", "head -c 100000000 /dev/zero > big 2>&1; ls -l big",
                lambda r, _: "File size limit exceeded" in r.output, "file-size limit"),
        Attempt("eat memory", "python3 -c 'x = bytearray(2000 * 2**20)'",
                lambda r, _: r.returncode != 0 and "MemoryError" in r.output, "memory limit"),
        Attempt("flood the output", "yes", lambda r, _: r.stopped == "output", "output limit"),
        Attempt("never return", "sleep 1000", lambda r, _: r.stopped == "wall", "wall clock"),
    ]


def run_escapes(backend: str = "auto", limits: Limits | None = None,
                host_path: str | None = None) -> pd.DataFrame:
    """Run every attempt in one sandbox; one row each: attempt, stopped (bool), stopped by,
    seconds, and the tail of the output (chapter 07)."""
    rows = []
    with Sandbox({}, limits=limits or ESCAPE_LIMITS, backend=backend) as sb:
        for a in attempts(host_path):
            t0 = time.perf_counter()
            r = sb.exec(a.command)
            s = time.perf_counter() - t0
            wait_reaped(sb.uid)
            rows.append({"attempt": a.name, "stopped": bool(a.stopped(r, s)), "by": a.by,
                         "seconds": round(s, 2), "exit": r.returncode,
                         "output (tail)": r.observation.strip()[-70:].replace("\n", " | ")})
        rows.append({"attempt": "sandbox still works", "stopped": sb.exec("echo ok").output == "ok\n",
                     "by": "-", "seconds": 0.0, "exit": 0, "output (tail)": ""})
    return pd.DataFrame(rows)

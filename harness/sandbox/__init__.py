"""Run untrusted code (model-written programs) in a contained subprocess.

``run_sandboxed(argv, timeout_s=, memory_mb=)`` runs one command and returns a ``SandboxResult``;
``spawn_sandboxed`` starts one with the same containment and hands back the live process (for warm
worker pools that take jobs over stdin/stdout); ``run_python(code)`` is the common case.

Why this is a shared core service: several task families run code a model wrote (HumanEval
completions, Blender scripts) and any future family that
executes model output will too. Isolation is easy to get subtly wrong (a readable results database,
a forgotten socket, an exit status the program controls), so it is done once, here, tested here,
and every family calls this module instead of ``subprocess`` directly.

Containment when running as root with util-linux ``unshare`` (the CI and dev machines here):

* **filesystem (allow-list)**: a new mount namespace whose root is an empty tmpfs; only these are
  bind-mounted into it, read-only: the system's ``/usr`` tree (and the ``/bin``, ``/lib*`` links
  into it), a few loader/locale files from ``/etc`` (``SYSTEM_READ_PATHS``; ``/etc/passwd`` and
  ``/etc/group`` are written fresh, naming only root and the sandbox's uid), the interpreter's
  prefix (for a venv also its base interpreter's) and ``read_paths``; the work dir and
  ``allow_write_paths`` are bound writable. Nothing else of the host exists inside: not the
  caller's folder (``./harness.db``), not ``/tmp``, ``/home``, ``/root``, ``/run`` or any Unix
  socket outside those paths. ``/dev`` holds only null/zero/full/random/urandom and a private
  64 MB ``/dev/shm``; ``/proc`` is the sandbox's own. Every mount is ``nosuid`` (checked before the
  program starts, with write probes on every read-only mount);
* **work dir**: a size-limited tmpfs (``workdir_mb``) mounted on the host side, so outputs can be
  read back after the run and a write loop cannot fill the disk (it ends with ENOSPC); it stays
  mounted until ``cleanup()`` unmounts and removes it (a caller killed before that leaves it mounted);
  ``allow_write_paths`` are the caller's own folders and are *not* size-limited beyond
  ``RLIMIT_FSIZE`` per file;
* **network**: a new, empty network namespace (not even loopback is up), so a connect to a port
  listening on the host's 127.0.0.1 fails with ENETUNREACH (abstract Unix sockets are per network
  namespace too);
* **IPC**: a new IPC namespace: SysV shared memory, semaphores and message queues are private and
  destroyed with the run;
* **processes**: a new PID namespace whose init is the sandboxed program: when it exits or is
  killed, the kernel kills everything it left behind (fork bombs, daemons); ``RLIMIT_NPROC`` under a
  dedicated, randomly chosen uid (200000-299999, no passwd entry) caps how many it may have at once
  (the cap counts per uid, so each run gets its own uid); ``no_new_privs`` is set before exec;
* **memory**: ``memory_mb`` caps the whole process tree with a memory cgroup (v2 ``memory.max``
  where the controller is delegated, else v1 ``memory.limit_in_bytes``; tmpfs pages written by the
  program count too); an OOM kill in it ends as status ``memory``. Where no cgroup can be made the
  cap is ``RLIMIT_AS`` per process only (a program can exceed ``memory_mb`` with several
  processes) and ``isolation`` says so: ``"full"`` versus ``"namespaces, memory per process"``.
  ``RLIMIT_AS`` = memory_mb is applied per process in every mode;
* **other resources**: ``RLIMIT_CPU`` ~ timeout, ``RLIMIT_FSIZE`` (per file), no core dumps, plus a
  wall-clock timeout enforced by the parent (SIGKILL of the whole namespace);
* **environment**: a clean one (PATH, HOME and TMPDIR = the work dir, LANG), plus ``env``;
* **kernel keys**: the program gets a new, empty session keyring (``KEYCTL_JOIN_SESSION_KEYRING``
  after dropping to its uid), so the caller's session keyring, which a process would otherwise
  inherit and "possess", is out of reach; the throwaway uid has its own user keyring;
* **output**: ``run_sandboxed`` reads stdout and stderr through pipes, keeping the first
  ``OUTPUT_LIMIT_BYTES`` and the last ``OUTPUT_TAIL_BYTES`` of each and dropping the rest as it
  arrives (``details`` says ``stdout_truncated`` / ``stderr_truncated`` with the byte count): a
  program that floods its output costs the host a few MB of memory and no disk.

Without root or namespaces (``isolation="best-effort"`` on the result) it still applies the rlimits,
the private cwd/HOME, the clean environment, a new session keyring, the output cap and the timeout,
but network, filesystem reads and writes (and the caller's user keyring and processes, same uid) are
*not* contained; callers that need those guarantees must check ``result.isolation`` (the
HumanEval scorer refuses to run unsandboxed unless told to).

The sandbox does not decide whether a program *succeeded*: the exit status is the program's to
choose (``atexit(os._exit, 0)``), so verdicts must come from a channel the program cannot forge
(the HumanEval scorer reads its verdicts from the checker's own pipe).

Cost: ~0.16 s per ``run_python("print(1)")`` here (mean of 10) versus ~0.07 s without the namespaces.

Statuses: ``ok`` (exit 0), ``error`` (non-zero exit), ``timeout`` (wall clock or CPU limit),
``memory`` (the cgroup OOM-killed a process, or the address-space limit was hit: a MemoryError /
bad_alloc / allocation failure in stderr with a non-zero exit), ``killed`` (ended by a signal we did
not send).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from harness.sandbox.cgroup import MemoryCgroup
from harness.sandbox.isolation import (
    _NS_CACHE,
    _SYS_KEYCTL,
    _UNSHARE,
    _interpreter_prefixes,
    _join_own_session_keyring,
    _mount_workdir_tmpfs,
    _namespaces_available,
    _remove_workdir,
    _write_cwd_files,
    missing_isolation,
    namespaces_available,
)
from harness.sandbox.launcher import _LAUNCHER
from harness.sandbox.output import (
    _DRAIN_S,
    EXCERPT_CHARS,
    OUTPUT_LIMIT_BYTES,
    OUTPUT_TAIL_BYTES,
    CappedOutput,
    _pump,
    excerpt,
)

__all__ = [
    "EXCERPT_CHARS", "OUTPUT_LIMIT_BYTES", "OUTPUT_TAIL_BYTES", "CappedOutput", "SandboxProcess", "SandboxResult",
    "SandboxStatus", "classify", "excerpt", "missing_isolation", "namespaces_available", "run_python",
    "run_sandboxed", "spawn_sandboxed", "_NS_CACHE",
]

SandboxStatus = Literal["ok", "error", "timeout", "memory", "killed"]

DEFAULT_FILE_SIZE_MB = 512
DEFAULT_WORKDIR_MB = 512
DEFAULT_NPROC = 64
ISOLATION_FULL = "full"
ISOLATION_PER_PROCESS_MEMORY = "namespaces, memory per process"
ISOLATION_BEST_EFFORT = "best-effort"
_UID_RANGE = (200_000, 299_999)
_MEMORY_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory", "Out of memory")
_BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
# The only host paths (besides the interpreter's prefix, read_paths and the writable ones) that exist
# inside the sandbox, all read-only: the system's programs and shared libraries and the few /etc
# files the dynamic loader, locale and font code read. Missing ones are skipped.
SYSTEM_READ_PATHS = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf",
    "/etc/mime.types", "/etc/fonts",
)  # fmt: skip


@dataclass
class SandboxResult:
    status: SandboxStatus
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    workdir: Path
    isolation: str = ISOLATION_FULL  # see the module docstring: full / namespaces, memory per process / best-effort
    details: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def cleanup(self) -> None:
        _remove_workdir(self.workdir)


@dataclass
class SandboxProcess:
    """A live sandboxed process (see ``spawn_sandboxed``); ``kill()`` ends it and all it started."""

    popen: subprocess.Popen[bytes]
    workdir: Path
    uid: int | None
    isolation: str
    started: float
    restore: list[tuple[str, int, int]] = field(default_factory=list)  # (path, uid, gid) to chown back
    cgroup: MemoryCgroup | None = None
    details: dict[str, object] = field(default_factory=dict)

    def kill(self) -> None:
        # SIGKILL to unshare; --kill-child then SIGKILLs the namespace's init, and the kernel the rest.
        # In best-effort mode the program leads its own session: kill the process group.
        try:
            if self.isolation != ISOLATION_BEST_EFFORT:
                inits = _children(self.popen.pid)
                for child in inits:  # the namespace's init: its death ends them all
                    os.kill(child, signal.SIGKILL)
                self.popen.kill()
                _wait_gone(inits, timeout_s=10)
            else:
                os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.release()

    def oom_kills(self) -> int:
        return self.cgroup.oom_kills() if self.cgroup is not None else 0

    def release(self) -> None:
        for path, uid, gid in self.restore:
            try:
                os.chown(path, uid, gid)
            except OSError:
                pass
        self.restore.clear()
        if self.cgroup is not None and self.popen.poll() is not None:
            self.cgroup.remove()

    def cleanup(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        _remove_workdir(self.workdir)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
    except OSError:
        pass
    return out


def _wait_gone(pids: list[int], timeout_s: float) -> None:
    """Wait until the PID namespace is torn down (its init lingers until every member has exited)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
        time.sleep(0.02)


def spawn_sandboxed(
    argv: Sequence[str],
    *,
    timeout_s: float,
    memory_mb: int,
    cwd_files: Mapping[str, bytes | str] | None = None,
    env: Mapping[str, str] | None = None,
    allow_write_paths: Sequence[str] = (),
    read_paths: Sequence[str] = (),
    nproc: int = DEFAULT_NPROC,
    file_size_mb: int = DEFAULT_FILE_SIZE_MB,
    workdir_mb: int = DEFAULT_WORKDIR_MB,
    stdin: int | IO[bytes] | None = subprocess.PIPE,
    stdout: int | IO[bytes] | None = subprocess.PIPE,
    stderr: int | IO[bytes] | None = subprocess.PIPE,
    workdir: Path | None = None,
    pass_fds: Sequence[int] = (),
) -> SandboxProcess:
    """Start ``argv`` contained as described in the module docstring; the caller owns the process.

    ``timeout_s`` here only sets the CPU-time rlimit (the wall clock is the caller's to enforce).
    ``pass_fds`` stay open in the program (e.g. the write end of a pipe it reports through).
    A ``workdir`` given by the caller stays on its file system (it may hold files already); the
    default one is a ``workdir_mb`` tmpfs.
    """
    if not argv:
        raise ValueError("argv is empty")
    own_workdir = workdir is None
    workdir = Path(workdir or tempfile.mkdtemp(prefix="harness-sandbox-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    def start(workdir: Path) -> SandboxProcess:
        full = _namespaces_available()
        details: dict[str, object] = {}
        if full:
            details["workdir"] = "tmpfs" if own_workdir and _mount_workdir_tmpfs(workdir, workdir_mb) else "disk"
        _write_cwd_files(workdir, cwd_files)
        environment = {**_BASE_ENV, "HOME": str(workdir), "TMPDIR": str(workdir), **(env or {})}
        limits = {
            "as": int(memory_mb) * 1024 * 1024,
            "cpu": max(1, int(timeout_s) + 1),
            "fsize": int(file_size_mb) * 1024 * 1024,
            "nproc": int(nproc),
        }
        if full:
            uid = random.randint(*_UID_RANGE)
            restore: list[tuple[str, int, int]] = []
            for path in [str(workdir), *allow_write_paths]:
                st = os.stat(path)
                if path != str(workdir):
                    restore.append((path, st.st_uid, st.st_gid))
                os.chown(path, uid, uid)
            for root, dirs, files in os.walk(workdir):
                for name in dirs + files:
                    os.lchown(os.path.join(root, name), uid, uid)
            cgroup = MemoryCgroup.create(limits["as"])
            details["memory_limit"] = f"cgroup{cgroup.version}" if cgroup else "rlimit-as"
            spec = {
                "argv": list(argv),
                "env": environment,
                "workdir": str(workdir),
                "writable": [str(workdir), *[os.path.abspath(p) for p in allow_write_paths]],
                "readable": [
                    *SYSTEM_READ_PATHS,
                    *_interpreter_prefixes(argv[0]),
                    *[os.path.abspath(p) for p in read_paths],
                ],
                "uid": uid,
                "limits": limits,
                "cgroup_procs": cgroup.procs if cgroup else None,
                "machine": os.uname().machine,
                "keyctl": _SYS_KEYCTL.get(os.uname().machine),
                "keep_fds": list(pass_fds),
            }
            cmd = [*_UNSHARE, "--", sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(spec)]
            try:
                popen = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=stderr, env=_BASE_ENV, cwd="/",
                                         pass_fds=tuple(pass_fds))  # fmt: skip
            except BaseException:
                if cgroup:
                    cgroup.remove()
                raise
            isolation = ISOLATION_FULL if cgroup else ISOLATION_PER_PROCESS_MEMORY
            return SandboxProcess(popen, workdir, uid, isolation, time.monotonic(), restore, cgroup, details)

        def preexec() -> None:  # best effort: limits only
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limits["as"], limits["as"]))
            resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu"], limits["cpu"] + 1))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize"], limits["fsize"]))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            _join_own_session_keyring()

        popen = subprocess.Popen(
            list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=environment, cwd=workdir,
            preexec_fn=preexec, start_new_session=True, pass_fds=tuple(pass_fds),
        )  # fmt: skip
        details["memory_limit"] = "rlimit-as"
        return SandboxProcess(popen, workdir, None, ISOLATION_BEST_EFFORT, time.monotonic(), details=details)


    try:
        return start(workdir)
    except BaseException:  # nothing started: no tmpfs mount or work dir may be left behind
        if own_workdir:
            _remove_workdir(workdir)
        raise

def run_sandboxed(
    argv: list[str],
    *,
    timeout_s: float,
    memory_mb: int,
    cwd_files: dict[str, bytes | str] | None = None,
    env: dict[str, str] | None = None,
    allow_write_paths: Sequence[str] = (),
    stdin: str | None = None,
    read_paths: Sequence[str] = (),
    nproc: int = DEFAULT_NPROC,
    file_size_mb: int = DEFAULT_FILE_SIZE_MB,
    workdir_mb: int = DEFAULT_WORKDIR_MB,
    pass_fds: Sequence[int] = (),
) -> SandboxResult:
    """Run ``argv`` contained; never raises for anything the program does. The work dir is kept
    (outputs may be read from it) until ``result.cleanup()``.

    stdout and stderr come back through pipes, each kept to its first ``OUTPUT_LIMIT_BYTES`` and last
    ``OUTPUT_TAIL_BYTES`` (the rest is read and dropped, so a program that floods its output neither
    blocks nor costs the host disk or more than a few MB of memory); ``details`` then records
    ``stdout_truncated`` / ``stderr_truncated`` and the byte count the program wrote."""
    start = time.monotonic()
    proc = spawn_sandboxed(
        argv, timeout_s=timeout_s, memory_mb=memory_mb, cwd_files=cwd_files, env=env,
        allow_write_paths=allow_write_paths, read_paths=read_paths, nproc=nproc, file_size_mb=file_size_mb,
        workdir_mb=workdir_mb, pass_fds=pass_fds,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = CappedOutput(), CappedOutput()
    timed_out = False
    try:
        timed_out = not _pump(proc.popen, stdin.encode() if stdin is not None else None, out, err,
                              deadline=time.monotonic() + timeout_s)  # fmt: skip
    finally:
        if timed_out or proc.popen.poll() is None:
            proc.kill()
        # what the program wrote before it was killed may still be in the pipes: drain it
        _pump(proc.popen, None, out, err, deadline=time.monotonic() + _DRAIN_S)
        for pipe in (proc.popen.stdin, proc.popen.stdout, proc.popen.stderr):
            if pipe is not None:
                pipe.close()
        if proc.popen.poll() is None:
            proc.popen.wait()
        oom_kills = proc.oom_kills()
        proc.release()
    seconds = time.monotonic() - start
    stdout, stderr = out.text(), err.text()
    returncode = proc.popen.returncode
    status = classify(returncode, stderr, timed_out)
    if oom_kills and status != "timeout":
        status = "memory"  # the cgroup killed a process of the tree: whatever the exit status says
    details: dict[str, object] = {**proc.details, **({"uid": proc.uid} if proc.uid is not None else {})}
    if oom_kills:
        details["oom_kills"] = oom_kills
    for name, capture in (("stdout", out), ("stderr", err)):
        if capture.truncated:
            details[f"{name}_truncated"] = True
            details[f"{name}_bytes"] = capture.total
    return SandboxResult(status, returncode, stdout, stderr, seconds, proc.workdir, proc.isolation, details)


def run_python(
    code: str,
    *,
    python: str = sys.executable,
    timeout_s: float,
    memory_mb: int,
    cwd_files: dict[str, bytes | str] | None = None,
    env: dict[str, str] | None = None,
    allow_write_paths: Sequence[str] = (),
    stdin: str | None = None,
    args: Sequence[str] = (),
    **kwargs: object,
) -> SandboxResult:
    """Write ``code`` to main.py in the work dir and run it with ``python`` (isolated mode: no
    user site-packages, no PYTHON* variables; the interpreter's own site-packages stay importable)."""
    files = {**(cwd_files or {}), "main.py": code}
    return run_sandboxed(
        [python, "-I", "main.py", *args], timeout_s=timeout_s, memory_mb=memory_mb, cwd_files=files, env=env,
        allow_write_paths=allow_write_paths, stdin=stdin, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def classify(returncode: int | None, stderr: str, timed_out: bool) -> SandboxStatus:
    """Map how a sandboxed program ended to a status (see the module docstring)."""
    if timed_out:
        return "timeout"
    if returncode == 0:
        return "ok"
    if returncode is None:
        return "killed"
    # unshare reports the child's death by signal N as exit status 128 + N
    signum = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if signum == signal.SIGXCPU:
        return "timeout"
    if any(marker in stderr[-20_000:] for marker in _MEMORY_MARKERS):
        return "memory"
    if signum in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGTERM):
        return "killed"
    return "error"

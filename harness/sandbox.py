"""Run untrusted code (model-written programs) in a contained subprocess.

``run_sandboxed(argv, timeout_s=, memory_mb=)`` runs one command and returns a ``SandboxResult``;
``spawn_sandboxed`` starts one with the same containment and hands back the live process (for warm
worker pools that take jobs over stdin/stdout); ``run_python(code)`` is the common case.

Containment when running as root with util-linux ``unshare`` (the CI and dev machines here):

* **network**: a new, empty network namespace (not even loopback is up), so a connect to a port
  listening on the host's 127.0.0.1 fails with ENETUNREACH;
* **processes**: a new PID namespace whose init is the sandboxed program: when it exits or is
  killed, the kernel kills everything it left behind (fork bombs, daemons); ``RLIMIT_NPROC`` under a
  dedicated, randomly chosen uid (200000-299999, no passwd entry) caps how many it may have at once
  (the cap counts per uid, so each run gets its own uid);
* **filesystem**: a new mount namespace in which other users' and jobs' places (``HIDDEN_DIRS``:
  /tmp, /var/tmp, /root, /home, /run, /mnt, ...) are covered with empty tmpfs, the work dir,
  ``allow_write_paths``, the interpreter's prefix and ``read_paths`` are bind-mounted back into
  them, and then every mount is remounted read-only except the work dir and ``allow_write_paths``
  (verified by write probes before the program starts); a fresh small tmpfs covers /dev/shm. The
  program runs as the unprivileged uid, so it cannot undo any of it. The rest of the system (/usr,
  /etc, the repository) stays readable, as an interpreter needs;
* **resources**: ``RLIMIT_AS`` = memory_mb, ``RLIMIT_CPU`` ~ timeout, ``RLIMIT_FSIZE`` (per file;
  there is no quota on the number of files in the work dir), no core dumps, plus a wall-clock
  timeout enforced by the parent (SIGKILL of the whole namespace);
* **environment**: a clean one (PATH, HOME and TMPDIR = the work dir, LANG), plus ``env``.

Without root or namespaces (``isolation="best-effort"`` on the result) it still applies the rlimits,
the private cwd/HOME, the clean environment and the timeout, but network and filesystem writes are
*not* contained; callers that need those guarantees must check ``result.isolation``.

Cost: ~0.55 s per ``run_python("print(1)")`` here versus ~0.25 s without the namespaces.

Statuses: ``ok`` (exit 0), ``error`` (non-zero exit), ``timeout`` (wall clock or CPU limit),
``memory`` (the address-space limit was hit: a MemoryError / bad_alloc / allocation failure in
stderr with a non-zero exit), ``killed`` (ended by a signal we did not send).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

SandboxStatus = Literal["ok", "error", "timeout", "memory", "killed"]

# stdout/stderr are read back truncated to this many bytes each (a print loop must not fill our RAM)
OUTPUT_LIMIT_BYTES = 1_000_000
DEFAULT_FILE_SIZE_MB = 512
DEFAULT_NPROC = 64
_UID_RANGE = (200_000, 299_999)
_MEMORY_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory", "Out of memory")
_BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
# Covered with an empty tmpfs inside the sandbox (other users' and jobs' files: temp dirs, homes,
# runtime sockets); the work dir, allow_write_paths and read paths under them are mapped back.
HIDDEN_DIRS = ("/root", "/home", "/tmp", "/var/tmp", "/run", "/mnt", "/media", "/srv")


@dataclass
class SandboxResult:
    status: SandboxStatus
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    workdir: Path
    isolation: str = "full"  # "full" (namespaces + uid) or "best-effort" (rlimits/cwd/env only)
    details: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


@dataclass
class SandboxProcess:
    """A live sandboxed process (see ``spawn_sandboxed``); ``kill()`` ends it and all it started."""

    popen: subprocess.Popen[bytes]
    workdir: Path
    uid: int | None
    isolation: str
    started: float
    restore: list[tuple[str, int, int]] = field(default_factory=list)  # (path, uid, gid) to chown back

    def kill(self) -> None:
        # SIGKILL to unshare; --kill-child then SIGKILLs the namespace's init, and the kernel the rest.
        # In best-effort mode the program leads its own session: kill the process group.
        try:
            if self.isolation == "full":
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

    def release(self) -> None:
        for path, uid, gid in self.restore:
            try:
                os.chown(path, uid, gid)
            except OSError:
                pass
        self.restore.clear()

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


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


def namespaces_available() -> bool:
    """True when full isolation is possible: root plus a working ``unshare`` binary."""
    return _namespaces_available()


_NS_CACHE: dict[str, bool] = {}


def _namespaces_available() -> bool:
    if "ok" not in _NS_CACHE:
        ok = os.geteuid() == 0 and shutil.which("unshare") is not None
        if ok:
            probe = subprocess.run(
                ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "true"],
                capture_output=True,
                timeout=30,
            )
            ok = probe.returncode == 0
        _NS_CACHE["ok"] = ok
    return _NS_CACHE["ok"]


def _interpreter_prefixes(executable: str) -> list[str]:
    """Directories the program needs readable: argv[0]'s prefix as given and after symlinks
    (a venv's bin/python links to its base interpreter, which lives elsewhere)."""
    out: list[str] = []
    if not os.path.isabs(executable):
        found = shutil.which(executable)
        if not found:
            return out
        executable = found
    for path in (os.path.abspath(executable), os.path.realpath(executable)):
        prefix = os.path.dirname(os.path.dirname(path))
        if prefix not in ("/", "") and prefix not in out:
            out.append(prefix)
    return out


def _write_cwd_files(workdir: Path, cwd_files: Mapping[str, bytes | str] | None) -> None:
    for name, content in (cwd_files or {}).items():
        target = (workdir / name).resolve()
        if not target.is_relative_to(workdir.resolve()):
            raise ValueError(f"cwd_files name escapes the work dir: {name!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)


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
    stdin: int | IO[bytes] | None = subprocess.PIPE,
    stdout: int | IO[bytes] | None = subprocess.PIPE,
    stderr: int | IO[bytes] | None = subprocess.PIPE,
    workdir: Path | None = None,
) -> SandboxProcess:
    """Start ``argv`` contained as described in the module docstring; the caller owns the process.

    ``timeout_s`` here only sets the CPU-time rlimit (the wall clock is the caller's to enforce).
    """
    if not argv:
        raise ValueError("argv is empty")
    workdir = Path(workdir or tempfile.mkdtemp(prefix="harness-sandbox-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    _write_cwd_files(workdir, cwd_files)
    environment = {**_BASE_ENV, "HOME": str(workdir), "TMPDIR": str(workdir), **(env or {})}
    limits = {
        "as": int(memory_mb) * 1024 * 1024,
        "cpu": max(1, int(timeout_s) + 1),
        "fsize": int(file_size_mb) * 1024 * 1024,
        "nproc": int(nproc),
    }
    if _namespaces_available():
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
        spec = {
            "argv": list(argv),
            "env": environment,
            "workdir": str(workdir),
            "writable": [str(workdir), *[os.path.abspath(p) for p in allow_write_paths]],
            "readable": [
                *_interpreter_prefixes(argv[0]),
                *[os.path.abspath(p) for p in [*read_paths, *allow_write_paths]],
            ],
            "hide": list(HIDDEN_DIRS),
            "uid": uid,
            "limits": limits,
        }
        cmd = [
            "unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--",
            sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(spec),
        ]  # fmt: skip
        popen = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=stderr, env=_BASE_ENV, cwd="/")
        return SandboxProcess(popen, workdir, uid, "full", time.monotonic(), restore)

    def preexec() -> None:  # best effort: limits only
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limits["as"], limits["as"]))
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu"], limits["cpu"] + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize"], limits["fsize"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    popen = subprocess.Popen(
        list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=environment, cwd=workdir,
        preexec_fn=preexec, start_new_session=True,
    )  # fmt: skip
    return SandboxProcess(popen, workdir, None, "best-effort", time.monotonic())


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
) -> SandboxResult:
    """Run ``argv`` contained; never raises for anything the program does. The work dir is kept
    (outputs may be read from it) until ``result.cleanup()``."""
    out_file = tempfile.TemporaryFile()
    err_file = tempfile.TemporaryFile()
    start = time.monotonic()
    proc = spawn_sandboxed(
        argv, timeout_s=timeout_s, memory_mb=memory_mb, cwd_files=cwd_files, env=env,
        allow_write_paths=allow_write_paths, read_paths=read_paths, nproc=nproc, file_size_mb=file_size_mb,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, stdout=out_file, stderr=err_file,
    )  # fmt: skip
    timed_out = False
    try:
        proc.popen.communicate(input=stdin.encode() if stdin is not None else None, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if timed_out or proc.popen.poll() is None:
            proc.kill()
        proc.release()
    seconds = time.monotonic() - start
    stdout, stderr = _read_back(out_file), _read_back(err_file)
    returncode = proc.popen.returncode
    status = classify(returncode, stderr, timed_out)
    details: dict[str, object] = {"uid": proc.uid} if proc.uid is not None else {}
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


def _read_back(handle: IO[bytes]) -> str:
    handle.seek(0)
    data = handle.read(OUTPUT_LIMIT_BYTES + 1)
    handle.close()
    text = data[:OUTPUT_LIMIT_BYTES].decode("utf-8", "replace")
    return text + ("\n[output truncated]" if len(data) > OUTPUT_LIMIT_BYTES else "")


# The launcher runs as root inside the new namespaces (pid 1 is unshare's child; this execs into the
# program so that the program is the namespace's init). Standard library only, run with -I -S.
_LAUNCHER = r"""
import ctypes, errno, json, os, resource, sys
spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)

def mount(src, target, fstype, flags, data=None):
    rc = libc.mount(src and src.encode(), target.encode(), fstype and fstype.encode(), ctypes.c_ulong(flags),
                    data and data.encode())
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, "mount %s: %s" % (target, os.strerror(err)))

def fail(msg):
    sys.stderr.write("sandbox setup failed: %s\n" % msg)
    os._exit(125)

def under(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

def blocking_ancestors(path):
    parts = path.strip("/").split("/")
    out = []
    for i in range(1, len(parts)):
        anc = "/" + "/".join(parts[:i])
        if not os.stat(anc).st_mode & 0o001:
            out.append(anc)
    return out[:1]

def mountpoints():
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            out.append((fields[4].encode().decode("unicode_escape"), fields[5].split(",")))
    return out

try:
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    writable = [os.path.realpath(p) for p in spec["writable"]]
    readable = [os.path.realpath(p) for p in spec["readable"] if os.path.exists(p)]
    expose = list(dict.fromkeys(readable + writable))
    # Hold every exposed path by an O_PATH descriptor: after the directories around them are covered
    # with empty tmpfs they are bind-mounted back from /proc/self/fd.
    fds = {p: os.open(p, os.O_PATH) for p in expose}
    hide = [h for h in spec["hide"] if os.path.isdir(h)]
    for p in expose:
        hide += blocking_ancestors(p)
    covered = []
    for h in sorted(set(hide), key=len):
        if not under(h, covered):
            mount("tmpfs", h, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
            covered.append(h)
    for p in sorted(expose, key=len):
        if os.path.isdir("/proc/self/fd/%d" % fds[p]):
            os.makedirs(p, exist_ok=True)
        elif not os.path.exists(p):
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "a").close()
        mount("/proc/self/fd/%d" % fds[p], p, None, MS_BIND | MS_REC)
        os.close(fds[p])
    if os.path.isdir("/dev/shm"):
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    keep = set(writable) | {"/proc", "/dev/shm"}
    for mp, opts in mountpoints():
        if mp in keep or under(mp, writable) or mp.startswith("/proc/"):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        flags |= (MS_NOSUID if "nosuid" in opts else 0) | (MS_NODEV if "nodev" in opts else 0)
        flags |= MS_NOEXEC if "noexec" in opts else 0
        try:
            mount(None, mp, None, flags)
        except OSError as exc:
            if exc.errno != errno.ENOENT and mp == "/":  # ENOENT: a mount now hidden under a cover
                raise
    # verify before handing over: nothing but the writable paths may accept a new file
    others = [mp for mp, _ in mountpoints() if not under(mp, ["/proc", "/sys", "/dev", *writable])]
    for probe_dir in dict.fromkeys(["/", *covered, *others]):
        if not os.path.isdir(probe_dir):
            continue
        probe = os.path.join(probe_dir, ".sandbox-write-probe-%d" % os.getpid())
        try:
            open(probe, "w").close()
        except OSError:
            continue
        os.unlink(probe)
        fail("%s still writable" % probe_dir)
    lim = spec["limits"]
    resource.setrlimit(resource.RLIMIT_AS, (lim["as"], lim["as"]))
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["fsize"], lim["fsize"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (lim["nproc"], lim["nproc"]))
    uid = spec["uid"]
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    # changing credentials clears the parent-death signal unshare --kill-child set: arm it again, so
    # that killing unshare kills this init and with it the whole PID namespace
    if libc.prctl(1, 9, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG, SIGKILL
        fail("prctl(PR_SET_PDEATHSIG) failed")
    os.chdir(spec["workdir"])
    os.umask(0o077)
except Exception as exc:
    fail(repr(exc))
try:
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
except OSError as exc:
    sys.stderr.write("sandbox: cannot execute %s: %s\n" % (spec["argv"][0], exc))
    os._exit(127)
"""

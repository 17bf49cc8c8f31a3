"""Whether full isolation is possible here, and the host-side steps around it: the namespaces probe,
the interpreter's prefixes the program must be able to read, the session keyring of best-effort mode,
and the size-limited tmpfs work dir (mounted and removed on the host side)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

_MNT_DETACH = 2

def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _remove_workdir(workdir: Path) -> None:
    if os.path.ismount(workdir):
        _libc().umount2(str(workdir).encode(), _MNT_DETACH)
    shutil.rmtree(workdir, ignore_errors=True)


_UNSHARE = ["unshare", "--net", "--mount", "--pid", "--ipc", "--uts", "--fork", "--kill-child"]


def namespaces_available() -> bool:
    """True when full isolation is possible: root plus a working ``unshare`` binary."""
    return _namespaces_available()


def missing_isolation() -> str | None:
    """None when namespaces work, else a one-line reason naming what is missing."""
    if os.geteuid() != 0:
        return "the sandbox needs root (user namespaces are not used) to create mount/PID/network/IPC namespaces"
    if shutil.which("unshare") is None:
        return "the sandbox needs util-linux 'unshare' on PATH"
    if not _namespaces_available():
        return "'unshare --net --mount --pid --ipc' fails here (namespaces are not permitted in this container)"
    return None


_NS_CACHE: dict[str, bool] = {}


def _namespaces_available() -> bool:
    if "ok" not in _NS_CACHE:
        ok = os.geteuid() == 0 and shutil.which("unshare") is not None
        if ok:
            probe = subprocess.run([*_UNSHARE, "true"], capture_output=True, timeout=30)
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


# keyctl(2) per machine: the launcher uses it to give the program its own session keyring
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "ppc64le": 271, "s390x": 280, "riscv64": 219}


def _join_own_session_keyring() -> None:
    """Best-effort mode: leave the caller's session keyring for a new, empty one (the full sandbox's
    launcher does the same, and there a different uid keeps the caller's user keyring out of reach too;
    here the program runs as the caller and can still name the caller's keys)."""
    number = _SYS_KEYCTL.get(os.uname().machine)
    if number is not None:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        libc.syscall(number, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING; failing is no worse than before


def _write_cwd_files(workdir: Path, cwd_files: Mapping[str, bytes | str] | None) -> None:
    for name, content in (cwd_files or {}).items():
        target = (workdir / name).resolve()
        if not target.is_relative_to(workdir.resolve()):
            raise ValueError(f"cwd_files name escapes the work dir: {name!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)


def _mount_workdir_tmpfs(workdir: Path, size_mb: int) -> bool:
    """Mount a size-limited tmpfs on the (new, empty) work dir on the host side, so its files outlive
    the namespace for the caller to read; False where mounting is not allowed."""
    opts = f"size={int(size_mb)}m,nr_inodes=65536,mode=0700".encode()
    rc = _libc().mount(b"tmpfs", str(workdir).encode(), b"tmpfs", ctypes.c_ulong(2 | 4), opts)  # nosuid|nodev
    return bool(rc == 0)

"""A memory limit for a whole sandboxed process tree: a cgroup (v2, or v1's memory controller) with
``memory.max`` / ``memory.limit_in_bytes`` set, created beside the harness's own cgroup and removed
afterwards. Where no writable cgroup exists, :meth:`MemoryCgroup.create` returns None and the
sandbox falls back to a per-process address-space limit (and says so in the result's
``isolation``). Split from :mod:`harness.sandbox`, which uses it."""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

_CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass
class MemoryCgroup:
    """A throwaway memory cgroup capping a whole sandboxed process tree."""

    path: Path
    version: int  # 1 or 2

    @classmethod
    def create(cls, limit_bytes: int) -> MemoryCgroup | None:
        """A new cgroup under ours with the limit set, or None where none can be made here."""
        name = f"harness-sandbox-{os.getpid()}-{secrets.token_hex(4)}"
        for version, parent in _cgroup_parents():
            path = parent / name
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                if version == 2:
                    (path / "memory.max").write_text(str(limit_bytes))
                    if (path / "memory.swap.max").exists():
                        (path / "memory.swap.max").write_text("0")
                else:
                    (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                    if (path / "memory.memsw.limit_in_bytes").exists():
                        (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
                return cls(path, version)
            except OSError:
                _rmdir_retry(path, 0.0)
        return None

    @property
    def procs(self) -> str:
        return str(self.path / "cgroup.procs")

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        _rmdir_retry(self.path, 5.0)


def _rmdir_retry(path: Path, timeout_s: float) -> None:
    # the PID namespace's members may take a moment to be reaped after its init died (EBUSY until then)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)


def _cgroup_parents() -> list[tuple[int, Path]]:
    """Where a child memory cgroup may go: our own v2 cgroup when it delegates the memory controller
    to children, then our v1 memory cgroup."""
    out: list[tuple[int, Path]] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        hierarchy, controllers, rel = line.split(":", 2)
        if hierarchy == "0" and controllers == "":
            for base in (_CGROUP_ROOT, _CGROUP_ROOT / "unified"):
                parent = base / rel.lstrip("/")
                try:
                    if "memory" in (parent / "cgroup.subtree_control").read_text().split():
                        out.insert(0, (2, parent))
                        break
                except OSError:
                    continue
        elif "memory" in controllers.split(","):
            out.append((1, _CGROUP_ROOT / "memory" / rel.lstrip("/")))
    return out

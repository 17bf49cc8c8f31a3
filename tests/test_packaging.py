"""The wheel is the product: built from a clean copy of the sources, it holds every file of the four
package folders (migrations, alias cards, prompts, references, templates, static files, shipped data
and licences), and installed non-editable in a fresh virtual environment it upgrades a database,
lists the aliases, evaluates and serves the leaderboard, reading nothing from this checkout.

The fresh venv has no pip and no dependencies of its own: a ``.pth`` file points it at a folder of
links to this interpreter's site-packages minus every trace of the editable ``harness`` (so the
dependencies are the tested ones and cost nothing to install), and ``harness`` itself comes from the
wheel, which the first test proves by where ``harness.__file__`` lies.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# source folder -> its place in the wheel (setup.py's mapping)
FOLDERS = {"harness": "harness", "tasks": "harness/tasks", "models": "harness/models",
           "leaderboard": "harness/leaderboard"}
BUILD_FILES = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md"]


def _source_files() -> list[str]:
    """Tracked and new (not ignored) files of the package folders, as git sees the checkout now."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", *FOLDERS], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if (ROOT / f).is_file() and "__pycache__" not in f]


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def build_wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the sources (an in-tree build/ folder could hold stale files).
    Built once per session: tests/conftest.py's ``harness_wheel`` fixture calls this."""
    src = tmp_path_factory.mktemp("src")
    for rel in [*BUILD_FILES, *_source_files()]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    out = tmp_path_factory.mktemp("dist")
    t0 = time.perf_counter()
    proc = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                 str(src)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    print(f"wheel built in {time.perf_counter() - t0:.1f}s")
    (whl,) = out.glob("harness-*.whl")
    return whl


def _deps_dir(base: Path) -> Path:
    """Links to this interpreter's site-packages entries except the editable harness and its hooks.
    A venv whose .pth file chains another venv's site-packages (the .pth files are not linked) gets
    that folder's entries too, after its own."""
    deps = base / "deps"
    deps.mkdir()
    purelib = sysconfig.get_paths()["purelib"]
    sites = [purelib, *(p for p in sys.path if p != purelib and p.endswith("site-packages") and os.path.isdir(p))]
    for site in sites:
        for entry in Path(site).iterdir():
            name = entry.name.lower()
            if name.startswith(("harness", "__editable__", "_harness")) or name.endswith(".pth") \
                    or os.path.lexists(deps / entry.name):
                continue
            (deps / entry.name).symlink_to(entry)
    return deps


def _install(wheel: Path, base: Path) -> Path:
    venv = base / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "_harness_test_deps.pth").write_text(f"{_deps_dir(base)}\n")
    proc = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
                 str(wheel)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return venv


def _env(venv: Path, db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_ROOT", "VIRTUAL_ENV")}
    return {**env, "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}", "HARNESS_DB_URL": f"sqlite:///{db}",
            "VIRTUAL_ENV": str(venv)}


def install_wheel(wheel: Path, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed non-editable (conftest's ``harness_wheel_venv``)."""
    t0 = time.perf_counter()
    venv = _install(wheel, tmp_path_factory.mktemp("installed"))
    print(f"installed in {time.perf_counter() - t0:.1f}s")
    return venv


@pytest.fixture
def wheel(harness_wheel: Path) -> Path:
    return harness_wheel


@pytest.fixture
def venv(harness_wheel_venv: Path) -> Path:
    return harness_wheel_venv


def test_wheel_holds_every_package_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for rel in _source_files():
        top, rest = rel.split("/", 1)
        if f"{FOLDERS[top]}/{rest}" not in names:
            missing.append(rel)
    assert not missing, f"not in the wheel: {missing}"
    for required in ["harness/py.typed", "harness/store/migrations/env.py", "harness/store/migrations/script.py.mako",
                     "harness/store/migrations/versions/0001_initial_schema.py", "harness/models/aliases/smollm2.yaml",
                     "harness/leaderboard/templates/base.html", "harness/leaderboard/static/style.css",
                     "harness/leaderboard/arena/templates/arena.html", "harness/tasks/gsm8k/data/test.jsonl",
                     "harness/tasks/code3d/references/mug.py", "harness/tasks/alignment/prompts/xstest_judge.txt"]:
        assert required in names, required
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_installed_wheel_works_outside_the_checkout(venv, tmp_path):
    db = tmp_path / "fresh.db"
    env = _env(venv, db)
    where = _run([str(venv / "bin" / "python"), "-c", "import harness, harness.models; print(harness.__file__)"],
                 env=env, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the wheel's copy, not the checkout

    up = _run(["harness", "db", "upgrade"], env=env, cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    with sqlite3.connect(db) as conn:
        (rev,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    newest = max(p.name.split("_")[0] for p in (ROOT / "harness/store/migrations/versions").glob("[0-9]*_*.py"))
    assert rev == newest

    models = _run(["harness", "models"], env=env, cwd=tmp_path, )
    assert models.returncode == 0, models.stderr
    for alias in ("smollm2", "qwen", "gpt4o"):
        assert alias in models.stdout

    ev = _run(["harness", "eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "5", "--no-progress"],
              env=env, cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM sample_results").fetchone() == (5,)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(["harness", "serve", "--port", str(port)], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        pages = {}
        deadline = time.monotonic() + 60
        for path in ("/", "/api/overview"):
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                        pages[path] = (resp.status, resp.read().decode())
                    break
                except OSError:
                    assert server.poll() is None, server.stderr.read() if server.stderr else ""
                    assert time.monotonic() < deadline, f"{path} did not answer"
                    time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(10)
    assert pages["/"][0] == 200 and "gsm8k" in pages["/"][1]
    assert pages["/api/overview"][0] == 200 and "gsm8k" in pages["/api/overview"][1]


def test_a_wheel_without_its_data_says_what_is_missing(wheel, tmp_path):
    venv = _install(wheel, tmp_path)
    site = next((venv / "lib").glob("python3*/site-packages"))
    shutil.rmtree(site / "harness/models/aliases")
    shutil.rmtree(site / "harness/store/migrations/versions")
    shutil.rmtree(site / "harness/leaderboard/templates")
    env = _env(venv, tmp_path / "x.db")
    models = _run(["harness", "models"], env=env, cwd=tmp_path)
    assert models.returncode != 0
    assert models.stderr.strip().count("\n") == 0 and "harness/models/aliases" in models.stderr, models.stderr
    up = _run(["harness", "db", "upgrade"], env=env, cwd=tmp_path)
    assert up.returncode != 0
    assert up.stderr.strip().count("\n") == 0 and "harness/store/migrations/versions" in up.stderr, up.stderr
    serve = _run(["harness", "serve", "--port", "1"], env=env, cwd=tmp_path)  # fails before it binds
    assert serve.returncode != 0
    assert serve.stderr.strip().count("\n") == 0 and "harness/leaderboard/templates" in serve.stderr, serve.stderr

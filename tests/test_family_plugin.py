"""A family from outside the harness tree: `tests/plugins/harness_wordcount` is built and installed
(into its own target folder, put on PYTHONPATH) and then used only through its entry point: a task,
a backend, a CLI subcommand and a leaderboard chart, end to end through the `harness` command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

PLUGIN = Path(__file__).parent / "plugins" / "harness_wordcount"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    target = tmp_path_factory.mktemp("plugin-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(PLUGIN)], check=True, capture_output=True, text=True)
    # an installed distribution, not the source folder: its dist-info carries the entry point
    assert list(target.glob("harness_wordcount-*.dist-info"))
    path = os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "COLUMNS": "250", "PYTHONPATH": path}


def harness(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_outside_family_evaluates_lists_and_adds_a_subcommand(plugin_env: dict[str, str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'plugin.db'}"
    exact = harness(plugin_env, "eval", "-t", "wordcount", "-m", "counter:exact", "--db", db, "--no-progress")
    assert exact.returncode == 0, exact.stderr
    off = harness(plugin_env, "eval", "-t", "wordcount", "-m", "counter:off", "--db", db, "--no-progress")
    assert off.returncode == 0, off.stderr
    runs = harness(plugin_env, "runs", "--db", db)
    assert "wordcount" in runs.stdout and "1.0000" in runs.stdout and "0.0000" in runs.stdout

    tasks = harness(plugin_env, "tasks")
    assert "wordcount" in tasks.stdout
    models = harness(plugin_env, "models")
    assert "counter" in models.stdout

    sub = harness(plugin_env, "wordcount", "sentences")
    assert sub.returncode == 0, sub.stderr
    assert sub.stdout.splitlines()[0] == "3\tthe cat sat"
    helped = harness(plugin_env, "--help")
    assert "wordcount" in helped.stdout and "Word counting" in helped.stdout

    bad = harness(plugin_env, "eval", "-t", "wordcount", "-m", "counter:sideways", "--db", db)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr


def test_the_outside_familys_chart_is_on_its_task_page(plugin_env: dict[str, str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'chart.db'}"
    assert harness(plugin_env, "eval", "-t", "wordcount", "-m", "counter:exact", "--db", db,
                   "--no-progress").returncode == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--db", db, "--port", str(port)],
                              env=plugin_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        page = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/tasks/wordcount", timeout=5) as r:
                    page = r.read().decode()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else "server exited"
                time.sleep(0.3)
        assert "wordcount: exact match by run" in page  # the family's chart, drawn from its manifest
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/overview", timeout=5) as r:
            assert "wordcount" in json.dumps(json.load(r))
    finally:
        server.terminate()
        server.wait(10)


def test_the_outside_familys_typed_option_and_declared_setting(plugin_env: dict[str, str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'typed.db'}"
    run = harness(plugin_env, "eval", "-t", "wordcount", "-T", "min_words=4", "-m", "counter:exact", "-M", "offset=2",
                  "--db", db, "--no-progress")
    assert run.returncode == 0, run.stderr
    runs = harness(plugin_env, "runs", "--db", db)
    assert "4/4" in runs.stdout and "0.0000" in runs.stdout  # 4 sentences of 4 words or more, each counted 2 over
    for option, setting, refusal in [
        ("min_words=0", "offset=1", ("error: task 'wordcount'", "min_words", ">= 1")),  # the annotation's bound
        ("min_words=1", "ofset=1", ("error: counter:", "'ofset'", "'offset'")),  # strict: names the closest key
        ("min_words=1", "offset=x", ("error: counter:", "offset='x'", "integer")),  # the declared type
    ]:
        bad = harness(plugin_env, "eval", "-t", "wordcount", "-T", option, "-m", "counter:exact", "-M", setting,
                      "--db", db, "--no-progress")
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
        assert bad.stderr.startswith(refusal[0]) and all(part in bad.stderr for part in refusal[1:]), bad.stderr
    listed = harness(plugin_env, "models", "counter")
    assert "offset" in listed.stdout and "added to every count" in listed.stdout


def _code_after_docstring(path: Path) -> str:
    text = path.read_text()
    assert text.startswith('"""'), path
    return text[text.index('"""', 3) + 3:].lstrip("\n")


def test_the_family_guide_quotes_the_example_as_it_is() -> None:
    """tasks/README.md shows a whole family by quoting this package: each Python block is one of its
    files, less the module docstring (the guide's prose says what each file is)."""
    guide = (Path(__file__).resolve().parents[1] / "tasks" / "README.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in guide.split("```")[1::2] if b.startswith("python\n")]
    source = PLUGIN / "src" / "harness_wordcount"
    for name in ("family.py", "tasks.py", "backends.py"):
        assert _code_after_docstring(source / name) in blocks, f"tasks/README.md does not quote {name} as it is"
    assert len(blocks) == 3
    entry_point = 'wordcount = "harness_wordcount.family:FAMILY"'  # the registration the guide quotes
    assert entry_point in guide and entry_point in (PLUGIN / "pyproject.toml").read_text()

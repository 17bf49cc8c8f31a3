"""``harness demo --size small``: the showcase database builds offline, every family it plans either
runs or is skipped with one line, every page of the leaderboard on it loads, every file it shows is
served from the demo's media folder and no page holds the machine's absolute paths."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from harness.demo_plan import plan

STEP = re.compile(r"^\[ *(\d+)/(\d+)\] (\S+) +(.+?) \.\.\. (.+)$")
ROOT = Path(__file__).resolve().parent.parent
MEDIA_URL = re.compile(r'(?:src|href)="(/media\?path=[^"]+)"')
TEMPLATE_ERRORS = re.compile(r"Traceback|UndefinedError|TemplateSyntaxError|jinja2\.|\{\{|\{%|Internal Server Error")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "harness.cli", "demo", "--dir", str(folder), "--size", "small",
                        "--no-serve"], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return folder, f"sqlite:///{folder / 'demo.db'}", r.stderr


def test_every_planned_family_runs_or_says_why_in_one_line(demo_db):
    _, _, log = demo_db
    small = plan("small")
    steps = [m for m in map(STEP.match, log.splitlines()) if m]
    assert len({m.group(2) for m in steps}) == 1 and len(steps) == int(steps[0].group(2)), log
    # nothing but the step lines between the first line and the summary: what runs print is in DIR/logs
    other = [ln for ln in log.splitlines() if not STEP.match(ln) and "3D battles left out" not in ln]
    assert len(other) == 3 and other[0].startswith("building the small demo") and other[1].startswith("demo: "), other
    for item in small:
        lines = [m for m in steps if m.group(3) == item.family and m.group(4) == item.label]
        assert len(lines) == 1, (item.label, log)
        outcome = lines[0].group(5)
        # never "failed" on a set-up machine; a run that did not run says how to get what it needs
        assert re.match(r"\d+\.\d s(;|$)", outcome) or outcome.startswith("skipped: needs "), outcome
    assert {p.family for p in small} >= {"gsm8k", "alignment", "longshot", "dsgg", "partverse", "conformal",
                                         "causal", "transport", "methods", "decision", "agents", "selection",
                                         "spa3d", "code3d", "reid", "nvs", "puzzles"}
    assert any(m.group(3) == "arena" and re.match(r"\d+\.\d s; \d+ seeded votes", m.group(5)) for m in steps)
    # the 3D arena battles are real renders where Blender is, else left out with one line
    from harness.blender import blender_available

    left_out = [ln for ln in log.splitlines() if "3D battles left out" in ln]
    assert len(left_out) == (0 if blender_available() else 1), left_out


def test_stub_judges_say_they_are_stubs_and_their_verdicts_parse(demo_db):
    from harness.store.db import open_db
    from harness.store.schema import JudgementRow, RunRow
    from harness.tasks.alignment.misalignment import parse_aligned
    from harness.tasks.alignment.refusal_grading import parse_class
    from harness.tasks.longshot.rubric import parse_verdict

    stubs = {item.run.task: item.run.judge_settings["text"] for item in plan("small") if item.run.judge}
    assert all("stub judge" in stub for stub in stubs.values())
    assert parse_class(stubs["alignment_refusal"]) == "full_compliance" and parse_verdict(stubs["longshot"]) is True
    assert parse_aligned(stubs["alignment_misalignment"]) == 50.0
    _, url, _ = demo_db
    with open_db(url)() as s:
        judged = list(s.scalars(select(RunRow.name).where(RunRow.judge_spec.is_not(None))))
        replies = set(s.scalars(select(JudgementRow.raw)))
    # the run names and every stored judge reply say "stub judge"
    assert len(judged) >= 3 and all(name.endswith("__stub-judge") for name in judged), judged
    assert replies == set(stubs.values())


def test_every_page_of_the_demo_loads(demo_db):
    from harness.leaderboard.app import create_app
    from harness.store.db import open_db
    from harness.store.schema import ModelRow, RunRow, TaskRow

    folder, url, _ = demo_db
    with open_db(url)() as s:
        runs = list(s.scalars(select(RunRow.id)))
        tasks = sorted(set(s.scalars(select(TaskRow.name))))
        models = list(s.scalars(select(ModelRow.id)))
    assert len(runs) >= 12 and "arena-demo" in tasks
    pages = ["/", "/tasks", "/models", "/runs", "/api", "/arena", "/arena/ratings", "/api/arena/ratings",
             f"/compare?a={runs[0]}&b={runs[1]}"]
    pages += [f"/tasks/{t}" for t in tasks] + [f"/models/{m}" for m in models] + [f"/runs/{r}" for r in runs]
    pages += [f"/runs/{runs[0]}?page=99999", f"/runs/{runs[0]}?status=errors"]
    pages += [f"/api/runs/{r}/samples" for r in runs]
    app = create_app(url, media_roots=[str(folder / "media")])
    # what would give the machine away: the demo's folder, the home, the checkout (the venv lives there)
    absolute = re.compile("|".join(re.escape(str(p)) for p in {folder.resolve(), Path.home(), ROOT, Path(sys.prefix)}))
    media: set[str] = set()
    with TestClient(app) as client:
        for page in pages:
            resp = client.get(page)
            assert resp.status_code == 200, (page, resp.status_code, resp.text[:300])
            if "html" in resp.headers.get("content-type", ""):
                assert not TEMPLATE_ERRORS.search(resp.text), (page, TEMPLATE_ERRORS.search(resp.text))
                assert "not served" not in resp.text, page  # every file a demo run refers to is served
                media |= {u.replace("&amp;", "&") for u in MEDIA_URL.findall(resp.text)}
            found = absolute.search(resp.text)
            assert found is None, (page, resp.text[max(0, found.start() - 80):found.end() + 40])
        ratings = client.get("/api/arena/ratings").json()
        assert len(ratings.get("ratings") or []) >= 2, ratings
        kinds = {client.get(u).headers["content-type"].split(";")[0] for u in media}
        assert {"video/mp4", "image/png"} <= kinds, kinds  # LongShOT's videos and Crafter's frames among them
        assert client.get("/media", params={"path": "../demo.db"}).status_code == 404  # the database is not media
        from harness.blender import blender_available

        if blender_available():  # the 3D battles: two stand-ins' Blender renders of the shipped objects
            battle = client.get("/api/arena/battle", params={"task": "code3d"}).json()
            for side in ("left", "right"):
                assert len(battle[side]["images"]) == 4, battle
                shot = client.get(battle[side]["images"][0])
                assert shot.status_code == 200 and shot.headers["content-type"] == "image/png"


def _watch(page) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"script: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request: {r.url}"))
    return problems


def test_the_demo_pages_in_chromium_have_no_console_errors(demo_db):
    """Every kind of page of the showcase, in a real browser at desktop and phone width: no console
    error, no uncaught script error, no failed request (a missing static file or chart script)."""
    from live_server import chromium, serve

    from harness.leaderboard.app import create_app
    from harness.store.db import open_db
    from harness.store.schema import RunRow, TaskRow

    folder, url, _ = demo_db
    with open_db(url)() as s:
        runs = list(s.scalars(select(RunRow.id)))
        tasks = sorted(set(s.scalars(select(TaskRow.name))))
    pages = ["/", "/tasks", "/models", "/runs", "/arena", "/arena/ratings", f"/compare?a={runs[0]}&b={runs[1]}"]
    pages += [f"/tasks/{t}" for t in tasks[:6]] + [f"/runs/{r}" for r in runs[:6]]
    app = create_app(url, media_roots=[str(folder / "media")])
    with serve(app) as base, chromium() as browser:
        for width in (1366, 390):
            page = browser.new_page(viewport={"width": width, "height": 900})
            problems = _watch(page)
            for path in pages:
                resp = page.goto(base + path, wait_until="load")
                assert resp is not None and resp.status == 200, (path, resp and resp.status)
                page.wait_for_timeout(150)  # charts draw after load
                assert not problems, (width, path, problems)
            page.close()


def test_only_one_family_and_bad_size(tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    r = CliRunner()
    bad = r.invoke(app, ["demo", "--size", "huge", "--dir", str(tmp_path)])
    assert bad.exit_code == 2 and "--size must be full or small" in bad.output
    out = r.invoke(app, ["demo", "--size", "small", "--only", "gsm8k", "--no-serve", "--dir", str(tmp_path / "d")])
    assert out.exit_code == 0, out.output
    done = [m.group(3) for m in map(STEP.match, out.output.splitlines()) if m and re.match(r"\d+\.\d s", m.group(5))]
    assert done == ["gsm8k", "gsm8k"]
    assert "demo: 2 runs, 0 skipped or failed, 0 arena votes" in out.output
    unknown = r.invoke(app, ["demo", "--only", "gsm8", "--no-serve", "--dir", str(tmp_path / "e")])
    assert unknown.exit_code == 2 and "did you mean 'gsm8k'" in unknown.output and not (tmp_path / "e").exists()

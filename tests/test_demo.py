"""``harness demo --size small``: the showcase database builds offline, every family it plans either
runs or is skipped with one line, and every page of the leaderboard on it loads."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from harness.demo import PLAN, STUB_RUBRIC, STUB_SCORE, STUB_XSTEST

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
    small = [p for p in PLAN if not p.full_only]
    for item in small:
        what = re.compile(rf"\s{re.escape(item.task)} / {re.escape(item.model)}(:| \(|$)")
        lines = [ln for ln in log.splitlines() if what.search(ln)]
        assert len(lines) == 1, (item, log)
        assert lines[0].split()[0] in ("ok", "skipped"), lines[0]  # never "failed" on a set-up machine
    assert {p.family for p in small} >= {"gsm8k", "alignment", "longshot", "dsgg", "partverse", "conformal",
                                         "causal", "transport", "methods", "decision", "agents"}
    assert re.search(r"arena +demo tasks and \d+ seeded votes", log)


def test_stub_judges_say_they_are_stubs_and_their_verdicts_parse(demo_db):
    from harness.store.db import open_db
    from harness.store.schema import JudgementRow, RunRow
    from harness.tasks.alignment.misalignment import parse_aligned
    from harness.tasks.alignment.refusal_grading import parse_class
    from harness.tasks.longshot.rubric import parse_verdict

    assert all("stub judge" in stub for stub in (STUB_XSTEST, STUB_RUBRIC, STUB_SCORE))
    assert parse_class(STUB_XSTEST) == "full_compliance" and parse_verdict(STUB_RUBRIC) is True
    assert parse_aligned(STUB_SCORE) == 50.0
    _, url, _ = demo_db
    with open_db(url)() as s:
        judged = list(s.scalars(select(RunRow.name).where(RunRow.judge_spec.is_not(None))))
        replies = set(s.scalars(select(JudgementRow.raw)))
    # the run names and every stored judge reply say "stub judge"
    assert len(judged) >= 3 and all(name.endswith("__stub-judge") for name in judged), judged
    assert replies == {STUB_XSTEST, STUB_RUBRIC, STUB_SCORE}


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
    app = create_app(url, media_roots=[str(folder / "renders")])
    with TestClient(app) as client:
        for page in pages:
            resp = client.get(page)
            assert resp.status_code == 200, (page, resp.status_code, resp.text[:300])
            if "html" in resp.headers.get("content-type", ""):
                assert not TEMPLATE_ERRORS.search(resp.text), (page, TEMPLATE_ERRORS.search(resp.text))
        ratings = client.get("/api/arena/ratings").json()
        assert len(ratings.get("ratings") or []) >= 2, ratings


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
    app = create_app(url, media_roots=[str(folder / "renders")])
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
    done = [ln.split()[1] for ln in out.output.splitlines() if ln.startswith("  ok ")]
    assert done == ["gsm8k", "gsm8k"] and "arena" not in done
    assert "demo: 2 runs, 0 skipped, 0 arena votes" in out.output

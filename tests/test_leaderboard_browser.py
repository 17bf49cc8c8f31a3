"""The leaderboard in a real headless Chromium (Debian package, driven by Playwright; no browser
download) against uvicorn on 127.0.0.1: overview, sorting, a run, paging, and hostile outputs that
must show as text and run nothing. Also `harness push` from the command line to that live server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from live_server import chromium, serve
from test_leaderboard_data import SCRIPT, XSS_MODEL, XSS_OUTPUT, XSS_RUN, populate

SHOTS = os.environ.get("HARNESS_SCREENSHOTS")  # a folder to keep the screenshots in (development)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from harness.leaderboard.app import create_app

    tmp = tmp_path_factory.mktemp("browser")
    (tmp / "media").mkdir()
    url = f"sqlite:///{tmp / 'lb.db'}"
    ids = populate(url, tmp / "media")
    app = create_app(url, media_roots=[tmp / "media"], write_token="live-secret", cache_seconds=0.2)
    with serve(app) as base:
        yield base, ids, tmp
    app.state.sessions.kw["bind"].dispose()


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _shot(page, tmp: Path, name: str) -> None:
    path = Path(SHOTS or tmp) / f"leaderboard-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def test_browse_sort_open_run_page_samples_and_xss_stays_text(live, browser):
    base, ids, tmp = live
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    dialogs: list[str] = []
    console_errors: list[str] = []
    foreign: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console_errors.append(str(e)))
    page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith(base) else None)

    page.goto(base + "/")
    assert page.locator("h1").inner_text() == "Leaderboard"
    assert page.locator("#overview tbody tr").count() == 4
    _shot(page, tmp, "overview")

    # sort by model name, both directions, by clicking the header link
    page.click("#overview thead a.sort:has-text('Model')")
    page.wait_for_url("**sort=model**")
    names = page.locator("#overview tbody td.model").all_inner_texts()
    assert names == sorted(names, key=str.lower)  # first click: A to Z
    page.click("#overview thead a.sort:has-text('Model')")
    page.wait_for_url("**dir=desc**")
    names = page.locator("#overview tbody td.model").all_inner_texts()
    assert names == sorted(names, key=str.lower, reverse=True)
    assert XSS_MODEL in names  # the hostile name is shown as text

    # open the number model's run from its cell, then page through its 30 samples
    row = page.locator("#overview tbody tr", has_text="builtin:number")
    row.locator("a.cell").click()
    page.wait_for_url(f"**/runs/{ids['builtin:number']}")
    assert page.locator("article.sample").count() == 20
    assert page.locator("article.sample .sid").first.inner_text() == "0"
    page.locator("nav.pager a[rel=next]").first.click()
    page.wait_for_url("**page=2**")
    assert page.locator("article.sample").count() == 10
    assert page.locator("article.sample .sid").first.inner_text() == "20"
    page.select_option("select[name=per_page]", "10")
    page.fill("input[name=q]", "")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**per_page=10**")
    assert "page 1 of 3" in page.locator("nav.pager").first.inner_text()

    # the hostile run: payloads are visible text, nothing injected, nothing executed
    page.goto(f"{base}/runs/{ids['hostile']}")
    outputs = page.locator("pre.output").all_inner_texts()
    assert outputs and all(o == XSS_OUTPUT for o in outputs)
    assert SCRIPT in page.locator("pre.error").first.inner_text()
    assert page.locator("h1").inner_text() == XSS_RUN
    page.locator("details.judgements summary").first.click()
    assert SCRIPT in page.locator("details.judgements").first.inner_text()
    injected = page.evaluate("""() => ({
        imgs: [...document.querySelectorAll('img')].filter(i => !i.src.includes('/media?path=')).length,
        onerror: document.querySelectorAll('[onerror]').length,
        scripts: [...document.querySelectorAll('script')].filter(s => s.type !== 'application/json'
                                                               && !s.src.includes('/static/')).length,
        mediaLoaded: [...document.querySelectorAll('img')].every(i => i.complete && i.naturalWidth > 0),
    })""")
    assert injected == {"imgs": 0, "onerror": 0, "scripts": 0, "mediaLoaded": True}
    _shot(page, tmp, "hostile-run")

    # task page: plotly (served locally) draws the score chart under the CSP; no cost chart, since the
    # comparable runs cost nothing (the hostile run, which has a cost, measured another gsm8k)
    page.goto(f"{base}/tasks/gsm8k")
    page.wait_for_selector("#chart-scores .main-svg", timeout=20000)
    assert page.locator("#chart-cost").count() == 0
    _shot(page, tmp, "task")
    page.goto(f"{base}/compare?a={ids['builtin:number']}&b={ids['builtin:constant']}")
    assert "exact McNemar" in page.content()
    page.close()

    assert dialogs == []
    assert console_errors == []
    assert foreign == []


def test_pages_read_without_javascript(live, browser):
    base, ids, _ = live
    ctx = browser.new_context(java_script_enabled=False)
    page = ctx.new_page()
    page.goto(base + "/?sort=task:gsm8k&dir=desc")
    assert page.locator("#overview tbody tr").count() == 4
    page.select_option("select[name=backend]", "builtin")
    page.fill("input[name=q]", "echo")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**q=echo**")
    assert page.locator("#overview tbody td.model").all_inner_texts() == ["builtin:echo"]
    page.goto(f"{base}/tasks/gsm8k")
    assert page.locator("table.grid").first.locator("tbody tr").count() == 4
    ctx.close()


def test_cli_push_to_live_server(live, tmp_path):
    base, _, _ = live
    harness = shutil.which("harness")
    cmd = [harness] if harness else [sys.executable, "-m", "harness.cli"]
    src = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    env = {**os.environ, "HARNESS_PUSH_TOKEN": ""}
    from harness.runner import EvalConfig, Runner
    from harness.store.db import open_db

    sessions = open_db(src)
    runner = Runner(EvalConfig(task="gsm8k", model="builtin:echo", limit=7, run_name="from-elsewhere",
                               progress=False), session_factory=sessions)
    # in a thread of its own: Playwright's sync API keeps an event loop running in this one
    worker = threading.Thread(target=runner.run)
    worker.start()
    worker.join(120)
    sessions.kw["bind"].dispose()
    refused = subprocess.run(cmd + ["push", "from-elsewhere", "--to", base, "--token", "wrong", "--db", src],
                             capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "401" in refused.stderr
    ok = subprocess.run(cmd + ["push", "from-elsewhere", "--to", base, "--token", "live-secret", "--db", src],
                        capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "7 new samples" in ok.stdout
    again = subprocess.run(cmd + ["push", "from-elsewhere", "--to", base, "--db", src], capture_output=True,
                           text=True, env={**env, "HARNESS_PUSH_TOKEN": "live-secret"})
    assert again.returncode == 0 and "0 new samples" in again.stdout and "7 samples there now" in again.stdout
    import httpx

    runs = httpx.get(base + "/api/runs").json()["rows"]
    assert any(r["run_name"] == "from-elsewhere" and r["n_done"] == 7 for r in runs)


def test_harness_serve_and_token_commands(tmp_path):
    harness = shutil.which("harness")
    cmd = [harness] if harness else [sys.executable, "-m", "harness.cli"]
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    made = subprocess.run(cmd + ["serve", "--token-create", "robot", "--db", db], capture_output=True, text=True)
    assert made.returncode == 0 and made.stdout.strip().startswith("hlb_")
    listed = subprocess.run(cmd + ["tokens", "list", "--db", db], capture_output=True, text=True)
    assert listed.stdout.startswith("robot\tactive")
    port = _free_port()
    proc = subprocess.Popen(cmd + ["serve", "--db", db, "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        import httpx

        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        assert r.status_code == 200 and r.json()["rows"] == []
        body = {"task": {"name": "t", "version": "1", "content_hash": "h"}, "model": {"spec": "builtin:echo"},
                "run": {"name": "r"}}
        auth = {"Authorization": f"Bearer {made.stdout.strip()}"}
        assert httpx.post(f"http://127.0.0.1:{port}/api/runs", json=body, headers=auth).status_code == 200
    finally:
        proc.terminate()
        proc.wait(10)

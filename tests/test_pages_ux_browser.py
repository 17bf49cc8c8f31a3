"""The leaderboard pages as people use them, in a real headless Chromium (Debian package driven by
Playwright, no browser download): a 390 px phone layout (no sideways scrolling, every link reachable
through the menu, with and without JavaScript), the dark theme (system preference and the toggle,
remembered, charts included), filtering samples by score, the compare page's disagreements, and a
running run whose page counts up while rows are inserted. No console errors anywhere."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from live_server import chromium, serve
from pages_ux_data import add_samples, lease, make_run
from playwright.sync_api import expect

SHOTS = os.environ.get("HARNESS_SCREENSHOTS")  # a folder to keep the screenshots in (development)
PAGES = ("/", "/tasks", "/tasks/ux", "/models", "/runs", "/runs/{a}", "/compare?a={a}&b={b}", "/api")
NAV = ["Overview", "Tasks", "Models", "Runs", "Compare", "Arena", "API"]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from harness.leaderboard.app import create_app

    tmp = tmp_path_factory.mktemp("ux-browser")
    app = create_app(f"sqlite:///{tmp / 'ux.db'}", media_roots=[tmp], cache_seconds=0.2)
    sessions = app.state.sessions
    ids = {"a": make_run(sessions, "ux-a", "builtin:a"),
           "b": make_run(sessions, "ux-b", "builtin:b", right={0, 1, 2, 3, 4, 6, 8, 10}),
           "live": make_run(sessions, "ux-live", "builtin:c", rows=[], status="running", n_samples=10)}
    with serve(app) as base:
        yield base, ids, sessions, tmp
    sessions.kw["bind"].dispose()


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _watch(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def _shot(page, tmp: Path, name: str) -> None:
    path = Path(SHOTS or tmp) / f"pages-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def _background(page) -> tuple[int, int, int]:
    rgb = page.evaluate("getComputedStyle(document.body).backgroundColor")
    return tuple(int(x) for x in re.findall(r"\d+", rgb)[:3])  # type: ignore[return-value]


def _is_dark(rgb: tuple[int, int, int]) -> bool:
    return sum(rgb) / 3 < 60


def test_narrow_layout_no_sideways_scroll_and_menu_reaches_every_link(live, browser):
    base, ids, _, tmp = live
    for js in (True, False):
        ctx = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=js)
        page = ctx.new_page()
        errors = _watch(page)
        for path in PAGES:
            page.goto(base + path.format(**ids))
            if js and "/tasks/ux" in path:
                page.wait_for_selector("#chart-scores .main-svg", timeout=20000)
            widths = page.evaluate("[document.documentElement.scrollWidth, document.body.scrollWidth]")
            assert max(widths) <= 390, (path, widths)
            if js and "/tasks/ux" in path:  # the chart fits its card
                box = page.locator("#chart-scores .main-svg").first.bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390
            if path in ("/runs", "/runs/{a}"):  # a wide table scrolls inside its card, not the page
                wrap = page.locator(".table-wrap").first
                assert wrap.evaluate("e => e.getBoundingClientRect().right") <= 390
        if js:
            _shot(page, tmp, "run-390")
        # the navigation is folded behind the menu button; opening it shows every link on screen
        page.goto(base + "/")
        links = page.locator("nav.mainnav a")
        assert not links.first.is_visible()
        page.click("label.nav-button")
        assert [t.strip() for t in links.all_inner_texts()] == NAV
        for i in range(links.count()):
            box = links.nth(i).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["y"] >= 0
        page.click("nav.mainnav a:has-text('Runs')")
        page.wait_for_url("**/runs")
        assert page.locator("h1").inner_text() == "Runs"
        assert errors == []
        ctx.close()
    # at desktop width the links are simply there
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(base + "/")
    assert page.locator("nav.mainnav a").first.is_visible() and not page.locator("label.nav-button").is_visible()
    page.close()


def test_dark_theme_follows_the_system_and_the_toggle_and_charts_follow(live, browser):
    base, ids, _, tmp = live
    ctx = browser.new_context(viewport={"width": 1366, "height": 900}, color_scheme="dark")
    page = ctx.new_page()
    errors = _watch(page)
    page.goto(base + "/tasks/ux")
    assert _is_dark(_background(page))
    page.wait_for_selector("#chart-scores .main-svg", timeout=20000)
    paper = "document.querySelector('#chart-scores .main-svg').style.background"
    assert _is_dark(tuple(int(x) for x in re.findall(r"\d+", page.evaluate(paper))[:3]))  # type: ignore[arg-type]
    assert page.locator("#chart-cost").count() == 0  # every cost is zero: no Pareto chart
    # the chart follows its card when the window narrows
    svg = page.locator("#chart-scores .main-svg").first
    wide = svg.evaluate("e => e.getBoundingClientRect().width")
    page.set_viewport_size({"width": 700, "height": 900})
    for _ in range(60):
        narrow = svg.evaluate("e => e.getBoundingClientRect().width")
        if narrow < wide and narrow <= 700:
            break
        page.wait_for_timeout(100)
    else:
        pytest.fail(f"the chart kept its width ({wide} px) in a 700 px window")
    page.set_viewport_size({"width": 1366, "height": 900})
    _shot(page, tmp, "task-dark")
    page.click("#theme-toggle")  # dark -> light, remembered
    assert not _is_dark(_background(page))
    for _ in range(50):  # the charts are redrawn in the new colours
        if not _is_dark(tuple(int(x) for x in re.findall(r"\d+", page.evaluate(paper))[:3])):  # type: ignore[arg-type]
            break
        page.wait_for_timeout(100)
    else:
        pytest.fail("the chart stayed dark after the toggle")
    assert "theme=light" in page.evaluate("document.cookie")
    page.goto(base + f"/runs/{ids['a']}")
    assert not _is_dark(_background(page))  # the cookie wins over the system preference
    ctx.close()
    light = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="light")
    page = light.new_page()
    errors += _watch(page)
    page.goto(base + f"/runs/{ids['a']}")
    assert not _is_dark(_background(page))
    page.click("#theme-toggle")
    assert _is_dark(_background(page))
    page.reload()
    assert _is_dark(_background(page))
    assert page.get_attribute("html", "data-theme") == "dark"
    _shot(page, tmp, "run-390-dark")
    light.close()
    assert errors == []


def test_filter_samples_by_score_and_sort(live, browser):
    base, ids, _, _ = live
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = _watch(page)
    page.goto(f"{base}/runs/{ids['a']}")
    page.fill("input[name=q]", "score:exact_match<1")
    page.select_option("select[name=sort]", "-latency")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**q=score**")
    assert page.locator("article.sample .sid").all_inner_texts() == ["11", "9", "7", "3", "1"]
    assert "5 samples" in page.locator("nav.pager").first.inner_text()
    # every shown exact_match badge is red (0 on a higher-is-better 0..1 score)
    assert set(page.locator("article.sample .chip.score:has-text('exact_match')").evaluate_all(
        "els => els.map(e => e.className)")) == {"chip score bad"}
    # the quick filters are links: the timeout error
    page.click(".quick a:has-text('error: timeout')")
    page.wait_for_url("**q=error**")
    assert page.locator("article.sample .sid").all_inner_texts() == ["5"]
    page.goto(f"{base}/runs/{ids['a']}?page=99999&per_page=5")
    assert "page 3 of 3" in page.locator("nav.pager").first.inner_text()
    page.close()
    assert errors == []


def test_compare_page_lists_disagreements_first(live, browser):
    base, ids, _, tmp = live
    page = browser.new_page(viewport={"width": 390, "height": 844})
    errors = _watch(page)
    page.goto(f"{base}/compare?a={ids['a']}&b={ids['b']}")
    headings = page.locator("main h2").all_inner_texts()
    assert headings[0].startswith("Samples where exact_match differs (2 of 12")
    assert page.locator("#diffs tbody td.sid").evaluate_all("els => els.map(e => e.firstChild.textContent)") == [
        "1", "3"]
    assert page.locator("#diffs tbody td.better").count() == 2  # B's side, by the declared direction
    widths = page.evaluate("[document.documentElement.scrollWidth, document.body.scrollWidth]")
    assert max(widths) <= 390
    _shot(page, tmp, "compare-390")
    page.close()
    assert errors == []


def test_running_run_page_refreshes_live(live, browser):
    base, ids, sessions, tmp = live
    run = ids["live"]
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = _watch(page)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/progress" in r.url else None)
    page.goto(f"{base}/runs/{run}")
    live_box = page.locator("#live")
    assert live_box.locator('[data-live="done"]').inner_text() == "0"
    add_samples(sessions, run, range(3))
    lease(sessions, run, range(3, 5))
    expect(live_box.locator('[data-live="done"]')).to_have_text("3", timeout=15000)
    assert live_box.locator('[data-live="leased"]').inner_text() == "2"
    assert live_box.locator('[data-live="pending"]').inner_text() == "5"
    assert page.locator('.card [data-live="value"]').inner_text() == "1.000"  # the running mean so far
    add_samples(sessions, run, range(3, 6), right=False)
    expect(live_box.locator('[data-live="done"]')).to_have_text("6", timeout=15000)
    assert page.locator('.card [data-live="value"]').inner_text() == "0.500"
    _shot(page, tmp, "live")
    assert requests and all(u.endswith(f"/api/runs/{run}/progress") for u in requests)
    page.close()
    assert errors == []


def test_media_frames_strip_video_size_and_mesh_viewer(live, browser):
    base, _, sessions, tmp = live
    from pages_ux_data import sample_row
    from test_leaderboard_data import tiny_png

    frames = [str(tiny_png(tmp / f"frame{i}.png", 64, 48)) for i in range(4)]
    mesh = tmp / "tetra.obj"
    mesh.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")
    (tmp / "clip.webm").write_bytes(b"\x1aE\xdf\xa3" + bytes(64))  # not decodable: only its box is measured
    row = sample_row(0, 0, right=True)
    row["input"]["messages"][0]["content"] += [{"type": "image", "path": p} for p in frames]
    row["details"] = {"media": [{"type": "mesh", "path": str(mesh)}, {"type": "video", "path": str(tmp / "clip.webm")}]}
    run = make_run(sessions, "ux-media", "builtin:m", rows=[row], n_samples=1)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = _watch(page)
    page.goto(f"{base}/runs/{run}")
    strip = page.locator(".media.strip")
    assert strip.locator("img").count() == 4  # four frames in one strip, side by side
    tops = strip.locator("img").evaluate_all("els => els.map(e => Math.round(e.getBoundingClientRect().top))")
    assert len(set(tops)) == 1
    for _ in range(100):  # (wait_for_function polls with eval, which the pages' CSP refuses)
        if strip.locator("img").evaluate_all("els => els.every(i => i.complete && i.naturalWidth > 0)"):
            break
        page.wait_for_timeout(50)
    assert strip.locator("img").first.evaluate("e => e.getBoundingClientRect().height") >= 120  # 48 px scaled up
    assert page.locator(".media video").evaluate("e => e.getBoundingClientRect().width") >= 320
    assert page.locator(".mesh-view").first.is_hidden()
    page.click(".mesh-btn")  # plotly.js is fetched now, then the arena's mesh3d figure is drawn
    page.wait_for_selector(".mesh-view .main-svg", timeout=20000)
    _shot(page, tmp, "media")
    page.close()
    assert errors == []

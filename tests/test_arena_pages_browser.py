"""The arena pages in headless Chromium (Debian's, through Playwright) inside the full leaderboard
app, with two real local OpenAI-compatible streaming servers in the live pool: a failed side leaves
no vote button enabled (and the API refuses the vote), the live page's header and answer cards have
their designed sizes at 1366 and 390 px, the ratings page fits 390 px, every page follows the dark
theme and its toggle, and plotly.js is fetched only where a chart is drawn. Screenshots go to
$HARNESS_SCREENSHOTS (else the test's temporary folder)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from arena_stream_server import StreamingServer
from live_server import chromium, serve
from sqlalchemy import func, select

from harness.leaderboard.arena import pool
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.demo import seed_renders, seed_text, seed_votes
from harness.leaderboard.arena.failures import FAILED_REPLY
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

SHOTS = os.environ.get("HARNESS_SCREENSHOTS")
WORDS = {"foxtrot-large": [w + " " for w in "alpha beta gamma delta epsilon zeta eta theta".split()],
         "owlbear-mini": [w + " " for w in "one two three four five six seven eight".split()]}
WIDTHS = (1366, 390)


class Battles:
    """ASGI middleware keeping the ``battle`` events the server sent (id and token), as a client could."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def record(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                for line in bytes(message.get("body", b"")).decode("utf-8", "replace").splitlines():
                    if line.startswith("data:") and '"type": "battle"' in line:
                        self.seen.append(json.loads(line[5:]))
            await send(message)

        await self.app(scope, receive, record)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from harness.leaderboard.app import create_app

    tmp = tmp_path_factory.mktemp("arena-pages")
    root = tmp / "artifacts"
    app = create_app(f"sqlite:///{tmp / 'arena.db'}", media_roots=[root])
    app.state.arena_config = ArenaConfig(secret="pages", min_votes=1, live_media_dir=str(tmp / "live"),
                                         votes_per_minute=1000, battles_per_minute=1000)
    seed_text(app.state.sessions)
    seed_renders(app.state.sessions, root)
    seed_votes(app.state.sessions, n_votes=200)
    servers = {n: StreamingServer(w, delay=0.02) for n, w in WORDS.items()}
    with app.state.sessions() as s:
        for n, srv in servers.items():
            pool.add(s, f"openai:{n}", srv.settings(), label=n)
    recorder = Battles(app)
    try:
        with serve(recorder) as base:
            app.state.test_servers = servers
            yield base, app, recorder, tmp
    finally:
        for srv in servers.values():
            srv.close()


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _shot(page: Any, tmp: Path, name: str) -> None:
    path = Path(SHOTS or tmp) / f"arena-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def _page(browser: Any, width: int, scheme: str = "light") -> tuple[Any, Any, list[str]]:
    ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    return ctx, page, errors


def _box(page: Any, selector: str) -> dict[str, float]:
    return page.evaluate("s => { const b = document.querySelector(s).getBoundingClientRect();"
                         " return {w: b.width, h: b.height, left: b.left, right: b.right}; }", selector)


def test_a_failed_side_leaves_no_vote_button_enabled_and_the_api_refuses(site, browser):
    base, app, recorder, tmp = site
    dead = StreamingServer(["never"])
    dead.close()  # its port refuses: the side that draws it fails
    with app.state.sessions() as s:  # the pool for this test: one answering model, one dead
        pool.remove(s, "owlbear-mini")
        pool.add(s, "openai:gone-model", dead.settings(), label="gone")
    try:
        for width in WIDTHS:
            ctx, page, errors = _page(browser, width)
            page.goto(f"{base}/arena/chat")
            page.fill("#prompt", "Count for me, please.")
            page.click("#send")
            page.wait_for_selector("#failed-actions:not([hidden])")
            states = page.eval_on_selector_all("#votes button", "bs => bs.map(b => b.disabled)")
            assert states == [True, True, True, True]
            assert "No output" in page.inner_text("#side-a") + page.inner_text("#side-b")
            assert page.is_visible("#retry") and page.is_visible("#new-pair")
            page.locator("body").click(position={"x": 5, "y": 5})
            page.keyboard.press("1")  # the vote key does nothing either
            page.wait_for_timeout(200)
            assert page.is_hidden("#reveal")
            battle = recorder.seen[-1]
            r = page.request.post(f"{base}/api/arena/chat/{battle['battle']}/vote",
                                  data={"token": battle["token"], "outcome": "left"})
            assert r.status == 409 and r.json()["detail"] == FAILED_REPLY
            with app.state.sessions() as s:
                b = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == battle["battle"]))
                assert b is not None and b.voted_at is None
                assert s.scalar(select(func.count()).select_from(ArenaVoteRow)
                                .where(ArenaVoteRow.battle_id == b.id)) == 0
            _shot(page, tmp, f"chat-failed-{width}")
            assert not errors, errors
            ctx.close()
    finally:
        with app.state.sessions() as s:
            pool.remove(s, "gone")
            pool.add(s, "openai:owlbear-mini", app.state.test_servers["owlbear-mini"].settings(), label="owlbear-mini")


def test_live_page_header_and_cards_have_their_sizes(site, browser):
    base, _, _, tmp = site
    for width in WIDTHS:
        ctx, page, errors = _page(browser, width)
        page.goto(f"{base}/arena/chat")
        bar, h1, sub = _box(page, ".arena .bar"), _box(page, ".arena h1"), _box(page, ".arena .bar .sub")
        a, b = _box(page, "#side-a"), _box(page, "#side-b")
        main = _box(page, "main")
        assert bar["h"] >= 60 and h1["h"] >= 24 and sub["h"] >= 18, (bar, h1, sub)  # not a 6 px strip
        if width >= 1000:  # side by side, each about half the page
            assert a["w"] >= 0.45 * main["w"] and b["w"] >= 0.45 * main["w"] and a["right"] <= b["left"], (a, b, main)
        else:  # one above the other, the full width
            assert a["w"] >= 0.9 * (main["w"] - 28) and b["w"] == a["w"], (a, main)
        assert a["h"] >= 100
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        _shot(page, tmp, f"chat-idle-{width}")
        assert not errors, errors
        ctx.close()


def test_ratings_page_fits_a_phone(site, browser):
    base, _, _, tmp = site
    ctx, page, errors = _page(browser, 390)
    page.goto(f"{base}/arena/ratings")
    page.wait_for_selector("#chart-ci .main-svg")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    table, card = _box(page, "#ratings"), _box(page, ".arena .table-card")
    assert table["w"] <= card["w"] + 0.5, (table, card)  # every column on screen, none scrolled away
    rights = page.eval_on_selector_all("#ratings th", "ths => ths.map(t => t.getBoundingClientRect().right)")
    assert len(rights) == 6 and max(rights) <= 390
    _shot(page, tmp, "ratings-390")
    assert not errors, errors
    ctx.close()


def _dark(page: Any) -> bool:
    return page.evaluate("""() => {
      const rgb = c => c.match(/\\d+/g).slice(0, 3).map(Number);
      const lum = c => { const [r, g, b] = rgb(c); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
      const body = getComputedStyle(document.body).backgroundColor;
      const card = document.querySelector('.arena .card, .arena .side');
      return lum(body) < 60 && (!card || lum(getComputedStyle(card).backgroundColor) < 60);
    }""")


def test_every_arena_page_follows_the_dark_theme_and_its_toggle(site, browser):
    base, _, _, tmp = site
    ctx, page, errors = _page(browser, 1366, "dark")
    for name, path in (("battle", "/arena?task=arena-demo"), ("battle-3d", "/arena?task=arena-demo-3d"),
                       ("chat", "/arena/chat"), ("ratings", "/arena/ratings")):
        page.goto(f"{base}{path}")
        assert page.get_attribute("html", "data-theme-lock") is None
        assert page.is_visible("#theme-toggle") and _dark(page), name
        _shot(page, tmp, f"{name}-dark")
    page.goto(f"{base}/arena?task=arena-demo")
    page.click("#vote-left")
    page.wait_for_selector("#reveal-a .name")
    assert _dark(page)
    _shot(page, tmp, "reveal-dark")
    page.click("#theme-toggle")  # the toggle switches this page, and the next, to light
    assert page.get_attribute("html", "data-theme") == "light" and not _dark(page)
    page.goto(f"{base}/arena/ratings")
    assert not _dark(page)
    assert not errors, errors
    ctx.close()


def test_plotly_is_fetched_only_where_a_chart_is_drawn(site, browser):
    base, _, _, _ = site
    ctx, page, errors = _page(browser, 1366)

    def plotly_urls() -> list[str]:
        return page.evaluate("performance.getEntriesByType('resource').map(e => e.name)"
                             ".filter(n => n.includes('plotly'))")

    for path in ("/arena?task=arena-demo", "/arena/chat", "/arena?task=arena-demo-3d"):
        page.goto(f"{base}{path}")
        page.wait_for_load_state("load")
        assert plotly_urls() == [], path
    page.click("#side-a .mesh-btn")  # the 3D view: fetched now, from its versioned URL
    page.wait_for_selector("#side-a .mesh-view .main-svg")
    assert [u.split("/")[-1].split("=")[0] for u in plotly_urls()] == ["plotly.min.js?v"]
    page.goto(f"{base}/arena/ratings")
    page.wait_for_selector("#chart-ci .main-svg")
    assert len(plotly_urls()) == 1 and "?v=" in plotly_urls()[0]
    head = page.request.get(plotly_urls()[0], headers={"Accept-Encoding": "gzip"})
    assert "immutable" in head.headers["cache-control"]
    for asset in page.eval_on_selector_all("link[rel=stylesheet], script[src]", "es => es.map(e => e.href || e.src)"):
        assert "?v=" in asset, asset  # every file of the page is versioned, so cached for good
    assert not errors, errors
    ctx.close()

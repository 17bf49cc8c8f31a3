"""The arena in a real headless Chromium (Debian package driven by Playwright, no browser download)
inside the full leaderboard app on uvicorn: vote through the page, see the reveal, see renders, and
the ratings page draws its charts under the leaderboard's CSP."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from live_server import chromium, serve

from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.demo import DEMO_MODELS, seed_renders, seed_text

SHOTS = os.environ.get("HARNESS_SCREENSHOTS")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from harness.leaderboard.app import create_app

    tmp = tmp_path_factory.mktemp("arena-browser")
    url = f"sqlite:///{tmp / 'arena.db'}"
    root = tmp / "artifacts"
    app = create_app(url, media_roots=[root])
    app.state.arena_config = ArenaConfig(secret="browser", min_votes=1)
    seed_text(app.state.sessions)
    seed_renders(app.state.sessions, root)
    with serve(app) as base:
        yield base, tmp


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _shot(page, tmp: Path, name: str) -> None:
    path = Path(SHOTS or tmp) / f"arena-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def test_vote_through_the_page_and_see_the_reveal(live, browser):
    base, tmp = live
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    page.goto(f"{base}/arena?task=arena-demo")
    body = page.inner_text("body").lower()
    assert not [m for m in DEMO_MODELS if m in body]
    assert page.locator("#side-a .text").inner_text() != page.locator("#side-b .text").inner_text()
    _shot(page, tmp, "battle")
    page.click("#vote-left")
    page.wait_for_selector("#reveal-a .name")
    left, right = page.inner_text("#reveal-a .name"), page.inner_text("#reveal-b .name")
    assert left in DEMO_MODELS and right in DEMO_MODELS and left != right
    assert "your pick" in page.inner_text("#reveal-a") and "A is better" in page.inner_text("#your-vote")
    _shot(page, tmp, "reveal")

    # 3D task: four renders per side, all loaded, none named after a model
    page.goto(f"{base}/arena?task=arena-demo-3d")
    images = page.locator("#side-a img, #side-b img")
    assert images.count() == 8
    page.wait_for_function("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    srcs = [images.nth(i).get_attribute("src") for i in range(images.count())]
    assert not [s for s in srcs for m in DEMO_MODELS if m in s]
    page.click("#side-a .mesh-btn")  # the interactive view: plotly mesh3d from vertices and faces only
    page.wait_for_selector("#side-a .mesh-view .main-svg")
    _shot(page, tmp, "battle-3d")
    page.click("#vote-tie")
    page.wait_for_selector("#reveal-b .name")
    assert page.inner_text("#reveal-b .name") in DEMO_MODELS

    # replaying the used token (the form as it was) is refused
    assert not errors, errors
    page.goto(f"{base}/arena?task=arena-demo")
    token = page.get_attribute("input[name=token]", "value")
    page.click("#vote-right")
    page.wait_for_selector("#reveal-a .name")
    page.goto(f"{base}/arena?task=arena-demo")
    page.evaluate("t => { document.querySelector('input[name=token]').value = t; }", token)
    page.click("#vote-left")
    assert "already used" in page.inner_text("#arena-message")
    errors.clear()  # the refusal's own 409

    page.goto(f"{base}/arena/ratings")
    page.wait_for_selector("#chart-ci .main-svg")
    page.wait_for_selector("#chart-win .main-svg")
    assert page.locator("#ratings tbody tr").count() >= 2
    _shot(page, tmp, "ratings")
    assert not errors, errors

"""A minimal app around the arena router, for tests and for running the arena on its own
(``uvicorn --factory leaderboard.arena.standalone:app_from_env``). The leaderboard app
(leaderboard/app.py) includes the same router with its own pages and static files."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse

from harness.store.db import open_db

from .config import ArenaConfig


def create_arena_app(db_url: str | None = None, config: ArenaConfig | None = None,
                     media_roots: list[Path] | None = None) -> FastAPI:
    from .routes import router

    app = FastAPI(title="harness arena")
    app.state.sessions = open_db(db_url)
    app.state.arena_config = config or ArenaConfig()
    app.state.media_roots = list(media_roots or [])
    from .bodylimit import BodyLimit, arena_limit

    app.add_middleware(BodyLimit, limit_for=arena_limit)  # no body is parsed past the arena's cap
    _leaderboard_shell(app)
    app.include_router(router)
    return app


def _leaderboard_shell(app: FastAPI) -> None:
    """The leaderboard's static files and security headers (CSP) when that package provides them,
    so the arena pages look and behave as they do inside the full app."""
    from fastapi.staticfiles import StaticFiles

    static = Path(__file__).resolve().parent.parent / "static"
    try:
        from ..app import SecurityHeaders, plotly_js_path

        app.add_middleware(SecurityHeaders)
        plotly_js = plotly_js_path()

        @app.get("/static/plotly.min.js", include_in_schema=False)
        def plotly_min_js() -> FileResponse:
            return FileResponse(plotly_js, media_type="text/javascript")
    except ImportError:
        pass
    if static.is_dir():
        app.mount("/static", StaticFiles(directory=static), name="static")


def app_from_env() -> FastAPI:
    return create_arena_app()

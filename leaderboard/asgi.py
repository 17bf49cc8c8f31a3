"""ASGI entry point for multi-worker servers (``uvicorn harness.leaderboard.asgi:app --workers N``,
gunicorn): settings come from the environment ($HARNESS_DB_URL, $HARNESS_MEDIA_ROOT and the write
token in the variable named by $HARNESS_LEADERBOARD_WRITE_TOKEN_ENV, default $HARNESS_WRITE_TOKEN)."""

from __future__ import annotations

import os

from .app import create_app

app = create_app(write_token=os.environ.get(os.environ.get("HARNESS_LEADERBOARD_WRITE_TOKEN_ENV",
                                                           "HARNESS_WRITE_TOKEN")) or None)

"""The human-preference arena: anonymous pairwise battles over stored outputs and live battles on
the voter's own prompt, signed single-use vote tokens, rate limits, Bradley-Terry ratings
(harness.ratings). ``router`` goes into the leaderboard app; ``create_arena_app`` is a standalone
app for tests and small deployments."""

from . import routes_live  # noqa: F401  (adds the live battle routes to the router)
from .routes import router
from .standalone import create_arena_app

__all__ = ["router", "create_arena_app"]

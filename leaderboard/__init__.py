"""The web leaderboard: FastAPI app (``create_app``) over the results database."""

"""harness: evaluation harness with a SQL results store, leaderboard and arena."""

__version__ = "0.1.0"

"""CLI plugins: each module here defines ``register(app: typer.Typer)`` and adds its commands."""

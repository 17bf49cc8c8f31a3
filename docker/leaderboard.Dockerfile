# The harness web leaderboard (FastAPI + uvicorn). Build from the repository root:
#   docker build -f docker/leaderboard.Dockerfile -t harness-leaderboard .
# Run: docker run -p 8000:8000 -e HARNESS_DB_URL=postgresql+psycopg://USER:PASS@HOST/DB harness-leaderboard
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HARNESS_DB_URL=sqlite:////data/harness.db \
    HARNESS_MEDIA_ROOT=/media

WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY harness ./harness
COPY tasks ./tasks
COPY models ./models
COPY leaderboard ./leaderboard
# uvicorn[standard] brings httptools + uvloop: about 3x the requests/s of the pure-Python stack.
# DL3013: "." is this repository (its dependencies are bounded in pyproject.toml), not an index package.
# hadolint ignore=DL3013
RUN pip install ".[postgres,leaderboard]" "uvicorn[standard]==0.54.0" \
    && useradd --system --uid 10001 --home-dir /app harness \
    && mkdir -p /data /media \
    && chown harness /data

USER harness
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/api/tasks', timeout=4)"]
# A write token for `harness push` can come from $HARNESS_WRITE_TOKEN, or be created with
#   docker compose exec leaderboard harness tokens create NAME
CMD ["harness", "serve", "--host", "0.0.0.0", "--port", "8000"]

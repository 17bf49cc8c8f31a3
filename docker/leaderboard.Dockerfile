# The harness web leaderboard (FastAPI + uvicorn), installed from the project's wheel with the lock
# file's exact versions. Build from the repository root:
#   docker build -f docker/leaderboard.Dockerfile -t harness-leaderboard .
# Run: docker run -p 8000:8000 -e HARNESS_DB_URL=postgresql+psycopg://USER:PASS@HOST/DB harness-leaderboard
# tests/test_docker.py runs the two pip steps and the start command below in a fresh venv (no engine
# needed) and lints this file with hadolint.

# --- stage 1: the wheel (what `pip wheel .` makes is the product: data files included) ---
FROM python:3.11-slim AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY harness ./harness
COPY tasks ./tasks
COPY models ./models
COPY leaderboard ./leaderboard
RUN pip wheel --no-deps --wheel-dir /dist /src

# --- stage 2: the leaderboard, from the wheel, through the lock ---
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HARNESS_DB_URL=sqlite:////data/harness.db \
    HARNESS_MEDIA_ROOT=/media

COPY constraints.txt /tmp/constraints.txt
COPY --from=wheel /dist /tmp/dist
# uvicorn[standard] (the leaderboard extra) brings httptools + uvloop: about 3x the requests/s of
# the pure-Python stack. Every version comes from constraints.txt, the lock the tests ran with.
RUN for whl in /tmp/dist/harness-*.whl; do pip install --constraint /tmp/constraints.txt "${whl}[postgres,leaderboard]"; done
RUN useradd --system --uid 10001 --home-dir /data harness \
    && mkdir -p /data /media \
    && chown 10001 /data \
    && rm -rf /tmp/dist /tmp/constraints.txt

WORKDIR /data
USER 10001
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/api/tasks', timeout=4)"]
# A write token for `harness push` can come from $HARNESS_WRITE_TOKEN, or be created with
#   docker compose exec leaderboard harness tokens create NAME
CMD ["harness", "serve", "--host", "0.0.0.0", "--port", "8000"]

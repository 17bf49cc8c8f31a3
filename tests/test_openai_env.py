"""The openai backend follows the ``openai`` SDK's environment: $OPENAI_BASE_URL, $OPENAI_API_KEY,
$OPENAI_ORG_ID (a run with only the base URL set calls that server, not api.openai.com)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness.models.openai import DEFAULT_BASE_URL, OpenAISettings

pytest_plugins = ("openai_server",)  # the scripted_server fixture


def _harness(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**base, "NO_PROXY": "127.0.0.1", **env})


def test_a_run_with_only_openai_base_url_calls_that_server(scripted_server, tmp_path):
    scripted_server.set_reply("#### 42")
    db = f"sqlite:///{tmp_path / 'h.db'}"
    r = _harness(["eval", "-t", "gsm8k", "-m", "openai:tiny", "--limit", "3", "--db", db, "--no-progress"],
                 {"OPENAI_BASE_URL": scripted_server.base_url})
    assert r.returncode == 0, r.stderr
    assert "3 new, 0 already done, 0 errors" in r.stdout
    assert len(scripted_server.requests) == 3
    assert all("authorization" not in {h.lower() for h in q.headers} for q in scripted_server.requests)
    shown = json.loads(_harness(["runs", "--db", db, "--json"], {}).stdout)
    assert shown[0]["n_errors"] == 0 and shown[0]["n_done"] == 3


def test_key_and_organisation_come_from_the_environment(scripted_server, tmp_path):
    scripted_server.set_reply("#### 1")
    r = _harness(["eval", "-t", "gsm8k", "-m", "openai:tiny", "--limit", "1", "--db",
                  f"sqlite:///{tmp_path / 'h.db'}", "--no-progress"],
                 {"OPENAI_BASE_URL": scripted_server.base_url + "/", "OPENAI_API_KEY": "sk-test-env",
                  "OPENAI_ORG_ID": "org-demo"})
    assert r.returncode == 0, r.stderr
    (req,) = scripted_server.requests
    headers = {k.lower(): v for k, v in req.headers.items()}
    assert headers["authorization"] == "Bearer sk-test-env" and headers["openai-organization"] == "org-demo"


def test_explicit_settings_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-env")
    s = OpenAISettings.parse("m", {"base_url": "http://127.0.0.1:8000/v1", "headers": {"OpenAI-Organization": "o"}})
    assert s.base_url == "http://127.0.0.1:8000/v1" and s.headers == {"OpenAI-Organization": "o"}
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert OpenAISettings.parse("m", {}).base_url == DEFAULT_BASE_URL

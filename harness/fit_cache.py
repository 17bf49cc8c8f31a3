"""The one cache of fitted state for fit-then-predict backends (every family whose backends fit).

A backend that trains on the task's train split before it answers asks here first, and saves here
after a fit, so a rerun on the same data and settings loads the fit instead of training again.

- **Key** (:func:`fit_key`): a hash of the backend (name and variant), the settings that change what is
  fitted, the hash of the task content the fit consumed (:func:`samples_hash`: every train sample's
  record and the bytes of every file it names), the identity of the train set as the backend fits it
  (:func:`digest_arrays` of its arrays, or of its derived views), the seed, anything ``extra`` and
  :data:`FIT_CACHE_VERSION`. A change of any of them is another key, so it refits. (The runner's
  ``task.content_hash`` also covers the test split and the prompts, which a fit never sees: keying on
  it would refit for nothing and would miss a ``fit(train)`` made outside a run.)
- **Files**: ``$HARNESS_CACHE_DIR/<folder>/<kind>-<key>.pkl`` (plain data and numpy arrays) or
  ``.pt`` (torch tensors), where ``folder`` is where the family always kept its fits (``fits``, or a
  folder of the family's own such as ``FAMILY/fits``). Files of older key layouts are simply never read.
- **Reads are data only**: ``.pkl`` through :func:`harness.safeload.load_pickle` (allow-list
  unpickler), ``.pt`` through :func:`harness.safeload.load_torch` (``weights_only=True``), both with
  the structure check. A file that is corrupt, refused (a pickle naming ``os.system``), not a dict or
  rejected by the caller's ``restore`` is a cache miss with one warning line; nothing in it runs.
- **Writes are atomic**: each writer writes its own temporary file in the same folder and renames it
  over the final name, so a reader sees the old file or the new one, never half of one; concurrent
  writers of one key each leave a whole file (the last rename wins); a writer killed midway leaves
  only its temporary file, which no reader opens. A state the reader would refuse is refused when it
  is written (TypeError), so the cache never holds a file its own reader rejects.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from harness.safeload import MAX_DEPTH, SafeLoadError, check_structure, load_pickle, load_torch
from harness.types import Sample, stable_hash

__all__ = ["FIT_CACHE_VERSION", "Format", "cache_root", "digest_arrays", "file_digest", "fit_key", "load",
           "path_for", "samples_hash", "save"]

# bump when what a key means changes (a new component, another hash of the train data): old fits are
# then never read again
FIT_CACHE_VERSION = 1

Format = Literal["auto", "pickle", "torch"]
_SUFFIX = {"pickle": ".pkl", "torch": ".pt"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+=-]{0,99}")
_KEY = re.compile(r"[0-9a-f]{16,64}")
# what a caller's restore raises on a state that does not fit its backend (missing field, wrong
# shape for load_state_dict, ...): a miss, like a refused file
_RESTORE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError)

log = logging.getLogger(__name__)
T = TypeVar("T")


def cache_root() -> Path:
    """``$HARNESS_CACHE_DIR``, else ``~/.cache/harness``: the root every harness cache shares."""
    return Path(os.environ.get("HARNESS_CACHE_DIR") or Path.home() / ".cache" / "harness")


# --- keys ------------------------------------------------------------------------------------------


def fit_key(*, backend: str, settings: Mapping[str, Any], task_hash: str, train: str | Sequence[Sample],
            seed: int, extra: Mapping[str, Any] | None = None) -> str:
    """The cache key of one fit: 32 hex digits of the hash of every input that changes it.

    ``backend``: the backend's name and variant (``hartigan:batched``); ``settings``: the settings that
    change what is fitted (JSON-like values); ``task_hash``: :func:`samples_hash` of the task content
    the fit consumed; ``train``: the digest of the train set as fitted (or the samples, digested
    here); ``seed``: the fit's random seed; ``extra``: anything else (a layout version)."""
    digest = train if isinstance(train, str) else samples_hash(train)
    return stable_hash({"fit_cache": FIT_CACHE_VERSION, "backend": backend, "settings": dict(settings),
                        "task": task_hash, "train": digest, "seed": int(seed), "extra": dict(extra or {})})[:32]


def digest_arrays(*arrays: Any) -> str:
    """sha256 of numpy arrays (dtype, shape and bytes each; ``None`` stands for itself)."""
    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"none")
            continue
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


# (path, size, mtime_ns, inode) -> sha256: one process hashes a file once however many fits read it
_FILE_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def file_digest(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, or ``missing`` when it cannot be read (the fit reports why)."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read; a folder has no bytes
        return "not a file"
    memo = (os.fspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    known = _FILE_DIGESTS.get(memo)
    if known is not None:
        return known
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return "missing"
    _FILE_DIGESTS[memo] = digest = h.hexdigest()
    return digest


def samples_hash(samples: Sequence[Sample], files: Iterable[str | os.PathLike[str] | None] = ()) -> str:
    """The content hash of train samples as a task handed them over: each sample's record (id,
    messages, target, metadata, in order) and the bytes of every file a part names, plus those of
    ``files`` (paths a backend reads from elsewhere, such as an option). Editing a file in place
    therefore changes the hash, whatever its path and modification time."""
    records, paths = [], []
    for s in samples:
        records.append(s.to_dict())
        paths += [p.path for m in s.messages for p in m.content if p.path]
    paths += [os.fspath(f) for f in files if f]
    return stable_hash({"samples": records, "files": [[p, file_digest(p)] for p in paths]})


# --- files -----------------------------------------------------------------------------------------


def path_for(key: str, *, kind: str, folder: str = "fits", format: Literal["pickle", "torch"] = "pickle") -> Path:
    """Where the fit ``key`` of ``kind`` lives: ``<cache root>/<folder>/<kind>-<key>.pkl`` (or ``.pt``).
    ``kind`` and each part of ``folder`` are plain names and ``key`` is hex, so no path leaves the root."""
    if not _NAME.fullmatch(kind):
        raise ValueError(f"fit cache kind {kind!r} is not a plain name (letters, digits, _ . + = -)")
    if not _KEY.fullmatch(key):
        raise ValueError(f"fit cache key {key!r} is not a hex digest (use fit_key)")
    parts = folder.split("/")
    if not all(_NAME.fullmatch(p) for p in parts):
        raise ValueError(f"fit cache folder {folder!r} is not a relative path of plain names")
    return cache_root().joinpath(*parts) / f"{kind}-{key}{_SUFFIX[format]}"


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def _miss(reason: str) -> None:
    log.warning("warning: fit cache file not used, fitting again: %s", _one_line(reason))


def _read(path: Path) -> dict[str, Any]:
    """The state in ``path`` (SafeLoadError for anything but a dict of data; OSError as it comes)."""
    state = load_torch(path) if path.suffix == ".pt" else load_pickle(path)
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise SafeLoadError(f"{path}: not a fit state (a {type(state).__name__}, not a dict with string keys)")
    return state


@overload
def load(key: str, *, kind: str, folder: str = ...) -> dict[str, Any] | None: ...


@overload
def load(key: str, *, kind: str, folder: str = ..., restore: Callable[[dict[str, Any]], T]) -> T | None: ...


def load(key: str, *, kind: str, folder: str = "fits", restore: Callable[[dict[str, Any]], Any] | None = None
         ) -> Any:
    """The cached state of fit ``key`` (``restore(state)`` when given), or None to fit again.

    No file: None, silently. A file that cannot be read, is refused by :mod:`harness.safeload`, is not a
    dict, or makes ``restore`` raise (KeyError, TypeError, ValueError, RuntimeError, ...): None with one
    warning line naming the file and the reason; the next :func:`save` replaces it."""
    for fmt in ("pickle", "torch"):
        path = path_for(key, kind=kind, folder=folder, format=fmt)
        if not path.exists():
            continue
        if not path.is_file():  # a folder or a FIFO planted there: opening a FIFO would wait forever
            _miss(f"{path}: not a regular file")
            continue
        try:
            state = _read(path)
        except SafeLoadError as exc:  # its message names the file
            _miss(str(exc))
            continue
        except OSError as exc:  # no permission, removed meanwhile, ...
            _miss(f"{path}: {type(exc).__name__}: {exc.strerror or exc}")
            continue
        if restore is None:
            return state
        try:
            return restore(state)
        except _RESTORE_ERRORS as exc:
            _miss(f"{path}: not a fit this backend can use ({type(exc).__name__}: {_one_line(str(exc))})")
    return None


def _has_tensor(obj: Any, depth: int = 0) -> bool:
    torch = sys.modules.get("torch")
    if torch is None or depth > MAX_DEPTH:  # no tensor exists before torch is imported
        return False
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, dict):
        return any(_has_tensor(v, depth + 1) for v in obj.values())
    if isinstance(obj, list | tuple):
        return any(_has_tensor(v, depth + 1) for v in obj)
    return False


def _check_torch(obj: Any, where: str, depth: int = 0) -> None:
    """TypeError unless ``obj`` is what ``load_torch`` reads back: tensors, numbers, strings and
    containers of them (numpy arrays are refused by that reader, so they are refused here)."""
    import numpy as np
    import torch

    if depth > MAX_DEPTH:
        raise TypeError(f"fit_cache.save: {where} nests more than {MAX_DEPTH} containers deep")
    if obj is None or isinstance(obj, str | bytes | int | float | bool | torch.Tensor | np.number | np.bool_):
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str | int):
                raise TypeError(f"fit_cache.save: {where} has a key of type {type(k).__name__}")
            _check_torch(v, f"{where}[{k!r}]", depth + 1)
        return
    if isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            _check_torch(v, f"{where}[{i}]", depth + 1)
        return
    raise TypeError(f"fit_cache.save: {where} is a {type(obj).__module__}.{type(obj).__qualname__}; a torch fit "
                    "state holds tensors, numbers, strings and containers of them (no numpy arrays)")


def save(key: str, state: Mapping[str, Any], *, kind: str, folder: str = "fits", format: Format = "auto"
         ) -> Path | None:
    """Write ``state`` as fit ``key`` and return its path, atomically (module docstring).

    ``format``: ``pickle`` (plain data and numpy arrays), ``torch`` (tensors and plain data, through
    ``torch.save``), or ``auto``: torch when the state holds a tensor, else pickle. A state the reader
    would refuse raises TypeError. A folder that cannot be written is one warning line and None: the
    fit in memory is still good, only the next run fits again."""
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise TypeError(f"fit_cache.save: the state must be a dict with string keys, not {type(state).__name__}")
    fmt: Literal["pickle", "torch"] = ("torch" if _has_tensor(state) else "pickle") if format == "auto" else format
    if fmt == "pickle":
        try:
            check_structure(state, "fit state")
        except SafeLoadError as exc:
            raise TypeError(f"fit_cache.save: {exc} (save tensors with format='torch')") from None
    else:
        _check_torch(state, "fit state")
    path = path_for(key, kind=kind, folder=folder, format=fmt)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        log.warning("warning: fit cache not written (%s: %s)", path.parent, exc.strerror or exc)
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            if fmt == "pickle":
                pickle.dump(state, fh, protocol=5)
            else:
                import torch

                torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())  # the bytes are on disk before the name points at them
        os.replace(tmp, path)
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        log.warning("warning: fit cache not written (%s: %s)", path, exc.strerror or exc)
        return None
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    return path

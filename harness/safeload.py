"""Pickles and checkpoints read as data, never as code: the one loader for every such file the project reads.

A pickle is a program: ``pickle.load`` calls whatever importable function the file names (a
``person_bbox.pkl`` whose ``__reduce__`` is ``os.system`` runs a shell command). Every file a user
downloads or receives is data, so nothing here calls a function the file chooses:

- :func:`load_pickle` reads a pickle with an allow-list. Containers and scalars the pickle opcodes build
  themselves (dict, list, tuple, str, bytes, int, float, bool, None), ``set``, ``frozenset``,
  ``bytearray``, ``complex``, and numpy arrays and scalars of plain dtypes (bool, integers, floats,
  complex, fixed-width str/bytes/void; no object, structured or datetime dtypes). Every other global is
  refused, naming it. Arrays are rebuilt here from (dtype, shape, bytes) after checking that the shape
  needs exactly the bytes the file holds, and the arrays of one file may not add up to more bytes than
  the file has (a reference to one buffer repeated a million times is refused): numpy's own unpickling
  code never sees the file, and nothing is allocated that the file does not hold.
- After loading, the structure is checked: at most ``MAX_DEPTH`` containers deep (so code that walks the
  result recursively cannot overflow the stack; a container holding itself is infinitely deep), and,
  counting shared references as often as they are reached (as any consumer that walks the result does),
  at most ``NODES_PER_BYTE`` items per byte of the file, so a small file cannot unfold into an
  exponentially large tree.
- :func:`dump_pickle` writes what :func:`load_pickle` reads back (and refuses anything else when
  writing, so a cache never becomes a file that its own reader refuses), atomically.
- :func:`load_torch` is ``torch.load(weights_only=True)`` (tensors, plain containers and scalars),
  plus the same structure check.

Every refusal is a :class:`SafeLoadError`: one line naming the file and the reason, which the CLI prints
as ``error: ...`` with exit status 2.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from harness.errors import UserError

__all__ = ["MAX_DEPTH", "NODES_PER_BYTE", "SafeLoadError", "check_structure", "dump_pickle", "load_pickle",
           "load_torch"]

MAX_DEPTH = 64  # containers inside containers: real annotation files and caches nest 3 to 6 deep
NODES_PER_BYTE = 16  # an unshared item costs the pickle at least one byte; shared leaves a few more
_NODE_SLACK = 1_000_000
_MAX_NDIM = 32
# dtype strings as numpy pickles them: kind + item size ('f8', 'i4', 'b1', 'U20', 'S3', 'V16')
_DTYPE_SPEC = re.compile(r"[biufcUSV][0-9]{1,9}")
_PLAIN_KINDS = frozenset("biufcUSV")
_SCALARS: frozenset[type] = frozenset({str, bytes, bytearray, int, float, bool, complex, type(None)})


class SafeLoadError(UserError, ValueError):
    """A pickle or checkpoint that was not loaded: the message names the file and why (one line)."""


class _Refused(Exception):
    """Raised inside the unpickler; :func:`load_pickle` adds the file name."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


# --- the restricted unpickler ----------------------------------------------------------------------


class _NdarrayToken:
    """Stands for ``numpy.ndarray`` in a pickle: only ``_reconstruct`` accepts it (calling the real
    class would allocate any shape the file names)."""

    __slots__ = ()


_NDARRAY = _NdarrayToken()


class _Dtype:
    """A numpy dtype named by a pickle; resolved to a real dtype only from an allowed spec and state
    (numpy's dtype ``__setstate__`` never runs on file data)."""

    __slots__ = ("spec", "base", "state", "resolved")

    def __init__(self, spec: Any, align: Any = False, copy: Any = True) -> None:
        if not isinstance(spec, str) or not _DTYPE_SPEC.fullmatch(spec):
            raise _Refused(f"numpy dtype {spec!r} (only bool, integer, float, complex, str, bytes and void)")
        try:
            self.base: np.dtype[Any] = np.dtype(spec)
        except TypeError:
            raise _Refused(f"numpy dtype {spec!r} (not a dtype this numpy knows)") from None
        if self.base.itemsize == 0:
            raise _Refused(f"numpy dtype {spec!r} of size 0")
        self.spec, self.state = spec, None
        self.resolved: np.dtype[Any] | None = None

    def __setstate__(self, state: Any) -> None:
        self.state, self.resolved = state, None

    def resolve(self) -> np.dtype[Any]:
        if not hasattr(self, "base"):  # made without __init__ (a NEWOBJ in the file)
            raise _Refused("a numpy dtype without its name")
        if self.resolved is None:
            self.resolved = self._resolve()
        return self.resolved

    def _resolve(self) -> np.dtype[Any]:
        dtype = self.base
        state = self.state
        if state is None:
            return dtype
        if not isinstance(state, tuple) or len(state) not in (8, 9) or state[0] not in (3, 4):
            raise _Refused(f"numpy dtype {self.spec!r} with an unknown state layout")
        _, order, subarray, names, fields, elsize = state[:6]
        if subarray is not None or names is not None or fields is not None or (len(state) == 9 and state[8]):
            raise _Refused(f"structured numpy dtype {self.spec!r} (only plain dtypes are read)")
        if order not in ("<", ">", "|", "="):
            raise _Refused(f"numpy dtype {self.spec!r} with byte order {order!r}")
        if dtype.kind in "USV" and elsize != dtype.itemsize:
            raise _Refused(f"numpy dtype {self.spec!r} with item size {elsize!r}")
        return dtype.newbyteorder(order) if order in "<>" else dtype


class _PendingArray:
    """What ``_reconstruct`` returns: the array is built from its state once loading is done."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        if self.state is not None:
            raise _Refused("an array given its data twice")
        self.state = state


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], budget: int) -> None:
        # latin1: Python 2 pickles' byte strings (numpy's array data among them) stay bytes-for-bytes
        super().__init__(file, encoding="latin1")
        self.size = self.budget = budget  # bytes the built arrays and copies may still take
        self.allowed: dict[tuple[str, str], Any] = {}
        for builtins in ("builtins", "__builtin__"):
            self.allowed.update({(builtins, "set"): self._set, (builtins, "frozenset"): self._frozenset,
                                 (builtins, "bytearray"): self._bytearray, (builtins, "bytes"): self._bytes,
                                 (builtins, "complex"): complex})
        self.allowed[("_codecs", "encode")] = self._latin1  # how protocol 2 writes bytes
        self.allowed[("numpy", "ndarray")] = _NDARRAY
        self.allowed[("numpy", "dtype")] = self._dtype
        for core in ("numpy.core", "numpy._core"):
            self.allowed[(f"{core}.multiarray", "_reconstruct")] = self._reconstruct
            self.allowed[(f"{core}.multiarray", "scalar")] = self._scalar
            self.allowed[(f"{core}.numeric", "_frombuffer")] = self._frombuffer

    def find_class(self, module: str, name: str) -> Any:
        target = self.allowed.get((module, name))
        if target is None:
            raise _Refused(f"refused global {module}.{name} (only plain data is read: containers, numbers, "
                           "strings and numpy arrays)")
        return target

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("refused a persistent id (only plain data is read)")

    def charge(self, nbytes: int, what: str) -> None:
        if nbytes > self.budget:
            raise _Refused(f"{what} of {nbytes} bytes takes the data built past the {self.size} bytes the file "
                           "holds (data repeated by reference)")
        self.budget -= nbytes

    # builtins, each charged for what it copies (a shared argument could otherwise be copied many times)
    def _set(self, items: Any = ()) -> set[Any]:
        self.charge(len(items) if isinstance(items, list | tuple) else 0, "a set")
        return set(items)

    def _frozenset(self, items: Any = ()) -> frozenset[Any]:
        self.charge(len(items) if isinstance(items, list | tuple) else 0, "a frozenset")
        return frozenset(items)

    def _bytes(self, *args: Any) -> bytes:
        if args:
            raise _Refused("bytes() with arguments (only the empty bytes object is written that way)")
        return b""

    def _bytearray(self, *args: Any) -> bytearray:
        if not args:
            return bytearray()
        data = self._latin1(*args) if len(args) == 2 else args[0]
        if len(args) > 2 or not isinstance(data, bytes):
            raise _Refused("bytearray() from something other than bytes")
        self.charge(len(data), "a bytearray")
        return bytearray(data)

    @staticmethod
    def _latin1(text: Any, encoding: Any = "latin1") -> bytes:
        if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
            raise _Refused("_codecs.encode other than a latin-1 string")
        return text.encode("latin1")

    # numpy
    @staticmethod
    def _dtype(spec: Any, align: Any = False, copy: Any = True) -> _Dtype:
        return _Dtype(spec)  # a function, not the class: the pickle cannot NEWOBJ it

    @staticmethod
    def _reconstruct(subtype: Any, shape: Any, typecode: Any) -> _PendingArray:
        if subtype is not _NDARRAY:
            raise _Refused("numpy _reconstruct of something other than numpy.ndarray")
        return _PendingArray()

    def _scalar(self, dtype: Any, data: Any) -> Any:
        real = _resolve(dtype)
        raw = data.encode("latin1") if isinstance(data, str) else data
        if not isinstance(raw, bytes) or len(raw) != real.itemsize:
            raise _Refused(f"a numpy {real} scalar whose data is not {real.itemsize} bytes")
        return np.frombuffer(raw, dtype=real, count=1)[0]

    def _frombuffer(self, buf: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray[Any, Any]:
        return self.build(buf, dtype, shape, order == "F")

    def build(self, raw: Any, dtype: Any, shape: Any, fortran: Any) -> np.ndarray[Any, Any]:
        """An array from its parts, after checking them against each other and against the budget.
        (Written for speed: an annotation file holds millions of small arrays.)"""
        real = (getattr(dtype, "resolved", None) if type(dtype) is _Dtype else None) or _resolve(dtype)
        if type(raw) is not bytes and type(raw) is not bytearray:
            if type(raw) is not str:
                raise _Refused("numpy array data that is not bytes")
            raw = raw.encode("latin1")
        if type(shape) is not tuple or len(shape) > _MAX_NDIM:
            raise _Refused(f"numpy array shape {repr(shape)[:40]}")
        count = 1
        for n in shape:
            if type(n) is not int or n < 0:
                raise _Refused(f"numpy array shape {repr(shape)[:40]}")
            count *= n
        needed = count * real.itemsize
        if needed != len(raw):
            raise _Refused(f"a numpy array of shape {shape} and dtype {real} needs {needed} bytes, "
                           f"the file holds {len(raw)}")
        if needed > self.budget:
            self.charge(needed, "a numpy array")
        self.budget -= needed
        # a copy: the array owns writable, aligned memory and keeps no reference to the file's bytes
        return np.ndarray(shape, dtype=real, buffer=raw, order="F" if fortran else "C").copy(order="K")

    def finish_array(self, pending: _PendingArray) -> np.ndarray[Any, Any]:
        state = pending.state
        if type(state) is tuple and len(state) == 5:
            state = state[1:]  # (version, shape, dtype, is_fortran, data); version 0 pickles lack the version
        if type(state) is not tuple or len(state) != 4:
            raise _Refused("a numpy array without its data")
        shape, dtype, fortran, raw = state
        if type(fortran) is not bool and type(fortran) is not int:
            raise _Refused("a numpy array whose memory order is not a flag")
        return self.build(raw, dtype, shape, fortran)


def _resolve(dtype: Any) -> np.dtype[Any]:
    if not isinstance(dtype, _Dtype):
        raise _Refused("a numpy value whose dtype is not a numpy.dtype")
    return dtype.resolve()


def _number_scalar(dtype: Any, data: Any) -> Any:
    """numpy's ``scalar`` for torch checkpoints (a float64 learning rate in an optimiser's state):
    numbers only, whose few bytes are all in the file."""
    real = _resolve(dtype)
    if real.kind not in "biufc" or not isinstance(data, bytes) or len(data) != real.itemsize:
        raise _Refused(f"a numpy {real} scalar (only numbers, with their bytes)")
    return np.frombuffer(data, dtype=real, count=1)[0]


# --- the structure check ---------------------------------------------------------------------------


class _Walk:
    """One pass over a loaded object. It recurses, but never deeper than ``max_depth`` containers (a
    cycle is infinitely deep, so it is refused the same way), and it visits shared containers once per
    reference (counting them against ``max_nodes``), so its time is bounded by the node limit and it
    needs no table of everything it saw."""

    def __init__(self, max_depth: int, max_nodes: int | None, finish: Callable[[Any], Any] | None,
                 other_leaves: bool) -> None:
        self.max_depth, self.finish, self.other_leaves = max_depth, finish, other_leaves
        self.left = max_nodes if max_nodes is not None else math.inf
        self.max_nodes = max_nodes
        self.arrays: dict[int, tuple[Any, Any]] = {}  # id(placeholder) -> (placeholder, array): built once

    def count(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise _Refused(f"unfolds to more than {self.max_nodes} items (shared references repeated)")

    def value(self, obj: Any, depth: int) -> Any:
        """``obj`` checked, with placeholders replaced (lists and dicts in place, tuples rebuilt)."""
        kind = type(obj)
        if kind is list or kind is dict or kind is tuple or kind is set or kind is frozenset or (
                self.other_leaves and isinstance(obj, dict)):
            if depth > self.max_depth:
                raise _Refused(f"nested more than {self.max_depth} containers deep (or contains itself)")
            self.count(len(obj) + 1)
            return self.container(obj, kind, depth + 1)
        if kind is _PendingArray and self.finish is not None:
            built = self.arrays.get(id(obj))
            if built is None:
                built = self.arrays[id(obj)] = (obj, self.finish(obj))
            return built[1]
        if kind in _SCALARS:
            return obj
        if kind is np.ndarray:
            if obj.dtype.kind not in _PLAIN_KINDS or obj.dtype.fields is not None:
                raise _Refused(f"a numpy array of dtype {obj.dtype} (only plain dtypes)")
            return obj
        if isinstance(obj, np.generic) and obj.dtype.kind in _PLAIN_KINDS and obj.dtype.fields is None:
            return obj
        if kind is _Dtype or kind is _NdarrayToken:
            raise _Refused("a numpy dtype or class outside an array")
        if self.other_leaves:
            return obj
        raise _Refused(f"a value of type {kind.__module__}.{kind.__qualname__} (only plain data)")

    def container(self, obj: Any, kind: type, depth: int) -> Any:
        scalars, value = _SCALARS, self.value
        if kind is list:
            for i, item in enumerate(obj):
                if type(item) not in scalars:
                    new = value(item, depth)
                    if new is not item:
                        obj[i] = new
            return obj
        if kind is tuple:
            parts = [item if type(item) in scalars else value(item, depth) for item in obj]
            return obj if all(a is b for a, b in zip(parts, obj, strict=True)) else tuple(parts)
        if kind is set or kind is frozenset:
            for item in obj:
                if type(item) not in scalars and value(item, depth) is not item:
                    raise _Refused("a numpy array inside a set")
            return obj
        for key, item in obj.items():  # a dict (or, in a torch checkpoint, an OrderedDict)
            if type(key) not in scalars and value(key, depth) is not key:
                raise _Refused("a numpy array inside a dict key")
            if type(item) not in scalars:
                new = value(item, depth)
                if new is not item:
                    obj[key] = new  # same key: the dict does not change size while it is iterated
        return obj


def check_structure(obj: Any, source: str, *, max_depth: int = MAX_DEPTH, max_nodes: int | None = None,
                    finish: Callable[[Any], Any] | None = None, other_leaves: bool = False) -> Any:
    """``obj`` after checking that it nests at most ``max_depth`` containers deep (no cycle) and unfolds
    (shared references counted each time they are reached) to at most ``max_nodes`` items. Types other
    than plain containers, scalars and numpy values are refused unless ``other_leaves`` (a torch
    checkpoint's tensors). ``finish`` builds loader placeholders; the result has them replaced.
    Raises SafeLoadError naming ``source``."""
    try:
        return _Walk(max_depth, max_nodes, finish, other_leaves).value(obj, 1)
    except _Refused as exc:
        raise SafeLoadError(f"{source}: {exc}") from None


# --- public loaders --------------------------------------------------------------------------------


def load_pickle(path: str | Path, *, max_depth: int = MAX_DEPTH) -> Any:
    """The data in pickle ``path``, read with the allow-list and checks of the module docstring.
    Raises SafeLoadError (one line naming the file) for refused or malformed content; OSError when the
    file cannot be opened."""
    path = Path(path)
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        unpickler = _Unpickler(fh, budget=size)
        try:
            data = unpickler.load()
        except _Refused as exc:
            raise SafeLoadError(f"{path}: {exc}") from None
        except RecursionError:
            raise SafeLoadError(f"{path}: not a readable pickle (nested too deeply)") from None
        except Exception as exc:  # any malformed pickle: truncated, bad opcode, wrong argument types, ...
            raise SafeLoadError(f"{path}: not a readable pickle ({_one_line(exc)})") from None
    return check_structure(data, str(path), max_depth=max_depth, max_nodes=NODES_PER_BYTE * size + _NODE_SLACK,
                           finish=unpickler.finish_array)


def dump_pickle(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` (plain data and numpy arrays only: TypeError otherwise) so that :func:`load_pickle`
    reads it back; atomic (a concurrent reader sees the old file or the new one)."""
    try:
        check_structure(obj, "object to pickle")
    except SafeLoadError as exc:
        raise TypeError(f"dump_pickle: {exc}") from None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with tmp.open("wb") as fh:
        pickle.dump(obj, fh, protocol=5)
    tmp.replace(path)
    return path


_TORCH_GLOBAL = re.compile(r"GLOBAL (\S+)")
# torch's message around the reason: the same advice every time, not about this file
_TORCH_BOILERPLATE = ("Weights only load failed", "Please file an issue", "Check the documentation")


def load_torch(path: str | Path, *, map_location: str = "cpu", max_depth: int = MAX_DEPTH) -> Any:
    """``torch.load(path, weights_only=True)``: tensors, plain containers and scalars, no code. Raises
    SafeLoadError (one line naming the file and, for a refusal, the refused global)."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise SafeLoadError(f"{path}: file not found")
    # numpy number scalars, through this module's checked constructors registered under numpy's names
    # (never numpy's own): optimiser states often hold a numpy float
    numpy_scalars: list[Any] = [(_Dtype, "numpy.dtype")] + [(_number_scalar, f"numpy.{core}.multiarray.scalar")
                                                            for core in ("core", "_core")]
    try:
        with torch.serialization.safe_globals(numpy_scalars), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol")  # we report what fails
            data = torch.load(path, map_location=map_location, weights_only=True)
    except _Refused as exc:
        raise SafeLoadError(f"{path}: {exc}") from None
    except pickle.UnpicklingError as exc:
        text = str(exc)
        refused = _TORCH_GLOBAL.search(text)
        if refused:
            raise SafeLoadError(f"{path}: refused global {refused.group(1)} (a checkpoint is read as tensors "
                                "and plain data only)") from None
        reasons = [line.strip() for line in text.splitlines()
                   if line.strip() and not line.startswith(_TORCH_BOILERPLATE)]
        raise SafeLoadError(f"{path}: refused to load ({'; '.join(reasons) or _one_line(exc)})") from None
    except RecursionError:
        raise SafeLoadError(f"{path}: not a readable PyTorch checkpoint (nested too deeply)") from None
    except Exception as exc:  # not a zip / legacy checkpoint, truncated, bad records, ...
        raise SafeLoadError(f"{path}: not a readable PyTorch checkpoint ({_one_line(exc)})") from None
    return check_structure(data, str(path), max_depth=max_depth, other_leaves=True)

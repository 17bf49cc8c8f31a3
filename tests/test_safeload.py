"""harness.safeload: pickles and checkpoints are read as data, never run as code.

Each attack is the file an attacker would send: a ``__reduce__`` that calls ``os.system``, an array
header that claims a terabyte, one buffer referenced a thousand times, 100,000 nested dicts, a list
that doubles at every level, a container that holds itself. The control test shows the payload does
run under plain ``pickle.loads``, so the "no marker" assertions can fail.
"""

from __future__ import annotations

import os
import pickle
import resource
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.errors import UserError
from harness.safeload import MAX_DEPTH, SafeLoadError, check_structure, dump_pickle, load_pickle, load_torch


class Payload:
    """Pickles as a call of os.system: loading it with plain pickle runs the shell command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _refused(path: Path, *fragments: str) -> SafeLoadError:
    with pytest.raises(SafeLoadError) as err:
        load_pickle(path)
    message = str(err.value)
    assert isinstance(err.value, UserError) and "\n" not in message and str(path) in message
    for fragment in fragments:
        assert fragment in message, message
    return err.value


def test_the_payload_runs_under_plain_pickle(tmp_path: Path) -> None:
    marker = tmp_path / "control"
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()  # the payload works: its absence below means it was not run


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_payload_is_refused_by_name_and_never_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"frame": [1, {"bbox": Payload(marker)}]}, protocol=protocol))
    _refused(path, "refused global posix.system")
    assert not marker.exists()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (type(b) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                and a.flags.f_contiguous == b.flags.f_contiguous and b.flags.writeable)
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


DATA = {
    "c": np.arange(6, dtype=np.float32).reshape(2, 3), "f": np.arange(6.0).reshape(2, 3).T,
    "strided": np.zeros((3, 4))[:, ::2], "big_endian": np.arange(3, dtype=">i4"), "bool": np.array([True, False]),
    "text": np.array(["ab", "c"]), "bytes_array": np.array([b"ab"]), "void": np.zeros(2, "V4"),
    "half": np.ones(2, np.float16), "empty": np.ones((0, 3)), "complex": np.array([1 + 2j]),
    "f64": np.float64(1.5), "i32": np.int32(-3), "nested": (np.zeros(2), [np.ones(1), {"deep": np.eye(2)}]),
    "set": {1, 2}, "frozenset": frozenset({"a"}), "bytes": b"\x00\x01", "empty_bytes": b"", "ba": bytearray(b"xy"),
    "scalars": [None, True, 1, 2**70, 1.5, "s", 1 - 1j], ("tuple", "key"): "value",
}


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_and_numpy_arrays_round_trip(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / "data.pkl"
    path.write_bytes(pickle.dumps(DATA, protocol=protocol))
    loaded = load_pickle(path)
    assert [k for k in DATA if not _same(DATA[k], loaded[k])] == []


def test_a_shared_array_stays_one_array(tmp_path: Path) -> None:
    shared = np.arange(4.0)
    path = tmp_path / "shared.pkl"
    path.write_bytes(pickle.dumps([shared, shared, (shared,)], protocol=4))
    a, b, (c,) = load_pickle(path)
    assert a is b is c and a.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("make, fragment", [
    (lambda: np.array([1, "a"], dtype=object), "numpy dtype 'O8'"),
    (lambda: np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]), "structured numpy dtype"),
    (lambda: np.array(["2020-01-01"], dtype="M8[D]"), "numpy dtype 'M8'"),
    (lambda: np.ma.array([1, 2]), "refused global numpy.ma.core._mareconstruct"),
    (lambda: np.matrix([[1]]), "refused global numpy.matrix"),
    (lambda: Path("x"), "refused global pathlib"),
])
@pytest.mark.filterwarnings("ignore:the matrix subclass")
def test_what_is_not_plain_data_is_refused(tmp_path: Path, make: Any, fragment: str) -> None:
    path = tmp_path / "x.pkl"
    path.write_bytes(pickle.dumps(make(), protocol=5))
    _refused(path, fragment)


def _array_claiming(shape: tuple[int, ...], data: bytes) -> bytes:
    """An ndarray pickle (numpy's own layout: _reconstruct, then BUILD with the state) whose state names
    ``shape`` but carries ``data``."""

    class Claim:
        def __reduce__(self) -> tuple[Any, ...]:
            return (np.ndarray.__reduce__(np.zeros(1))[0], (np.ndarray, (0,), b"b"),
                    (1, shape, np.dtype("f8"), False, data))

    return pickle.dumps(Claim(), protocol=2)


def test_an_array_header_claiming_a_terabyte_allocates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "huge.pkl"
    path.write_bytes(_array_claiming((2**37,), b"\x00" * 8))  # 2**37 float64 = 1 TiB, 8 bytes present
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _refused(path, "needs 1099511627776 bytes, the file holds 8")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: nothing was allocated
    # _reconstruct's own shape argument (numpy would allocate it) is never used
    path.write_bytes(pickle.dumps(_Reconstruct((2**40,))))
    _refused(path, "without its data")


class _Reconstruct:
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __reduce__(self) -> tuple[Any, ...]:
        return (np.ndarray.__reduce__(np.zeros(1))[0], (np.ndarray, self.shape, b"b"))


class _FromBuffer:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf

    def __reduce__(self) -> tuple[Any, ...]:
        return (np.zeros(1).__reduce_ex__(5)[0], (self.buf, np.dtype("u1"), (len(self.buf),), "C"))


def test_one_buffer_referenced_many_times_is_refused(tmp_path: Path) -> None:
    buf = b"\x00" * 1_000_000
    path = tmp_path / "amplified.pkl"
    path.write_bytes(pickle.dumps([_FromBuffer(buf) for _ in range(1000)], protocol=4))  # 1 MB file, 1 GB arrays
    assert path.stat().st_size < 1_100_000
    _refused(path, "past the", "bytes the file holds")


def test_nesting_depth_is_bounded(tmp_path: Path) -> None:
    n = 100_000  # {'k': {'k': ...}} written opcode by opcode (pickle.dumps itself would recurse)
    path = tmp_path / "deep.pkl"
    path.write_bytes(b"\x80\x04}" + b"\x8c\x01k}" * n + b"s" * n + b".")
    _refused(path, f"nested more than {MAX_DEPTH} containers deep")
    ok = {"a": {"b": {"c": [np.zeros(2)]}}}
    path.write_bytes(pickle.dumps(ok))
    assert load_pickle(path)["a"]["b"]["c"][0].shape == (2,)


def test_a_list_that_doubles_at_every_level_is_refused(tmp_path: Path) -> None:
    ops = b"\x80\x04]\x94"  # l0 = [] (memo 0); l_{i+1} = [l_i, l_i]: 2**40 leaves from a 500-byte file
    for i in range(40):
        ref = b"j" + i.to_bytes(4, "little")
        ops += b"](" + ref + ref + b"e\x94"
    path = tmp_path / "dag.pkl"
    path.write_bytes(ops + b".")
    tracemalloc.start()
    try:
        _refused(path, "unfolds to more than")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20  # refused while unfolding, long before 2**40 leaves


def test_a_container_holding_itself_is_refused(tmp_path: Path) -> None:
    loop: list[Any] = []
    loop.append({"again": loop})
    path = tmp_path / "cycle.pkl"
    path.write_bytes(pickle.dumps(loop))
    _refused(path, "contains itself")


@pytest.mark.parametrize("data, fragment", [
    (b"", "EOFError"), (b"not a pickle at all", "not a readable pickle"), (pickle.dumps({"a": 1})[:-4], "truncated"),
    (b"\x80\x04\x8e" + (2**40).to_bytes(8, "little") + b"abc", "not a readable pickle"),  # BINBYTES8 of 1 TiB
    (b"\x80\x05\x97.", "not a readable pickle"),  # an out-of-band buffer: none is ever supplied
])
def test_malformed_files_are_one_line(tmp_path: Path, data: bytes, fragment: str) -> None:
    path = tmp_path / "bad.pkl"
    path.write_bytes(data)
    _refused(path, fragment)


def test_dump_pickle_writes_only_what_load_pickle_reads(tmp_path: Path) -> None:
    path = dump_pickle(tmp_path / "sub" / "state.pkl", DATA)
    assert not [k for k in DATA if not _same(DATA[k], load_pickle(path)[k])]
    assert [p.name for p in path.parent.iterdir()] == ["state.pkl"]  # the temporary file was renamed
    torch = pytest.importorskip("torch")
    for bad in ({"w": torch.zeros(2)}, {"o": np.array([object()])}, {"p": Path("x")}):
        with pytest.raises(TypeError, match="dump_pickle"):
            dump_pickle(tmp_path / "bad.pkl", bad)
    assert not (tmp_path / "bad.pkl").exists()


def test_check_structure_bounds_json_like_data() -> None:
    deep: Any = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(SafeLoadError, match="predictions.json: nested more than"):
        check_structure(deep, "predictions.json")
    assert check_structure({"a": [1, 2]}, "x") == {"a": [1, 2]}


# --- torch checkpoints --------------------------------------------------------------------------------


def test_torch_checkpoints_load_weights_only(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}, "extra": Payload(marker)}, evil)
    with pytest.raises(SafeLoadError) as err:
        load_torch(evil)
    assert "refused global posix.system" in str(err.value) and str(evil) in str(err.value)
    assert "\n" not in str(err.value) and not marker.exists()
    legacy = tmp_path / "legacy.pt"  # a bare pickle, torch's legacy format
    legacy.write_bytes(pickle.dumps(Payload(marker), protocol=2))
    with pytest.raises(SafeLoadError, match="refused global posix.system"):
        load_torch(legacy)
    assert not marker.exists()

    good = tmp_path / "good.pt"  # tensors, plain data and numpy numbers (an optimiser's float64 lr)
    torch.save({"w": torch.arange(3.0), "lr": np.float64(0.5), "step": np.int64(3), "cfg": {"width": 8}}, good)
    loaded = load_torch(good)
    assert loaded["w"].tolist() == [0.0, 1.0, 2.0] and loaded["lr"] == 0.5 and loaded["cfg"] == {"width": 8}
    arrays = tmp_path / "arrays.pt"
    torch.save({"a": np.zeros(3)}, arrays)  # numpy arrays are not torch data: refused by name
    with pytest.raises(SafeLoadError, match="refused global numpy._core.multiarray._reconstruct"):
        load_torch(arrays)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"junk")
    with pytest.raises(SafeLoadError, match="not a readable PyTorch checkpoint"):
        load_torch(junk)
    with pytest.raises(SafeLoadError, match="file not found"):
        load_torch(tmp_path / "absent.pt")

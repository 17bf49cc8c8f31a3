"""The sandbox contains what untrusted code does: time, memory, processes, network, filesystem."""

from __future__ import annotations

import ast
import os
import random
import shutil
import socket
import threading
import uuid
from pathlib import Path

import pytest
from requirements import needs

from harness.sandbox import namespaces_available, run_python, run_sandboxed

REPO = Path(__file__).resolve().parents[1]
full_isolation = needs(namespaces_available(), "user namespaces (root + unshare)", "full isolation uses them")


def test_normal_code_returns_stdout_and_runs_in_private_dir() -> None:
    result = run_python("import os; print('hello', 6 * 7); print(os.getcwd())", timeout_s=20, memory_mb=1024)
    try:
        assert result.status == "ok", result.stderr
        assert result.returncode == 0
        lines = result.stdout.splitlines()
        assert lines[0] == "hello 42"
        assert Path(lines[1]) == result.workdir
        assert result.workdir.is_dir()
    finally:
        result.cleanup()
    assert not result.workdir.exists()


def test_cwd_files_stdin_env_and_clean_environment() -> None:
    os.environ["HARNESS_SANDBOX_SECRET_TEST"] = "leak"
    code = (
        "import os, sys\n"
        "print(open('data/in.txt').read().strip(), sys.stdin.read().strip(), os.environ.get('MINE'),"
        " os.environ.get('HARNESS_SANDBOX_SECRET_TEST'), os.environ['HOME'] == os.getcwd())\n"
    )
    result = run_python(
        code, timeout_s=20, memory_mb=1024, cwd_files={"data/in.txt": "file"}, env={"MINE": "env"}, stdin="input"
    )
    result.cleanup()
    assert result.status == "ok", result.stderr
    assert result.stdout.split() == ["file", "input", "env", "None", "True"]


def test_error_exit_is_error_with_traceback() -> None:
    result = run_python("raise ValueError('boom')", timeout_s=20, memory_mb=1024)
    result.cleanup()
    assert result.status == "error"
    assert result.returncode != 0
    assert "ValueError: boom" in result.stderr


def test_infinite_loop_times_out() -> None:
    result = run_python("while True:\n    pass\n", timeout_s=2, memory_mb=1024)
    result.cleanup()
    assert result.status == "timeout"
    assert 1.5 < result.seconds < 20  # generous: the machine may be heavily loaded


def test_sleeping_process_hits_wall_clock_not_cpu() -> None:
    result = run_python("import time; time.sleep(60)", timeout_s=1.5, memory_mb=1024)
    result.cleanup()
    assert result.status == "timeout"
    assert result.seconds < 20


def test_unbounded_allocation_ends_as_memory() -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(50_000_000))\n"
    result = run_python(code, timeout_s=30, memory_mb=400)
    result.cleanup()
    assert result.status == "memory", (result.status, result.stderr[-500:])


@full_isolation
def test_fork_bomb_is_contained() -> None:
    # Each child forks forever; RLIMIT_NPROC under the sandbox's own uid stops growth, and the PID
    # namespace takes every survivor down with the timeout.
    code = (
        "import os, time\n"
        "n = 0\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "        n += 1\n"
        "    except OSError:\n"
        "        time.sleep(0.05)\n"
    )
    result = run_python(code, timeout_s=3, memory_mb=256, nproc=32)
    result.cleanup()
    assert result.status == "timeout"
    assert result.seconds < 30
    # nothing of it survives: no process runs under the run's throwaway uid any more
    sandbox_uid = result.details["uid"]
    assert isinstance(sandbox_uid, int) and 200_000 <= sandbox_uid <= 299_999
    leftover = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except FileNotFoundError:
            continue
        if uid == sandbox_uid:
            leftover.append(pid)
    assert leftover == []


@full_isolation
def test_fork_count_is_capped() -> None:
    code = (
        "import os, time\n"
        "alive = 0\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(5)\n"
        "            os._exit(0)\n"
        "        alive += 1\n"
        "    except OSError:\n"
        "        break\n"
        "print(alive, flush=True)\n"
        "os._exit(0)\n"
    )
    result = run_python(code, timeout_s=20, memory_mb=256, nproc=16)
    result.cleanup()
    assert result.status == "ok", result.stderr
    assert int(result.stdout.strip()) < 16


@full_isolation
def test_socket_connect_to_local_listening_port_fails() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        server.settimeout(8)
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    # sanity: the port really is reachable from outside the sandbox
    probe = socket.create_connection(("127.0.0.1", port), timeout=5)
    probe.close()
    thread.join()
    assert len(accepted) == 1
    accepted.clear()
    thread = threading.Thread(target=accept)
    thread.start()
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('connected')\n"
    result = run_python(code, timeout_s=20, memory_mb=512)
    result.cleanup()
    thread.join()
    server.close()
    assert result.status == "error"
    assert "connected" not in result.stdout
    assert "OSError" in result.stderr or "unreachable" in result.stderr
    assert accepted == []


@full_isolation
def test_writes_outside_the_work_dir_fail_and_nothing_appears() -> None:
    escape_tmp = Path(f"/tmp/escape-{uuid.uuid4()}")
    escape_repo = REPO / f"escape-{uuid.uuid4()}"
    escape_shm = Path(f"/dev/shm/escape-{uuid.uuid4()}")
    code = (
        "import os\n"
        "results = []\n"
        f"for path in [{str(escape_tmp)!r}, {str(escape_repo)!r}]:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        results.append('WROTE')\n"
        "    except OSError as exc:\n"
        "        results.append(type(exc).__name__)\n"
        "open('inside.txt', 'w').write('fine')\n"
        f"open({str(escape_shm)!r}, 'w').write('private tmpfs')\n"
        "print(' '.join(results))\n"
    )
    result = run_python(code, timeout_s=20, memory_mb=512)
    try:
        assert result.status == "ok", result.stderr
        assert "WROTE" not in result.stdout
        assert (result.workdir / "inside.txt").read_text() == "fine"
    finally:
        result.cleanup()
    assert not escape_tmp.exists()
    assert not escape_repo.exists()
    assert not escape_shm.exists()


@full_isolation
def test_private_home_directories_are_hidden(tmp_path: Path) -> None:
    result = run_python("import os; print(os.listdir('/root'))", timeout_s=20, memory_mb=512)
    result.cleanup()
    if os.stat("/root").st_mode & 0o001:
        pytest.skip("/root is traversable on this machine")
    assert result.status == "ok", result.stderr
    # only the path prefix needed for the interpreter is mapped back, nothing else of /root
    assert ".bash_history" not in result.stdout and ".ssh" not in result.stdout


@full_isolation
def test_allow_write_paths_are_writable_and_ownership_restored(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    before = os.stat(out_dir)
    result = run_python(f"open({str(out_dir / 'x.txt')!r}, 'w').write('ok')", timeout_s=20, memory_mb=512,
                        allow_write_paths=[str(out_dir)])  # fmt: skip
    result.cleanup()
    assert result.status == "ok", result.stderr
    assert (out_dir / "x.txt").read_text() == "ok"
    assert os.stat(out_dir).st_uid == before.st_uid


def test_missing_program_is_error() -> None:
    result = run_sandboxed(["/nonexistent/program"], timeout_s=10, memory_mb=256)
    result.cleanup()
    assert result.status == "error"
    assert result.returncode != 0


@full_isolation
def test_other_files_in_tmp_are_invisible(tmp_path: Path) -> None:
    secret = Path(f"/tmp/harness-secret-{uuid.uuid4()}")
    secret.write_text("top secret")
    secret.chmod(0o644)
    try:
        code = f"import os\nprint(os.path.exists({str(secret)!r}), sorted(os.listdir('/tmp')))\n"
        result = run_python(code, timeout_s=20, memory_mb=512)
        result.cleanup()
    finally:
        secret.unlink()
    assert result.status == "ok", result.stderr
    exists, listing = result.stdout.split(" ", 1)
    assert exists == "False"
    # only what the sandbox maps back (its work dir, an interpreter that lives there) is there
    assert result.workdir.name in listing and secret.name not in listing
    assert not any(n.startswith("pytest-of") for n in ast.literal_eval(listing))  # other jobs' files are gone


def test_best_effort_mode_still_limits_time_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.sandbox as sandbox

    monkeypatch.setitem(sandbox._NS_CACHE, "ok", False)
    loop = run_python("while True:\n    pass\n", timeout_s=1.5, memory_mb=512)
    loop.cleanup()
    assert loop.isolation == "best-effort" and loop.status == "timeout"
    hog = run_python("x = []\nwhile True:\n    x.append(bytes(100_000_000))\n", timeout_s=20, memory_mb=400)
    hog.cleanup()
    assert hog.status == "memory"
    fine = run_python("import os; print(os.getcwd())", timeout_s=20, memory_mb=512)
    fine.cleanup()
    assert fine.status == "ok" and fine.stdout.strip() == str(fine.workdir)


# ---- allow-list filesystem, IPC, whole-tree memory, tmpfs work dir, no_new_privs --------------------


@full_isolation
def test_file_next_to_the_caller_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    # the results database sits in the caller's folder (./harness.db); a deny-list left it readable
    caller = REPO / f".sandbox-caller-{uuid.uuid4().hex[:8]}"
    caller.mkdir()
    try:
        secret = caller / "harness.db"
        secret.write_text("arena secret")
        secret.chmod(0o644)
        caller.chmod(0o755)
        monkeypatch.chdir(caller)
        code = (
            "import os\n"
            f"for p in [{str(secret)!r}, {str(REPO / 'README.md')!r}]:\n"
            "    try:\n"
            "        print(repr(open(p).read()[:20]))\n"
            "    except OSError as exc:\n"
            "        print(type(exc).__name__)\n"
        )
        result = run_python(code, timeout_s=20, memory_mb=512)
        result.cleanup()
    finally:
        shutil.rmtree(caller, ignore_errors=True)
    assert result.status == "ok", result.stderr
    assert result.stdout.split() == ["FileNotFoundError", "FileNotFoundError"]


@full_isolation
def test_unix_socket_outside_the_view_is_unreachable() -> None:
    sock_dir = REPO / f".sandbox-sock-{uuid.uuid4().hex[:8]}"
    sock_dir.mkdir()
    sock_dir.chmod(0o755)
    path = sock_dir / "s"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        path.chmod(0o777)  # anyone who can see it may connect
        server.listen(1)
        server.settimeout(0.5)
        code = (
            "import socket\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "try:\n"
            f"    s.connect({str(path)!r}); print('connected')\n"
            "except OSError as exc:\n"
            "    print(type(exc).__name__)\n"
        )
        result = run_python(code, timeout_s=20, memory_mb=512)
        result.cleanup()
        accepted = True
        try:
            server.accept()
        except TimeoutError:
            accepted = False
    finally:
        server.close()
        shutil.rmtree(sock_dir, ignore_errors=True)
    assert result.status == "ok", result.stderr
    assert result.stdout.strip() == "FileNotFoundError"
    assert not accepted


def _sysv_shm_keys() -> set[int]:
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines if line.strip()}


@full_isolation
def test_sysv_shared_memory_does_not_outlive_the_run() -> None:
    key = random.randint(10_000_000, 2_000_000_000)
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"shmid = libc.shmget({key}, 4096, 0o1000 | 0o666)\n"  # IPC_CREAT
        "print(shmid >= 0)\n"
    )
    result = run_python(code, timeout_s=20, memory_mb=512)
    result.cleanup()
    assert result.status == "ok", result.stderr
    assert result.stdout.strip() == "True"  # it was created, inside the sandbox's own IPC namespace
    assert key not in _sysv_shm_keys()


@full_isolation
def test_memory_limit_caps_the_whole_process_tree() -> None:
    # three processes of 150 MB each: every one fits a per-process 300 MB limit, together they do not
    code = (
        "import os, time\n"
        "pids = []\n"
        "for _ in range(3):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        block = bytearray(b'\\x01') * 150_000_000\n"
        "        time.sleep(3)\n"
        "        os._exit(0)\n"
        "    pids.append(pid)\n"
        "for pid in pids:\n"
        "    os.waitpid(pid, 0)\n"
        "print('all done')\n"
    )
    result = run_python(code, timeout_s=30, memory_mb=300)
    result.cleanup()
    if result.details.get("memory_limit") == "rlimit-as":
        assert result.isolation == "namespaces, memory per process"
        pytest.skip("no memory cgroup on this machine: the documented per-process fallback applies")
    assert result.isolation == "full"
    assert result.status == "memory", (result.status, result.stdout, result.stderr[-300:])


@full_isolation
def test_work_dir_is_a_size_limited_tmpfs() -> None:
    code = (
        "import os\n"
        "written = 0\n"
        "try:\n"
        "    with open('fill.bin', 'wb') as fh:\n"
        "        while written < 200 * 2**20:\n"
        "            fh.write(b'x' * 2**20)\n"
        "            fh.flush()\n"
        "            written += 2**20\n"
        "    print('wrote', written)\n"
        "except OSError as exc:\n"
        "    print(exc.errno, written // 2**20)\n"
    )
    result = run_python(code, timeout_s=30, memory_mb=1024, workdir_mb=16)
    try:
        assert result.status == "ok", result.stderr
        errno_, mb = result.stdout.split()
        assert int(errno_) == 28 and int(mb) <= 16  # ENOSPC at the tmpfs size, not at the disk's
        assert os.path.ismount(result.workdir)
    finally:
        result.cleanup()
    assert not result.workdir.exists()


@full_isolation
def test_no_new_privs_and_every_mount_nosuid() -> None:
    code = (
        "status = open('/proc/self/status').read()\n"
        "print([l.split()[1] for l in status.splitlines() if l.startswith('NoNewPrivs')][0])\n"
        "print(all('nosuid' in l.split()[5].split(',') for l in open('/proc/self/mountinfo')))\n"
    )
    result = run_python(code, timeout_s=20, memory_mb=512)
    result.cleanup()
    assert result.status == "ok", result.stderr
    assert result.stdout.split() == ["1", "True"]


def test_excerpt_is_one_short_clean_line() -> None:
    from harness.sandbox import EXCERPT_CHARS, excerpt

    text = "Traceback (most recent call last):\n  File x\nValueError: " + "S" * 5000 + "\x1b[2J\n\n"
    out = excerpt(text)
    assert out.startswith("ValueError: SSS") and len(out) == EXCERPT_CHARS and "\x1b" not in out
    assert excerpt("") == "" and excerpt("short\n") == "short"

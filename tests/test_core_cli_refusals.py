"""Bad command-line input is one line and exit status 2, and writes nothing: databases that cannot be
opened or created (a missing folder, /proc, an unreachable server), option values the parser must not
read (nested 60,000 deep, longer than the limit, numbers JSON cannot hold), an over-long token name
(the same limit on both engines), an unknown ``demo --only`` family, an unusable port or export path.

Every case runs the installed ``harness`` entry point in a subprocess (the real ``main``, its
exception net included) from an empty working folder, and checks that the folder is still empty.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.options import MAX_DEPTH, MAX_LENGTH, OptionValueError, parse_value


def _entry_point() -> list[str]:
    """The installed console script beside this interpreter (what users run), else the module."""
    script = Path(sys.executable).parent / "harness"
    if script.is_file():
        return [str(script)]
    found = shutil.which("harness")
    return [found] if found else [sys.executable, "-m", "harness.cli"]


def _harness(cwd: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    # HARNESS_DB_URL points into the folder too: a command that fell back to the default database
    # would leave a file there, which the callers' emptiness checks catch
    env = {**os.environ, "COLUMNS": "200", "HARNESS_DB_URL": f"sqlite:///{cwd / 'default.db'}"}
    return subprocess.run([*_entry_point(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


def _refused(done: subprocess.CompletedProcess[str], *expected: str) -> str:
    """Exit 2, nothing on stdout, one ``error:`` line on stderr holding every expected piece."""
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr and done.stdout == "", done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    for piece in expected:
        assert piece in lines[0], (piece, lines[0])
    return lines[0]


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """An empty working folder for the command."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder


# --- databases that cannot be opened or created -------------------------------------------------

_COMMANDS = {
    "eval": ["eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "2", "--no-progress"],
    "runs": ["runs"],
    # the host is never reached: a regression would fail to bind (a non-2 exit), not serve and hang
    "serve": ["serve", "--host", "256.256.256.256"],
    "serve-workers": ["serve", "--workers", "2", "--host", "256.256.256.256"],
    "tokens": ["tokens", "create", "ci"],
    "db-upgrade": ["db", "upgrade"],
}


@pytest.mark.parametrize("command", sorted(_COMMANDS))
@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_a_sqlite_file_in_a_missing_folder_is_refused_and_no_folder_is_made(cwd: Path, command: str,
                                                                           form: str) -> None:
    """Refused, not created: a mistyped folder would otherwise start a second, silent database."""
    url = f"sqlite:///{cwd / 'no/such/dir/h.db'}" if form == "absolute" else "sqlite:///no/such/dir/h.db"
    line = _refused(_harness(cwd, *_COMMANDS[command], "--db", url), "no/such/dir", "does not exist")
    assert "create it first" in line
    assert _listing(cwd) == []


def test_a_plain_path_is_refused_with_the_url_to_write(cwd: Path) -> None:
    _refused(_harness(cwd, "runs", "--db", "no/such/dir/h.db"), "not a URL", "sqlite:///no/such/dir/h.db")
    assert _listing(cwd) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("command", ["eval", "runs", "serve"])
def test_a_sqlite_file_on_proc_is_one_line(cwd: Path, command: str) -> None:
    _refused(_harness(cwd, *_COMMANDS[command], "--db", "sqlite:////proc/h.db"), "/proc/h.db",
             "does not accept new files")
    assert _listing(cwd) == []


@pytest.mark.parametrize("target", ["folder", "file-as-folder"])
def test_a_sqlite_url_naming_a_folder_or_below_a_file_is_one_line(cwd: Path, tmp_path: Path, target: str) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    url, expected = ((f"sqlite:///{tmp_path}", "it is a folder") if target == "folder"
                     else (f"sqlite:///{plain}/h.db", "is not a folder"))
    _refused(_harness(cwd, "runs", "--db", url), expected)
    assert _listing(cwd) == [] and plain.read_text() == "x"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("command", ["eval", "runs", "serve"])
def test_an_unreachable_postgresql_is_one_line_without_the_password(cwd: Path, command: str) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql+psycopg://u:s3cret-pw@127.0.0.1:{_closed_port()}/x"
    line = _refused(_harness(cwd, *_COMMANDS[command], "--db", url), "127.0.0.1", "u:***@")
    assert "s3cret-pw" not in line
    assert _listing(cwd) == []


def test_a_bad_url_never_shows_its_password(cwd: Path) -> None:
    line = _refused(_harness(cwd, "runs", "--db", "postgresql+nosuchdriver://u:s3cret-pw@host/x"), "u:***@")
    assert "s3cret-pw" not in line


# --- option values -------------------------------------------------------------------------------

@pytest.mark.parametrize(("option", "value", "expected"), [
    ("-M", "x=" + "[" * 60_000, f"-M x: the value nests brackets more than {MAX_DEPTH} deep"),
    ("-M", "x=" + "(" * (MAX_DEPTH + 1) + ")" * (MAX_DEPTH + 1), f"more than {MAX_DEPTH} deep"),
    ("-T", "breakdowns=" + "a" * (MAX_LENGTH + 1), f"-T breakdowns: the value is {MAX_LENGTH + 1:,} characters"),
    ("-T", "breakdowns=[nan, inf]", "-T breakdowns: nan is not a finite number"),
    ("-M", "temperature=1e309", "-M temperature: 1e309 is not a finite number"),
    ("-M", "temperature=-inf", "-M temperature: -inf is not a finite number"),
    ("-M", "seed=" + "9" * 5000, "-M seed: 99999999999999999999...(5000 characters) does not fit a 64-bit integer"),
    ("-M", "seed=18446744073709551616", "does not fit a 64-bit integer"),
    ("-J", "k={'a': [1, 1e400]}", "-J k: 1e400 is not a finite number"),
])
def test_refused_option_values_are_one_line_and_open_no_database(cwd: Path, option: str, value: str,
                                                                 expected: str) -> None:
    db = cwd / "h.db"
    done = _harness(cwd, "eval", "-t", "qa", "-m", "builtin:echo", option, value, "--db", f"sqlite:///{db}")
    _refused(done, expected)
    assert _listing(cwd) == []  # refused before the database was created


def test_option_values_in_bounds_are_read_as_before() -> None:
    deepest = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_value("x=" + deepest) == "x=" + deepest  # plain text: brackets counted, not parsed
    nested = parse_value(deepest)
    for _ in range(MAX_DEPTH - 1):
        nested = nested[0]
    assert nested == []
    assert parse_value("'" + "[" * 1000 + "'") == "[" * 1000  # quoted brackets do not nest
    assert parse_value("a" * MAX_LENGTH) == "a" * MAX_LENGTH
    assert parse_value("9223372036854775807") == 2**63 - 1 and parse_value("-9223372036854775808") == -(2**63)
    assert parse_value("1e308") == 1e308 and parse_value("'nan'") == "nan" and parse_value("infinite") == "infinite"
    for raw in ("nan", "NaN", "+Infinity", "[1, inf]", "9223372036854775808", "0x1" + "0" * 16, "1e309, 2"):
        with pytest.raises(OptionValueError):
            parse_value(raw)


def test_a_refused_operator_parameter_is_one_line(cwd: Path) -> None:
    done = _harness(cwd, "eval", "-t", "gsm8k", "-m", "vote(builtin:echo, n=" + "[" * 60_000 + ")",
                    "--db", f"sqlite:///{cwd / 'h.db'}")
    _refused(done, "nests brackets")


# --- token names ---------------------------------------------------------------------------------

def test_an_over_long_token_name_is_refused_on_both_engines(cwd: Path, db_url: str) -> None:
    """The name column holds 200 characters: PostgreSQL refused more while SQLite stored 10,000.
    Both now take exactly 200 and refuse 201 or 10,000 before writing."""
    from harness.leaderboard.tokens import NAME_MAX, list_tokens
    from harness.store.db import open_db

    assert NAME_MAX == 200
    ok = _harness(cwd, "tokens", "create", "n" * NAME_MAX, "--db", db_url)
    assert ok.returncode == 0, ok.stderr
    for length in (NAME_MAX + 1, 10_000):
        _refused(_harness(cwd, "tokens", "create", "n" * length, "--db", db_url),
                 f"at most {NAME_MAX} characters", f"has {length:,}")
        _refused(_harness(cwd, "serve", "--token-create", "m" * length, "--db", db_url), f"at most {NAME_MAX}")
    assert [t.name for t in list_tokens(open_db(db_url))] == ["n" * NAME_MAX]


def test_a_refused_token_name_creates_no_database(cwd: Path) -> None:
    _refused(_harness(cwd, "tokens", "create", "n" * 10_000, "--db", f"sqlite:///{cwd / 'lb.db'}"), "at most")
    assert _listing(cwd) == []


# --- harness demo --only, ports, export targets -------------------------------------------------

@pytest.mark.parametrize(("args", "expected"), [
    (["--only", "nosuchfamily"], ["'nosuchfamily' is not a demo family", "families: agents"]),
    (["--only", "gsm8kk"], ["did you mean 'gsm8k'?"]),
    (["--only", "qa", "--only", "arenna"], ["did you mean 'arena'"]),
    (["--port", "99999"], ["--port must be between 1 and 65535"]),
])
def test_demo_refuses_bad_arguments_before_building(cwd: Path, args: list[str], expected: list[str]) -> None:
    _refused(_harness(cwd, "demo", "--dir", str(cwd / "demo"), *args), *expected)
    assert _listing(cwd) == []  # no --dir folder, no database


def test_demo_only_a_family_without_runs_at_that_size_is_refused(monkeypatch, capsys) -> None:
    """Every family has small runs today, so the case is set up through the plan the check reads."""
    import typer

    import harness.demo_plan
    from harness.commands.demo import _check_only

    monkeypatch.setattr(harness.demo_plan, "demo_families", lambda: {"bigonly": {"full"}, "both": {"small", "full"}})
    _check_only(["both"], "small")
    _check_only(["bigonly"], "full")
    with pytest.raises(typer.Exit) as info:
        _check_only(["bigonly"], "small")
    assert info.value.exit_code == 2
    assert capsys.readouterr().err.strip() == ("error: --only 'bigonly': the small demo has no bigonly runs "
                                               "(use --size full)")


@pytest.mark.parametrize(("args", "expected"), [
    (["--port", "99999"], "--port must be between 1 and 65535, not 99999"),
    (["--port", "0"], "--port must be between 1 and 65535"),
    (["--workers", "0"], "--workers must be at least 1"),
])
def test_serve_refuses_an_unusable_port_or_worker_count(cwd: Path, args: list[str], expected: str) -> None:
    _refused(_harness(cwd, "serve", *args, "--db", f"sqlite:///{cwd / 'h.db'}", timeout=30), expected)
    assert _listing(cwd) == []


def test_export_to_an_unwritable_target_is_one_line(cwd: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    made = _harness(cwd, "eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "2", "--no-progress",
                    "--run-name", "r", "--db", db)
    assert made.returncode == 0, made.stderr
    cases = [(str(cwd / "no/such/x.jsonl"), "does not exist"), (str(tmp_path), "it is a folder")]
    if Path("/proc/self").is_dir():
        cases.append(("/proc/x.csv", "cannot write /proc/x.csv"))
    for target, expected in cases:
        _refused(_harness(cwd, "export", "r", "-o", target, "-f", "csv", "--db", db), expected)
    assert _listing(cwd) == []


def test_a_user_error_a_command_left_uncaught_is_still_one_line(cwd: Path, tmp_path: Path) -> None:
    """``main``'s net: ``code3d judge`` builds its judge without catching user errors itself, so an
    unknown backend reaches ``main``, which prints it as one line with exit status 2."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    for name, model in (("a", "builtin:number"), ("b", "builtin:echo")):
        made = _harness(cwd, "eval", "-t", "gsm8k", "-m", model, "--limit", "1", "--no-progress", "--run-name", name,
                        "--db", db)
        assert made.returncode == 0, made.stderr
    _refused(_harness(cwd, "code3d", "judge", "a", "b", "--judge", "nosuchbackend:x", "--db", db),
             "unknown model 'nosuchbackend'")


def test_a_model_spec_nested_thousands_deep_is_one_line(cwd: Path) -> None:
    spec = "vote(" * 5000 + "builtin:echo" + ")" * 5000
    _refused(_harness(cwd, "eval", "-t", "gsm8k", "-m", spec, "--db", f"sqlite:///{cwd / 'h.db'}"),
             f"the model spec nests brackets more than {MAX_DEPTH} deep")


def test_builtin_settings_out_of_range_and_unknown_kinds_are_one_line() -> None:
    """``-M delay=1e30`` hung the run; an unknown builtin kind was a plain ValueError (a traceback
    where no command caught it)."""
    from harness.modelspec import ModelSpecError, build_model

    for settings in ({"delay": 1e30}, {"delay": -1}, {"delay": float("nan")}):
        with pytest.raises(ModelSpecError, match="delay must be between 0 and 3600 seconds"):
            build_model("builtin:constant", settings)
    with pytest.raises(ModelSpecError, match="unknown builtin model 'nope'"):
        build_model("builtin:nope", {})


def test_token_names_with_line_breaks_are_refused() -> None:
    from harness.leaderboard.tokens import TokenError, check_name

    for name in ("ops\nadmin  ok", "a\rb", "tab\there", "bell\x07"):
        with pytest.raises(TokenError, match="control characters"):
            check_name(name)
    assert check_name("  ci bot  ") == "ci bot"

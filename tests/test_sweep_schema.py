"""Every sweep goes through one schema, through the real CLI: an alias bomb, a huge matrix, a file
too big or not UTF-8, a value of the wrong type, an unknown key, a negative limit, a bool seed and
out-of-range flags are each one line and exit status 2, with no traceback and nothing written."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from harness.cli import app
from harness.store import units
from harness.store.db import open_db
from harness.store.schema_sweeps import SweepRow, WorkUnitRow
from harness.sweep import SweepOptions, start
from harness.sweep.matrix import Matrix, Resources, SweepError, matrix_from_yaml
from harness.sweep.schema import MAX_ALIASES, MAX_FILE_BYTES, MAX_NODES, MAX_RUNS, MAX_SAMPLES, MAX_UNITS

GOOD = "tasks: [gsm8k]\nmodels: [builtin:echo]\n"


def _cli(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    out = result.output
    assert "Traceback" not in out, out
    # a refusal is typer's Exit (SystemExit), never an exception escaping the command
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, out


def _refused(args: list[str], db: Path) -> str:
    """Run the command, assert exit 2 with one line on it and no database written; the line."""
    code, out = _cli([*args, "--db", f"sqlite:///{db}", "--no-progress"])
    lines = out.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), out
    assert not db.exists(), "a refused sweep must not create or write the database"
    return lines[0]


def _refused_file(tmp_path: Path, content: str | bytes, *extra: str) -> str:
    path = tmp_path / "sweep.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return _refused(["sweep", "run", str(path), *extra], tmp_path / "h.db")


def _bomb(levels: int = 9, width: int = 9) -> str:
    """The classic billion laughs: each anchor is a list of `width` aliases of the previous one."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\ntasks: [{{name: gsm8k, options: {{x: *l{levels - 1}}}}}]\nmodels: [builtin:echo]\n"


# --- sizes, before expansion ---------------------------------------------------------------------


def test_an_alias_bomb_of_nine_to_the_ninth_is_refused_at_once(tmp_path: Path) -> None:
    assert len(_bomb()) < 1000  # a few hundred bytes that would expand to 9^9 = 387,420,489 leaves
    line = _refused_file(tmp_path, _bomb())
    assert f"more than {MAX_NODES:,} values" in line or f"more than {MAX_ALIASES} aliases" in line


def test_aliases_beyond_the_count_and_an_alias_inside_itself_are_refused(tmp_path: Path) -> None:
    many = "x: &a 1\ny: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n" + GOOD
    assert f"more than {MAX_ALIASES} aliases" in _refused_file(tmp_path, many)
    recursive = "tasks: [{name: gsm8k, options: {x: &a [*a]}}]\nmodels: [builtin:echo]\n"
    assert "refers to a value that contains it" in _refused_file(tmp_path, recursive)
    twice = "a: &x [1]\nb: &x [2]\n" + GOOD
    assert "anchor &x is defined twice" in _refused_file(tmp_path, twice)


def test_a_small_bomb_under_the_alias_count_is_still_bounded_by_its_expanded_size(tmp_path: Path) -> None:
    # 4 levels of 9 aliases (36, under the alias count) over a base of 500 scalars: 3.3 million values
    text = _bomb(levels=5, width=9).replace(", ".join(["lol"] * 9), ", ".join(["lol"] * 500))
    assert text.count("*") <= MAX_ALIASES
    assert f"more than {MAX_NODES:,} values" in _refused_file(tmp_path, text)


def test_aliases_for_shared_settings_still_work(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("tasks: [gsm8k]\nmodels:\n  - {spec: builtin:echo, settings: &common {delay: 0.0}}\n"
                    "  - {spec: builtin:number, settings: *common}\nlimit: 3\n")
    m = matrix_from_yaml(path)
    assert [s for _, s, _ in m.models] == [{"delay": 0.0}, {"delay": 0.0}]


def test_two_hundred_thousand_seeds_are_refused_from_the_list_lengths(tmp_path: Path) -> None:
    seeds = ",".join(map(str, range(200_000)))
    line = _refused(["sweep", "run", "-t", "gsm8k", "-m", "builtin:echo", "--seeds", seeds], tmp_path / "h.db")
    assert "200,000 runs" in line and f"at most {MAX_RUNS:,}" in line
    # in a file they are over the size limit; a file of fewer is over the run count before any is validated
    assert "larger than" in _refused_file(tmp_path, GOOD + f"seeds: [{seeds}]\n")
    assert f"at most {MAX_RUNS:,}" in _refused_file(tmp_path, GOOD + f"seeds: [{','.join(map(str, range(3000)))}]\n")
    # and from Python: refused before a task is built (well under the 2 GB and minutes it took)
    tracemalloc.start()
    try:
        with pytest.raises(SweepError, match="200,000 runs"):
            start(open_db(f"sqlite:///{tmp_path / 'py.db'}"), f"sqlite:///{tmp_path / 'py.db'}",
                  Matrix([("gsm8k", {})], [("builtin:echo", {}, Resources())], list(range(200_000))),
                  SweepOptions(workers=1, progress=False))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 2**20  # refused from the list lengths: no run was expanded (it took 2 GB)


def test_a_file_too_big_or_not_utf8_is_one_line(tmp_path: Path) -> None:
    assert "larger than" in _refused_file(tmp_path, GOOD + "#" + "x" * MAX_FILE_BYTES + "\n")
    assert "not UTF-8 text (byte 0xff" in _refused_file(tmp_path, GOOD.encode() + b"name: \xff\xfe\n")
    assert "nested more than" in _refused_file(tmp_path, GOOD + "name: " + "[" * 40 + "]" * 40 + "\n")


def test_the_samples_and_the_work_units_of_a_sweep_are_bounded_before_it_is_written(tmp_path: Path) -> None:
    # 760 models x gsm8k's 1,319 samples: each run stores its sample ids, so the total is bounded
    models = "".join(f"  - {{spec: builtin:constant, settings: {{text: '{i}'}}}}\n" for i in range(760))
    line = _refused_file(tmp_path, "tasks: [gsm8k]\nmodels:\n" + models)
    assert f"more than {MAX_SAMPLES:,} samples" in line
    # 80 seeds x 1,319 samples in units of one: over the unit rows one sweep may write
    db = tmp_path / "u.db"
    code, out = _cli(["sweep", "run", "-t", "gsm8k", "-m", "builtin:echo", "--seeds", ",".join(map(str, range(80))),
                      "--unit-size", "1", "--db", f"sqlite:///{db}", "--no-progress"])
    assert code == 2 and f"at most {MAX_UNITS:,}" in out and len(out.strip().splitlines()) == 1, out
    with open_db(f"sqlite:///{db}")() as s:
        assert s.scalar(select(func.count()).select_from(SweepRow)) == 0
        assert s.scalar(select(func.count()).select_from(WorkUnitRow)) == 0


# --- types and ranges ----------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "expected"), [
    ("tasks:\n  - [gsm8k]\nmodels: [builtin:echo]\n", 'tasks[0] = ["gsm8k"]: expected a task name'),
    ("tasks: [{name: [gsm8k]}]\nmodels: [builtin:echo]\n", 'tasks[0].name = ["gsm8k"]: expected a string'),
    ("tasks: gsm8k\nmodels: [builtin:echo]\n", 'tasks = "gsm8k": expected a list'),
    ("tasks: [{name: gsm8k, options: [1]}]\nmodels: [builtin:echo]\n", "tasks[0].options = [1]: expected a mapping"),
    ("tasks: [{name: gsm8k, options: {1: a}}]\nmodels: [builtin:echo]\n", "tasks[0].options: key 1: expected a string"),
    ("tasks: [{name: gsm8k, options: {since: 2024-01-01}}]\nmodels: [builtin:echo]\n",
     "tasks[0].options.since = \"2024-01-01\": expected a string, a finite number"),
    (GOOD.replace("[builtin:echo]", "[5]"), "models[0] = 5: expected a model spec"),
    (GOOD.replace("[builtin:echo]", "[{spec: {a: 1}}]"), 'models[0].spec = {"a": 1}: expected a string'),
    (GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, settings: x}]"),
     'models[0].settings = "x": expected a mapping'),
    (GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, settings: {temperature: .nan}}]"),
     "models[0].settings.temperature = NaN: expected a string, a finite number"),
    (GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, resources: {gpus: true}}]"),
     "models[0].resources.gpus = true: expected a number (true/false is not a number)"),
    (GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, resources: {cpus: -1}}]"),
     "models[0].resources.cpus = -1: expected a number >= 0"),
    (GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, resources: {memory_gb: .inf}}]"),
     "models[0].resources.memory_gb = Infinity: expected a finite number"),
    (GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, resources: 2}]"),
     "models[0].resources = 2: expected a mapping"),
    (GOOD + "epochs: two\n", 'epochs = "two": expected an integer'),
    (GOOD + "epochs: 1.5\n", "epochs = 1.5: expected an integer"),
    (GOOD + "epochs: 0\n", "epochs = 0: expected a number >= 1"),
    (GOOD + "limit: ten\n", 'limit = "ten": expected an integer'),
    (GOOD + "limit: -5\n", "limit = -5: expected a number >= 1"),
    (GOOD + "limit: 0\n", "limit = 0: expected a number >= 1"),
    (GOOD + "seeds: [true]\n", "seeds[0] = true: expected an integer (true/false is not a number)"),
    (GOOD + "seeds: [-1]\n", "seeds[0] = -1: expected a number >= 0"),
    (GOOD + "seeds: 99999999999999999999999999\n", "seeds[0] = 99999999999999999999999999: expected a number <="),
    (GOOD + "seeds: zero\n", 'seeds = "zero": expected a list'),
    (GOOD + "seeds: []\n", "the sweep has no seeds"),
    (GOOD + "judge: 5\n", "judge = 5: expected a judge model spec"),
    (GOOD + "judge: {settings: {a: 1}}\n", "judge.spec: missing"),
    (GOOD + "judge: {spec: builtin:echo, settings: [1]}\n", "judge.settings = [1]: expected a mapping"),
    (GOOD + "name: [a]\n", 'name = ["a"]: expected a string'),
    (GOOD + "name: \"a\\nb\"\n", 'name = "a\\nb": expected a name without control characters'),
    (GOOD + "name: '123'\n", 'name = "123": expected a name that is not only digits'),
    (GOOD + "name: " + "n" * 301 + "\n", "expected at most 300 characters"),
    ("tasks: []\nmodels: [builtin:echo]\n", "the sweep has no tasks"),
    ("tasks: [gsm8k]\n", "the sweep has no models"),
    ("- gsm8k\n", "a sweep file is a mapping with `tasks` and `models`"),
    ("", "a sweep file is a mapping"),
    ("tasks: [gsm8k]\n---\nmodels: [x]\n", "not valid YAML (line 2): expected a single document"),
    ("tasks: !!python/object/apply:os.system [ls]\nmodels: [x]\n", "not valid YAML (line 1): could not determine"),
    ("tasks: [gsm8k\n", "not valid YAML"),
])
def test_every_key_with_a_wrong_type_or_range_is_one_line_naming_key_value_and_expectation(
        tmp_path: Path, content: str, expected: str) -> None:
    assert expected in _refused_file(tmp_path, content)


@pytest.mark.parametrize(("content", "expected"), [
    (GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, setings: {delay: 0}}]"),
     "models[0].setings: unknown key (did you mean `settings`? known: spec, settings, resources)"),
    ("tasks: [{name: gsm8k, optons: {}}]\nmodels: [builtin:echo]\n", "did you mean `options`?"),
    (GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, resources: {gpu: 1}}]"), "did you mean `gpus`?"),
    (GOOD + "judge: {spec: builtin:echo, setting: {}}\n", "did you mean `settings`?"),
    ("tasks: [gsm8k]\nmodel: [builtin:echo]\n", "model: unknown key (did you mean `models`?"),
    (GOOD + "seed: [1]\n", "did you mean `seeds`?"),
    (GOOD + "limit: 5\nlimit: 500\n", "duplicate key `limit` (line 4)"),
])
def test_unknown_and_duplicate_keys_are_refused_not_ignored(tmp_path: Path, content: str, expected: str) -> None:
    assert expected in _refused_file(tmp_path, content)


def test_a_flag_beside_a_file_is_refused_not_ignored(tmp_path: Path) -> None:
    assert "(--limit beside the file)" in _refused_file(tmp_path, GOOD, "--limit", "3")
    assert "(--seeds beside the file)" in _refused_file(tmp_path, GOOD, "--seeds", "1")


# --- flags ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("flags", "expected"), [
    (["--unit-size", "0"], "--unit-size = 0: expected a number >= 1"),
    (["--unit-size", "-3"], "--unit-size = -3: expected a number >= 1"),
    (["--lease", "-1"], "--lease = -1.0: expected a number >= 1"),
    (["--lease", "nan"], "--lease = NaN: expected a finite number"),
    (["--lease", "inf"], "--lease = Infinity: expected a finite number"),
    (["--workers", "0"], "--workers = 0: expected a number >= 1"),
    (["--epochs", "0"], "--epochs = 0: expected a number >= 1"),
    (["--limit", "-5"], "--limit = -5: expected a number >= 1"),
    (["--seeds", "-1"], "--seeds = -1: expected a number >= 0"),
    (["--seeds", "1,,2"], "--seeds takes comma-separated integers"),
    (["-J", "a=1"], "--judge: missing"),
    (["--judge", "nosuchjudge"], "judge 'nosuchjudge': unknown model"),
    (["--name", "12"], '--name = "12": expected a name that is not only digits'),
])
def test_out_of_range_flags_are_one_line_and_exit_2(tmp_path: Path, flags: list[str], expected: str) -> None:
    limit = [] if "--limit" in flags else ["--limit", "3"]
    line = _refused(["sweep", "run", "-t", "gsm8k", "-m", "builtin:echo", *limit, *flags], tmp_path / "h.db")
    assert expected in line


def test_eval_shards_zero_is_refused(tmp_path: Path) -> None:
    for shards in ("0", "-1", "100000"):
        line = _refused(["eval", "-t", "gsm8k", "-m", "builtin:echo", "--limit", "3", "--shards", shards],
                        tmp_path / "h.db")
        assert "--shards must be between 1 and" in line


def test_status_and_cancel_of_a_forty_digit_id_are_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    sessions = open_db(url)
    sweep_id, _ = units.create_sweep(sessions, "real", {"runs": []}, [(0, "run-a", ["s0"])])
    for command in ("status", "cancel"):
        for ref in ("1" * 40, str(2**63), "²"):  # past SQL's integers; a digit int() does not read
            code, out = _cli(["sweep", command, ref, "--db", url])
            assert code == 2 and out.strip() == f"error: no sweep {ref!r}", out
    code, out = _cli(["sweep", "status", str(sweep_id), "--json", "--db", url])  # a real id still resolves
    assert code == 0 and '"sweep": "real"' in out


# --- what is well-formed still works -------------------------------------------------------------


def test_a_well_formed_file_passes_the_schema_and_the_expansion(tmp_path: Path) -> None:
    """Through the CLI up to the cluster: SQLite refuses a remote Ray address only after the file was
    validated and every run expanded (tasks built, samples listed), so no Ray is started here."""
    path = tmp_path / "sweep.yaml"
    path.write_text("name: nightly\ntasks:\n  - gsm8k\n  - {name: reliability_gsm8k, options: {}}\nmodels:\n"
                    "  - builtin:echo\n  - {spec: builtin:number, settings: {delay: 0.0}, "
                    "resources: {gpus: 0, cpus: 1, memory_gb: 1}}\nseeds: [0, 3]\nepochs: 2\nlimit: 5\n"
                    "judge: {spec: builtin:echo, settings: {}}\n")
    m = matrix_from_yaml(path)
    assert m.name == "nightly" and m.seeds == [0, 3] and m.epochs == 2 and m.limit == 5 and m.judge == "builtin:echo"
    db = tmp_path / "h.db"
    code, out = _cli(["sweep", "run", str(path), "--ray", "10.0.0.1:6379", "--db", f"sqlite:///{db}",
                      "--no-progress"])
    assert code == 2 and "SQLite runs its workers as local processes only" in out, out
    with open_db(f"sqlite:///{db}")() as s:
        assert s.scalar(select(func.count()).select_from(SweepRow)) == 0
    # the single-seed shorthand and a plain-int resource are still accepted
    path.write_text(GOOD.replace("[builtin:echo]", "[{spec: builtin:echo, resources: {gpus: 1}}]") + "seeds: 7\n")
    m = matrix_from_yaml(path)
    assert m.seeds == [7] and m.models[0][2].gpus == 1.0


def test_a_matrix_from_python_goes_through_the_same_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    sessions = open_db(url)
    for matrix, message in ((Matrix([("gsm8k", {})], [("builtin:echo", {}, Resources())], [True]), "--seeds = true"),
                            (Matrix([("gsm8k", {})], [("builtin:echo", {}, Resources())], limit=-5), "--limit = -5"),
                            (Matrix([("gsm8k", {})], [("builtin:echo", {}, Resources(gpus=float("nan")))]),
                             "gpus = NaN")):
        with pytest.raises(SweepError, match=message.replace("[", r"\[")) as err:
            start(sessions, url, matrix, SweepOptions(workers=1, progress=False))
        assert "\n" not in str(err.value)
    for opts, message in ((SweepOptions(unit_size=0), "--unit-size = 0"), (SweepOptions(lease_seconds=-1), "--lease"),
                          (SweepOptions(lease_seconds=float("nan")), "--lease = NaN")):
        with pytest.raises(SweepError, match=message):
            start(sessions, url, Matrix([("gsm8k", {})], [("builtin:echo", {}, Resources())], limit=3), opts)
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(SweepRow)) == 0

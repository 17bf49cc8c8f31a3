"""Sweep matrices and work units without Ray: validation before anything is written, one owner per
unit under racing claims, expiry and dead-owner take-over, heartbeats, cancellation."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from harness.store import units
from harness.store.db import open_db
from harness.store.schema import utcnow
from harness.store.schema_sweeps import SweepRow, WorkUnitRow
from harness.sweep import SweepOptions, start, unit_size
from harness.sweep.matrix import Matrix, Resources, SweepError, expand, matrix_from_yaml


def _matrix(**kw) -> Matrix:
    base = dict(tasks=[("gsm8k", {})], models=[("builtin:number", {}, Resources())], limit=12)
    base.update(kw)
    return Matrix(**base)


def test_expand_names_runs_like_a_plain_eval_and_lists_their_samples() -> None:
    from harness.runner import EvalConfig, build_task, default_run_name

    entries = expand(_matrix(models=[("builtin:number", {}, Resources()), ("builtin:echo", {}, Resources())],
                             seeds=[0, 1]))
    assert len(entries) == 4 and len({e.run_name for e in entries}) == 4
    task = build_task("gsm8k", {})
    cfg = EvalConfig(task="gsm8k", model="builtin:echo", seed=1, limit=12)
    assert default_run_name(task, cfg) in {e.run_name for e in entries}
    assert all(len(e.sample_ids) == 12 for e in entries)


@pytest.mark.parametrize(("matrix", "message"), [
    (dict(tasks=[("gsm8kk", {})]), "gsm8k"),
    (dict(models=[("builtinn:number", {}, Resources())]), "builtinn"),
    (dict(models=[("builtin:number", {"temprature": 0.1}, Resources())]), "temperature"),
    (dict(tasks=[("gsm8k", {"no_such_option": 1})]), "no_such_option"),
    (dict(tasks=[]), "no tasks"),
    (dict(epochs=0), "epochs"),
])
def test_a_bad_entry_is_one_line_and_nothing_is_submitted(tmp_path: Path, matrix: dict, message: str) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    sessions = open_db(url)
    with pytest.raises(SweepError) as err:
        start(sessions, url, _matrix(**matrix), SweepOptions(workers=1, progress=False))
    text = str(err.value)
    assert message in text and "\n" not in text
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(SweepRow)) == 0


def test_sqlite_refuses_a_remote_cluster_and_an_unreachable_cluster_is_one_line(tmp_path: Path, pg_url: str) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    with pytest.raises(SweepError, match="SQLite runs its workers as local processes"):
        start(open_db(url), url, _matrix(), SweepOptions(ray_address="10.0.0.1:6379", progress=False))
    sessions = open_db(pg_url)
    with pytest.raises(SweepError, match="cannot reach the Ray cluster at 127.0.0.1:9"):
        start(sessions, pg_url, _matrix(), SweepOptions(ray_address="127.0.0.1:9", progress=False))
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(WorkUnitRow)) == 0


def test_yaml_matrix_and_its_one_line_errors(tmp_path: Path) -> None:
    good = tmp_path / "sweep.yaml"
    good.write_text("name: nightly\ntasks:\n  - gsm8k\n  - {name: qa, options: {}}\nmodels:\n  - builtin:echo\n"
                    "  - {spec: builtin:number, settings: {delay: 0.0}, resources: {gpus: 0, memory_gb: 1}}\n"
                    "seeds: [0, 3]\nlimit: 5\n")
    m = matrix_from_yaml(good)
    assert m.name == "nightly" and m.seeds == [0, 3] and m.limit == 5
    assert [t for t, _ in m.tasks] == ["gsm8k", "qa"] and m.models[1][2].memory_gb == 1.0
    for text, message in (("tasks: [gsm8k\n", "not valid YAML"), ("- a\n", "mapping"),
                          ("tasks: [gsm8k]\nmodel: [x]\n", "unknown key"),
                          ("tasks: [gsm8k]\nmodels: [{spec: builtin:echo, resources: {gpus: many}}]\n", "resources")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(SweepError, match=message):
            matrix_from_yaml(bad)
    with pytest.raises(SweepError, match="cannot read"):
        matrix_from_yaml(tmp_path / "absent.yaml")


def test_unit_size_targets_four_units_per_worker() -> None:
    entries = expand(_matrix(limit=40))
    assert unit_size(entries, SweepOptions(workers=2)) == 5
    assert unit_size(entries, SweepOptions(workers=2, unit_size=7)) == 7
    with pytest.raises(SweepError):
        unit_size(entries, SweepOptions(unit_size=-1))


def _sweep(db_url: str, n_units: int = 6) -> tuple[object, int]:
    sessions = open_db(db_url)
    plan = [(0, "run-a", [f"s{i}"]) for i in range(n_units)]
    sweep_id, created = units.create_sweep(sessions, "t", {"runs": []}, plan)
    assert created
    return sessions, sweep_id


def test_racing_claims_give_each_unit_exactly_one_owner(db_url: str) -> None:
    sessions, sweep_id = _sweep(db_url, 12)
    got: dict[str, list[int]] = {}

    def grab(owner: str) -> None:
        mine = got.setdefault(owner, [])
        while (u := units.claim(sessions, sweep_id, owner)) is not None:
            mine.append(u.id)

    threads = [threading.Thread(target=grab, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [i for ids in got.values() for i in ids]
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == 12
    assert units.outstanding(sessions, sweep_id) == {"leased": 12}


def test_expired_and_dead_owner_leases_are_taken_over_and_heartbeats_keep_them(db_url: str) -> None:
    sessions, sweep_id = _sweep(db_url, 2)
    a = units.claim(sessions, sweep_id, "otherhost:1:a")
    b = units.claim(sessions, sweep_id, "otherhost:1:a")
    assert a and b and units.claim(sessions, sweep_id, "me:2:b") is None  # live leases on another host
    assert units.heartbeat(sessions, "otherhost:1:a") == 2
    with sessions.begin() as s:  # one lease runs out
        s.execute(update(WorkUnitRow).where(WorkUnitRow.id == a.id).values(expires_at=utcnow() - timedelta(seconds=1)))
    taken = units.claim(sessions, sweep_id, "me:2:b")
    assert taken is not None and taken.id == a.id and taken.attempts == 2
    assert not units.finish(sessions, a, "otherhost:1:a")  # the old owner lost it
    assert units.finish(sessions, taken, "me:2:b")
    # a dead owner on this host (no such pid) loses its lease at once, before it expires
    import socket

    dead = f"{socket.gethostname()[:80]}:999999999:x"
    with sessions.begin() as s:
        s.execute(update(WorkUnitRow).where(WorkUnitRow.id == b.id).values(owner=dead))
    again = units.claim(sessions, sweep_id, "me:2:b")
    assert again is not None and again.id == b.id


def test_cancel_releases_leases_and_stops_claims(db_url: str) -> None:
    sessions, sweep_id = _sweep(db_url, 3)
    assert units.claim(sessions, sweep_id, "w:1:a") is not None
    assert units.cancel(sessions, sweep_id) == 1
    assert units.outstanding(sessions, sweep_id) == {"pending": 3}
    assert units.sweep_status(sessions, sweep_id) == "cancelled"
    # a restart of the same sweep puts it back to running with its done units kept
    assert units.create_sweep(sessions, "t", {"runs": []}, []) == (sweep_id, False)
    assert units.sweep_status(sessions, sweep_id) == "running"


def test_one_worker_in_process_works_the_units_off_and_opens_slots_for_a_concurrent_model(tmp_path: Path) -> None:
    import asyncio

    from harness.sweep.worker import SweepWorker

    url = f"sqlite:///{tmp_path / 'h.db'}"
    sessions = open_db(url)
    entries = expand(_matrix(models=[("builtin:number", {"concurrency": 4, "batch_size": 1}, Resources())], limit=12))
    plan = [(0, entries[0].run_name, ids) for ids in units.chunk(entries[0].sample_ids, 3)]
    sweep_id, _ = units.create_sweep(sessions, "inproc", {"runs": [e.to_dict() for e in entries]}, plan)
    worker = SweepWorker(sessions, sweep_id, max_slots=3)
    report = asyncio.run(worker.run())
    assert report.units_done == 4 and report.samples_new == 12 and report.models_built == 1
    assert worker._slots == 3  # the model takes concurrent calls: more units in flight at once
    assert units.outstanding(sessions, sweep_id) == {"done": 4}
    from harness.store.schema import RunRow

    with sessions() as s:
        run = s.scalar(select(RunRow).where(RunRow.name == entries[0].run_name))
        assert run is not None and run.status == "finished" and run.n_samples == 12 and run.n_done == 12


def test_a_sweep_with_a_run_left_unfinished_is_not_complete() -> None:
    """Every unit done but the finaliser killed: the driver must not exit 0 as if the sweep were done."""
    from harness.sweep import SweepResult

    done = SweepResult(1, "s", True, [{"run": "a", "status": "finished"}, {"run": "b", "status": "failed"}],
                       units={"done": 4})
    assert done.complete  # a run whose samples all failed is finished work, not a stuck one
    stuck = SweepResult(1, "s", True, [{"run": "a", "status": "finished"}, {"run": "b", "status": "finalizing"}],
                        units={"done": 4})
    assert not stuck.complete and stuck.unfinished_runs == ["b"]
    assert not SweepResult(1, "s", True, [], units={"done": 3, "leased": 1}).complete

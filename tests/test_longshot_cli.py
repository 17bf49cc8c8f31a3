"""``harness longshot fixture DIR`` writes the offline fixture the task reads (no Python needed)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli import app

pytest.importorskip("av")


def test_fixture_command_writes_what_the_task_loads(tmp_path):
    out = CliRunner().invoke(app, ["longshot", "fixture", str(tmp_path / "fx")])
    assert out.exit_code == 0, out.output
    assert "5 items, 3 videos" in out.output and "-T data_dir=" in out.output
    items = [json.loads(line) for line in (tmp_path / "fx" / "items.jsonl").read_text().splitlines()]
    assert [i["sample_id"] for i in items] == ["s1", "s2", "s3", "s4", "s5"]
    from harness.tasks.longshot.task import longshot

    samples = list(longshot(data_dir=str(tmp_path / "fx")).load())
    assert {s.id.split("#")[0] for s in samples} == {"s1", "s2", "s3", "s4", "s5"}


def test_fixture_command_on_a_file_is_one_line(tmp_path):
    target = tmp_path / "a-file"
    target.write_text("x")
    out = CliRunner().invoke(app, ["longshot", "fixture", str(target)])
    assert out.exit_code == 2 and "is not a folder" in out.output and "Traceback" not in out.output

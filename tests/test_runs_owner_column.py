"""`harness runs` says whose each run is once token holders have pushed runs beside the operator's."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from harness.cli import app
from harness.runner import EvalConfig, Runner
from harness.store.db import open_db
from harness.store.schema import RunRow


def test_the_owner_column_appears_only_when_someone_pushed(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    sessions = open_db(url)
    for text in ("zero", "one"):
        Runner(EvalConfig(task="gsm8k", model="builtin:constant", model_settings={"text": text}, limit=2,
                          progress=False), session_factory=sessions).run()
    plain = CliRunner().invoke(app, ["runs", "--db", url, "--json"])
    assert plain.exit_code == 0 and all(r["owner"] == "operator" for r in json.loads(plain.output))
    assert "owner" not in CliRunner().invoke(app, ["runs", "--db", url]).output
    with sessions.begin() as s:
        s.get(RunRow, 2).owner = "alice"  # as a push token's run is stored
    listed = CliRunner().invoke(app, ["runs", "--db", url], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "owner" in listed.output
    assert "alice" in listed.output and "operator" in listed.output

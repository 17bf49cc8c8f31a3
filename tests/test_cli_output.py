"""The CLI as read by people and scripts: typed ``key=value`` values (``#`` kept, quoting), tables
that fit the terminal without cutting ids, ``--json``/``--csv`` on every listing, ``harness tasks
TASK``, unknown ``-T`` options, and the arena ratings table."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.cli_support import parse_kv
from harness.cli_tables import Column, render_table
from harness.modelspec import parse_spec, parse_value
from harness.options import split_top


@pytest.mark.parametrize("raw, value", [
    ("0.7", 0.7), ("12", 12), ("-3", -3), ("1_000", 1000), ("0x1f", 31), ("1e-3", 0.001), (".5", 0.5),
    ("true", True), ("False", False), ("None", None), ("null", None),
    ("abc", "abc"), ("none", "none"), ("007", "007"), ("'inf'", "inf"),
    ("60#ok", "60#ok"), ("'60#ok'", "60#ok"), ('"a # b"', "a # b"), ('"007"', "007"), ("'it\\'s'", "it's"),
    ("[1, 2.5, 'a,b']", [1, 2.5, "a,b"]), ("[text,image]", ["text", "image"]), ("(1, 2)", [1, 2]),
    ('{"a": 1, b: [null, true]}', {"a": 1, "b": [None, True]}), ("[[1], {}]", [[1], {}]),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"), ("a=b", "a=b"), ("", ""), ("  5 ", 5),
    # not one whole literal: kept as written, never a partial parse
    ("1, 2", [1, 2]), ("0.5,0.9", [0.5, 0.9]), ("1,", [1]), ("1, 'a'", [1, "a"]), ("a,b", "a,b"),
    ("1, x", "1, x"), ("16,24,32", [16, 24, 32]), ("[1, 2] x", "[1, 2] x"), ("'open", "'open"),
    ("[1, 2", "[1, 2"), ("{1, 2}", "{1, 2}"),
])
def test_parse_value(raw, value):
    got = parse_value(raw)
    assert got == value and type(got) is type(value)


def _listed(value):
    """literal_eval's value as JSON stores it (tuples are lists)."""
    if isinstance(value, tuple | list):
        return [_listed(v) for v in value]
    if isinstance(value, dict):
        return {k: _listed(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("raw", ["0", "12", "-3", "0.25", "1e-3", "True", "False", "None", "'text'", '"x y"',
                                 "[1, 2]", "[0.5, 'a', None]", "(1, 2)", "1, 2", "0.5,0.9", "{'a': 1}",
                                 '{"k": [1, {"j": false}]}' .replace("false", "False"), "[[1], [2, 3]]", "1,"])
def test_every_form_literal_eval_took_reads_the_same(raw):
    """Runs made before keep their identity: each form the old ``ast.literal_eval`` path accepted
    gives the same value (as stored: tuples as lists)."""
    import ast

    assert parse_value(raw) == _listed(ast.literal_eval(raw))


def test_kv_and_operator_params_keep_hash_and_quoted_commas():
    assert parse_kv(["text=60#ok", "url=http://h/v1?a=b", "n= 3"], "-J") == {
        "text": "60#ok", "url": "http://h/v1?a=b", "n": 3}
    node = parse_spec('vote(builtin:echo, n=5, note="a, b # c", levels=[1, 2])')
    assert [a.name for a in node.args] == ["builtin"]
    assert node.params == {"n": 5, "note": "a, b # c", "levels": [1, 2]}
    assert split_top("a, 'x,y', [1,2], (3,4)") == ["a", "'x,y'", "[1,2]", "(3,4)"]


COLS = [Column("id", "id", ident=True, right=True), Column("name", "name", ident=True),
        Column("model", "model", drop=2), Column("status", "status", drop=4), Column("note", "note", drop=1),
        Column("headline", "headline")]
ROWS = [{"id": 1, "name": "gsm8k__builtin-number__a0d16afc", "model": "openai:some-long-model-name@http://x",
         "status": "finished", "note": "a fairly long note that wraps", "headline": "exact_match 0.1000"},
        {"id": 22, "name": "qa__builtin-echo__c7f0dca3", "model": "builtin:echo", "status": "running",
         "note": "", "headline": "accuracy 0.5000"}]


@pytest.mark.parametrize("width", [40, 60, 80, 160, None])
def test_tables_fit_and_never_cut_ids(width):
    text = render_table("runs", COLS, ROWS, width)
    lines = text.splitlines()
    for row in ROWS:  # whole ids on one line, never an ellipsis
        assert any(row["name"] in ln and f" {row['id']} " in ln for ln in lines)
    assert "…" not in text
    table_lines = [ln for ln in lines if ln.startswith(("┃", "│", "┏", "└"))]
    if width is None or width >= 160:
        assert "left out" not in text and "finished" in text and "some-long-model-name" in text
    else:
        assert "left out" in text and "--json" in text
        # the footer names exactly the columns not in the header
        header = next(ln for ln in lines if ln.startswith("┃"))
        shown = [c.strip() for c in header.strip("┃").split("┃")]
        left_out = text.split("left out to fit ")[1].split(": ", 1)[1].split(";")[0].split(", ")
        assert sorted(shown + left_out) == sorted(c.header for c in COLS)
        assert {"id", "name", "headline"} <= set(shown)
        # the narrowest possible: the borders, both ids whole, the headline down to its longest word
        narrowest = 1 + (2 + 3) + (len(ROWS[0]["name"]) + 3) + (len("exact_match") + 3)
        assert max(len(ln) for ln in table_lines) <= max(width, narrowest)


@pytest.fixture()
def two_runs(tmp_path):
    db = f"sqlite:///{tmp_path / 'h.db'}"
    r = CliRunner()
    for model in ("builtin:number", "builtin:echo"):
        out = r.invoke(app, ["eval", "-t", "gsm8k", "-m", model, "--limit", "6", "--db", db, "--no-progress"])
        assert out.exit_code == 0, out.output
    out = r.invoke(app, ["eval", "-t", "gsm8k", "-m", "builtin:constant", "-M", "text=60#ok", "--limit", "2",
                         "--db", db, "--no-progress"])
    assert out.exit_code == 0, out.output
    return db


def test_runs_show_compare_json_csv_and_narrow_tables(two_runs):
    db, r = two_runs, CliRunner()
    runs = json.loads(r.invoke(app, ["runs", "--db", db, "--json"]).output)
    assert [x["model"] for x in runs] == ["builtin:number", "builtin:echo", "builtin:constant"]
    assert runs[0]["n_done"] == 6 and runs[0]["metric"] == "exact_match_flexible" and runs[0]["ci_low"] is not None
    rows = list(csv.DictReader(io.StringIO(r.invoke(app, ["runs", "--db", db, "--csv"]).output)))
    assert [x["name"] for x in rows] == [x["name"] for x in runs] and rows[1]["n_samples"] == "6"
    narrow = r.invoke(app, ["runs", "--db", db], env={"COLUMNS": "50"})
    assert narrow.exit_code == 0
    assert all(x["name"] in narrow.output for x in runs) and "left out to fit 50 columns" in narrow.output
    # `-M text=60#ok` is stored whole (literal_eval read it as 60)
    shown = json.loads(r.invoke(app, ["show", runs[2]["name"], "--db", db, "--json"]).output)
    assert shown["config"]["model_settings"] == {"text": "60#ok"} and shown["n_done"] == 2
    assert {m["metric"] for m in shown["metrics"]} >= {"exact_match_flexible", "exact_match_strict"}
    metrics = list(csv.DictReader(io.StringIO(r.invoke(app, ["show", "1", "--db", db, "--csv"]).output)))
    assert {"metric", "value", "ci_low", "ci_high", "n"} <= set(metrics[0])
    cmp = json.loads(r.invoke(app, ["compare", "1", "2", "--db", db, "--json"]).output)
    assert cmp["a"]["id"] == 1 and cmp["b"]["id"] == 2
    assert {x["metric"] for x in cmp["results"]} >= {"exact_match_strict"} and cmp["results"][0]["n"] == 6
    cmp_csv = list(csv.DictReader(io.StringIO(r.invoke(app, ["compare", "1", "2", "--db", db, "--csv"]).output)))
    assert len(cmp_csv) == len(cmp["results"]) and "p_value" in cmp_csv[0]
    both = r.invoke(app, ["runs", "--db", db, "--json", "--csv"])
    assert both.exit_code == 2 and "choose one" in both.output


def test_tasks_and_models_listings():
    r = CliRunner()
    tasks = json.loads(r.invoke(app, ["tasks", "--json"]).output)
    assert {"gsm8k", "ocp_synthetic"} <= {t["name"] for t in tasks}
    models = json.loads(r.invoke(app, ["models", "--json"]).output)
    kinds = {m["name"]: m["kind"] for m in models}
    assert kinds["builtin"] == "backend" and kinds["vote"] == "operator" and kinds["dsgg-prior"] == "backend"
    rows = list(csv.DictReader(io.StringIO(r.invoke(app, ["models", "--csv"]).output)))
    assert len(rows) == len(models)
    narrow = r.invoke(app, ["tasks"], env={"COLUMNS": "60"})
    assert all(ln.rstrip() == ln.rstrip()[:60] for ln in narrow.output.splitlines() if ln.startswith("│"))


def test_tasks_task_describes_options_metrics_and_data():
    r = CliRunner()
    out = r.invoke(app, ["tasks", "gsm8k"], env={"COLUMNS": "100"})
    assert out.exit_code == 0, out.output
    assert "data_file" in out.output and "str | None" in out.output and "GSM8K-format JSONL" in out.output
    assert "MIT License" in out.output and "grade-school-math" in out.output
    assert "exact_match_flexible" in out.output and "higher is better" in out.output
    info = json.loads(r.invoke(app, ["tasks", "ocp_synthetic", "--json"]).output)
    opts = {o["name"]: o for o in info["options"]}
    assert opts["T"]["type"] == "int" and opts["T"]["default"] == 5000 and not opts["T"]["required"]
    assert "sinusoid" in opts["stream"]["doc"]
    assert {m["name"]: m["direction"] for m in info["metrics"]}["wis"] == "lower"
    bad = r.invoke(app, ["tasks", "gsm8kk"])
    assert bad.exit_code == 2 and "did you mean 'gsm8k'" in bad.output


def test_unknown_task_option_names_the_closest(tmp_path):
    out = CliRunner().invoke(app, ["eval", "-t", "ocp_synthetic", "-m", "ocp:aci", "-T", "stram=shift",
                                   "--db", f"sqlite:///{tmp_path / 'h.db'}"])
    assert out.exit_code == 2
    assert "unknown option -T stram; did you mean 'stream'?" in out.output
    assert "unexpected keyword" not in out.output and "Traceback" not in out.output


def test_arena_ratings_csv_and_no_empty_column(sqlite_url):
    from test_arena_cli import add_votes

    add_votes(sqlite_url, 300)
    r = CliRunner()
    table = r.invoke(app, ["arena", "ratings", "--db", sqlite_url, "--bootstrap", "0"], env={"COLUMNS": "100"})
    assert table.exit_code == 0, table.output
    header = next(ln for ln in table.output.splitlines() if "Model" in ln)
    cells = [c.strip() for c in header.strip("┃").split("┃")]
    assert cells == ["Rank (UB)", "Model", "Rating", "95% CI", "Votes", "Win rate"]  # nothing empty at the end
    noted = r.invoke(app, ["arena", "ratings", "--db", sqlite_url, "--bootstrap", "0", "--min-votes", "1000"],
                     env={"COLUMNS": "120"})
    assert "Note" in noted.output and "not listed" in noted.output
    rows = list(csv.DictReader(io.StringIO(r.invoke(app, ["arena", "ratings", "--db", sqlite_url, "--csv",
                                                          "--bootstrap", "0"]).output)))
    assert {x["model"] for x in rows} == {"strong", "middle", "weak"} and "rating" in rows[0]

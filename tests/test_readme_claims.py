"""Every family README says, per headline claim of its seed paper, what this project measured.

One `## Claims` table per `tasks/*/README.md` with the columns below. A row's status is one of
three words; a row that says we measured (reproduced or not) carries our figure and the command
that produced it, and a row that says we did not carries the dash. The figures in `ours` must
already stand in the README's measured sections (no number is made up for the table), paper
and figures outside the table sit where the word "paper" names them. (That no method backend reads
its task's answer is checked per family, by the families' own tests.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAMILY_READMES = sorted((ROOT / "tasks").glob("*/README.md"))
HEADING = "## Claims"
COLUMNS = ["claim (paper)", "ours (measured)", "setting", "status", "command"]
STATUSES = {"reproduced", "not reproduced at this budget", "not measured"}
MEASURED = {"reproduced", "not reproduced at this budget"}
DASH = "—"
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
PAPER_FIGURE = re.compile(r"\d+(?:\.\d+)?%?")
CELL_SPLIT = re.compile(r"(?<!\\)\|")


def split_row(line: str) -> list[str]:
    body = line.strip()
    assert body.startswith("|") and body.endswith("|"), f"not a table row: {line!r}"
    return [cell.strip() for cell in CELL_SPLIT.split(body[1:-1])]


def claims_section(text: str) -> tuple[str, str]:
    """(the Claims section, up to the next `## ` heading; the README without it)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.rstrip() == HEADING]
    assert len(starts) == 1, f"expected exactly one {HEADING!r} heading, found {len(starts)}"
    start = starts[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end]), "\n".join(lines[:start] + lines[end:])


def claims_table(section: str) -> tuple[list[str], list[list[str]], str]:
    """(header, rows, the text under the table) of the first table in the section."""
    lines = section.splitlines()[1:]
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    assert i < len(lines) and lines[i].lstrip().startswith("|"), f"{HEADING} must open with its table"
    table = []
    while i < len(lines) and lines[i].lstrip().startswith("|"):
        table.append(split_row(lines[i]))
        i += 1
    assert len(table) >= 2, "the table has no separator row"
    assert all(re.fullmatch(r":?-{3,}:?", cell) for cell in table[1]), f"bad separator row: {table[1]}"
    return table[0], table[2:], "\n".join(lines[i:])


def parsed(path: Path) -> tuple[list[str], list[dict[str, str]], str, str]:
    text = path.read_text()
    section, rest = claims_section(text)
    header, rows, note = claims_table(section)
    for row in rows:
        assert len(row) == len(header), f"{len(row)} cells under {len(header)} columns: {row}"
    return header, [dict(zip(header, row, strict=True)) for row in rows], note, rest


@pytest.fixture(params=FAMILY_READMES, ids=lambda p: p.parent.name)
def readme(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


def test_every_family_readme_is_checked():
    names = {p.parent.name for p in FAMILY_READMES}
    assert {"reliability", "agents", "reid", "nvs", "selection", "gsm8k"} <= names
    assert len(names) >= 18


def test_claims_table_has_the_columns_and_two_to_five_rows(readme):
    header, rows, _, _ = parsed(readme)
    assert header == COLUMNS
    assert 2 <= len(rows) <= 5, f"{len(rows)} rows"
    for row in rows:
        assert all(row.values()), f"a row with an empty cell: {row}"


def test_every_status_is_one_of_three(readme):
    _, rows, _, _ = parsed(readme)
    for row in rows:
        assert row["status"] in STATUSES, row["status"]


def test_measured_rows_carry_a_figure_and_a_command_and_the_rest_a_dash(readme):
    _, rows, _, _ = parsed(readme)
    for row in rows:
        if row["status"] in MEASURED:
            assert row["ours (measured)"] != DASH and NUMBER.search(row["ours (measured)"]), row
            assert re.search(r"`[^`]+`", row["command"]), f"no command in backticks: {row}"
        else:
            assert row["ours (measured)"] == DASH, f"a 'not measured' row with a figure: {row}"


def test_our_figures_already_stand_in_the_measured_sections(readme):
    """No figure is made up for the table: each number in `ours` appears elsewhere in the README."""
    _, rows, _, rest = parsed(readme)
    for row in rows:
        for number in NUMBER.findall(row["ours (measured)"]):
            assert re.search(rf"(?<!\d)(?<!\d[.,]){re.escape(number)}(?!\d|[.,]\d)", rest), \
                f"{number} (ours, row {row['claim (paper)'][:40]!r}) is in no measured section"


def test_paper_figures_elsewhere_are_labelled_as_the_paper_s(readme):
    """A decimal or a percentage from the claims column, found outside the table, sits on a line or
    under a heading that names the paper: never presented as if it were ours."""
    _, rows, _, rest = parsed(readme)
    figures = {f for row in rows for f in PAPER_FIGURE.findall(row["claim (paper)"]) if "." in f or "%" in f}
    heading = ""
    for line in rest.splitlines():
        if line.startswith("#"):
            heading = line
        for figure in figures:
            if re.search(rf"(?<!\d)(?<!\d\.){re.escape(figure)}(?!\d|\.\d)", line):
                assert "paper" in line.lower() or "paper" in heading.lower(), \
                    f"{figure} (a paper figure) outside the table without 'paper': {line.strip()}"


GOOD = """# fam

## Results

Ours: accuracy 0.80 (`python bench/x.py`). The paper reports 0.95.

## Claims

| claim (paper) | ours (measured) | setting | status | command |
| --- | --- | --- | --- | --- |
| the method reaches 0.95 accuracy | 0.80 | toy | not reproduced at this budget | `python bench/x.py` |
| it also generalises | — | not run | not measured | `harness eval -t x -m y` |

No oracle input.

## Offline: fixture and judge replies
"""
BROKEN = {
    "wrong heading": GOOD.replace("## Claims", "## Claim"),
    "wrong column": GOOD.replace("| setting |", "| where |"),
    "a fourth status": GOOD.replace("| not measured |", "| partly |"),
    "a figure in a 'not measured' row": GOOD.replace("| — | not run |", "| 0.80 | not run |"),
    "a measured row without a command": GOOD.replace("| `python bench/x.py` |", "| see above |"),
    "a figure no measured section holds": GOOD.replace("| 0.80 | toy |", "| 0.81 | toy |"),
    "a paper figure passed off as ours": GOOD.replace("The paper reports 0.95.", "We reach 0.95."),
    "a cell too many": GOOD.replace("| `harness eval -t x -m y` |", "| `harness eval -t x -m y` | extra |"),
}
CHECKS = (test_claims_table_has_the_columns_and_two_to_five_rows, test_every_status_is_one_of_three,
          test_measured_rows_carry_a_figure_and_a_command_and_the_rest_a_dash,
          test_our_figures_already_stand_in_the_measured_sections,
          test_paper_figures_elsewhere_are_labelled_as_the_paper_s)


def test_the_checks_pass_a_conforming_readme(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(GOOD)
    for check in CHECKS:
        check(path)


@pytest.mark.parametrize("fault", sorted(BROKEN))
def test_the_checks_catch_each_broken_rule(tmp_path, fault):
    """Each rule the checks enforce is broken once, in an otherwise conforming README: some check fails."""
    path = tmp_path / "README.md"
    path.write_text(BROKEN[fault])
    failed = []
    for check in CHECKS:
        try:
            check(path)
        except AssertionError:
            failed.append(check.__name__)
    assert failed, f"no check caught {fault}"

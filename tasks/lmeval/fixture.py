"""The lmeval family's offline fixture: a small lm-eval YAML task on local data, for ``harness demo``.

``write(folder)`` writes ``harness_demo_mc.yaml`` (an lm-eval ``multiple_choice`` task), its data
``harness_demo_mc.jsonl`` and ``harness_demo_data.py``, whose ``load`` the YAML names as lm-eval's
``custom_dataset`` (``!function``): it reads the data beside itself, so the folder can move and the task
runs from any working directory: ``harness eval -t lmeval:harness_demo_mc -T include_path=FOLDER``.
"""

from __future__ import annotations

import json
from pathlib import Path

QUESTIONS = [
    ("What is the capital of France?", ["Paris", "Rome", "Madrid", "Berlin"], 0),
    ("How many legs does a spider have?", ["six", "eight", "ten", "four"], 1),
    ("Which planet is known as the red planet?", ["Venus", "Jupiter", "Mars", "Saturn"], 2),
    ("What do bees make?", ["milk", "silk", "wax and honey", "paper"], 2),
    ("Which is the largest ocean?", ["the Atlantic", "the Indian", "the Arctic", "the Pacific"], 3),
    ("What is frozen water called?", ["ice", "steam", "fog", "sand"], 0),
]


LOADER = '''"""The demo task's data: the JSONL beside this file, as lm-eval's custom_dataset."""
import json
from pathlib import Path


def load(**_kwargs):
    import datasets

    path = Path(__file__).with_name("harness_demo_mc.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"test": datasets.Dataset.from_list(rows)}
'''


def write(folder: str | Path) -> Path:
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    data = root / "harness_demo_mc.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "label": g}) + "\n" for q, c, g in QUESTIONS),
                    encoding="utf-8")
    (root / "harness_demo_data.py").write_text(LOADER, encoding="utf-8")
    (root / "harness_demo_mc.yaml").write_text(
        "task: harness_demo_mc\n"
        "dataset_path: json\n"
        "custom_dataset: !function harness_demo_data.load\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        'doc_to_text: "Question: {{question}}\\nAnswer:"\n'
        'doc_to_choice: "{{choices}}"\n'
        "doc_to_target: label\n"
        "metric_list:\n"
        "  - metric: acc\n"
        "    aggregation: mean\n"
        "    higher_is_better: true\n"
        "  - metric: acc_norm\n"
        "    aggregation: mean\n"
        "    higher_is_better: true\n"
        "metadata:\n"
        "  version: 1.0\n", encoding="utf-8")
    return root

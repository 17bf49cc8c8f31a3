"""lm-evaluation-harness's own run, for the parity tests: ``lm_eval.simple_evaluate`` with its ``hf``
model on a local model folder, float32 on the CPU, samples logged.

    python tests/lmeval_reference.py MODEL_DIR TASK[,TASK...] INCLUDE_DIR OUT.json BATCH_SIZE [MODEL_ARGS]

Writes {"results": lm-eval's results, "samples": {task: [{doc_id, filter, resps, filtered_resps,
metric values}]}}. Run from the repository root (the test YAMLs name their data relative to it).
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    model_dir, tasks, include, out = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4]
    batch_size = int(sys.argv[5])
    extra = sys.argv[6] if len(sys.argv) > 6 else ""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import lm_eval
    from lm_eval.tasks import TaskManager

    args = f"pretrained={model_dir},dtype=float32" + (f",{extra}" if extra else "")
    res = lm_eval.simple_evaluate(model="hf", model_args=args, tasks=tasks, batch_size=batch_size, device="cpu",
                                  task_manager=TaskManager(include_path=include), log_samples=True)
    keep = ("doc_id", "filter", "resps", "filtered_resps")
    samples = {t: [{**{k: s[k] for k in keep}, **{m: s[m] for m in s["metrics"]}} for s in res["samples"][t]]
               for t in tasks}
    with open(out, "w") as fh:
        json.dump({"results": res["results"], "samples": samples}, fh, default=str)


if __name__ == "__main__":
    main()

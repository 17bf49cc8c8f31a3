"""GSM8K: the harness's ``gsm8k`` task next to lm-evaluation-harness 0.4.13's own run, sample by sample.

The same model folder, the same problems (the first N of the shipped test split), the same prompt (the
harness's zero-shot instruction and question as the user message: ``bench/lmeval/harness_gsm8k_zeroshot.yaml``
states it as an lm-eval task with lm-eval's own gsm8k filters and exact_match), greedy, 256 new tokens,
float32 on the CPU, the same batch size on both sides (``--batch-size``, default 16: each side forms its
batches in its own order, and padding changes float rounding, which can flip a greedy token; 1 rules that
out at many times the cost). A chat model goes through its chat template on both sides (lm-eval's
``--apply_chat_template``); a base model without a template (Gemma 3 270M) gets its plain prompt after
``<bos>`` on both.

Printed per model: strict and flexible exact match of each, how many samples have the same generated text
and the same per-sample scores, and each sample that differs (its first differing characters).

    python bench/gsm8k_vs_lmeval.py --models smollm2-135m-instruct -n 50
    python bench/gsm8k_vs_lmeval.py --models gemma3-270m -n 20 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAT = {"smollm2-135m-instruct": True, "gemma3-270m": False}


def lm_eval_run(folder: str, n: int, chat: bool, batch_size: int) -> dict[str, dict]:
    import lm_eval
    from lm_eval.tasks import TaskManager

    res = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={folder},dtype=float32", batch_size=batch_size,
                                  device="cpu", tasks=["harness_gsm8k_zeroshot"], limit=n, log_samples=True,
                                  apply_chat_template=chat,
                                  task_manager=TaskManager(include_path=str(ROOT / "bench" / "lmeval")))
    out: dict[str, dict] = {}
    for s in res["samples"]["harness_gsm8k_zeroshot"]:
        row = out.setdefault(str(s["doc_id"]), {"text": s["resps"][0][0]})
        row[s["filter"]] = float(s["exact_match"])
    return out


def harness_run(name: str, n: int, db: Path, batch_size: int) -> dict[str, dict]:
    exe = str(Path(sys.executable).parent / "harness")
    subprocess.run([exe, "eval", "-t", "gsm8k", "-m", f"hf:{name}", "--limit", str(n), "-M", f"batch_size={batch_size}",
                    "--db", f"sqlite:///{db}", "--no-progress"], check=True, cwd=ROOT)
    with sqlite3.connect(db) as c:
        rows = c.execute("select sample_id, output, scores from sample_results").fetchall()
    return {sid: {"text": text, **json.loads(scores)} for sid, text, scores in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m-instruct,gemma3-270m")
    parser.add_argument("-n", type=int, default=50)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.chdir(ROOT)
    from harness.models.hf_embedded import ensure_converted

    report = {}
    for name in args.models.split(","):
        folder = str(ensure_converted(name))
        with tempfile.TemporaryDirectory() as tmp:
            ours = harness_run(name, args.n, Path(tmp) / "h.db", args.batch_size)
        theirs = lm_eval_run(folder, args.n, CHAT[name], args.batch_size)
        same_text = [sid for sid in theirs if ours.get(sid, {}).get("text") == theirs[sid]["text"]]
        same_scores = [sid for sid in theirs
                       if ours.get(sid, {}).get("exact_match_strict") == theirs[sid]["strict-match"]
                       and ours.get(sid, {}).get("exact_match_flexible") == theirs[sid]["flexible-extract"]]

        def mean(rows: dict[str, dict], key: str) -> float:
            return sum(r[key] for r in rows.values()) / max(1, len(rows))

        line = {"model": name, "n": len(theirs), "batch_size": args.batch_size,
                "harness_strict": mean(ours, "exact_match_strict"),
                "harness_flexible": mean(ours, "exact_match_flexible"),
                "lm_eval_strict": mean(theirs, "strict-match"), "lm_eval_flexible": mean(theirs, "flexible-extract"),
                "same_text": len(same_text), "same_scores": len(same_scores)}
        report[name] = line
        print(json.dumps(line))
        for sid in sorted(set(theirs) - set(same_text), key=int):
            a, b = ours.get(sid, {}).get("text", ""), theirs[sid]["text"]
            cut = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            print(f"  sample {sid}: texts differ at character {cut}: harness {a[cut:cut + 40]!r} | "
                  f"lm-eval {b[cut:cut + 40]!r}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

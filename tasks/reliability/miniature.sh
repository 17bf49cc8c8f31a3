#!/usr/bin/env bash
# The seed paper's experiment in miniature, on the two embedded models (offline, CPU): each model is a
# channel; plain decoding and the operators run on 30 items of the hard split (every tenth item of
# each source: 10 GSM8K, 10 MMLU, 10 HumanEval), then the report fits the SemKNN router on a hashed
# train part of the runs, scores it on the held-out rest and draws the Pareto front.
#   bash tasks/reliability/miniature.sh [DB_URL] [OUT_DIR]
# Budget (the README's table states it): replies capped at 128 tokens (-T max_tokens=128); rateless
# at most 6 samples, turbo 3 rounds; every other parameter is the reference default, and an
# operator's judge is its own first model (the reference code's default). SmolLM2 (instruct) runs
# every operator; Gemma 3 270M (a base model, which writes to the token limit and cannot judge) runs
# plain and vote, and joins SmolLM2 in the two-channel runs: vote over both, and adaptive with
# Gemma as the second channel.
set -euo pipefail
DB="${1:-sqlite:///reliability-miniature.db}"
OUT="${2:-reliability-miniature}"
mkdir -p "$OUT"
SAMPLES="gsm8k/8,gsm8k/157,gsm8k/315,gsm8k/443,gsm8k/584,gsm8k/746,gsm8k/814,gsm8k/976,gsm8k/1093,gsm8k/1175"
SAMPLES+=",mmlu/abstract_algebra/13,mmlu/college_chemistry/13,mmlu/college_mathematics/18,mmlu/college_physics/2"
SAMPLES+=",mmlu/econometrics/12,mmlu/formal_logic/1,mmlu/high_school_mathematics/15,mmlu/high_school_physics/3"
SAMPLES+=",mmlu/machine_learning/2,mmlu/moral_scenarios/7"
SAMPLES+=",HumanEval/0,HumanEval/19,HumanEval/43,HumanEval/64,HumanEval/76,HumanEval/95,HumanEval/108"
SAMPLES+=",HumanEval/124,HumanEval/136,HumanEval/147"
SMOL=llamacpp:smollm2
GEMMA=gemma3-270m
run() { harness eval -t reliability -T max_tokens=128 --samples "$SAMPLES" --db "$DB" -m "$1"; }
run "$SMOL"
run "vote($SMOL, n=5)"
run "fec($SMOL)"
run "adaptive($SMOL)"
run "rateless($SMOL, max_samples=6)"
run "turbo($SMOL, max_rounds=3)"
run "$GEMMA"
run "vote($GEMMA, n=5)"
run "vote($SMOL, $GEMMA, n=6)"
run "adaptive($SMOL, $GEMMA)"
harness reliability report -t reliability --db "$DB" --out "$OUT/report.html" --json "$OUT/report.json"

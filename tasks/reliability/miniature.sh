#!/usr/bin/env bash
# The seed paper's experiment in miniature, on the two embedded models (offline, CPU): each model is a
# channel. Plain decoding and vote run on 30 items of the hard split (every tenth item of each source:
# 10 GSM8K, 10 MMLU, 10 HumanEval), every other technique on the first five of each source (15
# items); the report fits the SemKNN router on a hashed train part of the samples every run shares
# (the 15), scores it on the held-out rest and draws the Pareto front.
#   bash tasks/reliability/miniature.sh [DB_URL] [OUT_DIR]
# Budget (the README's table states it): replies capped at 128 tokens (-T max_tokens=128); rateless
# at most 4 samples, turbo 2 rounds, vote over Gemma 3 samples; every other parameter is the
# reference default, and an operator's judge is its own first model (the reference code's default).
# SmolLM2 (instruct) runs every operator; Gemma 3 270M (a base model, which writes to the token
# limit and cannot judge) runs plain and vote, and joins SmolLM2 in the two-channel runs: vote over
# both, and adaptive with Gemma as the second channel.
set -euo pipefail
DB="${1:-sqlite:///reliability-miniature.db}"
OUT="${2:-reliability-miniature}"
mkdir -p "$OUT"
GSM="gsm8k/8,gsm8k/157,gsm8k/315,gsm8k/443,gsm8k/584"
GSM_MORE="gsm8k/746,gsm8k/814,gsm8k/976,gsm8k/1093,gsm8k/1175"
MMLU="mmlu/abstract_algebra/13,mmlu/college_chemistry/13,mmlu/college_mathematics/18,mmlu/college_physics/2"
MMLU+=",mmlu/econometrics/12"
MMLU_MORE="mmlu/formal_logic/1,mmlu/high_school_mathematics/15,mmlu/high_school_physics/3"
MMLU_MORE+=",mmlu/machine_learning/2,mmlu/moral_scenarios/7"
HE="HumanEval/0,HumanEval/19,HumanEval/43,HumanEval/64,HumanEval/76"
HE_MORE="HumanEval/95,HumanEval/108,HumanEval/124,HumanEval/136,HumanEval/147"
CORE="$GSM,$MMLU,$HE"
ALL="$CORE,$GSM_MORE,$MMLU_MORE,$HE_MORE"
SMOL=llamacpp:smollm2
GEMMA=gemma3-270m
run() { harness eval -t reliability -T max_tokens=128 --samples "$1" --db "$DB" -m "$2"; }
run "$ALL" "$SMOL"
run "$ALL" "vote($SMOL, n=5)"
run "$CORE" "fec($SMOL)"
run "$CORE" "adaptive($SMOL)"
run "$CORE" "$GEMMA"
run "$CORE" "vote($SMOL, $GEMMA, n=4)"
run "$CORE" "rateless($SMOL, max_samples=4)"
run "$CORE" "turbo($SMOL, max_rounds=2)"
run "$CORE" "vote($GEMMA, n=3)"
run "$CORE" "adaptive($SMOL, $GEMMA)"
harness reliability report -t reliability --db "$DB" --out "$OUT/report.html" --json "$OUT/report.json"

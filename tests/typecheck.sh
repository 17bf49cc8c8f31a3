#!/usr/bin/env bash
# mypy over the installed layout (tasks/ -> harness.tasks, models/ -> harness.models, leaderboard/ ->
# harness.leaderboard). mypy cannot follow setuptools' editable import hook, so it reads a folder of
# links that has that layout. Settings (strict for the core modules) are pyproject.toml's [tool.mypy].
# Prints the findings and one count per package; exits with mypy's status.
set -uo pipefail
cd "$(dirname "$0")/.."
# one view (and mypy cache) per checkout: stable paths keep mypy's cache warm between runs
CACHE="${HARNESS_CACHE_DIR:-$HOME/.cache/harness}/mypy/$(printf %s "$PWD" | sha256sum | cut -c1-12)"
VIEW="$CACHE/view"
rm -rf "$VIEW"
mkdir -p "$VIEW/harness"
for entry in harness/*; do
  ln -s "$PWD/$entry" "$VIEW/harness/$(basename "$entry")"
done
for folder in tasks models leaderboard; do
  ln -s "$PWD/$folder" "$VIEW/harness/$folder"
done
OUT="$(mktemp)"
MYPYPATH="$VIEW" python -m mypy --cache-dir "$CACHE/cache" \
  --config-file pyproject.toml -p harness >"$OUT" 2>&1
status=$?
sed "s|$VIEW/||" "$OUT"
python3 - "$OUT" "$VIEW/" <<'PY'
import collections, re, sys
counts = collections.Counter()
for line in open(sys.argv[1]):
    m = re.match(r"(\S+?\.py):\d+: error", line.replace(sys.argv[2], ""))
    if m:
        parts = m.group(1).split("/")
        counts["/".join(parts[:2]) if len(parts) > 2 and parts[1] in ("tasks", "models", "leaderboard") else "harness (core)"] += 1
print("mypy findings per package: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"))
PY
rm -f "$OUT"
exit $status

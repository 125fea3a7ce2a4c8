#!/usr/bin/env bash
# On the GPU machine: the training logs that a refactoring must leave bit for bit unchanged - the
# README's KJV run (GPT-2 124M, 200 steps) and 30-step 124M runs with adamw, muon and velo (random
# meta-weights) - written to $OUT/<tag>_*.jsonl without the timing fields, so that the logs of two
# builds can be compared with diff. Expects built programs and data/kjv (or .deps/data/kjv).
# Usage: scripts/device_logs.sh TAG
set -uo pipefail
cd "$(dirname "$0")/.."
tag=${1:?usage: scripts/device_logs.sh TAG}
OUT=${OUT:-.out}
mkdir -p "$OUT"
[ -d data/kjv ] || { mkdir -p data && cp -r .deps/data/kjv data/; }
strip() { sed -E 's/,"(ms|opt_ms|tok_per_s|mfu)":[^,}]*//g' "$1"; }
status=0
run() {  # name, flags...
  local name=$1
  shift
  if ./train_gpt2 "$@" --log "$OUT/$tag.$name.raw" > "$OUT/$tag.$name.txt" 2>&1 && [ -s "$OUT/$tag.$name.raw" ]; then
    strip "$OUT/$tag.$name.raw" > "$OUT/${tag}_$name.jsonl"
    echo "$tag $name: $(wc -l < "$OUT/${tag}_$name.jsonl") lines, last: $(tail -n 1 "$OUT/${tag}_$name.jsonl" | cut -c1-120)"
  else
    echo "$tag $name: FAILED"; tail -n 3 "$OUT/$tag.$name.txt"; status=1
  fi
  rm -f "$OUT/$tag.$name.raw" "$OUT/$tag.$name.txt"
}
run kjv200 -x 200
for o in adamw muon velo; do
  run "d12_30_$o" -x 30 -v 10 -m 4 -s 0 -o "$o" --lopt-random 1
done
exit $status

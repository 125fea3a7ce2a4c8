#!/usr/bin/env bash
# On the GPU machine: ELO on the GPU (small_fc_lopt's passes in ELO's mode). Builds; runs the ELO GPU tests
# against the CPU reference and the small_fc_lopt ones (which share the kernels, so they must still pass;
# the worst measured errors are printed as "[ info ]" lines); times the step next to AdamW and
# small_fc_lopt (exact and fast) on GPT-2 124M and 355M; trains GPT-2 124M for 30 steps on the KJV corpus
# with -o elo on random meta-weights (the published ones need the network). Logs under $OUT (default .out).
# Exit status 1 when any part fails.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
status=0

echo "== build"
make -j"$(nproc)" all > "$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; echo "build failed"; exit 1; }

# ELO's tests (EloGpu.*), small_fc_lopt's own, and the shared ones that step small_fc_lopt (resume, owned
# subsets, graph replay, hostile input, the 10M-element tensor) in test_optim_gpu.cu.
filter='EloGpu.*:Gpu.SmallFc*:Gpu.LearnedOptimizer*:Gpu.SaveLoadContinuesBitForBit'
filter+=':Gpu.OwnedSubsetStepsLikeAnArenaOfThoseTensors:Gpu.GraphReplayEqualsEagerSteps'
echo "== GPU tests ($filter)"
./build/test_gpu --gtest_filter="$filter" > "$OUT/test_elo_gpu.log" 2>&1 || status=1
grep -E "^\[ *(OK|FAILED|RUN) *\]|\[ info \]|Failure|Expected|Which|error" "$OUT/test_elo_gpu.log" | head -80
tail -n 3 "$OUT/test_elo_gpu.log"
grep -q "PASSED" "$OUT/test_elo_gpu.log" && ! grep -q "SKIPPED\|FAILED" "$OUT/test_elo_gpu.log" ||
  { echo "GPU tests did not all run and pass"; status=1; }

echo "== bench_optim"
./bench_optim -e gpt2-124m,gpt2-355m -o adamw,small_fc_lopt,small_fc_lopt:fast,elo,elo:fast 2>&1 |
  tee "$OUT/bench_elo.jsonl" || status=1
# ELO vs AdamW at GPT-2 355M (aim: fast ELO within 3x).
python3 - "$OUT/bench_elo.jsonl" <<'EOF' || status=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and '"optim_step"' in l]
ms = {(r["model"], r["optimizer"], r.get("mode", "")): r["median_ms"] for r in rows}
for model in ("gpt2-124m", "gpt2-355m"):
    a = ms.get((model, "adamw", ""))
    for opt, mode in (("small_fc_lopt", "exact"), ("small_fc_lopt", "fast"), ("elo", "exact"), ("elo", "fast")):
        m = ms.get((model, opt, mode))
        if a and m:
            print(f"{model} {opt} {mode}: {m:.3f} ms = {m / a:.2f}x AdamW")
        else:
            print(f"{model} {opt} {mode}: missing"); sys.exit(1)
EOF

echo "== train_gpt2 -o elo, 30 steps on KJV (random meta-weights)"
./train_gpt2 -x 30 -o elo --lopt-random 1 -v 10 -m 4 --log "$OUT/train_elo.jsonl" > "$OUT/train_elo.txt" 2>&1 || status=1
grep -iE "step|val|loss|error" "$OUT/train_elo.txt" | tail -n 40
n=$(grep -c '"loss"' "$OUT/train_elo.jsonl" 2>/dev/null || true)
[ "${n:-0}" -eq 30 ] || { echo "train_elo.jsonl has ${n:-0} loss lines, expected 30"; status=1; }
if grep -E '"loss":(nan|-?inf|null)' "$OUT/train_elo.jsonl" > /dev/null 2>&1; then
  echo "non-finite loss in train_elo.jsonl"
  status=1
fi

echo "== status $status"
exit $status

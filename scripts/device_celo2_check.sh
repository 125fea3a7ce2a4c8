#!/usr/bin/env bash
# On the GPU machine: CELO2 / ELO_CELO2 on the GPU. Builds, runs the GPU tests against the CPU reference
# (their worst measured errors are printed as "[ info ]" lines), times the step next to AdamW and Muon
# (Newton-Schulz in bf16, the default, tf32 and fp32),
# and trains GPT-2 124M for 30 steps on the KJV corpus with -o celo2 (the shipped real weights).
# Logs under $OUT (default .out). Exit status 1 when any part fails.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
status=0

echo "== build"
make -j"$(nproc)" all > "$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; echo "build failed"; exit 1; }

echo "== GPU tests (*Celo2*)"
./build/test_gpu --gtest_filter='*Celo2*' > "$OUT/test_celo2_gpu.log" 2>&1 || status=1
grep -E "^\[ *(OK|FAILED|RUN) *\]|\[ info \]|Failure|Expected|Which|error" "$OUT/test_celo2_gpu.log" | head -60
tail -n 3 "$OUT/test_celo2_gpu.log"

echo "== bench_optim"
./bench_optim -e gpt2-124m,gpt2-355m -o adamw,muon,celo2,celo2:tf32,celo2:fp32,elo_celo2 2>&1 | tee "$OUT/bench_celo2.jsonl" || status=1

echo "== train_gpt2 -o celo2, 30 steps on KJV"
./train_gpt2 -x 30 -o celo2 -v 10 -m 4 --log "$OUT/train_celo2.jsonl" > "$OUT/train_celo2.txt" 2>&1 || status=1
grep -iE "step|val|loss|error" "$OUT/train_celo2.txt" | tail -n 40

echo "== status $status"
exit $status

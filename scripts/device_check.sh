#!/usr/bin/env bash
# Runs on the GPU machine: the test suites, the PyTorch cross-checks (optimizers; the GPT-2 model), the
# optimizer benchmark and (ops, not in the default list) the per-operation GPT-2 benchmark, with every
# log under $OUT (or ./.out). Expects binaries built beforehand (`make all`); pass --build to build here first.
# pylo: the PyLO parity check (tests/pylo_crosscheck.py) of the optimizers with GPU kernels against a PyLO
# source checkout at $PYLO_SRC (default .deps/pylo; carry it along, it is not part of this repository);
# pylorefs: the same for CELO2, ELO and ELO_CELO2, their GPU kernels and CPU references (apart: with its
# float64 noise floors it runs for minutes on the CPU; PYLO_QUICK=1 leaves out the 1024 x 1100 matrix).
# vitcrosscheck (not in the default list: it needs timm): our ViT against timm (tests/timm_vit_crosscheck.py).
# Usage: scripts/device_check.sh [--build] [tests|crosscheck|gpt2crosscheck|vitcrosscheck|pylo|pylorefs|bench|ops]...
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
if [ "${1:-}" = "--build" ]; then
  shift
  make -j"$(nproc)" all > "$OUT/build.log" 2>&1 || { tail -n 20 "$OUT/build.log"; echo "build failed"; exit 1; }
fi
what=${*:-tests crosscheck gpt2crosscheck pylo bench}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
for w in $what; do
  case $w in
    tests)
      ./build/test_cpu --gtest_brief=1 2>&1 | tee "$OUT/test_cpu.log" | tail -n 3 || status=1
      ./build/test_gpu 2>&1 | tee "$OUT/test_gpu.log" | grep -E "^\[ info|FAILED|PASSED|SKIPPED|Failure|error" || status=1
      # The GPU tests skip themselves when the program cannot use a GPU, and a suite of skips passes. Here
      # nvidia-smi sees a GPU, so a run with no passed test or with any skipped one is a failure.
      if nvidia-smi -L > /dev/null 2>&1; then
        gpu_passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$OUT/test_gpu.log" | tail -n 1)
        gpu_skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\},.*/\1/p' "$OUT/test_gpu.log" | tail -n 1)
        if [ "${gpu_passed:-0}" -eq 0 ] || [ "${gpu_skipped:-0}" -gt 0 ]; then
          echo "GPU suite: ${gpu_passed:-0} tests passed and ${gpu_skipped:-0} skipped although nvidia-smi sees a GPU"
          status=1
        fi
      fi ;;
    crosscheck)
      PYTHONUNBUFFERED=1 python3 tests/torch_crosscheck.py 2>&1 | tee "$OUT/crosscheck.jsonl" || status=1 ;;
    gpt2crosscheck)
      PYTHONUNBUFFERED=1 python3 tests/torch_gpt2_crosscheck.py 2>&1 | tee "$OUT/gpt2_crosscheck.jsonl" || status=1 ;;
    vitcrosscheck)
      PYTHONUNBUFFERED=1 python3 tests/timm_vit_crosscheck.py 2>&1 | tee "$OUT/vit_crosscheck.jsonl" || status=1 ;;
    pylo | pylorefs)
      only=small_fc_lopt,mulo,velo
      [ "$w" = pylorefs ] && only=celo2,elo,elo_celo2
      PYTHONUNBUFFERED=1 python3 tests/pylo_crosscheck.py --pylo "${PYLO_SRC:-.deps/pylo}" --only "$only" \
        ${PYLO_QUICK:+--quick} --json "$OUT/$w.jsonl" > "$OUT/$w.log" 2>&1 || status=1
      tail -n 1 "$OUT/$w.log" ;;
    bench)
      ./bench_optim -o adamw,adafactor,muon,small_fc_lopt,small_fc_lopt:fast,velo,elo,elo:fast,celo2,elo_celo2 2>&1 |
        tee "$OUT/bench_optim.jsonl" || status=1 ;;
    ops)
      ./bench_gpt2_ops -e gpt2-124m:64,gpt2-355m:32,gpt2-774m:16,gpt2-1558m:8 2>&1 | tee "$OUT/bench_gpt2_ops.jsonl" | grep step_ms || status=1 ;;
    *) echo "unknown step $w"; status=1 ;;
  esac
done
exit $status

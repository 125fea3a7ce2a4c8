#!/usr/bin/env bash
# On the GPU machine: the nvJPEG decode path. Builds the GPU suite and bench_image_loader, runs the nvJPEG
# tests (the resize kernel against the CPU resampler, the hardware decoder against stb with progressive and
# PNG fallbacks, the nvjpeg loader against the stb loader; each prints its measured differences as "info:"
# lines), then times the image loader with stb and nvjpeg on SHARDS, without and with RandAugment, one JSON
# line per run. A skipped test (no libnvjpeg, no JPEG engine) counts as a failure here. Status 1 on failure.
#
#   scripts/device_nvjpeg_check.sh
#   SHARDS="/data/inet/imagenet1k-train-{0000..0009}.tar" THREADS=16 scripts/device_nvjpeg_check.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SHARDS=${SHARDS:-".bench/inet/imagenet1k-train-{0000..0003}.tar"}
THREADS=${THREADS:-16}
source scripts/device_preamble.sh
fail() {
  echo "$*"
  exit 1
}

make -j"$(nproc)" build/test_gpu build/bench_image_loader > "$OUT/nvjpeg_build.log" 2>&1 ||
  fail "build failed: $(tail -n 5 "$OUT/nvjpeg_build.log")"
shopt -s nullglob
libs=("${CUDA_HOME:-/usr/local/cuda}"/lib64/libnvjpeg.so*)
echo "libnvjpeg: ${libs[*]:-none in ${CUDA_HOME:-/usr/local/cuda}/lib64}"

./build/test_gpu --gtest_filter='Nvjpeg*' > "$OUT/test_nvjpeg.log" 2>&1
rc=$?
grep -E "^\[ +(OK|SKIPPED|FAILED|PASSED) +\]|^info:|Failure|Expected|Which is|Value of|Actual|^nvJPEG" "$OUT/test_nvjpeg.log"
[ $rc -eq 0 ] || fail "nvJPEG GPU tests failed (log: $OUT/test_nvjpeg.log)"
grep -q "^\[  SKIPPED \]" "$OUT/test_nvjpeg.log" && fail "nvJPEG GPU tests were skipped (log: $OUT/test_nvjpeg.log)"

: > "$OUT/bench_nvjpeg.jsonl"
for ra in "" "rand-m9-mstd0.5-inc1"; do
  build/bench_image_loader -i "$SHARDS" --decoder stb,nvjpeg --threads "$THREADS" -b 256 -x 20 --untimed 3 \
    --randaugment "$ra" 2> "$OUT/bench_nvjpeg.err" | tee -a "$OUT/bench_nvjpeg.jsonl" ||
    fail "bench_image_loader failed: $(tail -n 3 "$OUT/bench_nvjpeg.err")"
done
echo "nvJPEG check passed (JSON lines in $OUT/bench_nvjpeg.jsonl)"

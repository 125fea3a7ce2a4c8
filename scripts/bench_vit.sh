#!/usr/bin/env bash
# On a GPU machine: ViT training throughput of ./train_vit on synthetic batches held in memory (the
# model's and the optimizer's step, no data pipeline), one JSON line per configuration.
#
#   scripts/bench_vit.sh                          vit-b16 at B=256 and B=32
#   scripts/bench_vit.sh vit-s16:32 vit-l16:32    chosen configurations, MODEL:B
#   STEPS=20 EXTRA="-o velo --lopt-random 1" OUTFILE=results/h100_vit.jsonl scripts/bench_vit.sh vit-b16:32
#
# Each configuration runs, in the repository root,
#   ./train_vit --synthetic 1 -e MODEL --image 224 --channels 3 --classes 1000 -b B -x STEPS -u 2 -v 0 -o adamw
#               --log TMPFILE $EXTRA
# (EXTRA is split on whitespace; later flags win) and prints
#   {"model","params_m","B","img_per_s","mfu","step_ms","opt_ms","gpu","extra","timed_steps"}
# with medians over the logged steps after the first WARMUP (3) (`./report median`). A failed run prints its
# error instead. Environment: STEPS (15), WARMUP (3), EXTRA (""), OUTFILE (lines also appended there),
# TRAIN_VIT (./train_vit), REPORT (./report), LAUNCH ("": a data-parallel launcher, e.g. "mpirun
# --allow-run-as-root -np 4"; each run then gets a fresh --nccl-id-file and the line "launch" and "world"; B
# is per process, img_per_s over all), PROFILE (1: GPT2_PROFILE=1, and the line adds "fwd_ms", "bwd_ms",
# "loss_ms"), TIMEOUT (seconds per run, under `timeout`; "": no limit). Needs the report tool (`make report`).
set -uo pipefail
source "$(dirname "$0")/bench_common.sh"
bench_setup bench_vit "${TRAIN_VIT:-./train_vit}" 15 "$@"
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(vit-b16:256 vit-b16:32)
for c in "${configs[@]}"; do
  [[ "$c" =~ ^vit-[a-z]+[0-9]+:[0-9]+$ ]] || bench_refuse "bad configuration '$c'; use MODEL:B, e.g. vit-b16:256."
done

for c in "${configs[@]}"; do
  IFS=: read -r model B <<<"$c"
  log="$tmp/$model-$B.jsonl"
  bench_run "$log" "\"model\":\"$model\",\"B\":$B" -e "$model" -b "$B" -- \
    "$exe" --synthetic 1 -e "$model" --image 224 --channels 3 --classes 1000 -b "$B" -x "$steps" -u 2 -v 0 -o adamw \
    --log "$log"
done

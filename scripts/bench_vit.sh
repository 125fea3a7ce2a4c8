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
for a in "$@"; do
  case "$a" in -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;; esac
done
outfile=${OUTFILE:-}
if [ -n "$outfile" ]; then
  case "$outfile" in /*) ;; *) outfile="$PWD/$outfile" ;; esac
  mkdir -p "$(dirname "$outfile")"
fi
cd "$(dirname "$0")/.." || exit 1
steps=${STEPS:-15}
warmup=${WARMUP:-3}
extra=${EXTRA:-}
exe=${TRAIN_VIT:-./train_vit}
read -r -a extra_args <<<"$extra"
launch_str=${LAUNCH:-}
read -r -a launch <<<"$launch_str"
for n in "$steps" "$warmup"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "bench_vit: STEPS and WARMUP must be whole numbers (got '$n')." >&2; exit 2; }
done
[ "$steps" -gt "$warmup" ] || { echo "bench_vit: STEPS ($steps) must be larger than WARMUP ($warmup)." >&2; exit 2; }
[ -x "$exe" ] || { echo "bench_vit: $exe not found; build it with 'make train_vit' (or set TRAIN_VIT)." >&2; exit 2; }
report=${REPORT:-./report}
[ -x "$report" ] || { echo "bench_vit: $report not found; build it with 'make report' (or set REPORT)." >&2; exit 2; }
timeout_s=${TIMEOUT:-}
[ -z "$timeout_s" ] || [[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || { echo "bench_vit: TIMEOUT must be a whole number of seconds (got '$timeout_s')." >&2; exit 2; }
limit=()
[ -z "$timeout_s" ] || limit=(timeout -k 10 "$timeout_s")
profile=()
[ "${PROFILE:-0}" = 1 ] && profile=(env GPT2_PROFILE=1)
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(vit-b16:256 vit-b16:32)
for c in "${configs[@]}"; do
  [[ "$c" =~ ^vit-[a-z]+[0-9]+:[0-9]+$ ]] || { echo "bench_vit: bad configuration '$c'; use MODEL:B, e.g. vit-b16:256." >&2; exit 2; }
done
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_vit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for c in "${configs[@]}"; do
  IFS=: read -r model B <<<"$c"
  log="$tmp/$model-$B.jsonl"
  cmd=("${launch[@]}" "$exe" --synthetic 1 -e "$model" --image 224 --channels 3 --classes 1000 -b "$B" -x "$steps" -u 2
       -v 0 -o adamw --log "$log")
  if [ ${#launch[@]} -gt 0 ]; then
    rm -f "$tmp/nccl_id"
    cmd+=(--nccl-id-file "$tmp/nccl_id")
  fi
  cmd+=("${extra_args[@]}")
  echo "bench_vit: ${cmd[*]}" >&2
  "${limit[@]}" "${profile[@]}" "${cmd[@]}" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  line=$("$report" median --program train_vit --log "$log" --stdout "$tmp/stdout" --stderr "$tmp/stderr" \
    --exit "$rc" -e "$model" -b "$B" --warmup "$warmup" --gpu "$gpu" --extra "$extra" --launch "$launch_str")
  [ -n "$line" ] || line="{\"model\":\"$model\",\"B\":$B,\"error\":\"bench_vit could not summarise the run (exit status $rc)\"}"
  echo "$line"
  if [ -n "$outfile" ]; then echo "$line" >>"$outfile"; fi
done

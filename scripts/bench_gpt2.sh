#!/usr/bin/env bash
# On a GPU machine: GPT-2 training throughput of ./train_gpt2, one JSON line per configuration.
#
#   scripts/bench_gpt2.sh                      d12 B=64, d24 B=32, d36 B=16, d48 B=8, all T=1024
#   scripts/bench_gpt2.sh d12:64 d24:32        chosen configurations, MODEL:B (or MODEL:B:T)
#   STEPS=20 EXTRA="--precision fp32" OUTFILE=results/h100_gpt2_throughput.jsonl scripts/bench_gpt2.sh
#
# Each configuration runs, in the repository root,
#   ./train_gpt2 -e MODEL -b B -t T -x STEPS -v 0 -s 0 -o adamw --log TMPFILE $EXTRA
# and prints one line. EXTRA is split on whitespace (no quoting) and later flags win, so it may also
# change the optimizer or the data: EXTRA="-o muon -i data/mine/*train*.bin" (train_gpt2 expands the
# glob itself). The line is
#   {"model","params_m","B","T","tok_per_s","mfu","step_ms","opt_ms","gpu","extra","timed_steps"}
# where tok_per_s, mfu (a fraction of 989 TFLOP/s, as train_gpt2 logs it), step_ms and opt_ms are
# medians over the logged steps after the first WARMUP (3) ones (computed by `./report median`). A run
# that fails (out of memory, bad flag, ...) prints {"model",...,"error":"<train_gpt2's last stderr line>",
# "exit_status"} and the script goes on.
#
# Environment: STEPS (12), WARMUP (3), T (1024), EXTRA (""), OUTFILE (JSON lines are also appended
# there), TRAIN_GPT2 (./train_gpt2), REPORT (./report), LAUNCH ("": a launcher for data-parallel runs,
# split on whitespace, e.g. "mpirun --allow-run-as-root -np 4"; each run then gets a fresh --nccl-id-file,
# and the line the fields "launch" and "world", B being per process and tok_per_s over all), PROFILE (1:
# the run times each kernel, GPT2_PROFILE=1, and the line adds "fwd_ms", "bwd_ms", "loss_ms" per step),
# TIMEOUT (seconds: each run is stopped after that long, under `timeout`; "": no limit). Progress goes to
# stderr, results to stdout. Needs the report tool (`make report`), no Python.
set -uo pipefail

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 2
}
for a in "$@"; do
  case "$a" in -h | --help) usage ;; esac
done

outfile=${OUTFILE:-}
if [ -n "$outfile" ]; then
  case "$outfile" in /*) ;; *) outfile="$PWD/$outfile" ;; esac
  mkdir -p "$(dirname "$outfile")"
fi
cd "$(dirname "$0")/.." || exit 1

steps=${STEPS:-12}
warmup=${WARMUP:-3}
seq_len=${T:-1024}
extra=${EXTRA:-}
exe=${TRAIN_GPT2:-./train_gpt2}
read -r -a extra_args <<<"$extra"
launch_str=${LAUNCH:-}
read -r -a launch <<<"$launch_str"

for n in "$steps" "$warmup" "$seq_len"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "bench_gpt2: STEPS, WARMUP and T must be whole numbers (got '$n')." >&2; exit 2; }
done
if [ "$steps" -le "$warmup" ]; then
  echo "bench_gpt2: STEPS ($steps) must be larger than WARMUP ($warmup) to leave steps to time." >&2
  exit 2
fi
if [ ! -x "$exe" ]; then
  echo "bench_gpt2: $exe not found; build it with 'make train_gpt2' (or set TRAIN_GPT2)." >&2
  exit 2
fi
report=${REPORT:-./report}
[ -x "$report" ] || { echo "bench_gpt2: $report not found; build it with 'make report' (or set REPORT)." >&2; exit 2; }
timeout_s=${TIMEOUT:-}
[ -z "$timeout_s" ] || [[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || { echo "bench_gpt2: TIMEOUT must be a whole number of seconds (got '$timeout_s')." >&2; exit 2; }
limit=()
[ -z "$timeout_s" ] || limit=(timeout -k 10 "$timeout_s")
profile=()
[ "${PROFILE:-0}" = 1 ] && profile=(env GPT2_PROFILE=1)

configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(d12:64 d24:32 d36:16 d48:8)
for c in "${configs[@]}"; do
  [[ "$c" =~ ^[A-Za-z0-9]+:[0-9]+(:[0-9]+)?$ ]] || { echo "bench_gpt2: bad configuration '$c'; use MODEL:B or MODEL:B:T, e.g. d12:64." >&2; exit 2; }
done

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_gpt2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for c in "${configs[@]}"; do
  IFS=: read -r model B T_cfg <<<"$c"
  T_run=${T_cfg:-$seq_len}
  log="$tmp/$model-$B-$T_run.jsonl"
  rm -f "$log"
  cmd=("${launch[@]}" "$exe" -e "$model" -b "$B" -t "$T_run" -x "$steps" -v 0 -s 0 -o adamw --log "$log")
  if [ ${#launch[@]} -gt 0 ]; then
    rm -f "$tmp/nccl_id"
    cmd+=(--nccl-id-file "$tmp/nccl_id")
  fi
  cmd+=("${extra_args[@]}")
  echo "bench_gpt2: ${cmd[*]}" >&2
  "${limit[@]}" "${profile[@]}" "${cmd[@]}" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  line=$("$report" median --program train_gpt2 --log "$log" --stdout "$tmp/stdout" --stderr "$tmp/stderr" \
    --exit "$rc" -e "$model" -b "$B" -t "$T_run" --warmup "$warmup" --gpu "$gpu" --extra "$extra" --launch "$launch_str")
  if [ -z "$line" ]; then  # the report tool itself failed: still one line per configuration
    line="{\"model\":\"$model\",\"B\":$B,\"T\":$T_run,\"error\":\"bench_gpt2 could not summarise the run (exit status $rc)\"}"
  fi
  echo "$line"
  if [ -n "$outfile" ]; then echo "$line" >>"$outfile"; fi
done

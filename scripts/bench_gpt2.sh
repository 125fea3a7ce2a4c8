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
source "$(dirname "$0")/bench_common.sh"
bench_setup bench_gpt2 "${TRAIN_GPT2:-./train_gpt2}" 12 "$@"
seq_len=${T:-1024}
[[ "$seq_len" =~ ^[0-9]+$ ]] || bench_refuse "T must be a whole number (got '$seq_len')."
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(d12:64 d24:32 d36:16 d48:8)
for c in "${configs[@]}"; do
  [[ "$c" =~ ^[A-Za-z0-9]+:[0-9]+(:[0-9]+)?$ ]] ||
    bench_refuse "bad configuration '$c'; use MODEL:B or MODEL:B:T, e.g. d12:64."
done

for c in "${configs[@]}"; do
  IFS=: read -r model B T_cfg <<<"$c"
  T_run=${T_cfg:-$seq_len}
  log="$tmp/$model-$B-$T_run.jsonl"
  bench_run "$log" "\"model\":\"$model\",\"B\":$B,\"T\":$T_run" -e "$model" -b "$B" -t "$T_run" -- \
    "$exe" -e "$model" -b "$B" -t "$T_run" -x "$steps" -v 0 -s 0 -o adamw --log "$log"
done

#!/usr/bin/env bash
# On a machine with 2 GPUs or more: a data-parallel run must not wait forever on a process that is gone
# (train/nccl_comm.h: the non-blocking join, the watchdog, the abort). Two processes through the
# environment launcher (RANK / WORLD_SIZE / LOCAL_RANK), so that no launcher like mpirun ends the survivor
# for us:
#  1. kill -9 of rank 1 mid-run: rank 0 ends by itself within --nccl-timeout and a margin, with status 4
#     and its sentence; the last checkpoint is whole, no temporary file is left beside it, and two
#     processes resumed from it log what an uninterrupted run logged after it, bit for bit;
#  2. the same kill with --nccl-timeout 0 (wait forever): rank 0 is still waiting long after that bound,
#     so the check above cannot pass without the watchdog;
#  3. rank 0 alone of two: the join ends after --nccl-timeout with a sentence and no id file left;
#  4. rank 1 launched with another WORLD_SIZE than rank 0: refused at once, and rank 0 ends at its timeout.
# Any failure stops the script with status 1. Expects data/kjv and tokenizer/ (or .deps/) and train_gpt2.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
source scripts/device_check_lib.sh
export NCCL_NVLS_ENABLE=0
[ "$(nvidia-smi --list-gpus | wc -l)" -ge 2 ] || fail "needs 2 GPUs"
T=${TIMEOUT:-10}     # --nccl-timeout of the runs that must stop
MARGIN=${MARGIN:-20} # seconds beyond T that a stop may take (the watchdog polls; the abort; the exit)
STEPS=2000
flags=(-e tiny -t 128 -b 4 -d 1024 -v 0 -s 0 -x $STEPS -o adamw -n 100)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
last_step() { grep -o '"step":[0-9]*' "$1" 2>/dev/null | tail -n 1 | cut -d: -f2; }
# rank R WORLD NAME FLAGS...: one process in the background, its pid in pid_R.
rank() {
  local r=$1 w=$2 name=$3
  shift 3
  RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r ./train_gpt2 "$@" > "$work/$name.$r.txt" 2>&1 &
  eval "pid_$r=$!"
}
# alive_for PID SECONDS: 0 when the process is still there after SECONDS.
alive_for() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do kill -0 "$1" 2>/dev/null || return 1; sleep 0.1; done
}
# ended_within PID SECONDS: waits; sets `status` and `took`; 1 when the process outlives SECONDS.
ended_within() {
  local start i
  start=$(now)
  for ((i = 0; i < $2 * 10; i++)); do
    if ! kill -0 "$1" 2>/dev/null; then
      wait "$1"
      status=$?
      took=$(secs "$start" "$(now)")
      return 0
    fi
    sleep 0.1
  done
  return 1
}

echo "a process dies: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), timeout $T s"
# The uninterrupted run, for the resume's comparison.
rank 0 2 ref "${flags[@]}" --nccl-id-file "$work/id.ref" --log "$work/ref.jsonl"
rank 1 2 ref "${flags[@]}" --nccl-id-file "$work/id.ref"
wait "$pid_0" && wait "$pid_1" || fail "the uninterrupted two-process run failed: $(tail -n 2 "$work/ref.0.txt")"
expect_losses "$work/ref.jsonl" $STEPS "the uninterrupted run"

# kill_mid_run NAME TIMEOUT: two processes, rank 1 killed (-9) once rank 0 has logged step 250.
kill_mid_run() {
  mkdir -p "$work/$1.ck"
  rank 0 2 "$1" "${flags[@]}" --nccl-id-file "$work/id.$1" --nccl-timeout "$2" --ckpt-dir "$work/$1.ck" \
    --log "$work/$1.jsonl"
  rank 1 2 "$1" "${flags[@]}" --nccl-id-file "$work/id.$1" --nccl-timeout "$2" --ckpt-dir "$work/$1.ck"
  local i
  for ((i = 0; i < 1200; i++)); do
    [ "$(last_step "$work/$1.jsonl")" -ge 250 ] 2>/dev/null && break
    kill -0 "$pid_0" 2>/dev/null || fail "$1: rank 0 ended before the kill: $(tail -n 2 "$work/$1.0.txt")"
    sleep 0.1
  done
  kill -9 "$pid_1"
  killed_at=$(last_step "$work/$1.jsonl")
}

# 1. The watchdog.
kill_mid_run dies "$T"
ended_within "$pid_0" $((T + MARGIN)) ||
  { kill -9 "$pid_0"; fail "rank 1 killed at step $killed_at: rank 0 still waited $((T + MARGIN)) s later"; }
[ "$status" = 4 ] || fail "rank 0 ended with status $status, not 4: $(tail -n 2 "$work/dies.0.txt")"
grep -q "rank 0: no step has finished on every process for .* s: another process died or hangs" "$work/dies.0.txt" ||
  fail "rank 0's sentence is missing: $(tail -n 2 "$work/dies.0.txt")"
echo "rank 1 killed at step $killed_at: rank 0 ended after $took s with status 4: $(grep -o 'rank 0: no step.*hangs' "$work/dies.0.txt")"
ck=$(ls "$work/dies.ck"/model_*.bin 2>/dev/null | grep -v rank | sort | tail -n 1)
[ -n "$ck" ] || fail "no checkpoint was written before the kill"
leftovers=$(ls -A "$work/dies.ck" | grep -v '^model_[0-9]*\.bin$' | grep -v '^model_[0-9]*\.bin\.rank[0-9]*$' || true)
[ -z "$leftovers" ] || fail "the checkpoint folder holds more than checkpoints: $leftovers"
ck_step=$((10#$(basename "$ck" .bin | sed 's/model_//')))
rank 0 2 resumed "${flags[@]}" --nccl-id-file "$work/id.res" --resume "$ck" --log "$work/resumed.jsonl"
rank 1 2 resumed "${flags[@]}" --nccl-id-file "$work/id.res" --resume "$ck"
wait "$pid_0" && wait "$pid_1" || fail "resuming from $ck failed: $(tail -n 2 "$work/resumed.0.txt")"
diff <(losses "$work/ref.jsonl" | awk -v s="$ck_step" -F'"step":' '{ split($2, a, ","); if (a[1] > s) print }') \
  <(losses "$work/resumed.jsonl") > /dev/null || fail "the run resumed from step $ck_step differs from the uninterrupted run"
echo "resumed from $(basename "$ck") (step $ck_step) with 2 processes: steps $((ck_step + 1))-$STEPS bit-identical to the uninterrupted run"

# 2. Without the watchdog the survivor waits: the check above can fail.
kill_mid_run forever 0
alive_for "$pid_0" $((T + MARGIN)) || fail "--nccl-timeout 0: rank 0 ended by itself, so check 1 proves nothing"
kill -9 "$pid_0"; wait "$pid_0" 2>/dev/null
echo "--nccl-timeout 0 (negative control): rank 1 killed at step $killed_at, rank 0 still waiting $((T + MARGIN)) s later"

# 3. Rank 0 alone of two.
rank 0 2 alone "${flags[@]}" --nccl-id-file "$work/id.alone" --nccl-timeout "$T"
ended_within "$pid_0" $((T + MARGIN)) || { kill -9 "$pid_0"; fail "rank 0 alone still waited $((T + MARGIN)) s later"; }
[ "$status" = 1 ] || fail "rank 0 alone ended with status $status: $(tail -n 2 "$work/alone.0.txt")"
grep -q "NCCL was still joining the other processes after $T s" "$work/alone.0.txt" ||
  fail "rank 0 alone: $(tail -n 1 "$work/alone.0.txt")"
[ ! -e "$work/id.alone" ] || fail "rank 0 alone left its NCCL id file behind"
echo "rank 0 alone of 2: ended after $took s with status 1: $(tail -n 1 "$work/alone.0.txt")"

# 4. Another world size.
# -d a multiple of both worlds' -b * -t, so that no flag check refuses rank 1 before the id does.
rank 0 2 world "${flags[@]}" -d 3072 --nccl-id-file "$work/id.world" --nccl-timeout "$T"
rank 1 3 world "${flags[@]}" -d 3072 --nccl-id-file "$work/id.world" --nccl-timeout "$T"
ended_within "$pid_1" 5 || { kill -9 "$pid_1"; fail "rank 1 of 3 still waited for an id of 2 processes 5 s later"; }
[ "$status" = 1 ] && grep -q "rank 0 was launched with 2 processes and this process with 3" "$work/world.1.txt" ||
  fail "rank 1 of 3: status $status: $(tail -n 1 "$work/world.1.txt")"
echo "rank 1 launched with WORLD_SIZE 3 beside 2: refused after $took s: $(tail -n 1 "$work/world.1.txt")"
ended_within "$pid_0" $((T + MARGIN)) || { kill -9 "$pid_0"; fail "rank 0 still waited for rank 1"; }
[ "$status" = 1 ] || fail "rank 0 beside a rank of another world size ended with status $status"
echo "rank 0 beside it: ended after $took s with status 1"
echo "rank death check passed"

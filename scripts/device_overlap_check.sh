#!/usr/bin/env bash
# On the GPU machine: --overlap (each block's optimizer step during backward) must log exactly what the
# step after backward logs - losses and grad norms, bit for bit - in train_gpt2 (eager and CUDA graphs,
# one and two micro-batches a step, dropout on) and train_vit (synthetic batches), for every optimizer
# that can be grouped; a run resumed from an --overlap checkpoint must continue bit for bit; VeLO, which
# cannot be grouped, is refused with its reason and runs with --clip 0 as without. Any failure stops the
# script with status 1. Expects data/kjv and tokenizer/ (or copies under .deps/) and the built programs.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
source scripts/device_check_lib.sh

tiny=(-e tiny -b 4 -t 128 -v 0 -s 0 --clip 0 --lopt-random 1 --dropout 0.1)
# same_logs WHAT PROGRAM N ARGS_A -- ARGS_B: two runs of N steps that must log the same losses and norms.
same_logs() {
  local what=$1 program=$2 n=$3
  shift 3
  local a=() b=() into=a
  for x in "$@"; do
    if [ "$x" = "--" ]; then into=b; continue; fi
    if [ $into = a ]; then a+=("$x"); else b+=("$x"); fi
  done
  # The bf16 GPT-2 times one kernel choice when it is built ("kernels: ..."); the bits hang on it, so a
  # pair that chose differently is run again.
  local try ka kb
  for try in 1 2 3; do
    rm -f "$work/a.jsonl" "$work/b.jsonl"
    run_trainer "$program" "$what (without)" "${a[@]}" --log "$work/a.jsonl"
    ka=$(grep '^kernels:' "$work/stdout")
    run_trainer "$program" "$what (with)" "${b[@]}" --log "$work/b.jsonl"
    kb=$(grep '^kernels:' "$work/stdout")
    [ "$ka" = "$kb" ] && break
    echo "$what: the runs timed different kernels ($ka / $kb); again"
  done
  expect_losses "$work/a.jsonl" "$n" "$what (without)"
  expect_losses "$work/b.jsonl" "$n" "$what (with)"
  diff <(losses "$work/a.jsonl") <(losses "$work/b.jsonl") > /dev/null || fail "$what: MISMATCH"
  echo "$what: $n steps, bit-identical losses and grad norms"
}

for o in adamw adafactor small_fc_lopt elo; do
  for fast in 0 1; do
    [ $fast = 1 ] && [ $o != small_fc_lopt ] && [ $o != elo ] && continue
    set_fast=()
    [ $fast = 1 ] && set_fast=(--set "$o.fast=1")
    for d in 512 1024; do  # one and two micro-batches a step
      for g in 0 1; do
        same_logs "train_gpt2 -o $o fast=$fast -d $d graph $g, overlap vs after backward" train_gpt2 8 \
          "${tiny[@]}" -x 8 -d $d -o $o "${set_fast[@]}" --cuda-graph $g -- \
          "${tiny[@]}" -x 8 -d $d -o $o "${set_fast[@]}" --cuda-graph $g --overlap 1
      done
    done
  done
done

# The real model once: GPT-2 124M at the paper's batch, small_fc_lopt and AdamW.
for o in adamw small_fc_lopt; do
  same_logs "train_gpt2 d12 B=4x1024 -o $o, overlap vs after backward" train_gpt2 6 \
    -b 4 -t 1024 -x 6 -v 0 -s 0 --clip 0 --lopt-random 1 -o $o -- \
    -b 4 -t 1024 -x 6 -v 0 -s 0 --clip 0 --lopt-random 1 -o $o --overlap 1
done

vit=(--synthetic 1 -e vit-test --image 32 --channels 3 --classes 10 -b 8 -x 6 -u 1 -v 0 --clip 0 --lopt-random 1)
for o in adamw small_fc_lopt; do
  for g in 0 1; do
    same_logs "train_vit -o $o graph $g, overlap vs after backward" train_vit 6 \
      "${vit[@]}" -o $o --cuda-graph $g -- "${vit[@]}" -o $o --cuda-graph $g --overlap 1
  done
done

# Resume: 12 steps with a checkpoint at 6, and steps 7-12 again from it, both with --overlap.
for o in adamw small_fc_lopt; do
  rm -rf "$work/ck" "$work/a.jsonl" "$work/b.jsonl"
  run_trainer train_gpt2 "resume ($o), first run" "${tiny[@]}" -x 12 -n 6 -o $o --overlap 1 --ckpt-dir "$work/ck" --log "$work/a.jsonl"
  run_trainer train_gpt2 "resume ($o), resumed run" "${tiny[@]}" -x 12 -o $o --overlap 1 --resume "$work/ck/model_00000006.bin" --log "$work/b.jsonl"
  expect_losses "$work/a.jsonl" 12 "resume ($o), first run"
  expect_losses "$work/b.jsonl" 6 "resume ($o), resumed run"
  diff <(losses "$work/a.jsonl" | grep -E '"step":(7|8|9|10|11|12),') <(losses "$work/b.jsonl") || fail "resume ($o): MISMATCH"
  echo "resume with --overlap ($o): bit-identical losses and grad norms for steps 7-12"
  # without --overlap the grouped state is refused with a sentence, before any step
  ./train_gpt2 "${tiny[@]}" -x 12 -o $o --resume "$work/ck/model_00000006.bin" > /dev/null 2> "$work/stderr" &&
    fail "resume ($o) without --overlap: accepted grouped state"
  grep -q "resume with the --overlap setting of the run that wrote it" "$work/stderr" || fail "resume ($o) without --overlap: $(cat "$work/stderr")"
  echo "resume without --overlap from an --overlap checkpoint: refused ($(tail -n 1 "$work/stderr" | cut -c1-80)...)"
done

# VeLO cannot be grouped: refused with the reason; with --clip 0 it trains as before.
./train_gpt2 "${tiny[@]}" -x 2 -o velo --overlap 1 > /dev/null 2> "$work/stderr" && fail "velo --overlap: accepted"
grep -q "its LSTM reads the statistics of every tensor" "$work/stderr" || fail "velo --overlap: $(cat "$work/stderr")"
echo "velo --overlap: refused with its reason"
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary folders left behind: $(ls "$TMPDIR")"
echo "overlap checks passed; no temporary folders left"

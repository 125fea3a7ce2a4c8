#!/usr/bin/env bash
# On a GPU machine (one GPU is enough): the data-parallel paths of train_gpt2 and train_vit at world size 1.
# Through NCCL - the all-reduce mode (--nccl 1) and the sharded mode (--shard 1), launched plainly, by
# mpirun -np 1 and by RANK / WORLD_SIZE / LOCAL_RANK - each must log exactly what the single-GPU trainer
# logs (losses and grad norms, bit for bit): every optimizer, eager and as CUDA graphs, with accumulation
# and dropout, with --overlap in the all-reduce mode. A sharded run resumed from its checkpoint continues
# bit for bit, and the checkpoint is refused with a sentence by a run of the other mode. The GPU tests of
# the communicator and of the sharded step over several ranks (threads on one GPU) run first. Runs with
# several GPUs are the multi-GPU kinds' (not here). Any failure stops the script with status 1. Expects
# data/kjv and tokenizer/ (or copies under .deps/) and the programs.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
source scripts/device_check_lib.sh

./build/test_gpu --gtest_filter='NcclGpu*:ShardedGpu*' > "$work/dp_gpu.log" 2>&1 || fail "NcclGpu/ShardedGpu tests: $(grep -E 'Failure|FAILED|differ' "$work/dp_gpu.log" | head -5)"
grep -q '^\[  PASSED  \] 3 tests' "$work/dp_gpu.log" || fail "NcclGpu/ShardedGpu tests did not all run: $(tail -n 3 "$work/dp_gpu.log")"
grep '^\[ sharded' "$work/dp_gpu.log"
echo "NcclGpu, ShardedGpu: passed"

tiny=(-e tiny -b 4 -t 128 -v 0 -s 0 -x 8 --lopt-random 1 --dropout 0.1)
# compare PROGRAM MODE WHAT LAUNCH... -- FLAGS...: the plain single-GPU run of PROGRAM against the same
# flags plus MODE (--nccl 1 or --shard 1) under LAUNCH.
compare() {
  local program=$1 mode=$2 what="$1 $3"
  shift 3
  local launch=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done
  shift
  local try ka kb
  for try in 1 2 3; do  # the bf16 model times one kernel choice; the bits hang on it
    rm -f "$work/a.jsonl" "$work/b.jsonl" "$work/id"
    ./$program "$@" --log "$work/a.jsonl" > "$work/a.txt" 2>&1 || fail "$what (single GPU): $(tail -n 1 "$work/a.txt")"
    "${launch[@]}" ./$program "$@" $mode 1 --nccl-id-file "$work/id" --log "$work/b.jsonl" > "$work/b.txt" 2>&1 ||
      fail "$what ($mode): $(tail -n 1 "$work/b.txt")"
    ka=$(grep '^kernels:' "$work/a.txt")
    kb=$(grep '^kernels:' "$work/b.txt")
    [ "$ka" = "$kb" ] && break
  done
  grep -q "^data parallel: 1 process" "$work/b.txt" || fail "$what: the $mode run did not say it ran data parallel"
  [ "$mode" != --shard ] || grep -q "sharded:" "$work/b.txt" || fail "$what: the --shard run did not say it sharded"
  local n
  n=$(grep -c '"loss"' "$work/a.jsonl")
  [ "$n" -gt 0 ] || fail "$what: no losses logged"
  diff <(losses "$work/a.jsonl") <(losses "$work/b.jsonl") > /dev/null || fail "$what: MISMATCH"
  echo "$what ($mode 1): $n steps, bit-identical losses and grad norms"
}

for o in adamw small_fc_lopt velo; do
  for d in 512 1024; do
    for g in 0 1; do
      compare train_gpt2 --nccl "-o $o -d $d graph $g" -- "${tiny[@]}" -o $o -d $d --cuda-graph $g
    done
  done
done
for o in adamw adafactor muon small_fc_lopt velo celo2 elo elo_celo2; do
  for g in 0 1; do
    compare train_gpt2 --shard "-o $o -d 1024 graph $g" -- "${tiny[@]}" -o $o -d 1024 --cuda-graph $g
  done
done
compare train_gpt2 --shard "-o elo elo.clip_grad=1" -- "${tiny[@]}" -o elo --set elo.clip_grad=1
compare train_gpt2 --nccl "-o small_fc_lopt --overlap 1" -- "${tiny[@]}" -o small_fc_lopt --clip 0 --overlap 1
compare train_gpt2 --nccl "mpirun -np 1, -o adamw" mpirun --allow-run-as-root -np 1 -- "${tiny[@]}" -o adamw
compare train_gpt2 --shard "mpirun -np 1, -o velo" mpirun --allow-run-as-root -np 1 -- "${tiny[@]}" -o velo
compare train_gpt2 --shard "RANK/WORLD_SIZE/LOCAL_RANK = 0/1/0, -o muon" env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 -- \
  "${tiny[@]}" -o muon
compare train_gpt2 --nccl "RANK/WORLD_SIZE/LOCAL_RANK = 0/1/0, -o velo" env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 -- \
  "${tiny[@]}" -o velo
compare train_gpt2 --nccl "d12 B=4x1024 -o adamw" -- -b 4 -t 1024 -x 6 -v 0 -s 0 -o adamw
compare train_gpt2 --shard "d12 B=4x1024 -o velo" -- -b 4 -t 1024 -x 6 -v 0 -s 0 -o velo --lopt-random 1
vit=(--synthetic 1 -e vit-test --image 32 --channels 3 --classes 10 -b 8 -x 6 -u 1 -v 0 --lopt-random 1)
for o in adamw small_fc_lopt velo muon; do
  compare train_vit --nccl "-o $o" -- "${vit[@]}" -o $o
  compare train_vit --shard "-o $o graph 1" -- "${vit[@]}" -o $o --cuda-graph 1
done

# A sharded run resumed from its step-4 checkpoint logs what the whole run logged after step 4.
for o in velo elo_celo2; do
  rm -rf "$work/ck" "$work/full.jsonl" "$work/second.jsonl"
  run_trainer train_gpt2 "--shard resume $o" "${tiny[@]}" -o $o --shard 1 -n 4 --ckpt-dir "$work/ck" \
    --log "$work/full.jsonl"
  run_trainer train_gpt2 "--shard resume $o" "${tiny[@]}" -o $o --shard 1 --resume "$work/ck/model_00000004.bin" \
    --log "$work/second.jsonl"
  expect_losses "$work/second.jsonl" 4 "--shard resume $o"
  diff <(losses "$work/full.jsonl" | tail -n 4) <(losses "$work/second.jsonl") > /dev/null ||
    fail "--shard resume $o: MISMATCH"
  echo "train_gpt2 --shard 1 -o $o: resumed from step 4, bit-identical to the uninterrupted run"
done
./train_gpt2 "${tiny[@]}" -o elo_celo2 --resume "$work/ck/model_00000004.bin" > "$work/refused.txt" 2>&1 &&
  fail "a sharded checkpoint was resumed without --shard"
grep -q "was written with --shard 1; resume it with --shard 1." "$work/refused.txt" ||
  fail "the refusal of a sharded checkpoint without --shard: $(tail -n 1 "$work/refused.txt")"
echo "a sharded checkpoint resumed without --shard: refused with a sentence"
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary folders left behind: $(ls "$TMPDIR")"
echo "data-parallel world-size-1 checks passed; no temporary folders left"

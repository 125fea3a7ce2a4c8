#!/usr/bin/env bash
# On a GPU machine (one GPU is enough): the data-parallel path of train_gpt2 at world size 1. Gradients
# summed through NCCL during backward (--nccl 1; launched plainly, by mpirun -np 1 and by RANK /
# WORLD_SIZE / LOCAL_RANK) must log exactly what the single-GPU trainer logs - losses and grad norms, bit
# for bit - for adamw, small_fc_lopt and velo, eager and as CUDA graphs, with accumulation and dropout,
# with and without --overlap. Runs with several GPUs are the multi-GPU kinds' (not here). Any failure
# stops the script with status 1. Expects data/kjv and tokenizer/ (or copies under .deps/) and the programs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.out}
mkdir -p "$OUT" data
[ -d data/kjv ] || cp -r .deps/data/kjv data/
[ -f tokenizer/r50k_base.tiktoken ] || { mkdir -p tokenizer && cp .deps/tokenizer/r50k_base.tiktoken tokenizer/; }
source scripts/device_check_lib.sh

./build/test_gpu --gtest_filter='NcclGpu*' > "$work/nccl_gpu.log" 2>&1 || fail "NcclGpu tests: $(grep -E 'Failure|FAILED' "$work/nccl_gpu.log" | head -3)"
grep -q '^\[  PASSED  \] 1 test' "$work/nccl_gpu.log" || fail "NcclGpu tests did not run: $(tail -n 3 "$work/nccl_gpu.log")"
echo "NcclGpu: passed"

tiny=(-e tiny -b 4 -t 128 -v 0 -s 0 -x 8 --lopt-random 1 --dropout 0.1)
# compare WHAT LAUNCH... -- FLAGS...: the plain single-GPU run against the same flags under LAUNCH.
compare() {
  local what=$1
  shift
  local launch=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done
  shift
  local try ka kb
  for try in 1 2 3; do  # the bf16 model times one kernel choice; the bits hang on it
    rm -f "$work/a.jsonl" "$work/b.jsonl" "$work/id"
    ./train_gpt2 "$@" --log "$work/a.jsonl" > "$work/a.txt" 2>&1 || fail "$what (single GPU): $(tail -n 1 "$work/a.txt")"
    "${launch[@]}" ./train_gpt2 "$@" --nccl 1 --nccl-id-file "$work/id" --log "$work/b.jsonl" > "$work/b.txt" 2>&1 ||
      fail "$what (NCCL): $(tail -n 1 "$work/b.txt")"
    ka=$(grep '^kernels:' "$work/a.txt")
    kb=$(grep '^kernels:' "$work/b.txt")
    [ "$ka" = "$kb" ] && break
  done
  grep -q "gradients summed through NCCL" "$work/b.txt" || fail "$what: the NCCL run did not say it used NCCL"
  local n
  n=$(grep -c '"loss"' "$work/a.jsonl")
  [ "$n" -gt 0 ] || fail "$what: no losses logged"
  diff <(losses "$work/a.jsonl") <(losses "$work/b.jsonl") > /dev/null || fail "$what: MISMATCH"
  echo "$what: $n steps, bit-identical losses and grad norms"
}

for o in adamw small_fc_lopt velo; do
  for d in 512 1024; do
    for g in 0 1; do
      compare "-o $o -d $d graph $g, NCCL world 1" -- "${tiny[@]}" -o $o -d $d --cuda-graph $g
    done
  done
done
compare "-o small_fc_lopt --overlap 1, NCCL world 1" -- "${tiny[@]}" -o small_fc_lopt --clip 0 --overlap 1
compare "mpirun -np 1, -o adamw" mpirun --allow-run-as-root -np 1 -- "${tiny[@]}" -o adamw
compare "RANK/WORLD_SIZE/LOCAL_RANK = 0/1/0, -o velo" env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 -- "${tiny[@]}" -o velo
compare "d12 B=4x1024 -o adamw, NCCL world 1" -- -b 4 -t 1024 -x 6 -v 0 -s 0 -o adamw
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary folders left behind: $(ls "$TMPDIR")"
echo "NCCL world-size-1 checks passed; no temporary folders left"

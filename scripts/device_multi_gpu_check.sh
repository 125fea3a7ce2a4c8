#!/usr/bin/env bash
# On a machine with N GPUs (the multi-GPU kinds; N = WORLD, default every GPU nvidia-smi lists): data
# parallel train_gpt2 and train_vit over N processes (mpirun -np N), against one GPU.
#  - every optimizer, all-reduce mode and sharded mode (--shard 1): the losses and grad norms of 8 steps
#    match one GPU's run of the same global batch (the same sequences: rank r's micro-batch is the one-GPU
#    run's micro-batch r) within BOUND (relative; default 2e-3), and the sharded mode matches the
#    all-reduce mode within the same bound (bit for bit at N = 2, where every sum has two terms);
#  - a sharded run resumed from its step-4 checkpoint logs what the uninterrupted run logged, bit for
#    bit, and a run with another number of processes refuses the checkpoint with a sentence;
#  - the environment launcher (RANK / WORLD_SIZE / LOCAL_RANK and an id file) trains like mpirun;
#  - train_vit trains in both modes, the sharded mode within BOUND of the all-reduce mode.
# Dropout stays off: its masks follow each process's micro-batch count. Any failure stops the script
# with status 1. Expects data/kjv and tokenizer/ (or copies under .deps/) and the programs built.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
source scripts/device_check_lib.sh
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off (the device notes say why)

N=${WORLD:-$(nvidia-smi --list-gpus | wc -l)}
BOUND=${BOUND:-2e-3}
[ "$N" -ge 1 ] || fail "no GPU listed"
mpi=(mpirun --allow-run-as-root -np "$N")
echo "data parallel over $N GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"

# close A B WHAT: the two logs have the same steps, and every loss and grad norm agrees within BOUND.
close() {
  python3 - "$1" "$2" "$BOUND" "$3" <<'PY' || exit 1
import json, sys
a, b, bound, what = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
def rows(p):
    return [json.loads(l) for l in open(p) if '"loss"' in l]
ra, rb = rows(a), rows(b)
if not ra or len(ra) != len(rb):
    print(f"{what}: {len(ra)} against {len(rb)} logged steps"); sys.exit(1)
worst = 0.0
for x, y in zip(ra, rb):
    for k in ("loss", "grad_norm"):
        worst = max(worst, abs(x[k] - y[k]) / max(abs(x[k]), 1e-12))
same = all(x["loss"] == y["loss"] and x["grad_norm"] == y["grad_norm"] for x, y in zip(ra, rb))
print(f"{what}: {len(ra)} steps, largest relative difference {worst:.2e}{' (bit for bit)' if same else ''}")
if worst > bound:
    print(f"{what}: beyond the bound {bound}"); sys.exit(1)
PY
}

# A run under mpirun, rank 0's log in $2.
parallel() {
  local what=$1 log=$2
  shift 2
  rm -f "$work/id" "$log"
  "${mpi[@]}" "$@" --nccl-id-file "$work/id" --log "$log" > "$work/p.txt" 2>&1 ||
    fail "$what: $(grep -v '^$' "$work/p.txt" | tail -n 2)"
  grep -q "^data parallel: $N process" "$work/p.txt" || fail "$what: the run did not say it ran over $N processes"
  [ "$N" -eq 1 ] || [ ! -e "$work/id" ] || fail "$what: rank 0 left the NCCL id file behind"
}

tiny=(-e tiny -b 4 -t 128 -v 0 -s 0 -x 8 --lopt-random 1 -d $((4 * 128 * N)))
for o in adamw adafactor muon small_fc_lopt velo celo2 elo elo_celo2; do
  rm -f "$work/one.jsonl"
  run_trainer train_gpt2 "-o $o one GPU" "${tiny[@]}" -o $o --log "$work/one.jsonl"
  parallel "-o $o all-reduce" "$work/ar.jsonl" ./train_gpt2 "${tiny[@]}" -o $o --nccl 1
  parallel "-o $o sharded" "$work/sh.jsonl" ./train_gpt2 "${tiny[@]}" -o $o --shard 1
  close "$work/one.jsonl" "$work/ar.jsonl" "train_gpt2 -o $o: all-reduce over $N against one GPU"
  close "$work/one.jsonl" "$work/sh.jsonl" "train_gpt2 -o $o: sharded over $N against one GPU"
  close "$work/ar.jsonl" "$work/sh.jsonl" "train_gpt2 -o $o: sharded against all-reduce over $N"
  if [ "$N" -eq 2 ]; then
    diff <(losses "$work/ar.jsonl") <(losses "$work/sh.jsonl") > /dev/null || fail "-o $o: sharded != all-reduce at N = 2"
  fi
done

for o in velo muon; do
  rm -rf "$work/ck"
  parallel "-o $o sharded, checkpoints" "$work/full.jsonl" ./train_gpt2 "${tiny[@]}" -o $o --shard 1 -n 4 \
    --ckpt-dir "$work/ck"
  [ -f "$work/ck/model_00000004.bin.rank$((N - 1))" ] || [ "$N" -eq 1 ] || fail "-o $o: no rank files were written"
  parallel "-o $o sharded, resumed" "$work/second.jsonl" ./train_gpt2 "${tiny[@]}" -o $o --shard 1 \
    --resume "$work/ck/model_00000004.bin"
  diff <(losses "$work/full.jsonl" | tail -n 4) <(losses "$work/second.jsonl") > /dev/null ||
    fail "-o $o: the resumed sharded run differs"
  echo "train_gpt2 -o $o --shard 1 over $N: resumed from step 4, bit-identical to the uninterrupted run"
done
if [ "$N" -gt 1 ]; then
  ./train_gpt2 "${tiny[@]}" -o muon --shard 1 --resume "$work/ck/model_00000004.bin" > "$work/r.txt" 2>&1 &&
    fail "a checkpoint of $N processes was resumed by one"
  grep -q "was written by $N processes, this run has 1; resume it with $N" "$work/r.txt" ||
    fail "the refusal of another world size: $(tail -n 1 "$work/r.txt")"
  echo "a checkpoint of $N processes resumed by one: refused with a sentence"

  rm -f "$work/id" "$work"/env*.jsonl
  for r in $(seq 0 $((N - 1))); do
    RANK=$r WORLD_SIZE=$N LOCAL_RANK=$r ./train_gpt2 "${tiny[@]}" -o adamw --nccl-id-file "$work/id" \
      --log "$work/env$r.jsonl" > "$work/env$r.txt" 2>&1 &
  done
  wait || true
  [ -s "$work/env0.jsonl" ] || fail "the environment launcher: $(tail -n 1 "$work/env0.txt")"
  parallel "-o adamw all-reduce (mpirun)" "$work/ar.jsonl" ./train_gpt2 "${tiny[@]}" -o adamw --nccl 1
  close "$work/ar.jsonl" "$work/env0.jsonl" "train_gpt2 RANK/WORLD_SIZE/LOCAL_RANK against mpirun"
fi

vit=(--synthetic 1 -e vit-test --image 32 --channels 3 --classes 10 -b 8 -x 6 -u 1 -v 0 --lopt-random 1)
for o in adamw velo; do
  parallel "train_vit -o $o all-reduce" "$work/var.jsonl" ./train_vit "${vit[@]}" -o $o --nccl 1
  parallel "train_vit -o $o sharded" "$work/vsh.jsonl" ./train_vit "${vit[@]}" -o $o --shard 1
  close "$work/var.jsonl" "$work/vsh.jsonl" "train_vit -o $o: sharded against all-reduce over $N"
done
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary folders left behind: $(ls "$TMPDIR")"
echo "data-parallel checks over $N GPUs passed"

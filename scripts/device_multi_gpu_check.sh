#!/usr/bin/env bash
# On a machine with N GPUs (the multi-GPU kinds; N = WORLD, default every visible GPU): data-parallel
# train_gpt2 and train_vit over N processes (mpirun -np N), against one GPU.
#  - Like with like: the one-GPU reference reads exactly the samples the N processes of B read together.
#    train_gpt2's reads them as one batch of N x B (the token loader gives rank r slice r of each N x B
#    sample); train_vit's as N micro-batches of B (its synthetic images are drawn from their place in the
#    step), so that its matmuls have the ranks' shapes too: cuBLASLt picks other algorithms for 8 and 32
#    rows of the ViT's head, which alone moved the step-1 gradient norm by 3.7e-4. Every log line carries
#    the digest of the step's data over all processes ("data", common/digest.h), and two logs are compared
#    only if every step's digest is equal, so the check cannot pass on runs of different data. It proves
#    that on itself first: a one-GPU run of other samples must be refused.
#  - Every optimizer, separate and fused q/k/v, both programs: all-reduce and sharded (--shard 1) against one
#    GPU, sharded against all-reduce (bit for bit at N = 2, where every sum has two terms), each with the
#    gradients summed by NCCL and by the copy engines (--grad-sum copy). At N = 2 the two equal each other bit
#    for bit in train_vit; in train_gpt2 they are held within BOUND, not to the bit: there the copy engines'
#    path adds each process's per-token sums of the tied table's lookup part into the table rank by rank, NCCL's
#    path sums every process's positions, gathered, in one pass (the same terms in another order). train_gpt2
#    pins its GELU backward (--kernels), which is otherwise timed at start-up and may differ from one launch to
#    the next. At step 1 both runs start from the same weights and data, so the loss and the gradient norm may
#    differ only by the order of the sums: within STEP1_BOUND (relative; default 1e-4). Later steps carry that
#    rounding through the optimizers, which amplify it (AdamW's first steps are g / |g|; random meta-weights
#    more so): within BOUND (default 2e-3; train_vit 1e-2: on 4 GPUs its tiny ViT with Muon and the learned
#    optimizers spread the rounding of 4-term sums to 5.8e-3 in 6 steps, and the two data-parallel modes
#    differed from each other by 4.1e-3, while its step 1 equalled one GPU's bit for bit).
#  - A sharded run resumed from its step-4 checkpoint logs what the uninterrupted run logged, bit for
#    bit; one process refuses a checkpoint of N with a sentence; the environment launcher (RANK /
#    WORLD_SIZE / LOCAL_RANK and an id file) trains like mpirun, and rank 0 removes the id file.
# Dropout stays off: its masks follow each process's micro-batch count. Any failure stops the script
# with status 1. Expects data/kjv and tokenizer/ (or copies under .deps/) and the programs built.
#
# Environment: WORLD, BOUND, STEP1_BOUND, KEEP_GOING (1: report every failed comparison, fail at the end),
# PROGRAMS ("train_gpt2 train_vit"), OPTIMIZERS (all eight), QKV ("separate fused"), SUMS ("nccl copy"),
# EXTRAS (1: resume, refusal, launcher, with the default --grad-sum). Runs on the GPUs CUDA_VISIBLE_DEVICES
# shows, so two checks of N = 2 can share a 4-GPU machine.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
source scripts/device_check_lib.sh
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off (the device notes say why)

G=$(nvidia-smi --list-gpus | wc -l)
[ -n "${CUDA_VISIBLE_DEVICES:-}" ] && G=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
N=${WORLD:-$G}
STEP1_BOUND=${STEP1_BOUND:-1e-4}
failed=0
read -r -a programs <<<"${PROGRAMS:-train_gpt2 train_vit}"
read -r -a optimizers <<<"${OPTIMIZERS:-adamw adafactor muon small_fc_lopt velo celo2 elo elo_celo2}"
read -r -a qkvs <<<"${QKV:-separate fused}"
read -r -a sums <<<"${SUMS:-nccl copy}"
[ "$N" -ge 1 ] && [ "$N" -le "$G" ] || fail "WORLD=$N but $G GPUs are visible"
mpi=(mpirun --allow-run-as-root -np "$N")
echo "data parallel over $N GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"

# close A B WHAT: the logs have the same steps, the same data digest at every step, the loss and grad norm
# of step 1 within STEP1_BOUND and of every step within the program's BOUND. Prints why not and returns 1
# otherwise.
close() {
  python3 - "$1" "$2" "$(bound_of "$3")" "$STEP1_BOUND" "$3" <<'PY'
import json, sys
a, b, bound, bound1, what = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def rows(p):
    return [json.loads(l) for l in open(p) if '"loss"' in l]
ra, rb = rows(a), rows(b)
if not ra or len(ra) != len(rb):
    print(f"{what}: {len(ra)} against {len(rb)} logged steps"); sys.exit(1)
for x, y in zip(ra, rb):
    if "data" not in x or x.get("data") != y.get("data"):
        print(f"{what}: the runs read different data at step {x['step']} ({x.get('data')} against {y.get('data')})")
        sys.exit(1)
def rel(x, y, k):
    return abs(x[k] - y[k]) / max(abs(x[k]), 1e-12)
first = max(rel(ra[0], rb[0], k) for k in ("loss", "grad_norm"))
worst = max(rel(x, y, k) for x, y in zip(ra, rb) for k in ("loss", "grad_norm"))
same = all(x["loss"] == y["loss"] and x["grad_norm"] == y["grad_norm"] for x, y in zip(ra, rb))
print(f"{what}: {len(ra)} steps, same data, relative difference {first:.1e} at step 1, at most {worst:.2e}"
      f"{' (bit for bit)' if same else ''}")
if first > bound1:
    print(f"{what}: step 1 beyond the bound {bound1}"); sys.exit(1)
if worst > bound:
    print(f"{what}: beyond the bound {bound}"); sys.exit(1)
PY
}
bound_of() { case $1 in *train_vit*) echo "${BOUND:-1e-2}" ;; *) echo "${BOUND:-2e-3}" ;; esac; }
must_close() {
  close "$@" && return 0
  [ "${KEEP_GOING:-0}" = 1 ] || exit 1
  failed=$((failed + 1))
  cp "$1" "$OUT/failed_${failed}_a.jsonl" && cp "$2" "$OUT/failed_${failed}_b.jsonl"
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

pin="--kernels gelu_backward=epilogue"  # train_gpt2's; a resumed run takes its checkpoint's instead
# Each program's flags: the tiny models, 8 (6) steps, random meta-weights. B is per process; the one-GPU
# reference reads N x B at once.
args() {  # PROGRAM QKV B
  case $1 in
    train_gpt2) echo "-e tiny -t 128 -v 0 -s 0 -x 8 --lopt-random 1 --qkv $2 -b $3 -d $(($3 * 128 * N)) $pin" ;;
    train_vit) echo "--synthetic 1 -e vit-test --image 32 --channels 3 --classes 10 -x 6 -u 1 -v 0 --lopt-random 1 --qkv $2 -b $3" ;;
  esac
}
per_rank() { case $1 in train_gpt2) echo 4 ;; train_vit) echo 8 ;; esac; }
# The one-GPU reference's batching (the same samples as N processes of B), and a one-GPU run of other
# samples (train_gpt2: N micro-batches of B read other slices of the shuffled token stream; train_vit:
# one micro-batch of B reads a quarter of the step's images).
ref_batch() {  # PROGRAM B
  case $1 in train_gpt2) echo "-b $(($2 * N))" ;; train_vit) echo "-b $2 -d $(($2 * N))" ;; esac
}
other_batch() {
  case $1 in train_gpt2) echo "-b $2 -d $(($2 * N * 128))" ;; train_vit) echo "-b $2" ;; esac
}
# The k-th GPU this script may use, as CUDA_VISIBLE_DEVICES names it.
nvidia_index() {
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | sed -n "$(($1 + 1))p"; else echo "$1"; fi
}

# One-GPU references first, as many at once as there are GPUs.
jobs_run=0
for p in "${programs[@]}"; do
  for q in "${qkvs[@]}"; do
    for o in "${optimizers[@]}"; do
      b=$(per_rank "$p")
      # shellcheck disable=SC2046
      CUDA_VISIBLE_DEVICES=$(nvidia_index $((jobs_run % G))) ./$p $(args "$p" "$q" "$b") $(ref_batch "$p" "$b") -o "$o" \
        --log "$work/ref_${p}_${q}_$o.jsonl" > "$work/ref_${p}_${q}_$o.txt" 2>&1 &
      jobs_run=$((jobs_run + 1))
      [ $((jobs_run % G)) -eq 0 ] && wait
    done
  done
done
wait
for f in "$work"/ref_*.txt; do
  [ -s "${f%.txt}.jsonl" ] || fail "one-GPU reference ${f#$work/ref_}: $(tail -n 1 "$f")"
done

for p in "${programs[@]}"; do
  b=$(per_rank "$p")
  for q in "${qkvs[@]}"; do
    for o in "${optimizers[@]}"; do
      ref="$work/ref_${p}_${q}_$o.jsonl"
      for e in "${sums[@]}"; do
        # shellcheck disable=SC2046
        parallel "$p -o $o --qkv $q all-reduce, $e" "$work/ar_$e.jsonl" ./$p $(args "$p" "$q" "$b") -o "$o" --nccl 1 --grad-sum "$e"
        # shellcheck disable=SC2046
        parallel "$p -o $o --qkv $q sharded, $e" "$work/sh_$e.jsonl" ./$p $(args "$p" "$q" "$b") -o "$o" --shard 1 --grad-sum "$e"
        must_close "$ref" "$work/ar_$e.jsonl" "$p -o $o --qkv $q: all-reduce ($e) over $N against one GPU"
        must_close "$ref" "$work/sh_$e.jsonl" "$p -o $o --qkv $q: sharded ($e) over $N against one GPU"
        must_close "$work/ar_$e.jsonl" "$work/sh_$e.jsonl" "$p -o $o --qkv $q: sharded against all-reduce ($e) over $N"
        if [ "$N" -eq 2 ]; then
          if [ "$e" = "${sums[0]}" ]; then :
          elif [ "$p" = train_vit ]; then
            diff <(losses "$work/ar_${sums[0]}.jsonl") <(losses "$work/ar_$e.jsonl") > /dev/null ||
              fail "$p -o $o --qkv $q: all-reduce $e != ${sums[0]} at N = 2"
            echo "$p -o $o --qkv $q: all-reduce $e equals ${sums[0]} bit for bit at N = 2"
          else
            must_close "$work/ar_${sums[0]}.jsonl" "$work/ar_$e.jsonl" \
              "$p -o $o --qkv $q: all-reduce $e against ${sums[0]} at N = 2"
          fi
          diff <(losses "$work/ar_$e.jsonl") <(losses "$work/sh_$e.jsonl") > /dev/null ||
            fail "$p -o $o --qkv $q: sharded != all-reduce ($e) at N = 2"
        fi
      done
      cp "$work/ar_${sums[0]}.jsonl" "$work/ar.jsonl"
      if [ "$N" -gt 1 ] && [ "$o" = "${optimizers[0]}" ] && [ "$q" = "${qkvs[0]}" ]; then
        # The check itself: one GPU with N micro-batches of B reads other samples, and must be refused.
        rm -f "$work/other.jsonl"
        # shellcheck disable=SC2046
        ./$p $(args "$p" "$q" "$b") $(other_batch "$p" "$b") -o "$o" --log "$work/other.jsonl" > "$work/o.txt" 2>&1 ||
          fail "$p one GPU, $N micro-batches: $(tail -n 1 "$work/o.txt")"
        if close "$work/other.jsonl" "$work/ar.jsonl" "$p: one GPU reading other samples" > "$work/c.txt"; then
          fail "$p: the check passed two runs of different data: $(cat "$work/c.txt")"
        fi
        grep -q "read different data" "$work/c.txt" || fail "$p: refused, but not for its data: $(cat "$work/c.txt")"
        echo "$p: a one-GPU run of other samples is refused: $(cat "$work/c.txt")"
        rm -f "$work/other.jsonl"
      fi
    done
  done
done

if [ "${EXTRAS:-1}" = 1 ] && [[ " ${programs[*]} " == *" train_gpt2 "* ]]; then
  read -r -a tiny <<<"$(args train_gpt2 separate 4)"
  read -r -a resumed <<<"$(args train_gpt2 separate 4 | sed "s/ $pin//")"  # a resume refuses --kernels
  for o in velo muon; do
    rm -rf "$work/ck"
    parallel "-o $o sharded, checkpoints" "$work/full.jsonl" ./train_gpt2 "${tiny[@]}" -o $o --shard 1 -n 4 \
      --ckpt-dir "$work/ck"
    [ -f "$work/ck/model_00000004.bin.rank$((N - 1))" ] || [ "$N" -eq 1 ] || fail "-o $o: no rank files were written"
    parallel "-o $o sharded, resumed" "$work/second.jsonl" ./train_gpt2 "${resumed[@]}" -o $o --shard 1 \
      --resume "$work/ck/model_00000004.bin"
    diff <(losses "$work/full.jsonl" | tail -n 4) <(losses "$work/second.jsonl") > /dev/null ||
      fail "-o $o: the resumed sharded run differs"
    echo "train_gpt2 -o $o --shard 1 over $N: resumed from step 4, bit-identical to the uninterrupted run"
  done
  if [ "$N" -gt 1 ]; then
    ./train_gpt2 "${resumed[@]}" -o muon --shard 1 --resume "$work/ck/model_00000004.bin" > "$work/r.txt" 2>&1 &&
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
    [ ! -e "$work/id" ] || fail "the environment launcher: rank 0 left the NCCL id file behind"
    parallel "-o adamw all-reduce (mpirun)" "$work/ar.jsonl" ./train_gpt2 "${tiny[@]}" -o adamw --nccl 1
    must_close "$work/ar.jsonl" "$work/env0.jsonl" "train_gpt2 RANK/WORLD_SIZE/LOCAL_RANK against mpirun"
  fi
fi
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary folders left behind: $(ls "$TMPDIR")"
[ "$failed" -eq 0 ] || fail "$failed comparisons failed (their logs: $OUT/failed_*)"
echo "data-parallel checks over $N GPUs passed (${programs[*]}; ${optimizers[*]}; q/k/v ${qkvs[*]})"

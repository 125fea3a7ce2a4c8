#!/usr/bin/env bash
# On a machine with several GPUs: the data-parallel step times behind docs/data_parallel.md, one JSON line
# per run (through scripts/bench_gpt2.sh and scripts/bench_vit.sh), into OUTFILE.
#
#   OUTFILE=results/h100x4_dp.jsonl scripts/bench_data_parallel.sh
#
#  - table3: the PyLO paper's Table 3 setting, GPT-2 124M at 4 x 1024 tokens per GPU, for each q/k/v layout
#    (QKV) and optimizer (OPTIMIZERS): one GPU, and WORLD GPUs in the all-reduce and the sharded mode.
#  - weak: weak scaling of AdamW, all-reduce, for each configuration (CONFIGS: GPT-2 MODEL:B with T 1024;
#    VIT: ViT MODEL:B on synthetic images) on each world size (WORLDS); and SHARDED (MODEL:B:OPTIMIZER ...)
#    on one GPU and sharded on the largest world size.
#  - bf16: the all-reduce mode with --grad-comm bf16 at each GPT-2 configuration on the largest world size.
# Every run over several processes runs once per gradient sum engine in SUMS (--grad-sum: copy, nccl),
# one after the other, so that both are measured on the same machine (bf16 with nccl only).
# PARTS picks among them (default "table3 weak bf16"). CONCURRENT=1 runs the one- and two-GPU runs side by
# side on disjoint GPUs of the machine (each run still has its GPUs to itself; the host and its links are
# shared) to save time. The learned optimizers run on random meta-weights (--lopt-random 1; the time does
# not depend on their values) with the lr multiplier 0.01 (-l), which keeps such weights from diverging; an
# entry NAME:fast sets NAME.fast=1. Weak-scaling efficiency at N = tokens/s(N) / (N x tokens/s(1)); `./report dp
# -i OUTFILE` writes both tables (PARTS="table3 weak", in that order: tools/report/dp_tables.h).
#
# Environment: OUTFILE (required), PARTS, WORLD (every GPU), WORLDS ("1 2 WORLD"), QKV ("fused separate"),
# OPTIMIZERS ("adamw muon small_fc_lopt:fast velo"; a ":rec16" suffix adds the learned records in bf16), CONFIGS
# ("d12:4 d12:16 d24:8"), VIT ("vit-b16:32"), SHARDED ("d24:8:velo"), SUMS ("copy nccl"), STEPS (12), WARMUP
# (3), CONCURRENT (0). NVLink multicast stays off.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
out=${OUTFILE:?set OUTFILE to the JSON-lines file the runs go to}
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
W=${WORLD:-$gpus}
[ "$W" -ge 2 ] && [ "$W" -le "$gpus" ] || { echo "bench_data_parallel: WORLD=$W, and this machine lists $gpus GPUs." >&2; exit 2; }
parts=${PARTS:-table3 weak bf16}
read -r -a worlds <<<"${WORLDS:-1 2 $W}"
read -r -a qkvs <<<"${QKV:-fused separate}"
read -r -a optimizers <<<"${OPTIMIZERS:-adamw muon small_fc_lopt:fast velo}"
read -r -a configs <<<"${CONFIGS:-d12:4 d12:16 d24:8}"
read -r -a vits <<<"${VIT:-vit-b16:32}"
read -r -a sharded <<<"${SHARDED:-d24:8:velo}"
read -r -a sums <<<"${SUMS:-copy nccl}"
export STEPS=${STEPS:-12} WARMUP=${WARMUP:-3}
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_dp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

flags_of() {  # OPTIMIZER[:fast][:rec16] -> its flags (rec16: the learned records in bf16)
  local name=${1%%:*} f="-o ${1%%:*}"
  [[ ":$1:" == *:fast:* ]] && f="$f --set $name.fast=1"
  [[ ":$1:" == *:rec16:* ]] && f="$f --set $name.bf16_record=1"
  case "$name" in adamw | adafactor | muon) ;; *) f="$f --lopt-random 1 -l 0.01" ;; esac
  echo "$f"
}
# run N KIND CONFIG EXTRA: one benchmark line (KIND gpt2 or vit) over N processes, on the GPUs in $GPUS
# (empty: all), into a file of its own (numbered in the order of the calls), so that side-by-side runs do
# not interleave.
n_jobs=0
run() {
  local n=$1 kind=$2 cfg=$3 extra=$4 launch=""
  # Unbound: Open MPI binds 2 processes to cores 0 and 1, so two such runs side by side would share them
  # (seen: 124M at 2 x 4 x 1024 took 13.2 ms a step, slower than on 4 GPUs).
  [ "$n" -gt 1 ] && launch="mpirun --allow-run-as-root --bind-to none -np $n"
  CUDA_VISIBLE_DEVICES=${GPUS:-$(seq -s, 0 $((gpus - 1)))} LAUNCH="$launch" EXTRA="$extra" OUTFILE= \
    scripts/bench_$kind.sh "$cfg" > "$tmp/$(printf %04d "$n_jobs").jsonl" 2>> "$tmp/stderr"
}
# side N JOBS...: each job ("KIND CONFIG EXTRA", tab-separated) over N processes, as many side by side as
# the GPUs allow with CONCURRENT=1, else one after another.
side() {
  local n=$1 slots=1 k=0 expanded=() job e
  shift
  for job in "$@"; do
    if [[ "$job" != *"--nccl 1"* && "$job" != *"--shard 1"* ]]; then expanded+=("$job"); continue; fi
    for e in "${sums[@]}"; do
      [[ "$e" != nccl && "$job" == *"--grad-comm bf16"* ]] || expanded+=("$job --grad-sum $e")
    done
  done
  set -- "${expanded[@]}"
  [ "${CONCURRENT:-0}" = 1 ] && slots=$((gpus / n))
  for job in "$@"; do
    IFS=$'\t' read -r kind cfg extra <<<"$job"
    n_jobs=$((n_jobs + 1))
    GPUS=$(seq -s, $((k % slots * n)) $((k % slots * n + n - 1))) run "$n" "$kind" "$cfg" "$extra" &
    k=$((k + 1))
    [ $((k % slots)) -eq 0 ] && wait
  done
  wait
}

for part in $parts; do
  case $part in
    table3)
      ones=()
      for q in "${qkvs[@]}"; do
        for o in "${optimizers[@]}"; do ones+=("gpt2	d12:4	$(flags_of "$o") --qkv $q"); done
      done
      side 1 "${ones[@]}"
      for q in "${qkvs[@]}"; do
        for o in "${optimizers[@]}"; do
          side "$W" "gpt2	d12:4	$(flags_of "$o") --qkv $q --nccl 1" "gpt2	d12:4	$(flags_of "$o") --qkv $q --shard 1"
        done
      done ;;
    weak)
      for n in "${worlds[@]}"; do
        jobs=()
        for c in "${configs[@]}"; do jobs+=("gpt2	$c	-o adamw --qkv fused$([ "$n" -gt 1 ] && echo " --nccl 1")"); done
        for c in "${vits[@]}"; do jobs+=("vit	$c	-o adamw$([ "$n" -gt 1 ] && echo " --nccl 1")"); done
        if [ "$n" -eq 1 ] || [ "$n" -eq "${worlds[-1]}" ]; then
          for s in "${sharded[@]}"; do
            IFS=: read -r m b o <<<"$s"
            jobs+=("gpt2	$m:$b	$(flags_of "$o") --qkv fused$([ "$n" -gt 1 ] && echo " --shard 1")")
            [ "$n" -gt 1 ] && jobs+=("gpt2	$m:$b	-o adamw --qkv fused --shard 1")
          done
        fi
        side "$n" "${jobs[@]}"
      done ;;
    bf16)
      jobs=()
      for c in "${configs[@]}"; do jobs+=("gpt2	$c	-o adamw --qkv fused --nccl 1 --grad-comm bf16"); done
      side "$W" "${jobs[@]}" ;;
    *) echo "bench_data_parallel: unknown part '$part' (table3, weak, bf16)." >&2; exit 2 ;;
  esac
done
cat "$tmp"/*.jsonl >> "$out"
grep -h '"error"' "$tmp"/*.jsonl >&2 && exit 1
exit 0

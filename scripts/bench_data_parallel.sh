#!/usr/bin/env bash
# On a GPU machine: data-parallel step times of train_gpt2 (weak scaling: B x T per GPU), one JSON line
# per run, through scripts/bench_gpt2.sh.
#
#   scripts/bench_data_parallel.sh                       WORLDS "1 2 4" (those the machine has), d12:4 and d24:4
#   WORLDS="4" CONFIGS="d12:4" OPTIMIZERS="adamw velo" OUTFILE=results/h200x4_dp.jsonl scripts/bench_data_parallel.sh
#
# For each world size N, configuration and optimizer: N = 1 runs plainly (one GPU, no NCCL); N > 1 runs
# under "mpirun -np N" twice, in the all-reduce mode and the sharded mode (--shard 1). A world size of 1
# with ONE_PROCESS_MODES=1 also runs both modes as one process, to show what the NCCL paths cost by
# themselves. The learned optimizers run on random meta-weights (--lopt-random 1; the time does not
# depend on their values) with the lr multiplier 0.01 (-l), which keeps such weights from diverging.
# An entry NAME:fast sets NAME.fast=1 (the tensor-core MLP). Weak-scaling efficiency at N =
# tok_per_s(N) / (N x tok_per_s(1)).
#
# VIT="vit-b16:32" (MODEL:B per GPU) adds train_vit's runs on synthetic batches (scripts/bench_vit.sh).
#
# Environment: WORLDS, CONFIGS, VIT (""), OPTIMIZERS ("adamw muon small_fc_lopt:fast velo": the PyLO paper's Table 3),
# STEPS (20), ONE_PROCESS_MODES (0), OUTFILE; NCCL_NVLS_ENABLE is set to 0 (NVLink multicast off).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
worlds=${WORLDS:-1 2 4}
read -r -a configs <<<"${CONFIGS:-d12:4 d24:4}"
read -r -a optimizers <<<"${OPTIMIZERS:-adamw muon small_fc_lopt:fast velo}"
export STEPS=${STEPS:-20}
for n in $worlds; do
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] || { echo "bench_data_parallel: bad world size '$n'." >&2; exit 2; }
  if [ "$n" -gt "$gpus" ]; then
    echo "bench_data_parallel: skipping N = $n: this machine lists $gpus GPUs." >&2
    continue
  fi
  for o in "${optimizers[@]}"; do
    name=${o%%:*}
    base="-o $name"
    [ "$o" != "$name" ] && base="$base --set $name.fast=1"
    case "$name" in adamw | adafactor | muon) ;; *) base="$base --lopt-random 1 -l 0.01" ;; esac
    for bench in gpt2 vit; do
      if [ $bench = gpt2 ]; then cfgs=("${configs[@]}"); else read -r -a cfgs <<<"${VIT:-}"; fi
      [ ${#cfgs[@]} -gt 0 ] || continue
      if [ "$n" -eq 1 ]; then
        EXTRA="$base" scripts/bench_$bench.sh "${cfgs[@]}"
        [ "${ONE_PROCESS_MODES:-0}" = 1 ] || continue
      fi
      LAUNCH="mpirun --allow-run-as-root -np $n" EXTRA="$base --nccl 1" scripts/bench_$bench.sh "${cfgs[@]}"
      LAUNCH="mpirun --allow-run-as-root -np $n" EXTRA="$base --shard 1" scripts/bench_$bench.sh "${cfgs[@]}"
    done
  done
done

#!/usr/bin/env bash
# On a GPU machine: the training step of every optimizer at the PyLO paper's small batch, with the
# optimizer after backward and with --overlap, through scripts/bench_gpt2.sh (GPT-2) and
# scripts/bench_vit.sh (ViT), one JSON line per run.
#
#   scripts/bench_overlap.sh                             GPT-2 124M and 355M at 4 x 1024 tokens
#   CONFIGS="d12:4" OPTS="adamw velo" scripts/bench_overlap.sh
#   VIT="vit-b16:32" CONFIGS= scripts/bench_overlap.sh   ViT-B/16 at batch 32 only
#
# For each configuration and optimizer, three modes: "clip" (the default --clip 1: the global norm before
# any step), "noclip" (--clip 0, the step after backward) and "overlap" (--clip 0 --overlap 1; only the
# optimizers that can step block by block). A name:fast optimizer is that optimizer with --set name.fast=1.
# Learned optimizers run with random meta-weights (--lopt-random 1: the step costs the same). Each line is
# bench_gpt2.sh's (or bench_vit.sh's) with "extra" naming the flags.
# Environment: CONFIGS (d12:4 d24:4), VIT (none), OPTS (adamw adafactor muon small_fc_lopt
# small_fc_lopt:fast velo elo elo:fast celo2 elo_celo2), GRAPH (0: eager; 1: --cuda-graph 1), STEPS, OUTFILE.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
read -r -a configs <<<"${CONFIGS-d12:4 d24:4}"
read -r -a vit <<<"${VIT-}"
read -r -a opts <<<"${OPTS:-adamw adafactor muon small_fc_lopt small_fc_lopt:fast velo elo elo:fast celo2 elo_celo2}"
graph=${GRAPH:-0}

groupable() { case "$1" in adamw | adafactor | small_fc_lopt | elo) return 0 ;; *) return 1 ;; esac; }
for o in "${opts[@]}"; do
  name=${o%%:*}
  flags="-o $name --lopt-random 1 --cuda-graph $graph"
  [ "$o" != "$name" ] && flags="$flags --set $name.fast=1"
  modes=("--clip 1" "--clip 0")
  groupable "$name" && modes+=("--clip 0 --overlap 1")
  for m in "${modes[@]}"; do
    [ ${#configs[@]} -gt 0 ] && EXTRA="$flags $m" scripts/bench_gpt2.sh "${configs[@]}"
    [ ${#vit[@]} -gt 0 ] && EXTRA="$flags $m" scripts/bench_vit.sh "${vit[@]}"
  done
done
true

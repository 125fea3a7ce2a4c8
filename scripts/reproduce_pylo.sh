#!/usr/bin/env bash
# Reproduces the PyLO paper's experiments that a GPU machine can run, beside the paper's figures: one
# command per machine kind, one file per experiment (so a second call resumes where the first stopped),
# then a report folder with a markdown page and one SVG per figure (./report pylo). docs/reproduce.md has
# what each experiment is and what it needs.
#
#   scripts/reproduce_pylo.sh single [--quick] [--out DIR]     one GPU: Tables 2 and 9, Figures 1, 5, 6, 9,
#                                                              the scaled-down training runs, the configs
#   scripts/reproduce_pylo.sh multi  [--quick] [--out DIR]     4 GPUs (or WORLD): Table 3
#
#   --quick          few sizes, few steps: the whole single-GPU pass in minutes (for a first look)
#   --out DIR        the report folder (default .out/pylo_KIND, .out/pylo_KIND_quick with --quick)
#   --only A,B       only these experiments (names below); --redo A,B runs them again even if done
#   --deadline S     start no run after S seconds (the experiment it interrupts goes on in the next call)
#   --dry-run        print the plan (each experiment and its commands), run nothing
#   --no-report      leave out the report step
#   --build          make the programs first (default: make only those that are missing)
#
# Experiments (single): setup_pylo_cuda, table2_step_breakdown, table9_step_throughput,
# fig1_vit_batch_breakdown, fig5_optimizer_step_vs_size, fig5_peers, fig6_synthetic_mlp, fig6_peers,
# fig9_matrix_8192, fig9_peers, train_vit_fashion_mnist, train_gpt2_english, fig8_gpt2_schedule_wd,
# fig16_gpt2_qkv, configs_smoke. (multi):
# table3_data_parallel.
#
# Each experiment writes DIR/exp/NAME.jsonl: a header line {"experiment":{...}} (its title, the machine's
# GPU, the commit, this command), the programs' JSON lines, one {"run":{"cmd","exit","wall_s"}} line after
# each program run, and an end line {"experiment_end":{"status","wall_s",...}}; its console output goes to
# DIR/logs/NAME.log, the training runs' logs to DIR/train/. The file appears (renamed from NAME.jsonl.part)
# when the experiment ends; one whose status is ok or partial (some runs failed, e.g. out of memory at the
# largest size) is done and skipped by later calls; skipped (a missing prerequisite: PyLO, data, weights),
# failed ones run again, and a stopped one (the deadline) goes on from the runs it had not ended, so an
# experiment longer than one call ends over several. Every program run is bounded by `timeout RUN_LIMIT`
# (600 s). The report: DIR/report.md and DIR/*.svg.
#
# Environment: RUN_LIMIT (600), PYLO_SRC (.deps/pylo: PyLO's source, for the peers), PYTHON (python3),
# WORLD (multi: the GPUs, default 4), TRAIN_GPT2, TRAIN_VIT, BENCH_OPTIM, REPORT (./train_gpt2 ...), COMMIT
# (the commit the files record, for a copy of a checkout without its history; default: git's HEAD).
# Exit status: 0 when every experiment it started is done, 1 otherwise, 2 for a mistake in the arguments.
set -uo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
die() { echo "reproduce_pylo: $*" >&2; exit 2; }

invocation="scripts/reproduce_pylo.sh $*"
kind=${1:-}
case "$kind" in
  single | multi) shift ;;
  -h | --help | "") usage ;;
  *) die "KIND must be single or multi (got '$kind'); see --help." ;;
esac
out="" quick=0 dry=0 only="" redo="" deadline="" build=0 want_report=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out | --only | --redo | --deadline) [ $# -ge 2 ] || die "$1 needs a value."
      case "$1" in --out) out=$2 ;; --only) only=$2 ;; --redo) redo=$2 ;; --deadline) deadline=$2 ;; esac
      shift 2 ;;
    --quick) quick=1; shift ;;
    --dry-run) dry=1; shift ;;
    --build) build=1; shift ;;
    --no-report) want_report=0; shift ;;
    -h | --help) usage ;;
    *) die "unknown option '$1'; see --help." ;;
  esac
done
[ -z "$deadline" ] || [[ "$deadline" =~ ^[1-9][0-9]*$ ]] || die "--deadline must be a whole number of seconds (got '$deadline')."
limit=${RUN_LIMIT:-600}
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || die "RUN_LIMIT must be a whole number of seconds (got '$limit')."
cd "$(dirname "$0")/.." || exit 2
# DIR stays as given (relative to the repository root, where everything runs): the commands the files record
# then name no absolute path.
out=${out:-".out/pylo_$kind$([ $quick = 1 ] && echo _quick)"}
out=${out%/}
case "$out" in
  /*) echo "reproduce_pylo: note: --out $out is an absolute path, which the experiment files will record in" \
         "their commands; give it relative to the checkout for a folder that is to be committed." >&2 ;;
esac
exp_dir=$out/exp log_dir=$out/logs
python=${PYTHON:-python3}
pylo_src=${PYLO_SRC:-.deps/pylo}
train_gpt2=${TRAIN_GPT2:-./train_gpt2} train_vit=${TRAIN_VIT:-./train_vit}
bench_optim=${BENCH_OPTIM:-./bench_optim} report=${REPORT:-./report}
world=${WORLD:-4}
export NCCL_NVLS_ENABLE=0

all_single="setup_pylo_cuda table2_step_breakdown table9_step_throughput fig1_vit_batch_breakdown
  fig5_optimizer_step_vs_size fig5_peers fig6_synthetic_mlp fig6_peers fig9_matrix_8192 fig9_peers
  train_vit_fashion_mnist train_gpt2_english fig8_gpt2_schedule_wd fig16_gpt2_qkv configs_smoke"
all_multi="table3_data_parallel"
known=$([ "$kind" = single ] && echo $all_single || echo $all_multi)
for list in "$only" "$redo"; do
  IFS=, read -r -a names <<<"$list"
  for n in "${names[@]}"; do
    [[ " $(echo $known) " == *" $n "* ]] || die "no experiment '$n' for $kind (experiments: $(echo $known))."
  done
done

# --------------------------------------------------------------------------------------- experiment files
source scripts/reproduce_lib.sh  # begin, run, note, finish, skip; json_str, cmdline, listed

# The GPUs the programs see: nvidia-smi lists every GPU of the machine, CUDA_VISIBLE_DEVICES (indices or UUIDs,
# which nvidia-smi -i takes too) those of this call, as when two passes share a machine a GPU each.
visible=${CUDA_VISIBLE_DEVICES-}
if [ -n "$visible" ]; then
  gpu=$(nvidia-smi -i "${visible%%,*}" --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  gpus=$(tr ',' '\n' <<<"$visible" | grep -c .)
else
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
fi
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -z "${COMMIT:-}" ] && [ "$commit" != unknown ] &&
   [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit+changes"
fi

if [ $dry = 0 ]; then
  mkdir -p "$exp_dir" "$log_dir" || die "cannot create $out."
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/reproduce_pylo.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
fi

# ------------------------------------------------------------------------------------------ prerequisites
need_programs() {  # PATH...: make the programs (./NAME) that are missing (all with --build)
  local p missing=()
  for p in "$@"; do
    if [ "$p" != "./${p#./}" ] || [[ "${p#./}" == */* ]]; then  # set by the environment: used as it is
      [ $dry = 1 ] || [ -x "$p" ] || die "$p is not an executable program."
    elif [ $build = 1 ] || [ ! -x "$p" ]; then
      missing+=("${p#./}")
    fi
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  if [ $dry = 1 ]; then
    echo "make -j$(nproc) ${missing[*]}"
  else
    echo "reproduce_pylo: make ${missing[*]}" >&2
    make -j"$(nproc)" "${missing[@]}" >"$log_dir/build.log" 2>&1 || die "make ${missing[*]} failed; see $log_dir/build.log."
  fi
}
have_torch() { "$python" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" >/dev/null 2>&1; }
pylo_cuda_built() {
  local k
  for k in cuda_lo velo_cuda_kernel celo2_cuda_kernel; do compgen -G "$pylo_src/$k*.so" >/dev/null || return 1; done
}
peer_problem() {  # why the PyLO peers cannot run here, or nothing
  if ! command -v "$python" >/dev/null 2>&1; then echo "no $python"
  elif [ ! -d "$pylo_src/pylo" ]; then echo "no PyLO source at $pylo_src (set PYLO_SRC, or carry .deps/pylo)"
  elif [ $dry = 0 ] && ! have_torch; then echo "$python has no torch with CUDA"
  fi
}
weights_of() {  # OPTIMIZER -> the weight folders it needs under weights/ (none: shipped or not learned)
  case "$1" in
    velo) echo "weights/VeLO_RNN weights/VeLO_MLP" ;;
    small_fc_lopt) echo "weights/mulo" ;;
    elo) echo "weights/elo" ;;
    elo_celo2) echo "weights/elo-celo2" ;;
  esac
}
have_weights() { local d; for d in $(weights_of "$1"); do [ -f "$d/model.safetensors" ] || return 1; done; }
# opt_flags NAME[:fast]: its flags for the training benchmarks (random meta-weights: the step costs the same)
opt_flags() {
  local n=${1%%:*} f="-o ${1%%:*}"
  [ "$1" != "$n" ] && f+=" --set $n.fast=1"
  case "$n" in adamw | adafactor | muon) ;; *) f+=" --lopt-random 1" ;; esac
  echo "$f"
}
if [ $dry = 0 ]; then
  [ -d data/kjv ] || { [ -d .deps/data/kjv ] && mkdir -p data && cp -r .deps/data/kjv data/; }
  [ -f tokenizer/r50k_base.tiktoken ] || { [ -f .deps/tokenizer/r50k_base.tiktoken ] && mkdir -p tokenizer &&
    cp .deps/tokenizer/r50k_base.tiktoken tokenizer/; }
  if [ -z "$gpu" ]; then
    echo "reproduce_pylo: no GPU visible (nvidia-smi); the runs will fail and say so." >&2
  fi
fi
need_programs "$report" "$bench_optim" "$train_gpt2" "$train_vit"

# --------------------------------------------------------------------------------------------- the plan
source scripts/reproduce_pylo_plan.sh

# ------------------------------------------------------------------------------------------------ report
if [ $want_report = 1 ]; then
  if [ $dry = 1 ]; then
    echo "$report pylo -i $out --out $out"
  else
    "$report" pylo -i "$out" --out "$out" || not_done=1
  fi
fi
[ $dry = 1 ] && exit 0
[ $not_done = 0 ] || echo "reproduce_pylo: some experiments are not done (skipped, stopped or failed); their files say why" >&2
exit $not_done

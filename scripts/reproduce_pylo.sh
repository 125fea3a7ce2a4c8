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

# ------------------------------------------------------------------------------------------------ helpers
now() { date +%s.%N; }
t_start=$(now)
elapsed() { awk -v a="$t_start" -v b="$(now)" 'BEGIN { printf "%d", b - a }'; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
json_str() {  # a JSON string literal
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/ }
  s=${s//$'\n'/ }
  printf '"%s"' "$s"
}
quote() {  # a word as a shell would need it typed
  if [[ "$1" =~ ^[A-Za-z0-9_./=,:+@%-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
cmdline() { local w s=""; for w in "$@"; do s+="$(quote "$w") "; done; printf '%s' "${s% }"; }
listed() { [[ ",$1," == *",$2,"* ]]; }

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
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

stopped=0 not_done=0 name="" part="" log="" runs=0 failed=0 t_exp=0
# begin NAME TITLE [KEY=VALUE...]: starts experiment NAME, or returns 1: not selected, done earlier (its file
# ends with status ok or partial; --redo runs it again) or past the deadline. KEY=VALUE pairs go into the header.
begin() {
  name=$1
  local title=$2 file="$exp_dir/$1.jsonl"
  shift 2
  if [ -n "$only" ] && ! listed "$only" "$name"; then return 1; fi
  if [ $dry = 0 ] && [ -f "$file" ] && ! listed "$redo" "$name" &&
     tail -n 1 "$file" | grep -qE '"experiment_end":\{"status":"(ok|partial)"'; then
    echo "reproduce_pylo: $name is done ($file); skipped (--redo $name runs it again)" >&2
    return 1
  fi
  if [ -n "$deadline" ] && [ "$(elapsed)" -ge "$deadline" ]; then
    [ $stopped = 1 ] || echo "reproduce_pylo: the deadline (${deadline} s) has passed; run the same command again to go on" >&2
    stopped=1 not_done=1
    return 1
  fi
  runs=0 failed=0 t_exp=$(now)
  if [ $dry = 1 ]; then
    echo "# $name: $title"
    return 0
  fi
  part="$file.part" log="$log_dir/$name.log"
  : >"$log"
  local extra="" kv
  for kv in "$@"; do extra+=",$(json_str "${kv%%=*}"):$(json_str "${kv#*=}")"; done
  printf '{"experiment":{"name":%s,"title":%s,"kind":"%s","quick":%s,"gpu":%s,"gpus":%s,"commit":%s,"invocation":%s,"started":%s%s}}\n' \
    "$(json_str "$name")" "$(json_str "$title")" "$kind" "$([ $quick = 1 ] && echo true || echo false)" \
    "$(json_str "$gpu")" "${gpus:-0}" "$(json_str "$commit")" "$(json_str "$invocation")" \
    "$(json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" "$extra" >"$part"
  carry_runs "$file"
  echo "reproduce_pylo: [$(elapsed) s] $name: $title" >&2
}
# carry_runs FILE: an experiment that the deadline stopped goes on where it stopped. The runs its file
# records as ended (each run's JSON lines come before its "run" line) are copied into the new file, and
# run() skips their commands, counted (a command given twice runs twice); the runs the deadline left out or
# cut short run now. --redo, a GPU of another name, or settings of its header that changed (the corpus, the
# steps) start over. Each run line names the commit it ran at (a carried line without one, from before run
# lines had it, takes its file's header's). carried: 1 when the experiment goes on.
declare -A ran=() ran_failed=()
carried_s=0 carried=0  # the carried runs' time
settings() { head -n 1 "$1" | sed -n 's/.*"started":"[^"]*"//p'; }  # the header's KEY=VALUE pairs
carry_runs() {
  ran=() ran_failed=() carried_s=0 carried=0
  [ -f "$1" ] && ! listed "$redo" "$name" && tail -n 1 "$1" | grep -q '"experiment_end":{"status":"stopped"' || return 0
  if ! head -n 1 "$1" | grep -qF "\"gpu\":$(json_str "$gpu"),"; then  # one experiment, one kind of GPU
    echo "reproduce_pylo: $name stopped on another kind of GPU; it starts over" >&2
    return 0
  fi
  if [ "$(settings "$1")" != "$(settings "$part")" ]; then
    echo "reproduce_pylo: $name stopped with other settings ($(settings "$1")); it starts over" >&2
    return 0
  fi
  carried=1
  local line key lines=() n=0 old_commit
  old_commit=$(head -n 1 "$1" | sed -n 's/.*"commit":\("[^"]*"\).*/\1/p')
  while IFS= read -r line; do
    case "$line" in
      '{"experiment":'* | '{"experiment_end":'*) ;;
      '{"run":{"cmd":'*'"exit":null'*) lines=() ;;
      '{"run":{"cmd":'*)
        key=${line#'{"run":{"cmd":'}
        key=${key%%,\"exit\":*}  # the command as json_str wrote it (its own quotes are escaped)
        ran[$key]=$((${ran[$key]:-0} + 1))
        [[ "$line" == *'"exit":0,'* ]] || ran_failed[$key]=$((${ran_failed[$key]:-0} + 1))
        carried_s=$(awk -v a="$carried_s" -v b="$(sed -n 's/.*"wall_s":\([0-9.]*\).*/\1/p' <<<"$line")" \
          'BEGIN { printf "%.1f", a + b }')
        [[ "$line" == *'"commit":'* ]] || line="${line%\}\}},\"commit\":${old_commit:-\"unknown\"}}}"
        printf '%s\n' "${lines[@]}" "$line" >>"$part"
        lines=()
        n=$((n + 1)) ;;
      *) lines+=("$line") ;;
    esac
  done <"$1"
  [ $n = 0 ] || echo "reproduce_pylo: $name goes on after the $n runs that ended in its stopped call" >&2
}
# note TEXT: a line of the experiment's own (a JSON object, written as given)
note() { [ $dry = 1 ] || printf '%s\n' "$1" >>"$part"; }
# run [--limit S] CMD...: one run of a program (or a script that runs programs, each under its own
# limit) under `timeout`; its JSON lines go to the experiment's file, everything else to its log.
run() {
  local lim=$limit
  if [ "$1" = --limit ]; then lim=$2; shift 2; fi
  local printed
  printed=$(cmdline "$@")
  runs=$((runs + 1))
  if [ $dry = 1 ]; then
    echo "$printed"
    return 0
  fi
  local key
  key=$(json_str "$printed")
  if [ "${ran[$key]:-0}" -gt 0 ]; then  # ended in the stopped call before (carry_runs)
    ran[$key]=$((${ran[$key]} - 1))
    if [ "${ran_failed[$key]:-0}" -gt 0 ]; then
      ran_failed[$key]=$((${ran_failed[$key]} - 1))
      failed=$((failed + 1))
    fi
    return 0
  fi
  if [ -n "$deadline" ]; then
    local left=$((deadline - $(elapsed)))
    if [ "$left" -le 0 ]; then
      stopped=1
      printf '{"run":{"cmd":%s,"exit":null,"wall_s":0,"skipped":"the deadline"}}\n' "$key" >>"$part"
      return 0
    fi
    [ "$left" -ge "$lim" ] || lim=$((left > 30 ? left : 30))
    [ "$lim" -le "$limit" ] || lim=$limit
  fi
  echo "+ $printed" >>"$log"
  local t0 rc wall
  t0=$(now)
  timeout -k 10 "$lim" "$@" >"$tmp/stdout" 2>>"$log" </dev/null
  rc=$?
  wall=$(seconds_since "$t0")
  grep -v '^{' "$tmp/stdout" >>"$log"
  if [ "$lim" -lt "$limit" ] && { [ $rc = 124 ] || [ $rc = 137 ]; }; then  # cut short by the deadline: not a result
    stopped=1
    printf '{"run":{"cmd":%s,"exit":null,"wall_s":%s,"skipped":"cut short by the deadline"}}\n' "$key" "$wall" >>"$part"
    return 0
  fi
  grep '^{' "$tmp/stdout" >>"$part"
  printf '{"run":{"cmd":%s,"exit":%d,"wall_s":%s,"commit":%s}}\n' "$key" "$rc" "$wall" "$(json_str "$commit")" >>"$part"
  if [ "$rc" != 0 ]; then
    failed=$((failed + 1))
    echo "reproduce_pylo:   exit status $rc after ${wall} s: $printed (log: $log)" >&2
  fi
}
# finish: the end line; the file takes its name (done: ok or partial).
finish() {
  [ $dry = 1 ] && return 0
  local status=ok
  if [ $stopped = 1 ]; then
    status=stopped
  elif [ $failed -gt 0 ] && [ $failed -ge $runs ]; then
    status=failed
  elif [ $failed -gt 0 ]; then
    status=partial
  fi
  [ $status = ok ] || [ $status = partial ] || not_done=1
  local wall  # this call's time and that of the runs carried over from stopped calls
  wall=$(awk -v a="$(seconds_since "$t_exp")" -v b="$carried_s" 'BEGIN { printf "%.1f", a + b }')
  printf '{"experiment_end":{"status":"%s","wall_s":%s,"runs":%d,"failed":%d}}\n' "$status" "$wall" "$runs" "$failed" \
    >>"$part"
  mv "$part" "$exp_dir/$name.jsonl"
  echo "reproduce_pylo: [$(elapsed) s] $name: $status ($runs runs, $failed failed, $wall s)" >&2
}
# skip REASON: the experiment cannot run here; its file says why (and a later call tries again).
skip() {
  not_done=1
  if [ $dry = 1 ]; then
    echo "# (skipped here: $1)"
    return 0
  fi
  printf '{"experiment_end":{"status":"skipped","wall_s":0,"runs":0,"failed":0,"reason":%s}}\n' "$(json_str "$1")" >>"$part"
  mv "$part" "$exp_dir/$name.jsonl"
  echo "reproduce_pylo: $name: skipped: $1" >&2
}

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
all_opts="adamw adafactor muon small_fc_lopt small_fc_lopt:fast velo celo2 elo elo_celo2"
if [ $quick = 1 ]; then
  vits="vit-b16" gpt2s="d12" bench_steps=10
  t2_opts="adamw adafactor small_fc_lopt:fast velo"
  t9_opts="adamw small_fc_lopt:fast velo"
  f1_batches="128" f1_opts="adamw velo"  # with batch 32 from table2_step_breakdown (the report takes it)
  f5_models="gpt2-124m gpt2-355m" f5_opts="adamw,adafactor,muon,small_fc_lopt,small_fc_lopt:fast,velo,celo2"
  f5_peer_models="vit-b16,gpt2-124m"  # one run of the peer script for both
  f5_peers="pylo_cuda:small_fc_lopt,pylo_naive:small_fc_lopt,pylo_naive:velo,torch:adamw,torch:adafactor,torch:muon"
  f6_models="mlp-w256-d1 mlp-w1024-d1 mlp-w4096-d1 mlp-w256-d4 mlp-w256-d16 mlp-w4096-d4"
  f6_peers="pylo_cuda:small_fc_lopt,pylo_naive:small_fc_lopt" f6_peer_groups=$(echo $f6_models | tr ' ' ,)
  f9_peers="pylo_cuda:small_fc_lopt,pylo_naive:small_fc_lopt,torch:adamw,torch:muon"
  seeds="1 2 3" vit_steps=300 gpt2_steps=60 peer_steps=5 peer_budget=10 peer_limit=240
  vit_extra="-v 100" gpt2_extra="-v 20"  # few validations
  smoke_opts="celo2"
else
  vits="vit-s16 vit-b16 vit-l16" gpt2s="d12 d24 d36 d48" bench_steps=15
  t2_opts=$all_opts t9_opts=$all_opts
  f1_batches="8 16 32 64 128 256" f1_opts="adamw adafactor small_fc_lopt:fast velo"
  f5_models="vit-s16 vit-b16 vit-l16 gpt2-124m gpt2-355m gpt2-774m gpt2-1558m"
  f5_opts="adamw,adafactor,muon,small_fc_lopt,small_fc_lopt:fast,velo,celo2,elo,elo:fast,elo_celo2"
  f5_peer_models=$f5_models
  f5_peers="pylo_cuda:small_fc_lopt,pylo_cuda:velo,pylo_naive:small_fc_lopt,pylo_naive:velo,torch:adamw,torch:adamw_foreach,torch:adafactor,torch:muon"
  f6_models="mlp-w128-d1 mlp-w256-d1 mlp-w512-d1 mlp-w1024-d1 mlp-w2048-d1 mlp-w4096-d1 mlp-w8192-d1
    mlp-w256-d2 mlp-w256-d4 mlp-w256-d8 mlp-w256-d16 mlp-w256-d32 mlp-w4096-d2 mlp-w4096-d4 mlp-w4096-d8"
  f6_peers="pylo_cuda:small_fc_lopt,pylo_naive:small_fc_lopt,pylo_cuda:velo,pylo_naive:velo" f6_peer_groups=$f6_models
  f9_peers="pylo_cuda:small_fc_lopt,pylo_cuda:velo,pylo_cuda:celo2,pylo_naive:small_fc_lopt,pylo_naive:velo,pylo_naive:celo2,torch:adamw,torch:muon"
  seeds="1 2 3" vit_steps=9400 gpt2_steps=800 peer_steps=10 peer_budget=60 peer_limit=$limit
  vit_extra="" gpt2_extra=""
  smoke_opts="adamw muon velo small_fc_lopt celo2"
fi

# peers GROUPS RUNS: the PyLO / torch (and for VeLO, JAX) peers on bench_optim's shapes (--shapes 1, no GPU)
# of each group of models (a comma-separated list: one run of the peer script for all of them).
peers() {
  local groups=$1 runs_list=$2 g problem shapes
  problem=$(peer_problem)
  if [ -n "$problem" ]; then skip "$problem"; return; fi
  for g in $groups; do
    shapes="$log_dir/shapes_$name.jsonl"
    if [ $dry = 1 ]; then
      echo "$(cmdline "$bench_optim" -e "$g" --shapes 1) > $shapes"
    else
      "$bench_optim" -e "$g" --shapes 1 >"$shapes" 2>>"$log" || echo "reproduce_pylo: no shapes for $g" >&2
    fi
    run --limit "$peer_limit" "$python" bench/pylo_step_bench.py --shapes "$shapes" --pylo "$pylo_src" --run "$runs_list" \
      --steps "$peer_steps" --budget "$peer_budget"
    if [[ "$runs_list" == *velo* ]]; then run "$python" bench/jax_velo_bench.py --shapes "$shapes" --steps "$peer_steps"; fi
  done
  finish
}

# Each optimizer of $1 on every ViT at batch 32 and every GPT-2 at 4 x 1024 tokens; $2: PROFILE=1 for the
# forward / backward split, or nothing.
bench_models() {
  local o m
  for o in $1; do
    for m in $vits; do
      run env STEPS=$bench_steps ${2:-} TIMEOUT="$limit" TRAIN_VIT="$train_vit" REPORT="$report" \
        EXTRA="$(opt_flags "$o")" scripts/bench_vit.sh "$m:32"
    done
    for m in $gpt2s; do
      run env STEPS=$bench_steps ${2:-} TIMEOUT="$limit" TRAIN_GPT2="$train_gpt2" REPORT="$report" \
        EXTRA="$(opt_flags "$o")" scripts/bench_gpt2.sh "$m:4"
    done
  done
}

if [ "$kind" = single ]; then
  if begin setup_pylo_cuda "PyLO's CUDA extensions, built in its source folder for the peers"; then
    problem=$(peer_problem)
    if [ -n "$problem" ]; then
      skip "$problem"
    elif [ $dry = 0 ] && pylo_cuda_built; then
      note '{"setup":"PyLO CUDA extensions already built"}'
      finish
    else
      run bash -c "cd $(quote "$pylo_src") && PYLO_CUDA=1 $python setup.py build_ext --inplace"
      finish
    fi
  fi

  if begin table2_step_breakdown "Table 2: forward, backward and optimizer time per step, ViT at batch 32, GPT-2 at 4 x 1024 tokens" \
       "models=$vits $gpt2s" "optimizers=$t2_opts"; then
    bench_models "$t2_opts" PROFILE=1
    finish
  fi

  if begin table9_step_throughput "Table 9: training step and throughput, ViT at batch 32, GPT-2 at 4 x 1024 tokens" \
       "models=$vits $gpt2s" "optimizers=$t9_opts"; then
    bench_models "$t9_opts"
    finish
  fi

  if begin fig1_vit_batch_breakdown "Figure 1: ViT-B/16 step breakdown across batch sizes" \
       "batches=$f1_batches" "optimizers=$f1_opts"; then
    for b in $f1_batches; do
      for o in $f1_opts; do
        run env STEPS=$bench_steps PROFILE=1 TIMEOUT="$limit" TRAIN_VIT="$train_vit" REPORT="$report" \
          EXTRA="$(opt_flags "$o")" scripts/bench_vit.sh "vit-b16:$b"
      done
    done
    finish
  fi

  if begin fig5_optimizer_step_vs_size "Figure 5: optimizer step time against model size (ours)" "models=$f5_models"; then
    for m in $f5_models; do run "$bench_optim" -e "$m" -o "$f5_opts" -x 20; done
    finish
  fi
  if begin fig5_peers "Figure 5: optimizer step time against model size (PyLO, torch, JAX on the same shapes)" \
       "models=$f5_peer_models"; then
    peers "$f5_peer_models" "$f5_peers"
  fi

  if begin fig6_synthetic_mlp "Figure 6: learned optimizer step on synthetic MLPs (width and depth sweeps)" \
       "models=$(echo $f6_models)"; then
    run "$bench_optim" -e "$(echo $f6_models | tr ' ' ,)" -o small_fc_lopt,small_fc_lopt:fast,velo -x 20
    finish
  fi
  if begin fig6_peers "Figure 6: PyLO's CUDA and naive steps on the same MLPs" "models=$(echo $f6_models)"; then
    peers "$f6_peer_groups" "$f6_peers"
  fi

  if begin fig9_matrix_8192 "Figure 9: optimizer step on one 8192 x 8192 matrix (ours)"; then
    run "$bench_optim" -e mat-8192x8192 -o adamw,adafactor,muon,small_fc_lopt,small_fc_lopt:fast,velo,celo2,elo_celo2 -x 20
    finish
  fi
  if begin fig9_peers "Figure 9: PyLO and torch on the same 8192 x 8192 matrix"; then
    peers mat-8192x8192 "$f9_peers"
  fi

  # The scaled-down training runs: every configuration of the .cfg whose weights are here, SEEDS seeds each.
  train() {  # TASK CFG STEPS DATA_GLOB DATA_HINT [EXTRA [LOGDIR: under DIR/train/, default TASK]]
    local task=$1 cfg=$2 steps=$3 glob=$4 hint=$5 extra=${6:-} sub=${7:-$1} labels="" l o missing=""
    while read -r l o _; do
      [ -n "$l" ] && [ "$l" != common ] && [[ "$l" != \#* ]] || continue
      if have_weights "$o"; then labels+="${labels:+,}$l"; else missing+=" $l"; fi
    done <"$cfg"
    if [ $dry = 0 ] && ! compgen -G "$glob" >/dev/null; then skip "no data at $glob ($hint)"; return; fi
    [ -z "$missing" ] || note "{\"left_out\":$(json_str "${missing# }"),\"why\":\"their published weights are not in weights/ (scripts/download_lopt_weights.sh)\"}"
    local args=("$task" --cfg "$cfg" --steps "$steps" --seeds "$seeds" --only "$labels" --logdir "$out/train/$sub"
                --timeout "$limit" --resume --no-build)
    # An experiment that starts over trains every run again: the folder keeps no log of an earlier start.
    [ $dry = 1 ] || [ $carried = 1 ] || rm -rf "${out:?}/train/$sub"
    [ -z "$extra" ] || args+=(--extra "$extra")
    [ $dry = 1 ] && args+=(--dry-run)
    if [ $dry = 1 ]; then
      echo "scripts/compare_optimizers.sh $(cmdline "${args[@]}")"
      scripts/compare_optimizers.sh "${args[@]}" 2>/dev/null | sed 's/^/  /'
    else
      run --limit $((limit * 60)) scripts/compare_optimizers.sh "${args[@]}"
    fi
    finish
  }
  if begin train_vit_fashion_mnist "Table 4 and Figures 10-11, scaled down: ViT-Ti/4 on Fashion-MNIST, tuned AdamW and Muon, CELO2, VeLO, small_fc_lopt" \
       "logdir=train/vit" "steps=$vit_steps" "seeds=$seeds"; then
    train vit scripts/compare/pylo_vit.cfg "$vit_steps" 'data/fashion_mnist/fashion-mnist-train-*.tar' \
      "scripts/prepare_fashion_mnist.sh, or carry data/fashion_mnist" "$vit_extra"
  fi
  # The quick pass's 60 GPT-2 steps (0.5M tokens) may take the KJV where the English corpus is missing; the
  # full pass's 800 (6.6M tokens) would go over its 1.0M training tokens six times, so it waits for the corpus.
  english='data/english/english_train_*.bin' corpus=english extra=$gpt2_extra
  if [ $dry = 0 ] && [ $quick = 1 ] && ! compgen -G "$english" >/dev/null &&
     compgen -G 'data/kjv/kjv_train_*.bin' >/dev/null; then
    corpus=kjv extra="$gpt2_extra -i data/kjv/kjv_train_*.bin -j data/kjv/kjv_val_*.bin"  # no English corpus here
  fi
  if begin train_gpt2_english "Figures 10-11 for GPT-2, scaled down: GPT-2 124M on the English corpus (the quick pass: KJV where it is missing), tuned AdamW and Muon, CELO2, VeLO, small_fc_lopt" \
       "logdir=train/gpt2" "steps=$gpt2_steps" "seeds=$seeds" "corpus=$corpus"; then
    train gpt2 scripts/compare/pylo_gpt2.cfg "$gpt2_steps" "data/$corpus/${corpus}_train_*.bin" \
      "scripts/prepare_english.sh, or carry data/english" "$extra"
  fi
  if begin fig8_gpt2_schedule_wd "Figure 8, scaled down: CELO2 with and without weight decay, constant and cosine schedule, GPT-2 124M (AdamW for reference)" \
       "logdir=train/gpt2_fig8" "steps=$gpt2_steps" "seeds=$seeds" "corpus=$corpus"; then
    train gpt2 scripts/compare/pylo_gpt2_fig8.cfg "$gpt2_steps" "data/$corpus/${corpus}_train_*.bin" \
      "scripts/prepare_english.sh, or carry data/english" "$extra" gpt2_fig8
  fi
  if begin fig16_gpt2_qkv "Figure 16, scaled down: q, k and v as three tensors or one, GPT-2 124M, AdamW, CELO2, VeLO" \
       "logdir=train/gpt2_fig16" "steps=$gpt2_steps" "seeds=$seeds" "corpus=$corpus"; then
    train gpt2 scripts/compare/pylo_gpt2_fig16.cfg "$gpt2_steps" "data/$corpus/${corpus}_train_*.bin" \
      "scripts/prepare_english.sh, or carry data/english" "$extra" gpt2_fig16
  fi

  # The full configurations, for a user with the data, the weights and the GPUs; each run here on a few
  # steps with synthetic images or the KJV shards in place of ImageNet and FineWeb.
  if begin configs_smoke "Table 4, Figures 8, 10-11 and 16 as a user runs them: the full configurations, each tested on 3 steps"; then
    vit_cfg="-e vit-b16 --image 224 --channels 3 --classes 1000 --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225"
    vit_cfg+=" --scale-min 0.08 --crop-pct 0.875 --mixup 0.8 --cutmix 1.0 --randaugment rand-m9-mstd0.5-inc1"
    vit_cfg+=" -b 128 -d 4096 -k cosine"
    vit_data="-i 'imagenet/imagenet1k-train-{0000..1023}.tar' -j 'imagenet/imagenet1k-validation-{0000..0063}.tar'"
    vit_data+=" -x 150000 -v 5000 --ckpt-dir ckpt -n 5000"
    gpt2_cfg="-e d24 -b 16 -t 1024 -d 524288 -k cosine"
    gpt2_data="-i 'data/fineweb_edu/edu_fineweb_train_*.bin' -j 'data/fineweb_edu/edu_fineweb_val_*.bin'"
    gpt2_data+=" -x 10000 -v 250 --ckpt-dir ckpt -n 1000"
    read -r -a vit <<<"$vit_cfg"
    read -r -a gpt2 <<<"$gpt2_cfg"
    # config NAME COMMAND PROGRAM ARGS...: the configuration as a user runs it (COMMAND, noted with optimizer o's
    # weights), then PROGRAM ARGS here for 3 steps, with random meta-weights (w) where the published are missing.
    config() {
      note "{\"config\":{\"name\":$(json_str "$1"),\"optimizer\":\"$o\",\"command\":$(json_str "$2"),\"weights\":$(json_str "$wtext")}}"
      shift 2
      run "$@" "${w[@]}"
    }
    for o in $smoke_opts; do
      w=() wtext="none needed"
      [ -z "$(weights_of "$o")" ] || wtext="published (weights/)"
      have_weights "$o" || { w=(--lopt-random 1); wtext="random, of the published shapes (weights/ has none here)"; }
      config table4_vit_b16_imagenet "mpirun -np 8 ./train_vit -o $o $vit_cfg $vit_data --log vit_b16_$o.jsonl" \
        "$train_vit" -o "$o" "${vit[@]}" --synthetic 1 -x 3 -v 0
      config fig8_gpt2_355m_fineweb "./train_gpt2 -o $o $gpt2_cfg $gpt2_data --log gpt2_355m_$o.jsonl" \
        "$train_gpt2" -o "$o" "${gpt2[@]}" -x 3 -v 0 -s 0
      # Figures 10-11 (curves across sizes): Figure 8's recipe at 124M and 774M; Figure 16: q, k, v as one tensor.
      for size in d12:124m d36:774m; do
        cfg="-e ${size%%:*} ${gpt2_cfg#-e d24 }"
        read -r -a a <<<"$cfg"
        config "fig10_gpt2_${size#*:}_fineweb" "./train_gpt2 -o $o $cfg $gpt2_data --log gpt2_${size#*:}_$o.jsonl" \
          "$train_gpt2" -o "$o" "${a[@]}" -x 3 -v 0 -s 0
      done
      config fig16_gpt2_355m_fused "./train_gpt2 -o $o $gpt2_cfg --qkv fused $gpt2_data --log gpt2_355m_fused_$o.jsonl" \
        "$train_gpt2" -o "$o" "${gpt2[@]}" --qkv fused -x 3 -v 0 -s 0
    done
    finish
  fi
else
  if begin table3_data_parallel "Table 3: GPT-2 124M at 4 x 1024 tokens per GPU on $world GPUs, all-reduce and sharded" \
       "world=$world"; then
    if [ $dry = 0 ] && [ "${gpus:-0}" -lt "$world" ]; then
      skip "this machine lists ${gpus:-0} GPUs, fewer than WORLD=$world"
    else
      dp_opts=$([ $quick = 1 ] && echo "adamw small_fc_lopt:fast velo" || echo "adamw muon small_fc_lopt:fast velo")
      for o in $dp_opts; do
        run --limit $((limit * 4)) env OUTFILE="$log_dir/dp_${o//:/_}.jsonl" PARTS=table3 QKV=separate OPTIMIZERS="$o" \
          WORLD="$world" STEPS=$bench_steps TIMEOUT="$limit" TRAIN_GPT2="$train_gpt2" REPORT="$report" \
          scripts/bench_data_parallel.sh
        [ $dry = 1 ] || { cat "$log_dir/dp_${o//:/_}.jsonl" >>"$part" 2>/dev/null; rm -f "$log_dir/dp_${o//:/_}.jsonl"; }
      done
      finish
    fi
  fi
fi

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

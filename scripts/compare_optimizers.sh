#!/usr/bin/env bash
# Trains every configuration of scripts/compare/TASK.cfg once per seed, one after another, with the same
# steps (so the same tokens or images) each, for an optimizer comparison on a GPU machine:
#
#   scripts/compare_optimizers.sh gpt2|vit [--steps N] [--seeds "1337 42"] [--only LABEL,LABEL]
#                                          [--extra "FLAGS"] [--no-build] [--dry-run]
#                                          [--cfg FILE] [--logdir DIR] [--timeout SECONDS] [--resume]
#
#   --steps N     optimizer steps per run (gpt2: 800; vit: 9400, train_vit's default)
#   --seeds LIST  seeds, space-separated (default "1337"); every configuration runs once per seed
#   --only LIST   comma-separated labels of the .cfg (the rest are skipped): splits the work into calls
#   --extra FLAGS appended to every run's flags (split like the .cfg; later flags win)
#   --no-build    skip `make train_gpt2` / `make train_vit`
#   --dry-run     print the commands, run nothing (no build, no data needed)
#   --cfg FILE    the configurations (default scripts/compare/TASK.cfg)
#   --logdir DIR  where the logs go (default $OUT/compare/TASK)
#   --timeout S   each run stopped after S seconds (`timeout`; status "timeout")
#   --resume      skip the runs whose log already ends with status ok or diverged and was written with the
#                 same arguments (another corpus, --steps or flags: the run starts over)
#   (environment: TRAIN_GPT2 / TRAIN_VIT run another build of the program, and nothing is built)
#
# Each run, in the repository root:
#   ./PROGRAM -x STEPS [-v STEPS/30] COMMON -o OPTIMIZER FLAGS --seed SEED --log LOG EXTRA
# (COMMON, OPTIMIZER, FLAGS from the .cfg; -v only where COMMON has none). LOG is
# $OUT/compare/TASK/LABEL_sSEED.jsonl (OUT: default .out, relative to the repository root), with the
# console output beside it as .txt; the script writes a {"compare_run": ...} line (label, optimizer, flags,
# seed, steps, the program's arguments) before the program's lines and a {"compare_end": ...} line (status,
# exit code, wall seconds) after them, for `./report compare` (tools/report/). Status: ok; diverged (the
# program stopped on a non-finite loss: a result of the sweep, not a failure); failed; timeout (--timeout
# ended it); stopped (a signal ended it early; the runs after it are skipped). Ends with one summary line per
# run; exit status 1 when any run failed or was stopped or skipped, 2 for a mistake in the arguments, the
# .cfg or the set-up.
set -uo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
die() { echo "compare_optimizers: $*" >&2; exit 2; }

task=${1:-}
case "$task" in
  gpt2 | vit) shift ;;
  -h | --help | "") usage ;;
  *) die "TASK must be gpt2 or vit (got '$task'); see --help." ;;
esac
steps="" seeds="1337" only="" extra="" build=1 dry=0 cfg="" logdir="" timeout_s="" resume=0
while [ $# -gt 0 ]; do
  case "$1" in
    --steps | --seeds | --only | --extra | --cfg | --logdir | --timeout) [ $# -ge 2 ] || die "$1 needs a value."
      case "$1" in
        --steps) steps=$2 ;; --seeds) seeds=$2 ;; --only) only=$2 ;; --extra) extra=$2 ;;
        --cfg) cfg=$2 ;; --logdir) logdir=$2 ;; --timeout) timeout_s=$2 ;;
      esac
      shift 2 ;;
    --no-build) build=0; shift ;;
    --dry-run) dry=1; shift ;;
    --resume) resume=1; shift ;;
    -h | --help) usage ;;
    *) die "unknown option '$1'; see --help." ;;
  esac
done

# Everything, a relative OUT, --cfg or --logdir too, is taken from the repository root, where the programs
# are built.
cd "$(dirname "$0")/.." || exit 2
logdir=${logdir:-"${OUT:-.out}/compare/$task"}
cfg=${cfg:-"scripts/compare/$task.cfg"}
[ -z "$timeout_s" ] || [[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a whole number of seconds (got '$timeout_s')."
limit=()
[ -z "$timeout_s" ] || limit=(timeout -k 10 "$timeout_s")
if [ "$task" = gpt2 ]; then
  prog=train_gpt2 default_steps=800
  data_glob='data/english/english_train_*.bin'
  data_msg="no training shards match $data_glob; prepare the English corpus first (scripts/prepare_english.sh)."
else
  prog=train_vit default_steps=9400  # train_vit's default: 40 epochs of Fashion-MNIST at batch 256
  data_glob='data/fashion_mnist/fashion-mnist-train-*.tar'
  data_msg="data/fashion_mnist has no training shards; prepare them first with scripts/prepare_fashion_mnist.sh."
fi
steps=${steps:-$default_steps}
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive whole number (got '$steps')."
read -r -a seed_list <<<"$seeds"
[ ${#seed_list[@]} -gt 0 ] || die "--seeds needs at least one seed."
for s in "${seed_list[@]}"; do [[ "$s" =~ ^[0-9]+$ ]] || die "seeds must be whole numbers (got '$s')."; done

# split_words NAME STRING: the array NAME gets the words of STRING, split with shell quoting ('a b', "c") but no
# globbing or substitution (xargs splits; it also refuses an unmatched quote).
# shellcheck disable=SC2034  # `into` names the caller's array
split_words() {
  local -n into=$1
  local w
  w=$(printf '%s\n' "$2" | xargs -r printf '%s\n' 2>/dev/null) ||
    die "cannot split the flags '$2' (an unmatched quote?)."
  into=()
  [ -z "$w" ] || mapfile -t into <<<"$w"
}
# A word as a shell would need it typed: bare where safe, else in single quotes.
quote() {
  if [[ "$1" =~ ^[A-Za-z0-9_./=,:+@%-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}

[ -f "$cfg" ] || die "$cfg is missing."
common=() labels=() opts=() flagsets=()
while IFS= read -r line || [ -n "$line" ]; do
  line=${line%%#*}
  read -r label optim rest <<<"$line"
  [ -n "${label:-}" ] || continue
  if [ "$label" = common ]; then
    split_words common "${optim:-} ${rest:-}"
    continue
  fi
  [[ "$label" =~ ^[A-Za-z0-9._+-]+$ ]] || die "$cfg: label '$label' may hold only letters, digits and . _ + -."
  [[ "${optim:-}" =~ ^[a-z0-9_]+$ ]] || die "$cfg: label '$label' needs an optimizer name after it."
  labels+=("$label") opts+=("$optim") flagsets+=("$rest")
done <"$cfg"
[ ${#labels[@]} -gt 0 ] || die "$cfg lists no configuration."
split_words extra_words "$extra"

# --only: every name must be a label of the .cfg (a typo would otherwise skip a run silently).
selected=()
if [ -n "$only" ]; then
  IFS=, read -r -a want <<<"$only"
  for w in "${want[@]}"; do
    found=0
    for i in "${!labels[@]}"; do [ "${labels[$i]}" = "$w" ] && { selected+=("$i"); found=1; }; done
    [ $found = 1 ] || die "--only: no label '$w' in $cfg (labels: ${labels[*]})."
  done
else
  selected=("${!labels[@]}")
fi

# About 30 validation points a run, unless the .cfg's common flags set their own cadence.
val=()
[[ " ${common[*]} " =~ \ (-v|--val-every)[\ =] ]] || val=(-v $(((steps + 29) / 30)))

# The default corpus must be there, unless --extra names other training data (-i): the program checks that.
if ! compgen -G "$data_glob" >/dev/null && [[ " ${extra_words[*]} " != *" -i "* ]]; then
  [ $dry = 1 ] || die "$data_msg"
  echo "# note: $data_msg" >&2
fi
# TRAIN_GPT2 / TRAIN_VIT name another build of the program (then nothing is built).
exe=./$prog
if [ $prog = train_gpt2 ]; then exe=${TRAIN_GPT2:-$exe}; else exe=${TRAIN_VIT:-$exe}; fi
[ "$exe" = "./$prog" ] || build=0
if [ $build = 1 ]; then
  if [ $dry = 1 ]; then
    echo "make -j$(nproc) $prog"
  else
    make -j"$(nproc)" "$prog" >/dev/null || die "make $prog failed (its errors are above)."
  fi
fi
[ $dry = 1 ] || mkdir -p "$logdir" || die "cannot create $logdir."

now() { date +%s.%N; }
json_text() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '%s' "${s//$'\t'/ }"; }  # a string inside JSON quotes
row() { printf '%-16s %6s  %-8s %8s' "$@"; }
# Ctrl-C or a TERM reaches the program too, which finishes its step and exits; the script then records
# the run as stopped and starts no other (tee ignores both signals, so the console copy stays whole).
signalled=0
trap 'signalled=1' INT TERM
summary=() bad=0
for i in "${selected[@]}"; do
  for seed in "${seed_list[@]}"; do
    label=${labels[$i]} base="$logdir/${labels[$i]}_s$seed"
    split_words cfg_words "${flagsets[$i]}"
    run_args=(-x "$steps" "${val[@]}" "${common[@]}" -o "${opts[$i]}" "${cfg_words[@]}" --seed "$seed")
    cmd=("$exe" "${run_args[@]}" --log "$base.jsonl" "${extra_words[@]}")
    printed=$(for w in "${cmd[@]}"; do quote "$w"; printf ' '; done)
    if [ $dry = 1 ]; then
      echo "${printed% }"
      continue
    fi
    # The run's arguments (the program's and the log's paths aside) go into its log: --resume keeps a log
    # only of the same.
    args=$(for w in "${run_args[@]}" "${extra_words[@]}"; do quote "$w"; printf ' '; done)
    args=$(json_text "${args% }")
    if [ $resume = 1 ] && [ -f "$base.jsonl" ] &&
       tail -n 1 "$base.jsonl" | grep -qE '^\{"compare_end":\{"status":"(ok|diverged)"'; then
      if head -n 1 "$base.jsonl" | grep -qF "\"args\":\"$args\""; then
        summary+=("$(row "$label" "$seed" done -)")
        continue
      fi
      echo "compare_optimizers: $base.jsonl is the log of other arguments (data, steps or flags); it runs again." >&2
    fi
    if [ $signalled = 1 ]; then
      summary+=("$(row "$label" "$seed" skipped -)") bad=1
      continue
    fi
    echo "=== $label seed $seed: ${printed% }"
    # The program appends to its log: a rerun starts from an empty one.
    printf '{"compare_run":{"task":"%s","label":"%s","optimizer":"%s","flags":"%s","seed":%s,"steps":%s,' \
      "$task" "$label" "${opts[$i]}" "$(json_text "${flagsets[$i]}")" "$seed" "$steps" >"$base.jsonl"
    printf '"args":"%s"}}\n' "$args" >>"$base.jsonl"
    t0=$(now)
    "${limit[@]}" "${cmd[@]}" 2>&1 | (trap '' INT TERM; exec tee "$base.txt")
    rc=${PIPESTATUS[0]}
    wall=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    if [ -n "$timeout_s" ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ $signalled = 0 ]; then
      status=timeout  # the time limit stopped it (the program saw a TERM, or a KILL 10 s later)
    elif [ $signalled = 1 ] || grep -q '^signal received' "$base.txt"; then
      status=stopped signalled=1  # exit status 0, but the run is cut short
    elif [ "$rc" = 0 ]; then
      status=ok
    elif grep -q 'the loss became' "$base.txt"; then
      status=diverged  # the programs' sentence for a non-finite loss: a result of the sweep
    else
      status=failed
    fi
    [ $status = ok ] || [ $status = diverged ] || bad=1
    printf '{"compare_end":{"status":"%s","exit":%s,"wall_s":%s}}\n' "$status" "$rc" "$wall" >>"$base.jsonl"
    summary+=("$(row "$label" "$seed" "$status" "$wall")")
  done
done
[ $dry = 1 ] && exit 0

echo
echo "$(row label seed status seconds)   (logs: $logdir)"
printf '%s\n' "${summary[@]}"
[ $signalled = 0 ] || echo "compare_optimizers: stopped by a signal; the runs after it were skipped." >&2
exit $bad

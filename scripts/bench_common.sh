# Sourced by scripts/bench_gpt2.sh and scripts/bench_vit.sh: the environment they share (STEPS, WARMUP, EXTRA,
# OUTFILE, LAUNCH, REPORT, TIMEOUT, PROFILE; their headers say what each means), its checks, and one
# configuration's run summarised by `./report median` into one JSON line.

# bench_setup NAME PROGRAM DEFAULT_STEPS ARGS...: --help (among the script's ARGS) prints the calling script's
# header; OUTFILE is made absolute and its folder created; then, from the repository root, the settings are
# checked (exit status 2 with a sentence) and steps, warmup, extra, extra_args, launch_str, launch, exe, program
# (train_gpt2 or train_vit), report, limit, profile, gpu and tmp (a temporary folder, removed on exit) set.
bench_setup() {
  bench=$1 exe=$2 program=${1/bench_/train_}
  local default_steps=$3 a n
  shift 3
  for a in "$@"; do
    case "$a" in
      -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
    esac
  done
  outfile=${OUTFILE:-}
  if [ -n "$outfile" ]; then
    case "$outfile" in /*) ;; *) outfile="$PWD/$outfile" ;; esac
    mkdir -p "$(dirname "$outfile")"
  fi
  cd "$(dirname "$0")/.." || exit 1
  steps=${STEPS:-$default_steps} warmup=${WARMUP:-3} extra=${EXTRA:-} launch_str=${LAUNCH:-}
  read -r -a extra_args <<<"$extra"
  read -r -a launch <<<"$launch_str"
  for n in "$steps" "$warmup"; do
    [[ "$n" =~ ^[0-9]+$ ]] || bench_refuse "STEPS and WARMUP must be whole numbers (got '$n')."
  done
  [ "$steps" -gt "$warmup" ] ||
    bench_refuse "STEPS ($steps) must be larger than WARMUP ($warmup) to leave steps to time."
  [ -x "$exe" ] || bench_refuse "$exe not found; build it with 'make $program' (or set ${program^^})."
  report=${REPORT:-./report}
  [ -x "$report" ] || bench_refuse "$report not found; build it with 'make report' (or set REPORT)."
  local timeout_s=${TIMEOUT:-}
  [ -z "$timeout_s" ] || [[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] ||
    bench_refuse "TIMEOUT must be a whole number of seconds (got '$timeout_s')."
  limit=() profile=()
  [ -z "$timeout_s" ] || limit=(timeout -k 10 "$timeout_s")
  [ "${PROFILE:-0}" = 1 ] && profile=(env GPT2_PROFILE=1)
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$bench.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
}

bench_refuse() { echo "$bench: $*" >&2; exit 2; }

# bench_run LOG FALLBACK MEDIAN_ARGS... -- CMD...: runs CMD (a fresh --nccl-id-file under a
# launcher, then EXTRA's flags; under TIMEOUT and PROFILE) and prints, and appends to OUTFILE, its line from
# `./report median` (MEDIAN_ARGS: the configuration's fields), or FALLBACK (a JSON object's first fields) with
# an error when the report tool itself fails.
bench_run() {
  local log=$1 fallback=$2 median=() cmd line rc
  shift 2
  while [ "$1" != -- ]; do median+=("$1"); shift; done
  shift
  rm -f "$log"
  cmd=("${launch[@]}" "$@")
  if [ ${#launch[@]} -gt 0 ]; then
    rm -f "$tmp/nccl_id"
    cmd+=(--nccl-id-file "$tmp/nccl_id")
  fi
  cmd+=("${extra_args[@]}")
  echo "$bench: ${cmd[*]}" >&2
  "${limit[@]}" "${profile[@]}" "${cmd[@]}" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  line=$("$report" median --program "$program" --log "$log" --stdout "$tmp/stdout" --stderr "$tmp/stderr" \
    --exit "$rc" "${median[@]}" --warmup "$warmup" --gpu "$gpu" --extra "$extra" --launch "$launch_str")
  # The report tool itself failed: still one line per configuration.
  [ -n "$line" ] || line="{$fallback,\"error\":\"$bench could not summarise the run (exit status $rc)\"}"
  echo "$line"
  if [ -n "$outfile" ]; then echo "$line" >>"$outfile"; fi
}

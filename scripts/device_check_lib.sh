# Sourced by the trainer checks on the GPU machine (device_train_check.sh, device_vit_check.sh): a scratch
# folder for checkpoints and logs (removed at exit, also the programs' TMPDIR, which must end empty), and
# the helpers that run a trainer and compare its logs.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work/tmp"  # --lopt-random's weights go here, and must be gone after each run
mkdir -p "$TMPDIR"

fail() {
  echo "$*"
  exit 1
}
# The loss lines of a JSON-lines log without the timing fields: what two runs must agree on.
losses() { grep '"loss"' "$1" | sed 's/,"ms".*//'; }
# expect_losses LOG N WHAT: the log has exactly N loss lines.
expect_losses() {
  local n
  n=$( (grep -c '"loss"' "$1" 2>/dev/null) || true)
  [ "${n:-0}" -eq "$2" ] || fail "$3: $1 has ${n:-0} loss lines instead of $2"
}
# run_trainer PROGRAM WHAT ARGS...: ./PROGRAM with the given flags, output to $work; stops the script if it fails.
run_trainer() {
  local program=$1 what=$2
  shift 2
  "./$program" "$@" > "$work/stdout" 2> "$work/stderr" ||
    fail "$what: $program failed: $(tail -n 1 "$work/stderr")"
}

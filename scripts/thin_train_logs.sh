#!/usr/bin/env bash
# Thins training logs in place for committing them (the full pass's 9,400-step ViT logs are 1.5 MB each): keeps
# every line that is not a training step's (validations, compare_optimizers.sh's compare_run / compare_end,
# headers), every Nth step's line, the last step's, and every step whose loss is not a number. `./report
# compare` and `./report pylo` read the same validations, statuses and divergences from the thinned log.
#
#   scripts/thin_train_logs.sh N FILE...
# Exit status: 0, 1 when a file could not be read or replaced (the others are thinned), 2 for bad arguments.
set -uo pipefail
n=${1:-}
[[ "$n" =~ ^[1-9][0-9]*$ ]] && [ $# -ge 2 ] ||
  { echo "thin_train_logs: usage: scripts/thin_train_logs.sh N FILE... (N: keep every Nth step, N >= 1)" >&2; exit 2; }
shift
rc=0
for f in "$@"; do
  tmp="$f.thin.$$"
  # Two passes over the file: the first finds the last step line, the second keeps what is listed above.
  if awk -v n="$n" '
    function step_line() { return $0 ~ /^\{"step":[0-9]+,"loss":/ }
    NR == FNR { if (step_line()) last = FNR; next }
    step_line() {
      s = $0; sub(/^\{"step":/, "", s); sub(/,.*/, "", s)
      v = $0; sub(/^\{"step":[0-9]+,"loss":/, "", v)
      if (s % n == 0 || FNR == last || v !~ /^-?[0-9]/) print
      next
    }
    { print }' "$f" "$f" >"$tmp" && mv "$tmp" "$f"; then
    :
  else
    rm -f "$tmp"
    echo "thin_train_logs: could not thin '$f' (unreadable, or its folder is not writable); it is left as it was." >&2
    rc=1
  fi
done
exit $rc

#!/usr/bin/env bash
# The layering rule of docs/architecture.md, checked on the code: every #include "folder/..." points to a
# lower level or to the file's own folder. Levels: common 0; core, kernels, data 1; optim, models 2;
# train 3; the programs, bench/, tools/ and tests/ above them all (not checked). Prints each arrow that
# breaks the rule and exits 1; run from anywhere (make test-cpu runs it).
set -u
cd "$(dirname "$0")/.." || exit 1

level() {
  case $1 in
    common) echo 0 ;;
    core | kernels | data) echo 1 ;;
    optim | models) echo 2 ;;
    train) echo 3 ;;
    *) echo 9 ;;
  esac
}
# Known exceptions, "file -> included header", each with the work that removes it.
allowed=()

bad=0
for dir in common core kernels data optim models train; do
  mine=$(level "$dir")
  while IFS=: read -r file header; do
    target=${header%%/*}
    [ "$target" = "$dir" ] && continue
    [ "$(level "$target")" -lt "$mine" ] && continue
    arrow="$file -> $header"
    if printf '%s\n' "${allowed[@]}" | grep -qxF "$arrow"; then
      echo "layers: known exception: $arrow"
      continue
    fi
    echo "layers: $arrow points up or sideways (level $mine to $(level "$target")); see docs/architecture.md"
    bad=1
  done < <(grep -rHoE '^#include "[a-z_]+/[^"]+"' "$dir" | sed -E 's/:#include "/:/; s/"$//')
done
[ $bad = 0 ] && echo "layers: every include points down (docs/architecture.md)"
exit $bad

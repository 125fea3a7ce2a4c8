#!/usr/bin/env bash
# --help of each program (CPU suite; needs no GPU): it exits 0, every section (the blocks between blank
# lines) fits one screen (at most 40 lines, a line over 120 columns counting as two), and the programs
# that take -o list every optimizer with one line on what it is. Prints one line per program.
#
#   make test-cpu                  (builds the programs first, then runs this)
#   bash tests/cli/test_help.sh    (programs in the repository root; BIN_DIR=... to use others)
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN_DIR=${BIN_DIR:-.}
screen=40
optimizers="adamw adafactor muon velo small_fc_lopt celo2 elo elo_celo2"
fail=0

for prog in train_gpt2 train_vit bench_optim bench_gpt2_ops tokenize; do
  why=""
  if ! help=$("$BIN_DIR/$prog" --help 2>&1); then
    why="--help did not exit 0"
  else
    # The longest section, in screen lines.
    longest=$(printf '%s\n' "$help" | awk -v w=120 '
      /^$/ { n = 0; first = ""; next }
      { if (first == "") first = $0; n += int((length($0) + w - 1) / w) }
      n > max { max = n; title = first }
      END { print max + 0 " (" title ")" }')
    [ "${longest%% *}" -gt $screen ] && why="a section is longer than $screen lines: $longest"
    case $prog in train_gpt2 | train_vit | bench_optim)
      for o in $optimizers; do
        # "  name   what it is" in the optimizers section
        printf '%s\n' "$help" | sed -n '/^optimizers (-o):$/,/^$/p' | grep -qE "^  $o +[A-Za-z]" ||
          why="${why:+$why; }optimizer $o is not listed with a line on what it is"
      done ;;
    esac
  fi
  if [ -n "$why" ]; then echo "FAIL $prog --help: $why"; fail=1; else echo "PASS $prog --help"; fi
done
exit $fail

#!/usr/bin/env bash
# Data-safety tests of the programs and tools (CPU suite; needs no GPU), issue 25's cases:
#   - an image stream where nothing decodes stops with a sentence, quickly, without a flood of warnings;
#   - thread counts are bounded; the tools turn every error into one sentence (no abort, no core dump);
#   - make_imagenet_like refuses bad flags before creating anything and leaves no staging folder after an
#     error;
#   - tokenize replaces a dataset all or nothing (a folder in the way, SIGINT, SIGTERM, SIGKILL), refuses
#     empty input, and encodes a 50 MB "word" in bounded memory and time.
# Every error case checks: a non-zero exit that is not a signal or a hang, and a last stderr line
# "<program>: <sentence ending in '.'>" holding the expected text. Everything is written under one scratch
# folder ($TMPDIR too), removed at the end; nothing may be left in it by the programs.
#
#   bash tests/cli/test_data_safety.sh    (programs in the repository root and build/; BIN_DIR=... for others)
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN_DIR=${BIN_DIR:-.}
BUILD_DIR=${BUILD_DIR:-$BIN_DIR/build}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_data_safety.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp/tmpdir"
mkdir "$TMPDIR"
pass=0 fail=0 skip=0

ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() {
  echo "FAIL $1: $2" | cut -c 1-300
  [ -s "$tmp/stderr" ] && head -n 5 "$tmp/stderr" | cut -c 1-300 | sed 's/^/       | /'
  fail=$((fail + 1))
}
skip_() { echo "SKIP $1: $2"; skip=$((skip + 1)); }

# run LIMIT EXE ARGS...: runs with a time limit; sets rc, took, lines, last (the last stderr line).
run() {
  local limit=$1
  shift
  local start=$SECONDS
  timeout -k 5 "$limit" "$@" </dev/null >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  took=$((SECONDS - start))
  lines=$(awk 'END { print NR }' "$tmp/stderr")
  last=$(tail -n 1 "$tmp/stderr")
}

# sentence NAME PROGRAM WANT MAX_LINES: the checks of an error case on what run() left.
sentence() {
  local name=$1 prog=$2 want=$3 max_lines=$4
  if [ "$rc" -eq 0 ]; then bad "$name" "exit status 0 (the error went unnoticed)"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then bad "$name" "still running after ${took}s (killed)"
  elif [ "$rc" -ge 128 ]; then bad "$name" "crashed with exit status $rc (signal $((rc - 128)))"
  elif [ "$lines" -gt "$max_lines" ]; then bad "$name" "stderr has $lines lines (at most $max_lines)"
  elif [[ "$last" != "$prog: "*. ]]; then bad "$name" "the last stderr line is not '$prog: <sentence>.'"
  elif [[ "$last" != *"$want"* ]]; then bad "$name" "stderr does not end with a line containing '$want'"
  else ok "$name"; fi
}

# case_ NAME WANT PROGRAM ARGS...: PROGRAM (in BIN_DIR or BUILD_DIR) must fail with one sentence.
case_() {
  local name=$1 want=$2 prog=$3
  shift 3
  local exe="$BUILD_DIR/$prog"
  [ -x "$exe" ] || exe="$BIN_DIR/$prog"
  if [ ! -x "$exe" ]; then bad "$name" "$prog is missing; build it first"; return; fi
  run "${LIMIT:-120}" "$exe" "$@"
  sentence "$name" "$prog" "$want" 1
}

# --- item 1: a stream with nothing decodable stops, quickly, with few warnings ---
mkdir -p "$tmp/badimg"
for i in $(seq -w 1 20); do
  printf 'not a JPEG %s' "$i" >"$tmp/badimg/s$i.jpg"
  echo $((10#$i % 10)) >"$tmp/badimg/s$i.cls"
done
(cd "$tmp/badimg" && tar cf "$tmp/badimg.tar" $(for f in s*.jpg; do echo "$f" "${f%.jpg}.cls"; done))
if [ -x "$BUILD_DIR/bench_image_loader" ]; then
  run 60 "$BUILD_DIR/bench_image_loader" -i "$tmp/badimg.tar" --threads 1 -b 4 --image 32 --classes 10 -x 3
  sentence loader_nothing_decodes bench_image_loader "no image decodes: the last" 12
  [ "$rc" -ne 124 ] && [ "$took" -gt 20 ] && bad loader_nothing_decodes_quickly "took ${took}s"
else
  bad loader_nothing_decodes "$BUILD_DIR/bench_image_loader is missing; build it first"
fi
case_ loader_threads_over_limit  "from 0 to 256"  bench_image_loader -i "$tmp/badimg.tar" --threads 300
case_ loader_threads_negative    "from 0 to 256"  bench_image_loader -i "$tmp/badimg.tar" --threads 4,-3
case_ loader_out_of_memory       "out of memory"  bench_image_loader -i "$tmp/badimg.tar" -b 2000000000 --image 32

# --- item 8: the tools turn every error into one sentence ---
mkdir -p "$tmp/replay"
printf 'steps 1\ntensor w hidden 1 -1\n' >"$tmp/replay/manifest.txt"
case_ ref_replay_bad_manifest     "is not 'tensor NAME ROLE DECAY NDIM" ref_replay -d "$tmp/replay"
case_ optim_replay_bad_manifest   "is not 'tensor NAME ROLE DECAY NDIM" optim_replay --ref 1 -d "$tmp/replay"
printf 'steps 1\ntensor w hidden 1 2 4 4\n' >"$tmp/replay/manifest.txt"
head -c 10 /dev/zero >"$tmp/replay/init.bin"
case_ ref_replay_short_file       "holds 10 bytes, but the manifest needs 16 floats" ref_replay -d "$tmp/replay"
case_ vit_dump_out_of_memory      "out of memory" vit_dump --ref-only 1 -x 2000000000 --out "$tmp/vit_dump"

# --- make_imagenet_like: flags refused before anything is created; no staging folder after an error ---
printf 'not a photo' >"$tmp/photo.jpg"
for args in "--gray-pct 200" "--png-pct -1" "--progressive-pct 101" "--threads -3" "--threads 100000" "-n 0" "-n 1000000000"; do
  # shellcheck disable=SC2086
  LIMIT=30 case_ "imagenet_like_flag_${args// /_}" "must be" make_imagenet_like -i "$tmp/photo.jpg" --out "$tmp/stage" $args
  [ -e "$tmp/stage" ] && bad "imagenet_like_flag_${args// /_}_nothing_created" "'stage' was created" && rm -rf "$tmp/stage"
done
case_ imagenet_like_bad_photo "cannot decode image" make_imagenet_like -i "$tmp/photo.jpg" --out "$tmp/stage" -n 4 --per-shard 2
if [ -e "$tmp/stage" ]; then bad imagenet_like_no_staging_left "'stage' was left after the error"; rm -rf "$tmp/stage"
else ok imagenet_like_no_staging_left; fi

# --- tokenize: all or nothing ---
tok=tokenizer/r50k_base.tiktoken
TOKENIZE=$BIN_DIR/tokenize
if [ ! -f "$tok" ]; then
  skip_ tokenize "$tok is missing (scripts/download_tokenizer.sh)"
elif [ ! -x "$TOKENIZE" ]; then
  bad tokenize "$TOKENIZE is missing; build it first (make tokenize)"
else
  # An old dataset "t": its val shard holds "OLD"-marked bytes; the check compares every old file.
  old_set() {
    rm -rf "$1" && mkdir -p "$1"
    printf 'OLD val' >"$1/t_val_000000.bin"
    printf 'OLD train 1' >"$1/t_train_000001.bin"
    printf 'OLD train 2' >"$1/t_train_000002.bin"
  }
  # The old set, whole, and nothing else but (with "staging") a staging folder.
  old_intact() {
    [ "$(cat "$1"/t_*.bin 2>/dev/null | tr -d '\n\0')" = "OLD train 1OLD train 2OLD val" ] || return 1
    [ "$(ls "$1" | wc -l)" -eq 3 ] || return 1  # (ls without -A: the staging folder is hidden)
    [ -n "${2:-}" ] || [ ! -e "$1/.t.tokenize" ]
  }

  # The issue's reproducer: a folder under a shard's name; the old val shard must survive.
  mkdir -p "$tmp/ds" && echo OLD >"$tmp/ds/t_val_000000.bin" && mkdir "$tmp/ds/t_train_000001.bin"
  printf 'In the beginning God created the heaven and the earth.' >"$tmp/small.txt"
  run 60 "$TOKENIZE" -i "$tmp/small.txt" --out "$tmp/ds" --name t --shard-tokens 5 --val-tokens 5
  sentence tokenize_folder_in_the_way tokenize "has a shard's name but is not a regular file" 1
  [ "$(cat "$tmp/ds/t_val_000000.bin" 2>/dev/null)" = OLD ] || bad tokenize_folder_in_the_way_keeps_old "the old val shard is gone"

  printf '' >"$tmp/empty.txt"
  : >"$tmp/empty.jsonl"
  old_set "$tmp/ds"
  run 60 "$TOKENIZE" -i "$tmp/empty.txt" --out "$tmp/ds" --name t
  sentence tokenize_empty_txt tokenize "the input holds no text" 1
  run 60 "$TOKENIZE" -i "$tmp/empty.jsonl" --out "$tmp/ds" --name t
  sentence tokenize_empty_jsonl tokenize "the input holds no text" 1
  old_intact "$tmp/ds" || bad tokenize_empty_keeps_old "the old set changed"

  # feed N: tokenize reads a FIFO that N lines have been written to and that stays open, so a signal
  # lands while it is part way through its input (shards already written), whatever the machine's speed.
  line='{"text": "In the beginning God created the heaven and the earth. And the earth was without form."}'
  feed() {
    rm -f "$tmp/in.jsonl" && mkfifo "$tmp/in.jsonl"
    exec 3<>"$tmp/in.jsonl"  # read-write: opening never blocks, and writing never raises SIGPIPE
    set -m  # job control: the background run does not ignore SIGINT, as it would in a script
    "$TOKENIZE" -i "$tmp/in.jsonl" --out "$tmp/ds" --name t --shard-tokens 100 >"$tmp/stdout" 2>"$tmp/stderr" 3<&- &
    pid=$!
    set +m
    yes "$line" | head -n "$1" | timeout 20 cat >&3
    sleep 1
  }
  unfeed() { echo "$line" >&3; exec 3>&-; }  # then the end of the input

  for sig in INT TERM; do
    old_set "$tmp/ds"
    feed 2000
    kill -"$sig" "$pid"
    unfeed
    wait "$pid"
    rc=$? lines=$(awk 'END { print NR }' "$tmp/stderr") last=$(tail -n 1 "$tmp/stderr") took=0
    sentence "tokenize_sig$sig" tokenize "stopped by SIG$sig" 1
    if old_intact "$tmp/ds"; then ok "tokenize_sig${sig}_keeps_old"
    else bad "tokenize_sig${sig}_keeps_old" "left: $(ls -A "$tmp/ds" | tr '\n' ' ')"; fi
  done

  # SIGKILL part way: no old file lost, and the next run leaves one complete set and no staging folder.
  # (Every moment of the commit itself: tests/cpu/test_shard_writer.cpp.)
  for n in 1 500 3000; do
    old_set "$tmp/ds"
    feed "$n"
    kill -KILL "$pid"
    unfeed
    wait "$pid" 2>/dev/null
    if old_intact "$tmp/ds" staging; then ok "tokenize_sigkill_after_${n}_lines_keeps_old"
    else bad "tokenize_sigkill_after_${n}_lines_keeps_old" "left: $(ls -A "$tmp/ds" | tr '\n' ' ')"; fi
    run 60 "$TOKENIZE" -i "$tmp/small.txt" --out "$tmp/ds" --name t
    if [ "$rc" -eq 0 ] && [ "$(ls -A "$tmp/ds")" = t_val_000000.bin ]; then ok "tokenize_sigkill_after_${n}_lines_next_run_cleans"
    else bad "tokenize_sigkill_after_${n}_lines_next_run_cleans" "exit $rc, left: $(ls -A "$tmp/ds" | tr '\n' ' ')"; fi
  done
  rm -f "$tmp/in.jsonl"

  # A 50 MB word took 3.08 GB and 67 s: now within 400 MB of address space (8x the input) and a minute.
  head -c 50000000 /dev/zero | tr '\0' a >"$tmp/word.txt"
  rm -rf "$tmp/ds" && mkdir "$tmp/ds"
  run 90 bash -c "ulimit -v 400000 && exec '$TOKENIZE' -i '$tmp/word.txt' --out '$tmp/ds' --name w"
  if [ "$rc" -eq 0 ] && [ -s "$tmp/ds/w_val_000000.bin" ]; then ok "tokenize_50mb_word (${took}s)"
  else bad tokenize_50mb_word "exit status $rc after ${took}s"; fi
  rm -f "$tmp/word.txt"
fi

left=$(ls -A "$TMPDIR")
if [ -z "$left" ]; then ok no_temporary_files_left; else bad no_temporary_files_left "left in \$TMPDIR: $left"; fi
echo "data safety: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]

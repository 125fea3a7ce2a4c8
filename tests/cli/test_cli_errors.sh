#!/usr/bin/env bash
# CLI error tests for the programs (CPU suite; needs no GPU): each case runs a program with bad input
# and checks that it
#   - exits with a non-zero status that is not a crash (not >= 128, i.e. no signal) and not a hang,
#   - writes exactly one line to stderr, "<program>: <one sentence ending in '.'>",
#   - and that the line names what is wrong (contains the expected text).
# Prints one line per case (PASS/FAIL/SKIP name) and exits non-zero if any case fails.
#
#   make test-cpu                        (builds the programs first, then runs this)
#   bash tests/cli/test_cli_errors.sh    (programs in the repository root; BIN_DIR=... to use others)
#
# Cases marked "gpu_late" are checks that train_gpt2 / bench_optim make only after their "needs a
# CUDA GPU" check. On a machine without a GPU (no working `nvidia-smi -L`) such a case also passes
# when the program stops at the GPU check instead, with a note that the real check was not reached;
# on a GPU machine it must give the proper message. Once the programs check the GPU after these
# errors, the notes disappear by themselves.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN_DIR=${BIN_DIR:-.}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_cli_errors.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then has_gpu=1; fi
# Each case gets at most this long: a missing check must not start a training run.
run_limit=${CLI_TEST_TIMEOUT:-120}
timeout_cmd=()
if command -v timeout >/dev/null 2>&1; then timeout_cmd=(timeout -k 5 "$run_limit"); fi

pass=0 fail=0 skip=0 gpu_notes=0

# case NAME KIND EXPECTED PROGRAM ARGS...
#   KIND: now (checked before any GPU check) or gpu_late (see above).
#   EXPECTED: text the stderr line must contain (fixed string).
case_() {
  local name=$1 kind=$2 want=$3 prog=$4
  shift 4
  local exe="$BIN_DIR/$prog"
  if [ ! -x "$exe" ]; then
    echo "FAIL $name: $exe is missing; build it first (make $prog)"
    fail=$((fail + 1))
    return
  fi
  local rc start=$SECONDS
  "${timeout_cmd[@]}" "$exe" "$@" </dev/null >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  local took=$((SECONDS - start))
  local lines line
  lines=$(awk 'END { print NR }' "$tmp/stderr")
  line=$(head -n 1 "$tmp/stderr")
  local why=""
  if [ "$rc" -eq 0 ]; then
    why="exit status 0 (the error went unnoticed)"
  elif { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ "$took" -ge "$run_limit" ]; then
    why="still running after ${run_limit}s (killed)"
  elif [ "$rc" -ge 128 ]; then
    why="crashed with exit status $rc (signal $((rc - 128)))"
  elif [ "$lines" -ne 1 ]; then
    why="stderr has $lines lines instead of one"
  elif [[ "$line" != "$prog: "* ]]; then
    why="stderr line does not start with '$prog: '"
  elif [[ "$line" != *. ]]; then
    why="stderr line is not one sentence ending in '.'"
  elif [[ "$line" != *"$want"* ]]; then
    if [ "$kind" = gpu_late ] && [ "$has_gpu" -eq 0 ] && [[ "$line" == *"needs a CUDA GPU"* ]]; then
      echo "PASS $name (note: no GPU here and $prog checks for one first, so the check for this error was not reached)"
      pass=$((pass + 1))
      gpu_notes=$((gpu_notes + 1))
      return
    fi
    why="stderr does not contain '$want'"
  fi
  if [ -n "$why" ]; then
    echo "FAIL $name: $why"
    echo "     command: $prog $*"
    echo "     exit status $rc; stderr:"
    head -n 5 "$tmp/stderr" | sed 's/^/       | /'
    fail=$((fail + 1))
  else
    echo "PASS $name"
    pass=$((pass + 1))
  fi
}

skip_() {
  echo "SKIP $1 ($2)"
  skip=$((skip + 1))
}

# Little-endian int32 as raw bytes.
le32() {
  local v=$1
  printf '%b' "$(printf '\\0%03o\\0%03o\\0%03o\\0%03o' $((v & 255)) $((v >> 8 & 255)) $((v >> 16 & 255)) $((v >> 24 & 255)))"
}
# write_shard FILE MAGIC VERSION HEADER_TOKENS ACTUAL_TOKENS: an llm.c token shard (data/token_shards.h:
# 256 int32 header {magic, version, N, 0...}, then N uint16 tokens), here with token id 0 throughout.
write_shard() {
  local file=$1 magic=$2 version=$3 ntok=$4 actual=$5
  mkdir -p "$(dirname "$file")"
  {
    le32 "$magic"
    le32 "$version"
    le32 "$ntok"
    head -c 1012 /dev/zero
    head -c $((2 * actual)) /dev/zero
  } >"$file"
}

write_shard "$tmp/good/data_train_000001.bin" 20240520 1 64 64
write_shard "$tmp/badmagic/data_train_000001.bin" 12345678 1 64 64
write_shard "$tmp/badversion/data_train_000001.bin" 20240520 7 64 64
write_shard "$tmp/truncated/data_train_000001.bin" 20240520 1 1000 10
write_shard "$tmp/small/data_train_000001.bin" 20240520 1 4 4
printf 'not a shard' >"$tmp/short.bin"
mkdir -p "$tmp/short" && mv "$tmp/short.bin" "$tmp/short/data_train_000001.bin"

# A tiny, fast configuration for the cases that get as far as the data (GPU machine): no validation,
# no samples, one step.
small=(-e tiny -b 1 -t 8 -x 1 -v 0 -k 0 -j "")

# --- train_gpt2: flags (checked before the GPU check) ---
case_ train_unknown_flag        now "unknown flag '--bogus'"            train_gpt2 --bogus
case_ train_unknown_short_flag  now "unknown flag '-Q'"                 train_gpt2 -Q 1
case_ train_missing_value       now "flag '-b' needs a value"           train_gpt2 -b
case_ train_nonnumeric_int      now "flag --batch needs a number, got 'abc'" train_gpt2 -b abc
case_ train_fractional_int      now "flag --batch needs an integer, got '1.5'" train_gpt2 -b 1.5
case_ train_int_overflow        now "flag --batch is out of range"      train_gpt2 -b 99999999999
case_ train_empty_long_value    now "flag --steps needs a number, got ''" train_gpt2 --steps=
case_ train_nonnumeric_double   now "flag --lr needs a number, got 'x'" train_gpt2 -l x
case_ train_bad_bool            now "flag --lopt-random needs 0 or 1"   train_gpt2 --lopt-random maybe
case_ train_batch_zero          now "-b must be >= 1"                   train_gpt2 -b 0
case_ train_seq_one             now "-t >= 2"                           train_gpt2 -t 1
case_ train_steps_zero          now "-x >= 1"                           train_gpt2 -x 0
case_ train_bad_precision       now "--precision must be bf16 or fp32 (got 'fp8')" train_gpt2 --precision fp8
case_ train_bad_dropout         now "--dropout must be at least 0 and below 1 (got 1)" train_gpt2 --dropout 1
case_ train_total_batch         now "-d (17) must be a multiple of -b * -t (16)" train_gpt2 -b 2 -t 8 -d 17

# --- train_gpt2: checks made after the GPU check today ---
case_ train_unknown_optimizer   now      "unknown optimizer 'foo'"      train_gpt2 -o foo
case_ train_unknown_model       now      "unknown GPT-2 size 'd99'"     train_gpt2 -e d99
case_ train_bad_qkv             now      "--qkv must be separate or fused (got 'bad')" train_gpt2 --qkv bad
case_ train_bad_option          now      "unknown optimizer option 'adamw.nosuch'"              train_gpt2 --set adamw.nosuch=1
case_ train_glob_no_files       now      "no files match '$tmp/none/*.bin'" train_gpt2 "${small[@]}" -i "$tmp/none/*.bin"
case_ train_val_glob_no_files   now      "no files match '$tmp/none/*val*.bin'" \
  train_gpt2 -e tiny -b 1 -t 8 -x 1 -k 0 -v 1 -i "$tmp/good/*.bin" -j "$tmp/none/*val*.bin"
case_ train_shard_bad_magic     now      "has magic 12345678 instead of 20240520" train_gpt2 "${small[@]}" -i "$tmp/badmagic/*.bin"
case_ train_shard_bad_version   now      "has version 7"                train_gpt2 "${small[@]}" -i "$tmp/badversion/*.bin"
case_ train_shard_truncated     now      "truncated or corrupt"         train_gpt2 "${small[@]}" -i "$tmp/truncated/*.bin"
case_ train_shard_short_header  now      "shorter than its 1024-byte header" train_gpt2 "${small[@]}" -i "$tmp/short/*.bin"
case_ train_shard_too_small     now      "fewer than one batch needs"   train_gpt2 "${small[@]}" -i "$tmp/small/*.bin"
case_ train_velo_no_weights     gpu_late "weights not found at '$tmp/no_weights" \
  train_gpt2 "${small[@]}" -i "$tmp/good/*.bin" -o velo --lopt-weights "$tmp/no_weights"
case_ train_resume_missing      now      "$tmp/none.bin"                train_gpt2 "${small[@]}" -i "$tmp/good/*.bin" -r "$tmp/none.bin"
printf 'not a checkpoint at all' >"$tmp/garbage.bin"
case_ train_resume_corrupt      now      "is not a checkpoint/state file" train_gpt2 "${small[@]}" -i "$tmp/good/*.bin" -r "$tmp/garbage.bin"

# --- tokenize (no GPU involved) ---
case_ tokenize_unknown_flag     now "unknown flag '--bogus'"            tokenize --bogus
case_ tokenize_missing_value    now "flag '-o' needs a value"           tokenize -i README.md -o
case_ tokenize_nonnumeric_int   now "flag --shard-tokens needs a number, got 'x'" tokenize -s x
case_ tokenize_no_args          now "give input files with -i and an output folder with -o" tokenize
case_ tokenize_shard_tokens_zero now "--shard-tokens must be >= 1"      tokenize -i README.md -o "$tmp" -s 0
case_ tokenize_bad_format       now "--format must be auto, text or jsonl" tokenize -i README.md -o "$tmp" -f xml
case_ tokenize_missing_input    now "$tmp/missing.txt"                  tokenize -i "$tmp/missing.txt" -o "$tmp"
case_ tokenize_missing_tokenizer now "cannot open the GPT-2 tokenizer '$tmp/none.tiktoken'" \
  tokenize -i README.md -o "$tmp" -k "$tmp/none.tiktoken"
case_ tokenize_bad_output_dir  now "the output folder '$tmp/no/such/dir' does not exist" tokenize -i README.md -o "$tmp/no/such/dir"
if [ -f tokenizer/r50k_base.tiktoken ]; then
  printf '{"text": "a"}\n{"txt": "b"}\n' >"$tmp/bad.jsonl"
  case_ tokenize_jsonl_no_text  now "line 2 of '$tmp/bad.jsonl' has no string field \"text\"" \
    tokenize -i "$tmp/bad.jsonl" -o "$tmp"
  printf '%s\n' '{"text": "a \ud83d\ude00 pair is fine"}' '{"text": "\uZZZZ"}' >"$tmp/escape.jsonl"
  case_ tokenize_jsonl_bad_escape now "line 2 of '$tmp/escape.jsonl' is not valid JSON (bad \u escape" \
    tokenize -i "$tmp/escape.jsonl" -o "$tmp"
  printf '%s\n' '{"text": "\ud83d alone"}' >"$tmp/surrogate.jsonl"
  case_ tokenize_jsonl_lone_surrogate now "line 1 of '$tmp/surrogate.jsonl' is not valid JSON (unpaired surrogate" \
    tokenize -i "$tmp/surrogate.jsonl" -o "$tmp"
  # An error at line 3001, after 3000 documents filled many 100-token shards: none of them may remain.
  mkdir -p "$tmp/late"
  { for _ in $(seq 3000); do echo '{"text": "a few words of text"}'; done; echo '{"text": 1}'; } >"$tmp/late.jsonl"
  case_ tokenize_error_late     now "line 3001 of '$tmp/late.jsonl' has no string field" \
    tokenize -i "$tmp/late.jsonl" -o "$tmp/late" -s 100
  if [ -z "$(ls -A "$tmp/late")" ]; then
    echo "PASS tokenize_error_leaves_no_shards"
    pass=$((pass + 1))
  else
    echo "FAIL tokenize_error_leaves_no_shards: $(ls "$tmp/late" | wc -l) file(s) left in the output folder"
    fail=$((fail + 1))
  fi
else
  skip_ tokenize_jsonl_no_text "tokenizer/r50k_base.tiktoken is missing; run scripts/download_tokenizer.sh"
fi
mkdir -p "$tmp/folder_input"
case_ tokenize_input_folder     now "'$tmp/folder_input' is a folder, not a file" tokenize -i "$tmp/folder_input" -o "$tmp"

# --- bench_optim ---
case_ bench_unknown_flag        now "unknown flag '--bogus'"            bench_optim --bogus
case_ bench_nonnumeric_int      now "flag --steps needs a number, got 'x'" bench_optim -n x
case_ bench_steps_zero          now "--steps must be >= 1"              bench_optim -n 0
case_ bench_unknown_optimizer   now      "unknown optimizer 'foo'"      bench_optim -o adamw,foo
case_ bench_bad_option          now      "unknown optimizer option 'adamw.nosuch'" bench_optim --set adamw.nosuch=1
case_ bench_unknown_model       now      "unknown model 'foo'"          bench_optim -m foo -o adamw
case_ opsbench_unknown_model    now      "unknown model 'gpt2-9m'"      bench_gpt2_ops -m gpt2-124m,gpt2-9m
case_ opsbench_bad_seq          now      "need --seq a multiple of 64"  bench_gpt2_ops -t 100

summary="cli errors: $pass passed, $fail failed, $skip skipped"
if [ "$gpu_notes" -gt 0 ]; then summary+=" ($gpu_notes passed only up to the GPU check: no GPU here)"; fi
echo "$summary"
[ "$fail" -eq 0 ]

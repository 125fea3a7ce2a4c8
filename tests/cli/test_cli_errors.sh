#!/usr/bin/env bash
# CLI error tests for the programs (CPU suite; needs no GPU): each case runs a program with bad input
# and checks that it
#   - exits with a non-zero status that is not a crash (not >= 128, i.e. no signal) and not a hang,
#   - writes exactly one line to stderr, "<program>: <one sentence ending in '.'>", naming the program
#     only in that prefix,
#   - and that the line names what is wrong (contains the expected text).
# Every check of train_gpt2 / bench_optim runs before their "needs a CUDA GPU" check, so every case
# gives its real message on any machine. The programs' temporary folders go to a scratch $TMPDIR, which
# must be empty at the end; nothing new named after a program may appear in the system's /tmp either.
# Prints one line per case (PASS/FAIL/SKIP name) and exits non-zero if any case fails.
#
#   make test-cpu                        (builds the programs first, then runs this)
#   bash tests/cli/test_cli_errors.sh    (programs in the repository root; BIN_DIR=... to use others)
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN_DIR=${BIN_DIR:-.}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_cli_errors.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Folders the programs leave in the shared temporary folder (programs that ignore $TMPDIR) are found by
# comparing its listing before and after.
shared_tmp=${TMPDIR:-/tmp}
program_tmp_entries() { (cd "$shared_tmp" && ls -d bench_optim* bench_gpt2_ops* train_gpt2* train_vit* tokenize* lopt_* 2>/dev/null | sort); }
shared_before=$(program_tmp_entries)
export TMPDIR="$tmp/tmpdir"
mkdir "$TMPDIR"

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then has_gpu=1; fi
# Each case gets at most this long: a missing check must not start a training run.
run_limit=${CLI_TEST_TIMEOUT:-120}
timeout_cmd=()
if command -v timeout >/dev/null 2>&1; then timeout_cmd=(timeout -k 5 "$run_limit"); fi

pass=0 fail=0 skip=0

# case NAME EXPECTED PROGRAM ARGS...
#   EXPECTED: text the stderr line must contain (fixed string).
case_() {
  local name=$1 want=$2 prog=$3
  shift 3
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
  elif [[ "${line#"$prog: "}" =~ (^|[^A-Za-z0-9_])$prog([^A-Za-z0-9_]|$) ]]; then  # as a word: not download_tokenizer.sh
    why="stderr line names $prog again after its prefix"
  elif [[ "$line" != *"$want"* ]]; then
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

# A tiny, fast configuration for the cases that get as far as the data: no validation, no samples,
# one step.
small=(-e tiny -b 1 -t 8 -x 1 -v 0 -s 0 -j "")
good=(-i "$tmp/good/*.bin")
printf 'a file' >"$tmp/afile"

# --- train_gpt2: flags ---
case_ train_unknown_flag          "unknown flag '--bogus'; run with --help" train_gpt2 --bogus
case_ train_unknown_short_flag    "unknown flag '-Q'"                  train_gpt2 -Q 1
case_ train_missing_value         "flag '-b' needs a value"            train_gpt2 -b
case_ train_nonnumeric_int        "flag --batch needs a number, got 'abc'" train_gpt2 -b abc
case_ train_fractional_int        "flag --batch needs an integer, got '1.5'" train_gpt2 -b 1.5
case_ train_int_overflow          "flag --batch is too large: got '99999999999' (it takes integers from -2147483648 to 2147483647)" \
  train_gpt2 -b 99999999999
case_ train_int64_overflow        "flag --steps is too large: got '1e19' (it takes integers from -9223372036854775808 to 9223372036854775807)" \
  train_gpt2 -x 1e19
case_ train_empty_long_value      "flag --steps needs a number, got ''" train_gpt2 --steps=
case_ train_nonnumeric_double     "flag --lr needs a number, got 'x'"  train_gpt2 -l x
case_ train_double_overflow       "flag --lr is too large: got '1e400'" train_gpt2 -l 1e400
case_ train_infinite_double       "flag --lr needs a finite number, got 'inf'" train_gpt2 -l inf
# 1e-320 is below the smallest normal double: accepted (as a denormal), so the next mistake is reported.
case_ train_double_underflow_ok   "-b must be >= 1"                    train_gpt2 -l 1e-320 -b 0
case_ train_bad_bool              "flag --lopt-random needs 0 or 1"    train_gpt2 --lopt-random maybe
case_ train_batch_zero            "-b must be >= 1"                    train_gpt2 -b 0
case_ train_seq_one               "-t >= 2"                            train_gpt2 -t 1
case_ train_seq_beyond_context    "-t (2048) must be at most the model's context length (1024)" train_gpt2 -t 2048
case_ train_steps_zero            "-x >= 1"                            train_gpt2 -x 0
case_ train_bad_precision         "--precision must be bf16 or fp32 (got 'fp8')" train_gpt2 --precision fp8
case_ train_bad_dropout           "--dropout must be at least 0 and below 1 (got 1)" train_gpt2 --dropout 1
case_ train_total_batch           "-d (17) must be a multiple of -b * -t (16)" train_gpt2 -b 2 -t 8 -d 17
case_ train_total_batch_negative  "-d must be 0 (one micro-batch of -b * -t tokens) or a positive multiple of -b * -t (got -8)" \
  train_gpt2 -b 1 -t 8 -d -8
case_ train_total_batch_huge      "-d (9000000000000000000) asks for more than 2147483647 micro-batches per step" \
  train_gpt2 -b 1 -t 2 -d 9000000000000000000
case_ train_clip_negative         "--clip (grad-norm clip) must be >= 0, where 0 turns clipping off (got -1)" train_gpt2 --clip -1
case_ train_overlap_clip          "--overlap steps each block during backward, but --clip 1 needs the norm of every gradient before any tensor moves; add --clip 0" train_gpt2 --overlap 1
case_ train_overlap_velo          "--overlap cannot step velo block by block: its LSTM reads the statistics of every tensor" train_gpt2 --overlap 1 --clip 0 -o velo
case_ train_overlap_muon          "--overlap cannot step muon block by block" train_gpt2 --overlap 1 --clip 0 -o muon
case_ vit_overlap_elo_clip        "--overlap cannot step elo block by block: elo.clip_grad=1" train_vit --overlap 1 --clip 0 -o elo --set elo.clip_grad=1
WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 case_ train_world_no_id_file "2 processes need --nccl-id-file" train_gpt2
WORLD_SIZE=2 RANK=2 LOCAL_RANK=0 case_ train_world_bad_rank "RANK=2 is not below WORLD_SIZE=2" train_gpt2
WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 case_ vit_world_no_id_file "2 processes need --nccl-id-file" train_vit
case_ train_shard_overlap         "--shard 1 steps each process's tensors after backward, --overlap during it; leave out one of them." \
  train_gpt2 --shard 1 --overlap 1 --clip 0
case_ vit_shard_overlap           "--shard 1 steps each process's tensors after backward" train_vit --shard 1 --overlap 1 --clip 0
WORLD_SIZE=400 RANK=0 LOCAL_RANK=0 case_ train_shard_too_many "--shard 1 gives every process whole tensors, and this model has 148 (q, k and v count as one) for 400 processes" \
  train_gpt2 --shard 1 --nccl-id-file unused_id_file
case_ train_wd_negative           "-c (weight decay) must be >= 0 (got -1)" train_gpt2 -c -1
case_ train_val_every_negative    "-v (validate every N steps) must be >= 0" train_gpt2 -v -1
case_ train_val_batches_zero      "-m (validation batches) must be >= 1 (got 0)" train_gpt2 -m 0
case_ train_sample_every_negative "-s (sample every N steps) must be >= 0" train_gpt2 -s -5
case_ train_sample_tokens_negative "-g (tokens per sample) must be >= 1 (got -5); the grad-norm clip is --clip" train_gpt2 -g -5
case_ train_ckpt_every_negative   "-n (checkpoint every N steps) must be >= 0" train_gpt2 -n -1
case_ train_warmup_negative       "-u (warmup steps) must be >= 0, or -1 for the default (got -5)" train_gpt2 -u -5
case_ train_warmup_constant       "-u 5 has no effect with -k constant" train_gpt2 -k constant -u 5
case_ train_warmup_schedule_zero  "-k warmup needs -u >= 1"            train_gpt2 -k warmup -u 0
case_ train_bad_schedule          "-k (LR schedule) must be constant, warmup, cosine or wsd (got 'linear')" train_gpt2 --schedule linear
case_ train_final_frac_range      "-q (final LR fraction) must be in [0, 1] (got 2)" train_gpt2 -q 2
case_ train_final_frac_constant   "-q 0.5 has no effect with -k constant" train_gpt2 -k constant -q 0.5

# --- train_gpt2: one vocabulary with our other programs and llm.c (train/flags.h) ---
# Our earlier letters are refused and say what replaced them; llm.c's letters that train_gpt2 does not
# take are refused, not read as something else. -k and -s swapped: -k is llm.c's LR schedule, -s its
# sample interval.
case_ train_old_sample_every      "-k (LR schedule) must be constant, warmup, cosine or wsd (got '5'); sample every N steps is -s, as in llm.c" \
  train_gpt2 -k 5
case_ train_old_sample_tokens     "unknown flag '-z' (tokens per sample is -g now, as in llm.c; llm.c's -z (ZeRO stage) is not taken here)" \
  train_gpt2 -z 1
case_ train_old_resume            "unknown flag '-r' (the checkpoint to resume from is --resume FILE now" train_gpt2 -r "$tmp/none.bin"
case_ train_old_schedule          "flag --sample-every needs a number, got 'cosine' (-s is sample every N steps now, as in llm.c; the LR schedule is -k)" \
  train_gpt2 -s cosine
case_ train_old_clip              "flag --sample-tokens needs an integer, got '0.5' (-g is tokens per sample now, llm.c's genT; the grad-norm clip is --clip)" \
  train_gpt2 -g 0.5
case_ train_old_clip_off          "-g (tokens per sample) must be >= 1 (got 0); the grad-norm clip is --clip" train_gpt2 -g 0
case_ train_llmc_resume           "unknown flag '-y' (llm.c's -y (resume from the output folder) is --resume FILE here)" train_gpt2 -y 1
case_ train_llmc_tf32             "unknown flag '-f' (llm.c's -f (TF32) is not taken here; --precision chooses bf16 or fp32)" train_gpt2 -f 1
# -g 64 is 64 tokens per sample (llm.c's genT): taken, so the next mistake is the one reported.
case_ train_sample_tokens_taken   "-b must be >= 1"                    train_gpt2 -g 64 -s 10 -b 0
case_ train_resume_long_taken     "-b must be >= 1"                    train_gpt2 --resume "$tmp/none.bin" -k wsd --clip 0.5 -b 0

# --- train_gpt2: optimizer, model, data, checkpoints ---
case_ train_unknown_optimizer     "unknown optimizer 'foo'"            train_gpt2 -o foo
case_ train_unknown_model         "unknown model 'd99'; choose d12, d24, d36, d48 (GPT-2 124M to 1558M" train_gpt2 -e d99
case_ train_vit_model             "the model 'vit-b16' cannot be used here; choose d12, d24, d36, d48" train_gpt2 -e vit-b16
# Every GPT-2 name is taken (the context-length check comes after the model's name is read).
for m in d24 355m gpt2-355m tiny; do
  case_ "train_model_name_$m"     "-t (2048) must be at most the model's context length (1024)" train_gpt2 -e "$m" -t 2048
done
case_ train_bad_qkv               "--qkv must be separate or fused (got 'bad')" train_gpt2 --qkv bad
case_ train_bad_option            "unknown optimizer option 'adamw.nosuch'; run with --help to list them" train_gpt2 --set adamw.nosuch=1
case_ train_other_optimizer_option "option muon.lr=-5 is for muon, which is not the optimizer selected (adamw); remove it or choose -o muon" \
  train_gpt2 --set muon.lr=-5
case_ train_option_range          "muon.lr must be >= 0 (got -5)"      train_gpt2 -o muon --set muon.lr=-5
case_ train_option_int_overflow   "option muon.ns_steps is too large: got '1e10'" train_gpt2 -o muon --set muon.ns_steps=1e10
case_ train_glob_no_files         "no files match '$tmp/none/*.bin'"   train_gpt2 "${small[@]}" -i "$tmp/none/*.bin"
case_ train_val_glob_no_files     "no files match '$tmp/none/*val*.bin'" \
  train_gpt2 -e tiny -b 1 -t 8 -x 1 -s 0 -v 1 "${good[@]}" -j "$tmp/none/*val*.bin"
case_ train_shard_bad_magic       "has magic 12345678 instead of 20240520" train_gpt2 "${small[@]}" -i "$tmp/badmagic/*.bin"
case_ train_shard_bad_version     "has version 7"                      train_gpt2 "${small[@]}" -i "$tmp/badversion/*.bin"
case_ train_shard_truncated       "truncated or corrupt"               train_gpt2 "${small[@]}" -i "$tmp/truncated/*.bin"
case_ train_shard_short_header    "shorter than its 1024-byte header"  train_gpt2 "${small[@]}" -i "$tmp/short/*.bin"
case_ train_shard_too_small       "fewer than one batch needs"         train_gpt2 "${small[@]}" -i "$tmp/small/*.bin"
case_ train_velo_no_weights       "VeLO weights not found at '$tmp/no_weights'" \
  train_gpt2 "${small[@]}" "${good[@]}" -o velo --lopt-weights "$tmp/no_weights"
case_ train_small_fc_no_weights   "small_fc_lopt (μLO) weights not found at '$tmp/no_weights'" \
  train_gpt2 "${small[@]}" "${good[@]}" -o small_fc_lopt --set small_fc_lopt.weights="$tmp/no_weights"
case_ train_lopt_random_and_weights "--lopt-random replaces the weights given by --lopt-weights" \
  train_gpt2 "${small[@]}" "${good[@]}" -o velo --lopt-random 1 --lopt-weights "$tmp/no_weights"
case_ train_resume_missing        "$tmp/none.bin"                      train_gpt2 "${small[@]}" "${good[@]}" --resume "$tmp/none.bin"
printf 'not a checkpoint at all' >"$tmp/garbage.bin"
case_ train_resume_corrupt        "is not a checkpoint/state file"     train_gpt2 "${small[@]}" "${good[@]}" --resume "$tmp/garbage.bin"
case_ train_ckpt_dir_is_file      "--ckpt-dir '$tmp/afile' is a file, not a folder" \
  train_gpt2 "${small[@]}" "${good[@]}" --ckpt-dir "$tmp/afile"
case_ train_ckpt_dir_under_file   "cannot create the checkpoint folder '$tmp/afile/ckpt' (Not a directory)" \
  train_gpt2 "${small[@]}" "${good[@]}" --ckpt-dir "$tmp/afile/ckpt"
if [ "$(id -u)" -ne 0 ]; then
  mkdir -p "$tmp/readonly" && chmod 555 "$tmp/readonly"
  case_ train_ckpt_dir_unwritable "cannot write in the checkpoint folder '$tmp/readonly'" \
    train_gpt2 "${small[@]}" "${good[@]}" --ckpt-dir "$tmp/readonly"
  chmod 755 "$tmp/readonly"
else
  skip_ train_ckpt_dir_unwritable "running as root, who may write anywhere"
fi
case_ train_log_unwritable        "cannot open the log file '$tmp/afile/log.jsonl'" \
  train_gpt2 "${small[@]}" "${good[@]}" --log "$tmp/afile/log.jsonl"
if [ "$has_gpu" -eq 0 ]; then
  # A valid command stops at the GPU check, whose message names the program once, and leaves no folder
  # of random weights behind (--lopt-random writes them only after the GPU check).
  case_ train_no_gpu              "needs a CUDA GPU and none is visible" \
    train_gpt2 "${small[@]}" "${good[@]}" -o velo --lopt-random 1 --ckpt-dir "$tmp/ckpt"
else
  skip_ train_no_gpu "a GPU is visible"
fi

# --- tokenize (no GPU involved) ---
case_ tokenize_unknown_flag       "unknown flag '--bogus'"             tokenize --bogus
case_ tokenize_missing_value      "flag '--out' needs a value"         tokenize -i README.md --out
case_ tokenize_nonnumeric_int     "flag --shard-tokens needs a number, got 'x'" tokenize --shard-tokens x
case_ tokenize_no_args            "give input files with -i and an output folder with --out" tokenize
case_ tokenize_shard_tokens_zero  "--shard-tokens must be in [1, 2147483647]" tokenize -i README.md --out "$tmp" --shard-tokens 0
case_ tokenize_shard_tokens_huge  "counts its tokens in 32 bits"       tokenize -i README.md --out "$tmp" --shard-tokens 2147483648
case_ tokenize_val_tokens_huge    "--val-tokens in [0, 2147483647]"    tokenize -i README.md --out "$tmp" --val-tokens 3000000000
case_ tokenize_bad_format         "--format must be auto, text or jsonl" tokenize -i README.md --out "$tmp" --format xml
case_ tokenize_missing_input      "$tmp/missing.txt"                   tokenize -i "$tmp/missing.txt" --out "$tmp"
case_ tokenize_missing_tokenizer  "cannot open the GPT-2 tokenizer '$tmp/none.tiktoken'" \
  tokenize -i README.md --out "$tmp" --tokenizer "$tmp/none.tiktoken"
case_ tokenize_bad_output_dir     "the output folder '$tmp/no/such/dir' does not exist" tokenize -i README.md --out "$tmp/no/such/dir"
# -o is the optimizer in our other programs, so tokenize's output folder is --out; the old letters say so.
case_ tokenize_old_out            "unknown flag '-o' (the output folder is --out now; -o is the optimizer in our other programs)" \
  tokenize -i README.md -o "$tmp"
case_ tokenize_old_shard_tokens   "unknown flag '-s' (it is --shard-tokens now)" tokenize -i README.md --out "$tmp" -s 100
case_ tokenize_old_tokenizer      "unknown flag '-k' (it is --tokenizer now)" tokenize -i README.md --out "$tmp" -k "$tmp/none.tiktoken"
if [ -f tokenizer/r50k_base.tiktoken ]; then
  printf '{"text": "a"}\n{"txt": "b"}\n' >"$tmp/bad.jsonl"
  case_ tokenize_jsonl_no_text    "line 2 of '$tmp/bad.jsonl' has no string field \"text\"" \
    tokenize -i "$tmp/bad.jsonl" --out "$tmp"
  printf '%s\n' '{"text": "a \ud83d\ude00 pair is fine"}' '{"text": "\uZZZZ"}' >"$tmp/escape.jsonl"
  case_ tokenize_jsonl_bad_escape "line 2 of '$tmp/escape.jsonl' is not valid JSON (bad \u escape" \
    tokenize -i "$tmp/escape.jsonl" --out "$tmp"
  printf '%s\n' '{"text": "\ud83d alone"}' >"$tmp/surrogate.jsonl"
  case_ tokenize_jsonl_lone_surrogate "line 1 of '$tmp/surrogate.jsonl' is not valid JSON (unpaired surrogate" \
    tokenize -i "$tmp/surrogate.jsonl" --out "$tmp"
  # An error at line 3001, after 3000 documents filled many 100-token shards: none of them may remain.
  mkdir -p "$tmp/late"
  { for _ in $(seq 3000); do echo '{"text": "a few words of text"}'; done; echo '{"text": 1}'; } >"$tmp/late.jsonl"
  case_ tokenize_error_late       "line 3001 of '$tmp/late.jsonl' has no string field" \
    tokenize -i "$tmp/late.jsonl" --out "$tmp/late" --shard-tokens 100
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
case_ tokenize_input_folder       "'$tmp/folder_input' is a folder, not a file" tokenize -i "$tmp/folder_input" --out "$tmp"

# --- bench_optim, bench_gpt2_ops ---
case_ bench_unknown_flag          "unknown flag '--bogus'"             bench_optim --bogus
case_ bench_nonnumeric_int        "flag --steps needs a number, got 'x'" bench_optim -x x
case_ bench_steps_too_large       "flag --steps is too large: got '1e10'" bench_optim -x 1e10
case_ bench_steps_zero            "--steps must be >= 1"               bench_optim -x 0
case_ bench_world_zero            "--world must be between 1 and 64 (got 0)" bench_optim --world 0
case_ bench_clip_negative         "--clip (grad-norm clip) must be >= 0, where 0 turns clipping off (got -1)" bench_optim --clip -1
case_ bench_no_optimizer          "--optimizer and --model each need at least one name" bench_optim -o ,
case_ bench_unknown_optimizer     "unknown optimizer 'foo'"            bench_optim -o adamw,foo
case_ bench_bad_option            "unknown optimizer option 'adamw.nosuch'" bench_optim --set adamw.nosuch=1
case_ bench_other_optimizer_option "option muon.lr=0.1 is for muon, which is not the optimizer selected (adamw, adafactor)" \
  bench_optim -o adamw,adafactor --set muon.lr=0.1
case_ bench_option_range          "adafactor.d must be >= 1 (got 0.5)" bench_optim -o adamw,adafactor --set adafactor.d=0.5
case_ bench_velo_no_weights       "VeLO weights not found at '$tmp/no_weights'" \
  bench_optim -o velo --set velo.weights="$tmp/no_weights"
case_ bench_unknown_model         "unknown model 'foo'; choose d12, d24, d36, d48 (GPT-2 124M to 1558M" bench_optim -e foo -o adamw
case_ bench_old_models            "unknown flag '-m' (the models are -e (--model) now)" bench_optim -m gpt2-124m
case_ bench_old_models_long       "unknown flag '--models' (it is --model (-e) now)" bench_optim --models gpt2-124m
case_ bench_old_opts              "unknown flag '--opts=adamw' (it is --optimizer (-o) now)" bench_optim --opts=adamw
case_ bench_old_steps             "unknown flag '-n' (the timed steps are -x (--steps) now)" bench_optim -n 10
case_ bench_old_warmup            "unknown flag '--warmup' (the untimed steps are --untimed now)" bench_optim --warmup 2
case_ bench_old_set               "unknown flag '-s' (optimizer options are --set now)" bench_optim -s adamw.lr=1
case_ opsbench_unknown_model      "unknown model 'gpt2-9m'; choose d12, d24, d36 or d48" bench_gpt2_ops -e gpt2-124m,gpt2-9m
case_ opsbench_vit_model          "the model 'vit-b16' cannot be used here; choose d12, d24, d36 or d48" bench_gpt2_ops -e vit-b16
case_ opsbench_bad_seq            "need --seq a multiple of 64"        bench_gpt2_ops -t 100
case_ opsbench_old_models         "unknown flag '-m' (the models are -e (--model) now)" bench_gpt2_ops -m gpt2-124m
case_ opsbench_old_tune           "unknown flag '-k' (it is --tune now)" bench_gpt2_ops -k 8
# The same model names in every program: the benchmarks read their names before their other checks.
case_ bench_model_names           "--steps must be >= 1"               bench_optim -e d12,124m,gpt2-124m,d48,tiny,vit-b16 -x 0
case_ opsbench_model_names        "need --seq a multiple of 64"        bench_gpt2_ops -e d12,124m:8,gpt2-124m,1558m:2 -t 100
if [ "$has_gpu" -eq 0 ]; then
  case_ bench_no_gpu              "needs a CUDA GPU and none is visible" bench_optim -o small_fc_lopt,velo -e gpt2-124m
  case_ opsbench_no_gpu           "needs a CUDA GPU and none is visible" bench_gpt2_ops -e d12
else
  skip_ bench_no_gpu "a GPU is visible"
fi

# --- --help lists the optimizer options that --set takes (its "unknown option" message points there) ---
for prog in train_gpt2 bench_optim build/optim_replay; do
  name=${prog##*/}
  if [ ! -x "$BIN_DIR/$prog" ]; then  # the test tools are not among the programs `make test-cpu` builds
    skip_ "${name}_help_lists_options" "$BIN_DIR/$prog is not built (make $prog)"
  elif "$BIN_DIR/$prog" --help >"$tmp/help" 2>&1 &&
    grep -q '^  adamw.lr=' "$tmp/help" && grep -q '^  muon.aux.beta2=' "$tmp/help" && grep -q '^  velo.num_steps=' "$tmp/help"; then
    echo "PASS ${name}_help_lists_options"
    pass=$((pass + 1))
  else
    echo "FAIL ${name}_help_lists_options: $prog --help does not list the keys of --set (adamw.lr, muon.aux.beta2, velo.num_steps)"
    fail=$((fail + 1))
  fi
done

# --- one vocabulary: a flag that two programs share has the same letter and long name in both ---
# help_has NAME PROGRAM TEXT...: PROGRAM --help lists every TEXT (fixed strings, e.g. "-e, --model").
help_has() {
  local name=$1 prog=$2 missing=()
  shift 2
  "$BIN_DIR/$prog" --help >"$tmp/help" 2>&1
  for t in "$@"; do grep -qF -- "$t" "$tmp/help" || missing+=("'$t'"); done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "PASS $name"
    pass=$((pass + 1))
  else
    echo "FAIL $name: $prog --help lacks ${missing[*]}"
    fail=$((fail + 1))
  fi
}
help_has train_vocabulary train_gpt2 "-e, --model" "-o, --optimizer" "-x, --steps" "-t, --seq" "-s, --sample-every" \
  "-g, --sample-tokens" "-k, --schedule" "      --clip" "      --resume" "      --set" "      --tokenizer"
help_has bench_vocabulary bench_optim "-e, --model" "-o, --optimizer" "-x, --steps" "      --clip" "      --set"
help_has opsbench_vocabulary bench_gpt2_ops "-e, --model" "-t, --seq"
help_has tokenize_vocabulary tokenize "-i, --input" "      --out" "      --tokenizer"

# --- train_vit: flags, model, data (all checked before the GPU) ---
case_ vit_unknown_flag            "unknown flag '--bogus'; run with --help" train_vit --bogus
case_ vit_batch_zero              "-b and -x must be >= 1"             train_vit -b 0
case_ vit_unknown_model           "unknown ViT 'vit-q16'"              train_vit -e vit-q16
case_ vit_image_not_multiple      "must be a positive multiple of the patch size" train_vit --image 30
case_ vit_channels                "--channels must be 1 or 3"          train_vit --channels 2
case_ vit_qkv                     "--qkv must be separate or fused"    train_vit --qkv both
case_ vit_mean_list               "--mean needs 1 or 3 values"         train_vit --channels 3 --mean 0.1,0.2
case_ vit_mean_text               "--mean must be numbers separated by commas" train_vit --mean abc
case_ vit_std_zero                "--std values must be positive"      train_vit --std 0
case_ vit_dropout                 "this ViT has no dropout"            train_vit --dropout 0.1
case_ vit_smoothing               "--smoothing in [0, 1)"              train_vit --smoothing 1
case_ vit_total_batch             "-d (300) must be a multiple of -b (256)" train_vit -d 300
case_ vit_missing_shard           "no-such-shards"                     train_vit -i "$tmp/no-such-shards-{0..3}.tar"
case_ vit_randaugment             "RandAugment spec 'bogus'"                        train_vit --randaugment bogus
case_ vit_decoder                 "image decoder 'gpu' is unknown; use stb, nvjpeg" train_vit --decoder gpu
case_ vit_synthetic_resume        "--synthetic runs cannot be resumed" train_vit --synthetic 1 --resume x.bin

# --- temporary folders: none may remain, in the scratch $TMPDIR or in the shared one ---
left=$(ls -A "$TMPDIR")
new_shared=$(comm -13 <(printf '%s\n' "$shared_before") <(program_tmp_entries) | sed '/^$/d')
if [ -z "$left" ] && [ -z "$new_shared" ]; then
  echo "PASS no_temporary_folders_left"
  pass=$((pass + 1))
else
  echo "FAIL no_temporary_folders_left: left in \$TMPDIR: ${left:-none}; new in $shared_tmp: ${new_shared:-none}" | tr '\n' ' '
  echo
  fail=$((fail + 1))
fi

echo "cli errors: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# CLI error tests for the programs and tools (CPU suite; needs no GPU): each case runs a program with bad
# input and checks that it
#   - exits with status 1 (bad input): not 0, not a crash (>= 128, a signal), not a hang,
#   - writes exactly one line to stderr, "<program>: <one sentence ending in '.'>", naming the program
#     only in that prefix,
#   - names what is wrong (the line contains the expected text), which is never the GPU check's "needs a
#     CUDA GPU" unless that is the case's point: every input is checked before any GPU work,
#   - and creates nothing: no new entry in the working folder or anywhere under the suite's scratch folder
#     (where every path of the cases points, and $TMPDIR), and nothing new named after a program in the
#     system's /tmp (programs that ignore $TMPDIR).
# Every flag in each program's --help needs at least one case with a bad value (flag_ below): a flag added
# without one fails the suite (flag_coverage_<program>). The tools under build/ are checked where built
# (make all builds them); the five programs must be built.
# Prints one line per case (PASS/FAIL/SKIP name) and exits non-zero if any case fails.
#
#   make test-cpu                        (builds the programs and build/make_bad_inputs first, then runs this)
#   bash tests/cli/test_cli_errors.sh    (programs in the repository root; BIN_DIR=... to use others)
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN_DIR=${BIN_DIR:-.}
programs="train_gpt2 train_vit bench_optim bench_gpt2_ops bench_grad_sum tokenize"
tools="build/optim_replay build/ref_replay build/gpt2_dump build/vit_dump build/make_imagenet_like build/bench_augment
       build/bench_image_loader build/fashion_mnist_to_wds"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_cli_errors.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out="$tmp/.out"  # the suite's own captures, outside what the cases may touch
mkdir "$out"
# Folders the programs leave in the shared temporary folder (programs that ignore $TMPDIR) are found by
# comparing its listing before and after each case.
shared_tmp=${TMPDIR:-/tmp}
program_tmp_entries() {
  (cd "$shared_tmp" && ls -d bench_optim* bench_gpt2_ops* bench_grad_sum* train_gpt2* train_vit* tokenize* lopt_random_weights_* \
    optim_replay* ref_replay* gpt2_dump* vit_dump* make_imagenet_like* bench_augment* bench_image_loader* \
    fashion_mnist* 2>/dev/null | sort)
}
export TMPDIR="$tmp/tmpdir"
mkdir "$TMPDIR"
# What a case could leave: the working folder's entries, everything under the scratch folder, the
# program-named entries of the shared temporary folder.
snapshot() {
  ls -A . | sed 's|^|./|'
  (cd "$tmp" && find . -path ./.out -prune -o -print) | sed "s|^\.|$tmp|"
  program_tmp_entries | sed "s|^|$shared_tmp/|"
}

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then has_gpu=1; fi
# Each case gets at most this long: a missing check must not start a training run.
run_limit=${CLI_TEST_TIMEOUT:-120}
timeout_cmd=()
if command -v timeout >/dev/null 2>&1; then timeout_cmd=(timeout -k 5 "$run_limit"); fi

pass=0 fail=0 skip=0
covered=""  # "<program> <--flag>" per line: the flags that have a bad-value case
gpu_text="needs a CUDA GPU"

is_tool() { [[ "$1" == */* ]]; }

# case_ NAME EXPECTED PROGRAM ARGS...
#   EXPECTED: text the stderr line must contain (fixed string). PROGRAM: one of $programs, or a tool as
#   build/NAME (skipped when it is not built).
case_() {
  local name=$1 want=$2 prog=$3
  shift 3
  local exe="$BIN_DIR/$prog" label=${prog##*/}
  if [ ! -x "$exe" ]; then
    if is_tool "$prog"; then
      skip_ "$name" "$exe is not built (make $prog)"
    else
      echo "FAIL $name: $exe is missing; build it first (make $prog)"
      fail=$((fail + 1))
    fi
    return
  fi
  local before after left rc start=$SECONDS
  before=$(snapshot)
  "${timeout_cmd[@]}" "$exe" "$@" </dev/null >"$out/stdout" 2>"$out/stderr"
  rc=$?
  local took=$((SECONDS - start))
  after=$(snapshot)
  left=$(comm -13 <(sort <<<"$before") <(sort <<<"$after"))
  # What it left in the scratch folder is removed again, so that it cannot hide the next case's leftovers
  # (the shared temporary folder is other programs' too: nothing there is touched).
  while read -r path; do [[ "$path" == "$tmp/"* ]] && rm -rf -- "$path"; done <<<"$left"
  left=$(tr '\n' ' ' <<<"$left" | sed 's/ *$//')
  local lines line
  lines=$(awk 'END { print NR }' "$out/stderr")
  line=$(head -n 1 "$out/stderr")
  local why=""
  if [ "$rc" -eq 0 ]; then
    why="exit status 0 (the error went unnoticed)"
  elif { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ "$took" -ge "$run_limit" ]; then
    why="still running after ${run_limit}s (killed)"
  elif [ "$rc" -ge 128 ]; then
    why="crashed with exit status $rc (signal $((rc - 128)))"
  elif [ "$rc" -ne 1 ]; then
    why="exit status $rc instead of 1 (bad input)"
  elif [ "$lines" -ne 1 ]; then
    why="stderr has $lines lines instead of one"
  elif [[ "$line" != "$label: "* ]]; then
    why="stderr line does not start with '$label: '"
  elif [[ "$line" != *. ]]; then
    why="stderr line is not one sentence ending in '.'"
  elif [[ "${line#"$label: "}" =~ (^|[^A-Za-z0-9_])$label([^A-Za-z0-9_]|$) ]]; then  # as a word: not download_tokenizer.sh
    why="stderr line names $label again after its prefix"
  elif [[ "$want" != "$gpu_text"* && "$line" == *"$gpu_text"* ]]; then
    why="the bad input reached the GPU check"
  elif [[ "$line" != *"$want"* ]]; then
    why="stderr does not contain '$want'"
  fi
  if [ -z "$why" ] && [ -n "$left" ]; then why="it left behind: $left"; fi
  if [ -n "$why" ]; then
    echo "FAIL $name: $why"
    echo "     command: $prog $*"
    echo "     exit status $rc; stderr:"
    head -n 5 "$out/stderr" | sed 's/^/       | /'
    fail=$((fail + 1))
  else
    echo "PASS $name"
    pass=$((pass + 1))
  fi
}

# flag_ FLAG NAME EXPECTED PROGRAM ARGS...: a case giving FLAG (its long name) a bad value; it counts for
# the flag coverage check at the end.
flag_() {
  local flag=$1 prog=$4
  covered+="${prog##*/} $flag"$'\n'
  shift
  case_ "$@"
}

skip_() {
  echo "SKIP $1 ($2)"
  skip=$((skip + 1))
}

pass_or_fail() {  # NAME WHY: PASS when WHY is empty
  if [ -z "$2" ]; then
    echo "PASS $1"
    pass=$((pass + 1))
  else
    echo "FAIL $1: $2"
    fail=$((fail + 1))
  fi
}

# ================================================================================================ fixtures

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
mkdir -p "$tmp/short" && printf 'not a shard' >"$tmp/short/data_train_000001.bin"

# Checkpoints and weights a shell cannot write (tests/cli/make_bad_inputs.cpp), and a valid photo.
crafted="$tmp/crafted"
mkdir -p "$crafted"
have_crafted=0
if [ -x "$BIN_DIR/build/make_bad_inputs" ] && "$BIN_DIR/build/make_bad_inputs" "$crafted"; then have_crafted=1; fi

# vit_tar FILE KEY:LABEL...: a WebDataset shard (ustar) of samples with an image member (the valid photo,
# so that a program that runs on does not spin on undecodable images) and a class member each.
vit_tar() {
  local file=$1 stage names=() kl
  shift
  stage=$(mktemp -d "$tmp/stage.XXXXXX")
  for kl in "$@"; do
    if [ -f "$crafted/photo.png" ]; then cp "$crafted/photo.png" "$stage/${kl%%:*}.png"; else printf 'img' >"$stage/${kl%%:*}.png"; fi
    printf '%s' "${kl#*:}" >"$stage/${kl%%:*}.cls"
    names+=("${kl%%:*}.png" "${kl%%:*}.cls")
  done
  mkdir -p "$(dirname "$file")"
  tar --format=ustar -cf "$file" -C "$stage" "${names[@]}"
  rm -rf "$stage"
}
vit_tar "$tmp/vit/good-0.tar" s0:0 s1:1 s2:2
vit_tar "$tmp/vit/good-1.tar" s3:3 s4:4 s5:5
vit_tar "$tmp/vit/label5000.tar" s0:5000 s1:1
vit_tar "$tmp/vit/labelneg.tar" s0:-1 s1:1
: >"$tmp/vit/empty.tar"
head -c 2048 /dev/zero | tr '\0' 'x' >"$tmp/vit/garbage.tar"
head -c 700 "$tmp/vit/good-0.tar" >"$tmp/vit/cut.tar"  # inside the first sample's image
vit_size=$(wc -c <"$tmp/vit/good-0.tar")
head -c $((vit_size - 1000)) "$tmp/vit/good-0.tar" >"$tmp/vit/cut_late.tar"  # the first sample whole

# A folder of checkpoints given to --resume.
mkdir -p "$tmp/ckpts" && : >"$tmp/ckpts/model_00000010.bin" && : >"$tmp/ckpts/model_00000020.bin"
# The replay tools' files: one 2x2 matrix, one step.
mkdir -p "$tmp/replay"
printf 'steps 1\ntensor w hidden 1 2 2 2\n' >"$tmp/replay/manifest.txt"
head -c 16 /dev/zero >"$tmp/replay/init.bin"
head -c 16 /dev/zero >"$tmp/replay/grads.bin"

# A tiny, fast configuration for the cases that get as far as the data: no validation, no samples,
# one step.
small=(-e tiny -b 1 -t 8 -x 1 -v 0 -s 0 -j "")
good=(-i "$tmp/good/*.bin")
# train_vit's defaults (vit-ti4, 28x28 gray, 10 classes) on the shards above, no evaluation.
vit_small=(-i "$tmp/vit/good-{0..1}.tar" -j "" -x 1)
printf 'a file' >"$tmp/afile"
printf 'not a checkpoint at all' >"$tmp/garbage.bin"

# crafted_ NAME EXPECTED PROGRAM ARGS...: a case that needs make_bad_inputs' files.
crafted_() {
  if [ "$have_crafted" -eq 1 ]; then
    case_ "$@"
  else
    echo "FAIL $1: $BIN_DIR/build/make_bad_inputs is missing or failed; build it (make build/make_bad_inputs)"
    fail=$((fail + 1))
  fi
}

# ================================================================================================ train_gpt2
# --- flags: the parser ---
case_ train_unknown_flag          "unknown flag '--bogus'; run with --help" train_gpt2 --bogus
case_ train_unknown_short_flag    "unknown flag '-Q'"                  train_gpt2 -Q 1
case_ train_missing_value         "flag '-b' needs a value"            train_gpt2 -b
flag_ --batch train_nonnumeric_int "flag --batch needs a number, got 'abc'" train_gpt2 -b abc
case_ train_fractional_int        "flag --batch needs an integer, got '1.5'" train_gpt2 -b 1.5
# Integers are decimal: 0x10 is not 16 (issue 25, item 8).
case_ train_hex_int               "flag --batch needs a decimal number, got '0x10' (hexadecimal is not read)" \
  train_gpt2 "${small[@]}" "${good[@]}" -b 0x10
case_ train_int_overflow          "flag --batch is too large: got '99999999999' (it takes integers from -2147483648 to 2147483647)" \
  train_gpt2 -b 99999999999
case_ train_int64_overflow        "flag --steps is too large: got '1e19' (it takes integers from -9223372036854775808 to 9223372036854775807)" \
  train_gpt2 -x 1e19
case_ train_empty_long_value      "flag --steps needs a number, got ''" train_gpt2 --steps=
flag_ --lr train_nonnumeric_double "flag --lr needs a number, got 'x'"  train_gpt2 -l x
case_ train_lr_negative           "adamw.lr must be >= 0 (got -1)"     train_gpt2 -l -1
case_ train_double_overflow       "flag --lr is too large: got '1e400'" train_gpt2 -l 1e400
case_ train_infinite_double       "flag --lr needs a finite number, got 'inf'" train_gpt2 -l inf
# 1e-320 is below the smallest normal double: accepted (as a denormal), so the next mistake is reported.
case_ train_double_underflow_ok   "-b must be >= 1"                    train_gpt2 -l 1e-320 -b 0
flag_ --lopt-random train_bad_bool "flag --lopt-random needs 0 or 1"   train_gpt2 --lopt-random maybe
flag_ --cuda-graph train_cuda_graph_bool "flag --cuda-graph needs 0 or 1, got '2'" train_gpt2 --cuda-graph 2
flag_ --overlap train_overlap_bool "flag --overlap needs 0 or 1, got 'yes'" train_gpt2 --overlap yes
flag_ --nccl train_nccl_bool      "flag --nccl needs 0 or 1, got 'x'"  train_gpt2 --nccl x
flag_ --shard train_shard_bool    "flag --shard needs 0 or 1, got 'on'" train_gpt2 --shard on
flag_ --seed train_seed_text      "flag --seed needs a number, got 'abc'" train_gpt2 --seed abc

# --- flags: ranges and combinations ---
case_ train_batch_zero            "-b must be >= 1"                    train_gpt2 -b 0
flag_ --seq train_seq_one         "-t >= 2"                            train_gpt2 -t 1
case_ train_seq_beyond_context    "-t (2048) must be at most the model's context length (1024)" train_gpt2 -t 2048
flag_ --steps train_steps_zero    "-x >= 1"                            train_gpt2 -x 0
flag_ --precision train_bad_precision "--precision must be bf16 or fp32 (got 'fp8')" train_gpt2 --precision fp8
flag_ --kernels train_bad_kernels "--kernels must be gelu_backward=epilogue or gelu_backward=kernel (got 'gelu=x')" train_gpt2 --kernels gelu=x
case_ train_kernels_fp32 "--kernels chooses among the bf16 model's kernels; leave it out with --precision fp32" \
  train_gpt2 --kernels gelu_backward=kernel --precision fp32
case_ train_kernels_resume "a resumed run takes its checkpoint's kernel choices; leave out --kernels" \
  train_gpt2 --kernels gelu_backward=epilogue --resume "$tmp/ckpt"
flag_ --dropout train_bad_dropout "--dropout must be at least 0 and below 1 (got 1)" train_gpt2 --dropout 1
flag_ --total-batch train_total_batch "-d (17) must be a multiple of -b * -t (16)" train_gpt2 -b 2 -t 8 -d 17
case_ train_total_batch_negative  "-d must be 0 (one micro-batch of -b * -t tokens) or a positive multiple of -b * -t (got -8)" \
  train_gpt2 -b 1 -t 8 -d -8
case_ train_total_batch_huge      "-d (9000000000000000000) asks for more than 2147483647 micro-batches per step" \
  train_gpt2 -b 1 -t 2 -d 9000000000000000000
flag_ --clip train_clip_negative  "--clip (grad-norm clip) must be >= 0, where 0 turns clipping off (got -1)" train_gpt2 --clip -1
case_ train_overlap_clip          "--overlap steps each block during backward, but --clip 1 needs the norm of every gradient before any tensor moves; add --clip 0" train_gpt2 --overlap 1
case_ train_overlap_velo          "--overlap cannot step velo block by block: its LSTM reads the statistics of every tensor" train_gpt2 --overlap 1 --clip 0 -o velo
case_ train_overlap_muon          "--overlap cannot step muon block by block" train_gpt2 --overlap 1 --clip 0 -o muon
case_ vit_overlap_elo_clip        "--overlap cannot step elo block by block: elo.clip_grad=1" train_vit --overlap 1 --clip 0 -o elo --set elo.clip_grad=1
WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 case_ train_world_no_id_file "2 processes need --nccl-id-file" train_gpt2
WORLD_SIZE=2 RANK=2 LOCAL_RANK=0 case_ train_world_bad_rank "RANK=2 is not below WORLD_SIZE=2" train_gpt2
# The message names the real range (issue 25, item 8): 2000000 is >= 1 and still refused.
WORLD_SIZE=2000000 RANK=0 LOCAL_RANK=0 case_ train_world_size_limit \
  "the environment variable WORLD_SIZE='2000000' must be a whole number from 1 to 1048576" train_gpt2
WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 case_ vit_world_no_id_file "2 processes need --nccl-id-file" train_vit
flag_ --nccl-id-file train_nccl_id_file_folder "--nccl-id-file '$tmp/replay' is a folder" \
  train_gpt2 --nccl-id-file "$tmp/replay"
case_ train_nccl_id_file_no_folder "--nccl-id-file '$tmp/none/id' is not in an existing folder" \
  train_gpt2 --nccl-id-file "$tmp/none/id"
case_ train_shard_overlap         "--shard 1 steps each process's tensors after backward, --overlap during it; leave out one of them." \
  train_gpt2 --shard 1 --overlap 1 --clip 0
case_ vit_shard_overlap           "--shard 1 steps each process's tensors after backward" train_vit --shard 1 --overlap 1 --clip 0
flag_ --nccl-timeout train_nccl_timeout_negative "--nccl-timeout must be >= 0 seconds, where 0 waits forever (got -1)." \
  train_gpt2 --nccl-timeout -1
flag_ --nccl-timeout vit_nccl_timeout_negative "--nccl-timeout must be >= 0 seconds, where 0 waits forever (got -0.5)." \
  train_vit --nccl-timeout -0.5
flag_ --grad-comm train_grad_comm_bad "--grad-comm must be fp32 or bf16 (got 'fp16')." train_gpt2 --grad-comm fp16
flag_ --grad-comm vit_grad_comm_bad "--grad-comm must be fp32 or bf16 (got '16')." train_vit --grad-comm 16
case_ train_grad_comm_one_process "--grad-comm bf16 rounds the gradients that processes send each other, and this run is one process without NCCL" \
  train_gpt2 --grad-comm bf16
flag_ --grad-sum train_grad_sum_bad "--grad-sum must be auto, nccl or copy (got 'ce')." train_gpt2 --grad-sum ce
flag_ --grad-sum vit_grad_sum_bad "--grad-sum must be auto, nccl or copy (got 'NCCL')." train_vit --grad-sum NCCL
case_ train_grad_sum_bf16 "--grad-sum copy sums the fp32 gradients; leave out --grad-comm bf16 or use --grad-sum nccl." \
  train_gpt2 --grad-sum copy --grad-comm bf16 --nccl 1
case_ vit_grad_sum_one_process "--grad-sum copy sums the gradients of several processes, and this run is one process without NCCL" \
  train_vit --grad-sum copy
flag_ --attention train_attention_bad "--attention must be ours, cudnn or cudnn-nondet (got 'flash')." \
  train_gpt2 --attention flash
flag_ --attention vit_attention_bad "--attention must be ours, cudnn or cudnn-nondet (got 'CUDNN')." train_vit --attention CUDNN
case_ train_attention_dropout "--attention cudnn has no attention dropout; use --attention ours with --dropout 0.1, or leave out --dropout." \
  train_gpt2 --attention cudnn --dropout 0.1
case_ train_attention_fp32 "--attention cudnn-nondet runs in the bf16 model only; use --precision bf16 or --attention ours." \
  train_gpt2 --attention cudnn-nondet --precision fp32
WORLD_SIZE=400 RANK=0 LOCAL_RANK=0 case_ train_shard_too_many "--shard 1 gives every process whole tensors, and this model has 148 (q, k and v count as one) for 400 processes" \
  train_gpt2 --shard 1 --nccl-id-file unused_id_file
flag_ --wd train_wd_negative      "-c (weight decay) must be >= 0 (got -1)" train_gpt2 -c -1
flag_ --val-every train_val_every_negative "-v (validate every N steps) must be >= 0" train_gpt2 -v -1
flag_ --val-batches train_val_batches_zero "-m (validation batches) must be >= 1 (got 0)" train_gpt2 -m 0
flag_ --sample-every train_sample_every_negative "-s (sample every N steps) must be >= 0" train_gpt2 -s -5
flag_ --sample-tokens train_sample_tokens_negative "-g (tokens per sample) must be >= 1 (got -5); the grad-norm clip is --clip" train_gpt2 -g -5
flag_ --ckpt-every train_ckpt_every_negative "-n (checkpoint every N steps) must be >= 0" train_gpt2 -n -1
flag_ --warmup train_warmup_negative "-u (warmup steps) must be >= 0, or -1 for the default (got -5)" train_gpt2 -u -5
case_ train_warmup_constant       "-u 5 has no effect with -k constant" train_gpt2 -k constant -u 5
case_ train_warmup_schedule_zero  "-k warmup needs -u >= 1"            train_gpt2 -k warmup -u 0
flag_ --schedule train_bad_schedule "-k (LR schedule) must be constant, warmup, cosine or wsd (got 'linear')" train_gpt2 --schedule linear
flag_ --final-lr-frac train_final_frac_range "-q (final LR fraction) must be in [0, 1] (got 2)" train_gpt2 -q 2
case_ train_final_frac_constant   "-q 0.5 has no effect with -k constant" train_gpt2 -k constant -q 0.5

# --- one vocabulary with our other programs and llm.c (train/flags.h) ---
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

# --- optimizer, model, data ---
flag_ --optimizer train_unknown_optimizer "unknown optimizer 'foo'"    train_gpt2 -o foo
flag_ --model train_unknown_model "unknown model 'd99'; choose d12, d24, d36, d48 (GPT-2 124M to 1558M" train_gpt2 -e d99
case_ train_vit_model             "the model 'vit-b16' cannot be used here; choose d12, d24, d36, d48" train_gpt2 -e vit-b16
# Every GPT-2 name is taken (the context-length check comes after the model's name is read).
for m in d24 355m gpt2-355m tiny; do
  case_ "train_model_name_$m"     "-t (2048) must be at most the model's context length (1024)" train_gpt2 -e "$m" -t 2048
done
flag_ --qkv train_bad_qkv         "--qkv must be separate or fused (got 'bad')" train_gpt2 --qkv bad
flag_ --set train_bad_option      "unknown optimizer option 'adamw.nosuch'; run with --help to list them" train_gpt2 --set adamw.nosuch=1
case_ train_other_optimizer_option "option muon.lr=-5 is for muon, which is not the optimizer selected (adamw); remove it or choose -o muon" \
  train_gpt2 --set muon.lr=-5
case_ train_option_range          "muon.lr must be >= 0 (got -5)"      train_gpt2 -o muon --set muon.lr=-5
case_ train_option_int_overflow   "option muon.ns_steps is too large: got '1e10'" train_gpt2 -o muon --set muon.ns_steps=1e10
# Once narrowed to a negative int in newton_schulz.cu (issue 25, item 7).
case_ train_option_ns_workspace   "muon.ns_workspace_mb must be in [16, 1048576] MiB (got 1e+10)" \
  train_gpt2 "${small[@]}" "${good[@]}" -o muon --set muon.ns_workspace_mb=1e10
flag_ --train train_glob_no_files "no files match '$tmp/none/*.bin'"   train_gpt2 "${small[@]}" -i "$tmp/none/*.bin"
flag_ --val train_val_glob_no_files "no files match '$tmp/none/*val*.bin'" \
  train_gpt2 -e tiny -b 1 -t 8 -x 1 -s 0 -v 1 "${good[@]}" -j "$tmp/none/*val*.bin"
case_ train_shard_bad_magic       "has magic 12345678 instead of 20240520" train_gpt2 "${small[@]}" -i "$tmp/badmagic/*.bin"
case_ train_shard_bad_version     "has version 7"                      train_gpt2 "${small[@]}" -i "$tmp/badversion/*.bin"
case_ train_shard_truncated       "truncated or corrupt"               train_gpt2 "${small[@]}" -i "$tmp/truncated/*.bin"
case_ train_shard_short_header    "shorter than its 1024-byte header"  train_gpt2 "${small[@]}" -i "$tmp/short/*.bin"
case_ train_shard_too_small       "fewer than one batch needs"         train_gpt2 "${small[@]}" -i "$tmp/small/*.bin"
flag_ --lopt-weights train_velo_no_weights "VeLO weights not found at '$tmp/no_weights'" \
  train_gpt2 "${small[@]}" "${good[@]}" -o velo --lopt-weights "$tmp/no_weights"
case_ train_small_fc_no_weights   "small_fc_lopt (μLO) weights not found at '$tmp/no_weights'" \
  train_gpt2 "${small[@]}" "${good[@]}" -o small_fc_lopt --set small_fc_lopt.weights="$tmp/no_weights"
case_ train_lopt_random_and_weights "--lopt-random replaces the weights given by --lopt-weights" \
  train_gpt2 "${small[@]}" "${good[@]}" -o velo --lopt-random 1 --lopt-weights "$tmp/no_weights"
# A NaN in the meta-weights is refused when they are read, before any GPU work (issue 25, item 7).
crafted_ train_lopt_nan_weights   "in tensor 'network.linear_0.bias' (element 3); meta-weights must be finite numbers" \
  train_gpt2 "${small[@]}" "${good[@]}" -o small_fc_lopt --lopt-weights "$crafted/mulo_nan"
flag_ --tokenizer train_tokenizer_missing "cannot open the tokenizer '$tmp/none.tiktoken' given by --tokenizer" \
  train_gpt2 "${small[@]}" "${good[@]}" --tokenizer "$tmp/none.tiktoken"

# --- checkpoints: --resume, --ckpt-dir, --log ---
flag_ --resume train_resume_missing "$tmp/none.bin"                    train_gpt2 "${small[@]}" "${good[@]}" --resume "$tmp/none.bin"
case_ train_resume_corrupt        "is not a checkpoint/state file"     train_gpt2 "${small[@]}" "${good[@]}" --resume "$tmp/garbage.bin"
# A folder is not "truncated" (issue 25, item 8); the message names its newest checkpoint.
case_ train_resume_folder         "--resume '$tmp/ckpts' is a folder; give one of its files, such as '$tmp/ckpts/model_00000020.bin' (the newest)" \
  train_gpt2 "${small[@]}" "${good[@]}" --resume "$tmp/ckpts"
# Crafted checkpoints of the right model (issue 25, item 7): each flaw is refused before the GPU check.
crafted_ train_resume_other_optimizer "holds the state of optimizer 'muon', not 'adamw'; resume with -o muon" \
  train_gpt2 "${small[@]}" "${good[@]}" --resume "$crafted/gpt2_tiny_muon.bin"
crafted_ train_resume_other_overlap "was written with --overlap 1" \
  train_gpt2 "${small[@]}" "${good[@]}" --resume "$crafted/gpt2_tiny_overlap.bin"
crafted_ train_resume_step_negative "section 'train.step' holds step -5, and a step count is never negative" \
  train_gpt2 "${small[@]}" "${good[@]}" --resume "$crafted/gpt2_tiny_step_negative.bin"
crafted_ train_resume_step_max    "is at step 9223372036854775807, beyond this run's 1 steps (-x)" \
  train_gpt2 "${small[@]}" "${good[@]}" --resume "$crafted/gpt2_tiny_step_max.bin"
crafted_ train_resume_rng         "section 'train.sample_rng' is not a saved random generator state" \
  train_gpt2 "${small[@]}" "${good[@]}" --resume "$crafted/gpt2_tiny_rng.bin"
flag_ --ckpt-dir train_ckpt_dir_is_file "--ckpt-dir '$tmp/afile' is a file, not a folder" \
  train_gpt2 "${small[@]}" "${good[@]}" --ckpt-dir "$tmp/afile"
case_ train_ckpt_dir_under_file   "cannot create the checkpoint folder '$tmp/afile/ckpt' (Not a directory)" \
  train_gpt2 "${small[@]}" "${good[@]}" --ckpt-dir "$tmp/afile/ckpt"
if [ "$(id -u)" -ne 0 ]; then
  mkdir -p "$tmp/readonly" && chmod 555 "$tmp/readonly"
  case_ train_ckpt_dir_unwritable "cannot write in the checkpoint folder '$tmp/readonly'" \
    train_gpt2 "${small[@]}" "${good[@]}" --ckpt-dir "$tmp/readonly"
  case_ train_ckpt_dir_uncreatable "cannot create the checkpoint folder '$tmp/readonly/a/b' (Permission denied)" \
    train_gpt2 "${small[@]}" "${good[@]}" --ckpt-dir "$tmp/readonly/a/b"
  chmod 755 "$tmp/readonly"
else
  skip_ train_ckpt_dir_unwritable "running as root, who may write anywhere"
fi
flag_ --log train_log_unwritable  "cannot open the log file '$tmp/afile/log.jsonl' (Not a directory)" \
  train_gpt2 "${small[@]}" "${good[@]}" --log "$tmp/afile/log.jsonl"
case_ train_log_is_folder         "cannot open the log file '$tmp/replay' (Is a directory)" \
  train_gpt2 "${small[@]}" "${good[@]}" --log "$tmp/replay"
# A bad input with --log and --ckpt-dir leaves neither behind (the case checks that nothing was created).
case_ train_bad_input_creates_nothing "has magic 12345678" \
  train_gpt2 "${small[@]}" -i "$tmp/badmagic/*.bin" --log "$tmp/run.jsonl" --ckpt-dir "$tmp/run_ckpt"
if [ "$has_gpu" -eq 0 ]; then
  # A valid command stops at the GPU check, whose message names the program once, and leaves no log, no
  # checkpoint folder (issue 25, item 7) and no folder of random weights behind (--lopt-random writes them
  # only after the GPU check).
  case_ train_no_gpu              "$gpu_text and none is visible" \
    train_gpt2 "${small[@]}" "${good[@]}" -o velo --lopt-random 1 --ckpt-dir "$tmp/ckpt" --log "$tmp/run.jsonl"
  # The crafted checkpoints are otherwise whole: this one is taken.
  crafted_ train_resume_crafted_ok "$gpu_text and none is visible" \
    train_gpt2 "${small[@]}" "${good[@]}" --resume "$crafted/gpt2_tiny_ok.bin"
else
  skip_ train_no_gpu "a GPU is visible"
fi

# ================================================================================================ train_vit
# The shared flags (train/train_flags.h) once more: train_vit checks them as train_gpt2 does.
case_ vit_unknown_flag            "unknown flag '--bogus'; run with --help" train_vit --bogus
flag_ --batch vit_batch_zero      "-b and -x must be >= 1"             train_vit -b 0
flag_ --steps vit_steps_zero      "-b and -x must be >= 1"             train_vit -x 0
flag_ --optimizer vit_unknown_optimizer "unknown optimizer 'foo'"      train_vit -o foo
flag_ --lr vit_lr_text            "flag --lr needs a number, got 'x'"  train_vit -l x
flag_ --wd vit_wd_negative        "-c (weight decay) must be >= 0 (got -1)" train_vit -c -1
flag_ --schedule vit_bad_schedule "-k (LR schedule) must be constant, warmup, cosine or wsd (got 'linear')" train_vit -k linear
flag_ --warmup vit_warmup_negative "-u (warmup steps) must be >= 0, or -1 for the default (got -5)" train_vit -u -5
flag_ --final-lr-frac vit_final_frac_range "-q (final LR fraction) must be in [0, 1] (got 2)" train_vit -q 2
flag_ --total-batch vit_total_batch "-d (300) must be a multiple of -b (256)" train_vit -d 300
flag_ --clip vit_clip_negative    "--clip (grad-norm clip) must be >= 0" train_vit --clip -1
flag_ --val-every vit_val_every_negative "-v (validate every N steps) must be >= 0" train_vit -v -1
flag_ --val-batches vit_val_batches_negative "-m (validation batches) must be >= 0 (got -1)" train_vit -m -1
flag_ --ckpt-every vit_ckpt_every_negative "-n (checkpoint every N steps) must be >= 0" train_vit -n -1
flag_ --dropout vit_dropout       "this ViT has no dropout"            train_vit --dropout 0.1
flag_ --lopt-random vit_lopt_random_bool "flag --lopt-random needs 0 or 1" train_vit --lopt-random maybe
flag_ --cuda-graph vit_cuda_graph_bool "flag --cuda-graph needs 0 or 1" train_vit --cuda-graph 2
flag_ --overlap vit_overlap_bool  "flag --overlap needs 0 or 1"        train_vit --overlap yes
flag_ --nccl vit_nccl_bool        "flag --nccl needs 0 or 1"           train_vit --nccl x
flag_ --shard vit_shard_bool      "flag --shard needs 0 or 1"          train_vit --shard on
flag_ --seed vit_seed_hex         "flag --seed needs a decimal number, got '0x10'" train_vit --seed 0x10
flag_ --set vit_bad_option        "unknown optimizer option 'adamw.nosuch'" train_vit --set adamw.nosuch=1
flag_ --nccl-id-file vit_nccl_id_file_folder "--nccl-id-file '$tmp/replay' is a folder" train_vit --nccl-id-file "$tmp/replay"
flag_ --lopt-weights vit_velo_no_weights "VeLO weights not found at '$tmp/no_weights'" \
  train_vit "${vit_small[@]}" -o velo --lopt-weights "$tmp/no_weights"
crafted_ vit_lopt_nan_weights     "meta-weights must be finite numbers" \
  train_vit "${vit_small[@]}" -o small_fc_lopt --lopt-weights "$crafted/mulo_nan"

# --- its own flags ---
flag_ --model vit_unknown_model   "unknown ViT 'vit-q16'"              train_vit -e vit-q16
flag_ --image vit_image_not_multiple "must be a positive multiple of the patch size" train_vit --image 30
flag_ --channels vit_channels     "--channels must be 1 or 3"          train_vit --channels 2
flag_ --classes vit_classes_one   "a ViT needs 1 or more input channels, 2 or more classes" train_vit --classes 1
flag_ --qkv vit_qkv               "--qkv must be separate or fused"    train_vit --qkv both
case_ vit_mean_list               "--mean needs 1 or 3 values"         train_vit --channels 3 --mean 0.1,0.2
flag_ --mean vit_mean_text        "--mean must be numbers separated by commas" train_vit --mean abc
flag_ --std vit_std_zero          "--std values must be positive"      train_vit --std 0
flag_ --smoothing vit_smoothing   "--smoothing in [0, 1)"              train_vit --smoothing 1
flag_ --mixup vit_mixup_negative  "--mixup and --cutmix must be >= 0"  train_vit --mixup -1
flag_ --cutmix vit_cutmix_negative "--mixup and --cutmix must be >= 0" train_vit --cutmix -0.5
flag_ --scale-min vit_scale_min_zero "crop scale range (0, 1) is invalid" train_vit "${vit_small[@]}" --scale-min 0
flag_ --hflip vit_hflip_above_one "horizontal flip probability 2 is not in [0, 1]" train_vit "${vit_small[@]}" --hflip 2
# --crop-pct is checked with the flags, not at the first evaluation (issue 25, item 7).
flag_ --crop-pct vit_crop_pct_zero "--crop-pct must be in [0.1, 1] (got 0)" train_vit "${vit_small[@]}" --crop-pct 0
case_ vit_crop_pct_hundred        "--crop-pct must be in [0.1, 1] (got 100)" train_vit "${vit_small[@]}" --crop-pct 100
flag_ --randaugment vit_randaugment "RandAugment spec 'bogus'"         train_vit --randaugment bogus
flag_ --threads vit_threads_negative "--threads must be from 0 (one per hardware thread) to 256 (got -1)" train_vit --threads -1
# (With the default -b 256 a loader without the bound starts at most 256 threads, not 60000.)
case_ vit_threads_huge            "--threads must be from 0 (one per hardware thread) to 256 (got 60000)" \
  train_vit "${vit_small[@]}" --threads 60000
flag_ --decoder vit_decoder       "image decoder 'gpu' is unknown; use stb, nvjpeg" train_vit --decoder gpu
flag_ --shuffle vit_shuffle_negative "--shuffle must be >= 0 (got -1)" train_vit --shuffle -1
case_ vit_shuffle_huge            "the shuffle buffer must hold 0 to 16777216 samples" train_vit "${vit_small[@]}" --shuffle 99999999
flag_ --synthetic vit_synthetic_bool "flag --synthetic needs 0 or 1"   train_vit --synthetic maybe
case_ vit_synthetic_resume        "--synthetic runs cannot be resumed" train_vit --synthetic 1 --resume x.bin

# --- shards: looked inside before any GPU work (issue 25, item 7) ---
flag_ --train vit_missing_shard   "no-such-shards"                     train_vit -i "$tmp/no-such-shards-{0..3}.tar"
case_ vit_shard_empty             "shard '$tmp/vit/empty.tar' holds no samples" train_vit "${vit_small[@]}" -i "$tmp/vit/empty.tar"
case_ vit_shard_garbage           "tar archive '$tmp/vit/garbage.tar'" train_vit "${vit_small[@]}" -i "$tmp/vit/garbage.tar"
case_ vit_shard_truncated         "tar archive '$tmp/vit/cut.tar'"     train_vit "${vit_small[@]}" -i "$tmp/vit/cut.tar"
case_ vit_shard_truncated_later   "shard '$tmp/vit/cut_late.tar' is $((vit_size - 1000)) bytes, not a whole number of 512-byte tar blocks" \
  train_vit "${vit_small[@]}" -i "$tmp/vit/cut_late.tar"
case_ vit_label_5000              "sample 's0' has class 5000 but the dataset has 10 classes" \
  train_vit "${vit_small[@]}" -i "$tmp/vit/label5000.tar"
case_ vit_label_negative          "sample 's0' has a .cls member '-1' that is not a class index" \
  train_vit "${vit_small[@]}" -i "$tmp/vit/labelneg.tar"
case_ vit_label_above_classes     "sample 's3' has class 3 but the dataset has 3 classes" \
  train_vit "${vit_small[@]}" --classes 3 -i "$tmp/vit/good-{0..1}.tar"
flag_ --val vit_val_shard_garbage "tar archive '$tmp/vit/garbage.tar'" \
  train_vit "${vit_small[@]}" -j "$tmp/vit/garbage.tar" -v 1
case_ vit_bad_shard_creates_nothing "holds no samples" \
  train_vit "${vit_small[@]}" -i "$tmp/vit/empty.tar" --log "$tmp/vit.jsonl" --ckpt-dir "$tmp/vit_ckpt"

# --- checkpoints ---
flag_ --resume vit_resume_corrupt "is not a checkpoint/state file"    train_vit "${vit_small[@]}" --resume "$tmp/garbage.bin"
case_ vit_resume_folder           "--resume '$tmp/ckpts' is a folder"  train_vit "${vit_small[@]}" --resume "$tmp/ckpts"
crafted_ vit_resume_other_optimizer "holds the state of optimizer 'muon', not 'adamw'" \
  train_vit "${vit_small[@]}" --resume "$crafted/vit_ti4_muon.bin"
crafted_ vit_resume_overlap       "was written with --overlap 1" train_vit "${vit_small[@]}" --resume "$crafted/vit_ti4_overlap.bin"
crafted_ vit_resume_step_negative "holds step -5"                      train_vit "${vit_small[@]}" --resume "$crafted/vit_ti4_step_negative.bin"
crafted_ vit_resume_step_max      "is at step 9223372036854775807, beyond this run's 1 steps (-x)" \
  train_vit "${vit_small[@]}" --resume "$crafted/vit_ti4_step_max.bin"
crafted_ vit_resume_rng           "section 'train.sample_rng' is not a saved random generator state" \
  train_vit "${vit_small[@]}" --resume "$crafted/vit_ti4_rng.bin"
flag_ --ckpt-dir vit_ckpt_dir_is_file "--ckpt-dir '$tmp/afile' is a file, not a folder" train_vit --ckpt-dir "$tmp/afile"
flag_ --log vit_log_unwritable    "cannot open the log file '$tmp/afile/log.jsonl'" train_vit --log "$tmp/afile/log.jsonl"
if [ "$has_gpu" -eq 0 ]; then
  # A valid command stops at the GPU check and creates neither its log nor its checkpoint folder.
  case_ vit_no_gpu                "$gpu_text and none is visible" \
    train_vit "${vit_small[@]}" --log "$tmp/vit.jsonl" --ckpt-dir "$tmp/vit_ckpt"
else
  skip_ vit_no_gpu "a GPU is visible"
fi

# ================================================================================================ tokenize
case_ tokenize_unknown_flag       "unknown flag '--bogus'"             tokenize --bogus
case_ tokenize_missing_value      "flag '--out' needs a value"         tokenize -i README.md --out
case_ tokenize_nonnumeric_int     "flag --shard-tokens needs a number, got 'x'" tokenize --shard-tokens x
case_ tokenize_no_args            "give input files with -i and an output folder with --out" tokenize
flag_ --shard-tokens tokenize_shard_tokens_zero "--shard-tokens must be in [1, 2147483647]" tokenize -i README.md --out "$tmp" --shard-tokens 0
case_ tokenize_shard_tokens_huge  "counts its tokens in 32 bits"       tokenize -i README.md --out "$tmp" --shard-tokens 2147483648
flag_ --val-tokens tokenize_val_tokens_huge "--val-tokens in [0, 2147483647]" tokenize -i README.md --out "$tmp" --val-tokens 3000000000
case_ tokenize_val_tokens_negative "--val-tokens in [0, 2147483647]"   tokenize -i README.md --out "$tmp" --val-tokens -1
flag_ --format tokenize_bad_format "--format must be auto, text or jsonl" tokenize -i README.md --out "$tmp" --format xml
flag_ --input tokenize_missing_input "$tmp/missing.txt"                tokenize -i "$tmp/missing.txt" --out "$tmp"
flag_ --tokenizer tokenize_missing_tokenizer "cannot open the GPT-2 tokenizer '$tmp/none.tiktoken'" \
  tokenize -i README.md --out "$tmp" --tokenizer "$tmp/none.tiktoken"
flag_ --out tokenize_bad_output_dir "the output folder '$tmp/no/such/dir' does not exist" tokenize -i README.md --out "$tmp/no/such/dir"
# The shards stay inside --out: a name with a '/' could put them anywhere.
flag_ --name tokenize_name_with_slash "--name must be non-empty, without '/', and not begin with '.' (got '../escape')" \
  tokenize -i README.md --out "$tmp/replay" --name ../escape
case_ tokenize_name_empty         "--name must be non-empty" tokenize -i README.md --out "$tmp" --name ""
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
  # An error at line 3001, after 3000 documents filled many 100-token shards: none of them may remain
  # (the case checks that nothing was left in the output folder).
  mkdir -p "$tmp/late"
  { for _ in $(seq 3000); do echo '{"text": "a few words of text"}'; done; echo '{"text": 1}'; } >"$tmp/late.jsonl"
  case_ tokenize_error_late       "line 3001 of '$tmp/late.jsonl' has no string field" \
    tokenize -i "$tmp/late.jsonl" --out "$tmp/late" --shard-tokens 100
else
  skip_ tokenize_jsonl_no_text "tokenizer/r50k_base.tiktoken is missing; run scripts/download_tokenizer.sh"
fi
mkdir -p "$tmp/folder_input"
case_ tokenize_input_folder       "'$tmp/folder_input' is a folder, not a file" tokenize -i "$tmp/folder_input" --out "$tmp"

# ================================================================================================ benchmarks
case_ bench_unknown_flag          "unknown flag '--bogus'"             bench_optim --bogus
case_ bench_nonnumeric_int        "flag --steps needs a number, got 'x'" bench_optim -x x
case_ bench_steps_too_large       "flag --steps is too large: got '1e10'" bench_optim -x 1e10
flag_ --steps bench_steps_zero    "--steps must be >= 1"               bench_optim -x 0
flag_ --untimed bench_untimed_negative "--untimed >= 0"                bench_optim --untimed -1
flag_ --bf16 bench_bf16_bool      "flag --bf16 needs 0 or 1"           bench_optim --bf16 maybe
flag_ --clip-apart bench_clip_apart_bool "flag --clip-apart needs 0 or 1"  bench_optim --clip-apart 2
flag_ --world bench_world_zero    "--world must be between 1 and 64 (got 0)" bench_optim --world 0
flag_ --clip bench_clip_negative  "--clip (grad-norm clip) must be >= 0, where 0 turns clipping off (got -1)" bench_optim --clip -1
case_ bench_no_optimizer          "--optimizer and --model each need at least one name" bench_optim -o ,
flag_ --optimizer bench_unknown_optimizer "unknown optimizer 'foo'"    bench_optim -o adamw,foo
flag_ --set bench_bad_option      "unknown optimizer option 'adamw.nosuch'" bench_optim --set adamw.nosuch=1
case_ bench_other_optimizer_option "option muon.lr=0.1 is for muon, which is not the optimizer selected (adamw, adafactor)" \
  bench_optim -o adamw,adafactor --set muon.lr=0.1
case_ bench_option_range          "adafactor.d must be >= 1 (got 0.5)" bench_optim -o adamw,adafactor --set adafactor.d=0.5
case_ bench_option_ns_workspace   "muon.ns_workspace_mb must be in [16, 1048576] MiB" bench_optim -o muon --set muon.ns_workspace_mb=1e10
case_ bench_velo_no_weights       "VeLO weights not found at '$tmp/no_weights'" \
  bench_optim -o velo --set velo.weights="$tmp/no_weights"
crafted_ bench_lopt_nan_weights   "meta-weights must be finite numbers" \
  bench_optim -o small_fc_lopt --set small_fc_lopt.weights="$crafted/mulo_nan"
flag_ --model bench_unknown_model "unknown model 'foo'; choose d12, d24, d36, d48 (GPT-2 124M to 1558M" bench_optim -e foo -o adamw
case_ bench_mlp_bad_width         "the width of -e 'mlp-w0-d1' is too small" bench_optim -e mlp-w0-d1 -o adamw
case_ bench_mlp_too_big           "more than 2^32 parameters"          bench_optim -e mlp-w65536-d2 -o adamw
case_ bench_matrix_bad_rows       "the rows of -e 'mat-0x8' is too small" bench_optim -e mat-0x8 -o adamw
case_ bench_matrix_one_tensor     "mat-64x64 has 1 tensors, fewer than --world 2" bench_optim -e mat-64x64 --world 2 -o adamw
flag_ --shapes bench_shapes_bool  "flag --shapes needs 0 or 1"         bench_optim --shapes maybe
case_ bench_old_models            "unknown flag '-m' (the models are -e (--model) now)" bench_optim -m gpt2-124m
case_ bench_old_models_long       "unknown flag '--models' (it is --model (-e) now)" bench_optim --models gpt2-124m
case_ bench_old_opts              "unknown flag '--opts=adamw' (it is --optimizer (-o) now)" bench_optim --opts=adamw
case_ bench_old_steps             "unknown flag '-n' (the timed steps are -x (--steps) now)" bench_optim -n 10
case_ bench_old_warmup            "unknown flag '--warmup' (the untimed steps are --untimed now)" bench_optim --warmup 2
case_ bench_old_set               "unknown flag '-s' (optimizer options are --set now)" bench_optim -s adamw.lr=1
flag_ --model opsbench_unknown_model "unknown model 'gpt2-9m'; choose d12, d24, d36 or d48" bench_gpt2_ops -e gpt2-124m,gpt2-9m
case_ opsbench_vit_model          "the model 'vit-b16' cannot be used here; choose d12, d24, d36 or d48" bench_gpt2_ops -e vit-b16
case_ opsbench_bad_batch          "the batch of -e 'd12:x' needs a number, got 'x'" bench_gpt2_ops -e d12:x
case_ opsbench_zero_batch         "the batch of -e 'd12:0' is too small" bench_gpt2_ops -e d12:0
case_ opsbench_no_model           "--model needs at least one model name" bench_gpt2_ops -e ,
flag_ --seq opsbench_bad_seq      "need --seq a multiple of 64"        bench_gpt2_ops -t 100
flag_ --tune opsbench_tune_negative "--tune >= 0"                      bench_gpt2_ops --tune -1
flag_ --reps opsbench_reps_zero   "--reps >= 1"                        bench_gpt2_ops --reps 0
flag_ --vit-attention opsbench_vit_attention_text "flag --vit-attention needs a number, got 'yes'" bench_gpt2_ops --vit-attention yes
flag_ --cudnn opsbench_cudnn_bool  "flag --cudnn needs 0 or 1, got 'yes'" bench_gpt2_ops --cudnn yes
flag_ --attention-only opsbench_attention_only_bool "flag --attention-only needs 0 or 1, got '2'" bench_gpt2_ops --attention-only 2
case_ gradsum_one_process          "launch 2 or more"                   bench_grad_sum --nccl-id-file "$tmp/id"
case_ gradsum_no_id_file           "give --nccl-id-file"                bench_grad_sum
flag_ --nccl-id-file gradsum_id_folder "is a folder; give a new file's path in it" bench_grad_sum --nccl-id-file "$tmp"
flag_ --sums gradsum_sums_zero     "--sums must be >= 1"                bench_grad_sum --nccl-id-file "$tmp/id" --sums 0
flag_ --reps gradsum_reps_zero     "--reps must be >= 1"                bench_grad_sum --nccl-id-file "$tmp/id" --reps 0
case_ opsbench_old_models         "unknown flag '-m' (the models are -e (--model) now)" bench_gpt2_ops -m gpt2-124m
case_ opsbench_old_tune           "unknown flag '-k' (it is --tune now)" bench_gpt2_ops -k 8
# The report tool (tools/report/): its subcommands' flags and inputs.
case_ report_median_no_log        "--log is needed"                    report median --program train_gpt2
case_ report_median_program       "--program must be train_gpt2 or train_vit (got 'x')" report median --program x --log "$tmp/l"
case_ report_unknown_flag         "unknown flag '--bogus'"             report plot-log --bogus 1
case_ report_plot_missing_log     "cannot read '$tmp/none.jsonl'"      report plot-log -i "$tmp/none.jsonl" --out "$tmp/x.svg"
printf '{"step":0,"val_loss":2.0}\n' >"$tmp/val_only.jsonl"
case_ report_plot_no_steps        "no training steps in '$tmp/val_only.jsonl'" report plot-log -i "$tmp/val_only.jsonl" --out "$tmp/x.svg"
case_ report_plot_smooth          "--smooth must be >= 1 (got 0)"      report plot-log -i "$tmp/val_only.jsonl" --out "$tmp/x.svg" --smooth 0
case_ report_compare_not_folder   "'$tmp/nope' is not a folder"        report compare -i "$tmp/nope" --out "$tmp/x"
case_ report_compare_task         "--task must be gpt2 or vit (got 'bert')" report compare -i "$tmp" --out "$tmp/x" --task bert
case_ report_pylo_not_folder      "'$tmp/nope' is not a folder"        report pylo -i "$tmp/nope"
case_ report_trace_no_input      "-i FILE is needed"                  report trace
case_ report_trace_missing        "cannot read '$tmp/none.txt'"        report trace -i "$tmp/none.txt"
case_ report_trace_no_lines       "has no trace lines of rank 0 from step 4 on" report trace -i "$tmp/val_only.jsonl"
case_ report_trace_no_ranks       "has no trace lines (STEP_TRACE=1)"   report trace -i "$tmp/val_only.jsonl" --rank -1
case_ report_dp_no_input          "-i FILE is needed"                  report dp
case_ report_dp_no_runs           "the input holds no run of Table 3"  report dp -i "$tmp/val_only.jsonl"
rm -f "$tmp/val_only.jsonl"
# The same model names in every program: the benchmarks read their names before their other checks.
case_ bench_model_names           "--steps must be >= 1"               bench_optim -e d12,124m,gpt2-124m,d48,tiny,vit-b16 -x 0
case_ opsbench_model_names        "need --seq a multiple of 64"        bench_gpt2_ops -e d12,124m:8,gpt2-124m,1558m:2 -t 100
if [ "$has_gpu" -eq 0 ]; then
  case_ bench_no_gpu              "$gpu_text and none is visible" bench_optim -o small_fc_lopt,velo -e gpt2-124m
  case_ opsbench_no_gpu           "$gpu_text and none is visible" bench_gpt2_ops -e d12
else
  skip_ bench_no_gpu "a GPU is visible"
fi

# ================================================================================================ tools
# The tools that take flags (built by `make all`; skipped where not built). Their expected texts name the
# flag or its value, the least that their sentence must say.
for t in ref_replay optim_replay; do
  ref=()
  [ "$t" = optim_replay ] && ref=(--ref 1)  # the CPU reference: no GPU needed to reach the checks
  flag_ --dir "${t}_dir_missing"    "cannot open '$tmp/none/manifest.txt'" "build/$t" -d "$tmp/none"
  flag_ --optimizer "${t}_optimizer" "unknown optimizer 'foo'"          "build/$t" ${ref[@]+"${ref[@]}"} -d "$tmp/replay" -o foo
  flag_ --set "${t}_set"            "unknown optimizer option 'adamw.nosuch'" "build/$t" ${ref[@]+"${ref[@]}"} -d "$tmp/replay" -s adamw.nosuch=1
  flag_ --out "${t}_out"            "writing the output"                "build/$t" ${ref[@]+"${ref[@]}"} -d "$tmp/replay" --out no/such.bin
  flag_ --trace "${t}_trace"        "flag --trace needs 0 or 1"         "build/$t" --trace maybe
done
flag_ --ref optim_replay_ref        "flag --ref needs 0 or 1"           build/optim_replay --ref maybe

dump=(--out "$tmp/dump")  # must not be created by a refused run
flag_ --precision gpt2_dump_precision "--precision must be fp32 or bf16" build/gpt2_dump "${dump[@]}" --precision fp8
flag_ --layers gpt2_dump_layers     "layers"                            build/gpt2_dump "${dump[@]}" --layers 0
flag_ --channels gpt2_dump_channels "channels"                          build/gpt2_dump "${dump[@]}" --channels 101
flag_ --heads gpt2_dump_heads       "heads"                             build/gpt2_dump "${dump[@]}" --heads 0
flag_ --vocab gpt2_dump_vocab       "vocab"                             build/gpt2_dump "${dump[@]}" --vocab 1
flag_ --max-seq gpt2_dump_max_seq   "max-seq"                           build/gpt2_dump "${dump[@]}" --max-seq 0
flag_ --qkv gpt2_dump_qkv           "--qkv must be separate or fused"   build/gpt2_dump "${dump[@]}" --qkv both
flag_ --batch gpt2_dump_batch       "-b"                                build/gpt2_dump "${dump[@]}" -b 0
flag_ --seq gpt2_dump_seq           "-t"                                build/gpt2_dump "${dump[@]}" -t 65
flag_ --steps gpt2_dump_steps       "-x"                                build/gpt2_dump "${dump[@]}" -x -1
flag_ --lr gpt2_dump_lr             "lr"                                build/gpt2_dump "${dump[@]}" -l -1
flag_ --wd gpt2_dump_wd             "wd"                                build/gpt2_dump "${dump[@]}" -c -1
flag_ --seed gpt2_dump_seed         "flag --seed needs a number"        build/gpt2_dump "${dump[@]}" --seed abc
flag_ --out gpt2_dump_out           "--out"                             build/gpt2_dump --out ""

vdump=(--ref-only 1 --out "$tmp/dump")
flag_ --image vit_dump_image        "image"                             build/vit_dump "${vdump[@]}" --image 30
flag_ --patch vit_dump_patch        "patch"                             build/vit_dump "${vdump[@]}" --patch 0
flag_ --channels vit_dump_channels  "--channels must be 1 or 3"         build/vit_dump "${vdump[@]}" --channels 2
flag_ --classes vit_dump_classes    "classes"                           build/vit_dump "${vdump[@]}" --classes 1
flag_ --layers vit_dump_layers      "layers"                            build/vit_dump "${vdump[@]}" --layers 0
flag_ --heads vit_dump_heads        "heads"                             build/vit_dump "${vdump[@]}" --heads 0
flag_ --qkv vit_dump_qkv            "--qkv must be separate or fused"   build/vit_dump "${vdump[@]}" --qkv both
flag_ --batch vit_dump_batch        "-b"                                build/vit_dump "${vdump[@]}" -b 0
flag_ --steps vit_dump_steps        "-x"                                build/vit_dump "${vdump[@]}" -x -1
flag_ --lr vit_dump_lr              "lr"                                build/vit_dump "${vdump[@]}" -l -1
flag_ --wd vit_dump_wd              "wd"                                build/vit_dump "${vdump[@]}" -c -1
flag_ --seed vit_dump_seed          "flag --seed needs a number"        build/vit_dump "${vdump[@]}" --seed abc
flag_ --ref-only vit_dump_ref_only  "flag --ref-only needs 0 or 1"      build/vit_dump --ref-only maybe --out "$tmp/dump"
flag_ --out vit_dump_out            "--out"                             build/vit_dump --ref-only 1 --out ""

photo=(-i "$crafted/photo.png" --out "$tmp/stage" -n 4)  # the staging folder must not be left behind
flag_ --input imagenet_like_input   "$tmp/none"                         build/make_imagenet_like -i "$tmp/none/*.jpg" --out "$tmp/stage"
flag_ --out imagenet_like_out       "$tmp/afile/stage"                  build/make_imagenet_like -i "$crafted/photo.png" --out "$tmp/afile/stage"
flag_ --images imagenet_like_images "-n"                                build/make_imagenet_like "${photo[@]}" -n 0
flag_ --per-shard imagenet_like_per_shard "--per-shard"                 build/make_imagenet_like "${photo[@]}" --per-shard 0
flag_ --seed imagenet_like_seed     "flag --seed needs a number"        build/make_imagenet_like "${photo[@]}" --seed abc
flag_ --threads imagenet_like_threads "--threads"                       build/make_imagenet_like "${photo[@]}" --threads -3
flag_ --gray-pct imagenet_like_gray_pct "--gray-pct"                    build/make_imagenet_like "${photo[@]}" --gray-pct 200
flag_ --png-pct imagenet_like_png_pct "--png-pct"                       build/make_imagenet_like "${photo[@]}" --png-pct -1
flag_ --progressive-pct imagenet_like_progressive_pct "--progressive-pct" build/make_imagenet_like "${photo[@]}" --progressive-pct 101

flag_ --input augment_input         "$tmp/none"                         build/bench_augment -i "$tmp/none/*.png"
flag_ --passes augment_passes       "--passes"                          build/bench_augment -i "$crafted/photo.png" --passes 0
flag_ --size augment_size           "size"                              build/bench_augment -i "$crafted/photo.png" --size 0
flag_ --randaugment augment_randaugment "RandAugment spec 'bogus'"      build/bench_augment -i "$crafted/photo.png" --randaugment bogus
flag_ --dump augment_dump           "$tmp/afile/dump"                   build/bench_augment -i "$crafted/photo.png" --passes 1 --dump "$tmp/afile/dump"

shards=(-i "$tmp/vit/good-{0..1}.tar" -b 2 --image 16 -x 1 --untimed 0)
flag_ --train loader_bench_train    "-i"                                build/bench_image_loader -i ""
flag_ --threads loader_bench_threads "--threads"                        build/bench_image_loader "${shards[@]}" --threads x
case_ loader_bench_threads_huge     "--threads"                         build/bench_image_loader "${shards[@]}" --threads 60000  # -b 2: 2 threads at most without the bound
flag_ --decoder loader_bench_decoder "image decoder 'gpu' is unknown"   build/bench_image_loader "${shards[@]}" --decoder gpu
flag_ --batch loader_bench_batch    "batch"                              build/bench_image_loader "${shards[@]}" -b 0
flag_ --image loader_bench_image    "size"                              build/bench_image_loader "${shards[@]}" --image 0
flag_ --classes loader_bench_classes "classes"                          build/bench_image_loader "${shards[@]}" --classes 0
flag_ --steps loader_bench_steps    "-x must be >= 1"                   build/bench_image_loader "${shards[@]}" -x 0
flag_ --untimed loader_bench_untimed "--untimed >= 0"                   build/bench_image_loader "${shards[@]}" --untimed -1
flag_ --shuffle loader_bench_shuffle "shuffle"                          build/bench_image_loader "${shards[@]}" --shuffle -1
flag_ --randaugment loader_bench_randaugment "RandAugment spec 'bogus'" build/bench_image_loader "${shards[@]}" --randaugment bogus

# Fashion-MNIST's IDX files (big-endian headers), one 28x28 image each, for fashion_mnist_to_wds.
be32() { printf '%b' "$(printf '\\0%03o\\0%03o\\0%03o\\0%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"; }
mkdir -p "$tmp/idx"
for split in train t10k; do
  { be32 2051; be32 1; be32 28; be32 28; head -c 784 /dev/zero; } >"$tmp/idx/$split-images-idx3-ubyte"
  { be32 2049; be32 1; printf '\003'; } >"$tmp/idx/$split-labels-idx1-ubyte"
done
flag_ --input fmnist_input          "$tmp/none"                         build/fashion_mnist_to_wds -i "$tmp/none" --out "$tmp/fmnist"
flag_ --out fmnist_out              "$tmp/afile/fmnist"                 build/fashion_mnist_to_wds -i "$tmp/idx" --out "$tmp/afile/fmnist"
flag_ --shard-size fmnist_shard_size "--shard-size"                     build/fashion_mnist_to_wds -i "$tmp/idx" --out "$tmp/fmnist" --shard-size 0

# ================================================================================================ coverage
# Every flag of every program's --help has a bad-value case above (flag_): a new flag without one fails.
help_flags() {  # EXE: the long names of the flags its --help lists, --help itself left out
  "$1" --help 2>/dev/null | sed -n -E 's/^  (-[A-Za-z0-9], |    )(--[a-z0-9][a-z0-9-]*).*/\2/p' | grep -vx -- --help
}
for prog in $programs $tools; do
  label=${prog##*/}
  if [ ! -x "$BIN_DIR/$prog" ]; then
    if is_tool "$prog"; then skip_ "flag_coverage_$label" "$BIN_DIR/$prog is not built"; else
      pass_or_fail "flag_coverage_$label" "$BIN_DIR/$prog is missing; build it first (make $prog)"
    fi
    continue
  fi
  listed=$(help_flags "$BIN_DIR/$prog")
  missing=""
  for f in $listed; do grep -qxF -- "$label $f" <<<"$covered" || missing+=" $f"; done
  if [ -z "$listed" ]; then
    pass_or_fail "flag_coverage_$label" "its --help lists no flags (has the help's format changed?)"
  else
    pass_or_fail "flag_coverage_$label" "${missing:+flags without a bad-value case:$missing}"
  fi
done

# --- --help lists the optimizer options that --set takes (its "unknown option" message points there) ---
for prog in train_gpt2 bench_optim build/optim_replay; do
  name=${prog##*/}
  if [ ! -x "$BIN_DIR/$prog" ]; then  # the test tools are not among the programs `make test-cpu` builds
    skip_ "${name}_help_lists_options" "$BIN_DIR/$prog is not built (make $prog)"
  elif "$BIN_DIR/$prog" --help >"$out/help" 2>&1 &&
    grep -q '^  adamw.lr=' "$out/help" && grep -q '^  muon.aux.beta2=' "$out/help" && grep -q '^  velo.num_steps=' "$out/help"; then
    pass_or_fail "${name}_help_lists_options" ""
  else
    pass_or_fail "${name}_help_lists_options" "$prog --help does not list the keys of --set (adamw.lr, muon.aux.beta2, velo.num_steps)"
  fi
done

# --- one vocabulary: a flag that two programs share has the same letter and long name in both ---
# help_has NAME PROGRAM TEXT...: PROGRAM --help lists every TEXT (fixed strings, e.g. "-e, --model").
help_has() {
  local name=$1 prog=$2 missing=()
  shift 2
  "$BIN_DIR/$prog" --help >"$out/help" 2>&1
  for t in "$@"; do grep -qF -- "$t" "$out/help" || missing+=("'$t'"); done
  pass_or_fail "$name" "${missing[*]:+$prog --help lacks ${missing[*]}}"
}
help_has train_vocabulary train_gpt2 "-e, --model" "-o, --optimizer" "-x, --steps" "-t, --seq" "-s, --sample-every" \
  "-g, --sample-tokens" "-k, --schedule" "      --clip" "      --resume" "      --set" "      --tokenizer"
help_has bench_vocabulary bench_optim "-e, --model" "-o, --optimizer" "-x, --steps" "      --clip" "      --set"
help_has opsbench_vocabulary bench_gpt2_ops "-e, --model" "-t, --seq"
help_has tokenize_vocabulary tokenize "-i, --input" "      --out" "      --tokenizer"

# --- temporary folders: none may remain, in the scratch $TMPDIR or in the shared one ---
left=$(ls -A "$TMPDIR")
pass_or_fail no_temporary_folders_left "${left:+left in \$TMPDIR: $(echo $left)}"

echo "cli errors: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# On the GPU machine: GPT-2 GPU suites, a short real training run on the KJV corpus, and an exact
# resume check (a run resumed from a checkpoint must log the same losses as the uninterrupted run).
# Expects data/kjv and tokenizer/ (or copies under .deps/).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.out}
mkdir -p "$OUT" data
[ -d data/kjv ] || cp -r .deps/data/kjv data/
[ -f tokenizer/r50k_base.tiktoken ] || { mkdir -p tokenizer && cp .deps/tokenizer/r50k_base.tiktoken tokenizer/; }
./build/test_gpu --gtest_filter='Gpt2*' 2>&1 | tee "$OUT/test_gpt2_gpu.log" | grep -E "OK|FAILED|Failure|Expected|Which|rel_err" | head -20
./train_gpt2 -x ${STEPS:-30} -v 10 -m 4 -k 20 -z 32 --log "$OUT/train_d12.jsonl" 2>&1 | tee "$OUT/train_d12.txt" | tail -n 25
rm -rf /tmp/ck && ./train_gpt2 -e tiny -b 4 -t 128 -x 12 -v 0 -k 0 -n 6 --ckpt-dir /tmp/ck --log /tmp/a.jsonl > /dev/null
./train_gpt2 -e tiny -b 4 -t 128 -x 12 -v 0 -k 0 -r /tmp/ck/model_00000006.bin --log /tmp/b.jsonl > /dev/null
if diff <(grep -E '"step":(7|8|9|10|11|12),' /tmp/a.jsonl | sed 's/,"ms".*//') <(sed 's/,"ms".*//' /tmp/b.jsonl); then
  echo "resume: bit-identical losses and grad norms for steps 7-12"
else
  echo "resume: MISMATCH"; exit 1
fi
# Out of memory must be one clear sentence and exit status 1, not a crash.
./train_gpt2 -e d48 -b 512 -x 1 -v 0 -k 0 > /dev/null 2> "$OUT/oom.txt"; rc=$?
if [ $rc -eq 1 ] && grep -q "out of GPU memory" "$OUT/oom.txt"; then echo "oom: clear message, exit 1"; else echo "oom: rc=$rc $(cat "$OUT/oom.txt")"; exit 1; fi
for o in velo small_fc_lopt muon adafactor; do  # every optimizer through the trainer (tiny model, random meta-weights)
  ./train_gpt2 -e tiny -b 4 -t 128 -x 20 -v 10 -m 2 -k 0 -o $o --lopt-random 1 2>&1 | grep -E "^step +(1|20)/|val loss|train_gpt2:" | tr '\n' ' '
  echo
done

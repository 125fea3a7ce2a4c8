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
for drop in 0 0.1; do  # with dropout the masks must continue where they were too (-d: 2 micro-batches a step)
  rm -rf /tmp/ck /tmp/a.jsonl /tmp/b.jsonl
  ./train_gpt2 -e tiny -b 4 -t 128 -d 1024 -x 12 -v 0 -k 0 -n 6 --dropout $drop --ckpt-dir /tmp/ck --log /tmp/a.jsonl > /dev/null
  ./train_gpt2 -e tiny -b 4 -t 128 -d 1024 -x 12 -v 0 -k 0 --dropout $drop -r /tmp/ck/model_00000006.bin --log /tmp/b.jsonl > /dev/null
  if diff <(grep -E '"step":(7|8|9|10|11|12),' /tmp/a.jsonl | sed 's/,"ms".*//') <(sed 's/,"ms".*//' /tmp/b.jsonl); then
    echo "resume (dropout $drop): bit-identical losses and grad norms for steps 7-12"
  else
    echo "resume (dropout $drop): MISMATCH"; exit 1
  fi
done
# A CUDA-graph run must log exactly what an eager run logs (with accumulation, dropout, several optimizers).
for o in adamw muon velo; do
  rm -f /tmp/g0.jsonl /tmp/g1.jsonl
  for g in 0 1; do
    ./train_gpt2 -e tiny -b 4 -t 128 -d 1024 -x 8 -v 0 -k 0 -o $o --lopt-random 1 --dropout 0.1 --cuda-graph $g --log /tmp/g$g.jsonl > /dev/null
  done
  if [ -s /tmp/g0.jsonl ] && diff <(sed 's/,"ms".*//' /tmp/g0.jsonl) <(sed 's/,"ms".*//' /tmp/g1.jsonl) > /dev/null; then
    echo "cuda graph ($o, dropout 0.1): losses and grad norms equal to eager, 8 steps"
  else
    echo "cuda graph ($o): MISMATCH"; exit 1
  fi
done
# Out of memory must be one clear sentence and exit status 1, not a crash.
./train_gpt2 -e d48 -b 512 -x 1 -v 0 -k 0 > /dev/null 2> "$OUT/oom.txt"; rc=$?
if [ $rc -eq 1 ] && grep -q "out of GPU memory" "$OUT/oom.txt"; then echo "oom: clear message, exit 1"; else echo "oom: rc=$rc $(cat "$OUT/oom.txt")"; exit 1; fi
for o in velo small_fc_lopt muon adafactor; do  # every optimizer through the trainer (tiny model, random meta-weights)
  ./train_gpt2 -e tiny -b 4 -t 128 -x 20 -v 10 -m 2 -k 0 -o $o --lopt-random 1 2>&1 | grep -E "^step +(1|20)/|val loss|train_gpt2:" | tr '\n' ' '
  echo
done

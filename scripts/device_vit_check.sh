#!/usr/bin/env bash
# On the GPU machine: train_vit's checks. The ViT GPU tests; on Fashion-MNIST shards (made from
# FASHION_MNIST_SRC or Debian's package if missing): exact resume (a run resumed from a checkpoint logs
# what the uninterrupted run logs, with mixup, cutmix and gradient accumulation on), CUDA graphs against
# eager steps, every optimizer through the trainer, out of memory as one sentence; then the timm
# cross-check. Any failure stops the script with status 1.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
[ -f data/fashion_mnist/fashion-mnist-validation-0000.tar ] || scripts/prepare_fashion_mnist.sh > /dev/null ||
  { echo "no Fashion-MNIST shards"; exit 1; }
source scripts/device_check_lib.sh
run() { run_trainer train_vit "$@"; }

./build/test_gpu --gtest_filter='VitBf16Gpu*' > "$OUT/test_vit_gpu.log" 2>&1 || fail "ViT GPU tests failed"
grep -E "^\[ +(OK|PASSED)|info" "$OUT/test_vit_gpu.log"

small=(-b 64 -d 128 -v 0 -u 2 --mixup 0.8 --cutmix 1.0 --threads 8)
rm -rf "$work/ck"
run "resume, first run" "${small[@]}" -x 16 -n 8 --ckpt-dir "$work/ck" --log "$work/a.jsonl"
run "resume, resumed run" "${small[@]}" -x 16 --resume "$work/ck/model_00000008.bin" --log "$work/b.jsonl"
expect_losses "$work/a.jsonl" 16 "resume, first run"
expect_losses "$work/b.jsonl" 8 "resume, resumed run"
diff <(losses "$work/a.jsonl" | tail -n 8) <(losses "$work/b.jsonl") || fail "resume: MISMATCH"
echo "resume (mixup/cutmix, 2 micro-batches a step): bit-identical losses and grad norms for steps 9-16"

for o in adamw velo; do
  for g in 0 1; do
    rm -f "$work/g$g.jsonl"
    run "cuda graph $g ($o)" "${small[@]}" -x 8 -o $o --lopt-random 1 --cuda-graph $g --log "$work/g$g.jsonl"
    expect_losses "$work/g$g.jsonl" 8 "cuda graph $g ($o)"
  done
  diff <(losses "$work/g0.jsonl") <(losses "$work/g1.jsonl") > /dev/null || fail "cuda graph ($o): MISMATCH"
  echo "cuda graph ($o, mixup/cutmix): losses and grad norms equal to eager, 8 steps"
done

for o in adamw adafactor muon velo small_fc_lopt; do
  ./train_vit -x 40 -v 20 -o $o --lopt-random 1 > "$work/stdout" 2>&1 || fail "$o: train_vit failed: $(tail -n 1 "$work/stdout")"
  grep -E "^step +(1|40)/|val loss" "$work/stdout" | cut -c1-90 | tr '\n' ' '
  echo
done

./train_vit --synthetic 1 -e vit-l16 --image 224 --channels 3 --classes 1000 -b 4096 -x 1 -v 0 > /dev/null 2> "$OUT/vit_oom.txt"
rc=$?
if [ $rc -eq 1 ] && grep -q "out of GPU memory" "$OUT/vit_oom.txt"; then echo "oom: clear message, exit 1"; else fail "oom: rc=$rc $(cat "$OUT/vit_oom.txt")"; fi
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary folders left behind: $(ls "$TMPDIR")"

make -s build/vit_dump > /dev/null || fail "vit_dump does not build"
python3 tests/timm_vit_crosscheck.py > "$OUT/timm_vit_crosscheck.jsonl" 2>&1
rc=$?
python3 - "$OUT/timm_vit_crosscheck.jsonl" << 'EOF'
import json, sys
for l in open(sys.argv[1]):
    try:
        j = json.loads(l)
    except ValueError:
        print(l.strip()); continue
    print(j.get("config"), j.get("what"), j.get("err"), "bound", j.get("bound"), "pass" if j.get("pass") else j.get("pass", "info"),
          j.get("torch_bf16", ""), j.get("error", ""))
EOF
[ $rc -eq 0 ] || fail "timm cross-check failed (exit status $rc)"
echo "timm cross-check: all checks pass"

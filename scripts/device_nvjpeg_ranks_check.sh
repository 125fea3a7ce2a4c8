#!/usr/bin/env bash
# On a machine with 2 GPUs and nvJPEG: two train_vit processes with --decoder nvjpeg must each decode on
# their own GPU, so GPU 0 holds one process and GPU 1 one. (train_vit once made the decoder before the
# process had picked its GPU, and every rank put a context on GPU 0.) The images are 2 shards of random
# 48 x 48 JPEGs written with Python's PIL (only the data; the check is nvidia-smi's process list).
#   TRAIN_VIT=path/to/train_vit scripts/device_nvjpeg_ranks_check.sh   (default ./train_vit)
# Status 1 when a GPU holds another count of processes (or none can be seen).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_preamble.sh
source scripts/device_check_lib.sh
exe=${TRAIN_VIT:-./train_vit}
decoder=${DECODER:-nvjpeg}
[ "$(nvidia-smi --list-gpus | wc -l)" -ge 2 ] || fail "needs 2 GPUs"
python3 - "$work" <<'PY' || fail "could not write the JPEG shards (python3 with PIL)"
import io, random, sys, tarfile
from PIL import Image
random.seed(1)
for s in range(2):
    with tarfile.open(f"{sys.argv[1]}/s-{s}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(64):
            img = Image.frombytes("RGB", (48, 48), bytes(random.getrandbits(8) for _ in range(48 * 48 * 3)))
            buf = io.BytesIO()
            img.save(buf, "JPEG", quality=90)
            for ext, data in (("jpg", buf.getvalue()), ("cls", str(i % 10).encode())):
                info = tarfile.TarInfo(f"s{s}_{i:04d}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
PY
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r "$exe" -i "$work/s-{0..1}.tar" -j "" --decoder "$decoder" -e vit-test --image 32 \
    --channels 3 --classes 10 -b 8 -x 100000 -v 0 --nccl-id-file "$work/id" --log "$work/r$r.jsonl" \
    > "$work/r$r.txt" 2>&1 &
  pids+=($!)
done
for ((i = 0; i < 600; i++)); do
  n=$(cat "$work/r0.jsonl" 2>/dev/null | grep -c '"loss"')
  [ "${n:-0}" -ge 20 ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { kill -9 "${pids[@]}" 2>/dev/null; fail "rank 0 ended: $(tail -n 2 "$work/r0.txt")"; }
  sleep 0.1
done
declare -A index
while IFS=', ' read -r i u; do index[$u]=$i; done < <(nvidia-smi --query-gpu=index,uuid --format=csv,noheader)
apps=$(nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader)
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader
kill -9 "${pids[@]}" 2>/dev/null
wait 2>/dev/null
count() { local n=0 p u; while IFS=', ' read -r p u; do [ "${index[$u]:-}" = "$1" ] && n=$((n + 1)); done <<<"$apps"; echo $n; }
n0=$(count 0) n1=$(count 1)
echo "$exe, 2 processes decoding with $decoder: $n0 process(es) on GPU 0, $n1 on GPU 1"
[ "$n0" = 1 ] && [ "$n1" = 1 ] || fail "each GPU must hold exactly one process (nvidia-smi: $(tr '\n' ';' <<<"$apps"))"
echo "nvjpeg ranks check passed"

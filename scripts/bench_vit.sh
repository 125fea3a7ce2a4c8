#!/usr/bin/env bash
# On a GPU machine: ViT training throughput of ./train_vit on synthetic batches held in memory (the
# model's and the optimizer's step, no data pipeline), one JSON line per configuration.
#
#   scripts/bench_vit.sh                          vit-b16 at B=256 and B=32
#   scripts/bench_vit.sh vit-s16:32 vit-l16:32    chosen configurations, MODEL:B
#   STEPS=20 EXTRA="-o velo --lopt-random 1" OUTFILE=results/h100_vit.jsonl scripts/bench_vit.sh vit-b16:32
#
# Each configuration runs, in the repository root,
#   ./train_vit --synthetic 1 -e MODEL --image 224 --channels 3 --classes 1000 -b B -x STEPS -u 2 -v 0 -o adamw
#               --log TMPFILE $EXTRA
# (EXTRA is split on whitespace; later flags win) and prints
#   {"model","params_m","B","img_per_s","mfu","step_ms","opt_ms","gpu","extra","timed_steps"}
# with medians over the logged steps after the first WARMUP (3). A failed run prints its error instead.
# Environment: STEPS (15), WARMUP (3), EXTRA (""), OUTFILE (lines also appended there), TRAIN_VIT (./train_vit),
# LAUNCH ("": a data-parallel launcher, e.g. "mpirun --allow-run-as-root -np 4"; each run then gets a fresh
# --nccl-id-file and the line "launch" and "world"; B is per process, img_per_s over all).
set -uo pipefail
for a in "$@"; do
  case "$a" in -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;; esac
done
outfile=${OUTFILE:-}
if [ -n "$outfile" ]; then
  case "$outfile" in /*) ;; *) outfile="$PWD/$outfile" ;; esac
  mkdir -p "$(dirname "$outfile")"
fi
cd "$(dirname "$0")/.." || exit 1
steps=${STEPS:-15}
warmup=${WARMUP:-3}
extra=${EXTRA:-}
exe=${TRAIN_VIT:-./train_vit}
read -r -a extra_args <<<"$extra"
launch_str=${LAUNCH:-}
read -r -a launch <<<"$launch_str"
for n in "$steps" "$warmup"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "bench_vit: STEPS and WARMUP must be whole numbers (got '$n')." >&2; exit 2; }
done
[ "$steps" -gt "$warmup" ] || { echo "bench_vit: STEPS ($steps) must be larger than WARMUP ($warmup)." >&2; exit 2; }
[ -x "$exe" ] || { echo "bench_vit: $exe not found; build it with 'make train_vit' (or set TRAIN_VIT)." >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench_vit: python3 is needed to compute the medians." >&2; exit 2; }
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(vit-b16:256 vit-b16:32)
for c in "${configs[@]}"; do
  [[ "$c" =~ ^vit-[a-z]+[0-9]+:[0-9]+$ ]] || { echo "bench_vit: bad configuration '$c'; use MODEL:B, e.g. vit-b16:256." >&2; exit 2; }
done
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_vit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for c in "${configs[@]}"; do
  IFS=: read -r model B <<<"$c"
  log="$tmp/$model-$B.jsonl"
  cmd=("${launch[@]}" "$exe" --synthetic 1 -e "$model" --image 224 --channels 3 --classes 1000 -b "$B" -x "$steps" -u 2
       -v 0 -o adamw --log "$log")
  if [ ${#launch[@]} -gt 0 ]; then
    rm -f "$tmp/nccl_id"
    cmd+=(--nccl-id-file "$tmp/nccl_id")
  fi
  cmd+=("${extra_args[@]}")
  echo "bench_vit: ${cmd[*]}" >&2
  "${cmd[@]}" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  line=$(python3 - "$log" "$tmp/stdout" "$tmp/stderr" "$rc" "$model" "$B" "$warmup" "$gpu" "$extra" "$launch_str" <<'PY'
import json, os, re, statistics, sys
log, out, err, rc, model, B, warmup, gpu, extra, launch = sys.argv[1:]
rc, B, warmup = int(rc), int(B), int(warmup)
stdout = open(out, errors="replace").read()
m = re.search(r"([0-9.]+)M params", stdout)
rec = {"model": model, "params_m": float(m.group(1)) if m else None, "B": B}
if launch:  # "data parallel: 4 processes (mpirun), ..."
    w = re.search(r"^data parallel: ([0-9]+) process", stdout, re.M)
    rec.update({"launch": launch, "world": int(w.group(1)) if w else None})
steps = [json.loads(s) for s in open(log)] if os.path.exists(log) else []
timed = [s for s in steps if "ms" in s and s["step"] > warmup]
if rc != 0 or not timed:
    lines = [l.strip() for l in open(err, errors="replace").read().splitlines() if l.strip()]
    rec.update({"gpu": gpu, "extra": extra, "error": lines[-1] if lines else f"exit status {rc}, no timed steps"})
else:
    med = lambda k: statistics.median(float(s[k]) for s in timed)
    rec.update({"img_per_s": round(med("img_per_s"), 1), "mfu": round(med("mfu"), 4), "step_ms": round(med("ms"), 3),
                "opt_ms": round(med("opt_ms"), 3), "gpu": gpu, "extra": extra, "timed_steps": len(timed)})
print(json.dumps(rec, separators=(",", ":")))
PY
  )
  [ -n "$line" ] || line="{\"model\":\"$model\",\"B\":$B,\"error\":\"bench_vit could not summarise the run (exit status $rc)\"}"
  echo "$line"
  if [ -n "$outfile" ]; then echo "$line" >>"$outfile"; fi
done

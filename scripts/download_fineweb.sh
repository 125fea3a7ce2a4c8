#!/usr/bin/env bash
# Downloads llm.c's pre-tokenized FineWeb-Edu GPT-2 token shards (needs the network):
#
#   scripts/download_fineweb.sh [TRAIN_SHARDS] [DEST]      defaults: 8 train shards, data/fineweb_edu
#
# Source (the design notes, data.md B1; llm.c's dev/data/edu_fineweb.sh): the Hugging Face dataset
# karpathy/fineweb-edu-100B-gpt2-token-shards, files edu_fineweb_val_000000.bin and
# edu_fineweb_train_000001.bin ... edu_fineweb_train_001001.bin. They are what llm.c's
# dev/data/fineweb.py --type edu writes (GPT-2 tokens, EOT before every document, 100M tokens =
# 200,001,024 bytes per shard, shard 0 = validation), cut from FineWeb-Edu's sample-100BT. llm.c names no
# pre-tokenized copy of sample-10BT; the first ~100 shards of this set are the same amount of data
# (10B tokens), and 8 shards (0.8B tokens, 1.6 GB) are plenty for short runs.
#
# Every file is downloaded to FILE.part with resume (curl -C - or wget -c), so running the script again
# continues where it stopped; a file is renamed into place only after its header checks out: magic
# 20240520, version 1, and a size of exactly 1024 + 2 * (token count in the header). Files already in
# place are checked and skipped. REPO=owner/name overrides the dataset (same file names), HF_ENDPOINT
# the Hugging Face host (a mirror).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
n_train=${1:-8}
dest=${2:-$root/data/fineweb_edu}
repo=${REPO:-karpathy/fineweb-edu-100B-gpt2-token-shards}
base="${HF_ENDPOINT:-https://huggingface.co}/datasets/$repo/resolve/main"
max_train=1001  # train shards in the dataset (llm.c's edu_fineweb.sh)

if ! [[ "$n_train" =~ ^[0-9]+$ ]] || [ "$n_train" -lt 1 ] || [ "$n_train" -gt "$max_train" ]; then
  echo "download_fineweb: the number of train shards must be 1 to $max_train (got '$n_train')." >&2
  exit 2
fi
if command -v curl >/dev/null; then
  fetch() { curl -fL --retry 5 --retry-delay 3 -C - -o "$2" "$1"; }
elif command -v wget >/dev/null; then
  fetch() { wget -c --tries=5 -O "$2" "$1"; }
else
  echo "download_fineweb: needs curl or wget." >&2
  exit 1
fi
mkdir -p "$dest"

# check FILE: prints why the file is not a complete llm.c GPT-2 shard, or nothing when it is one.
check() {
  local file=$1 size magic version ntok
  size=$(stat -c %s "$file")
  if [ "$size" -lt 1024 ]; then
    echo "it is $size bytes, shorter than the 1024-byte header"
    return
  fi
  read -r magic version ntok < <(od -An -t d4 -N 12 "$file")
  if [ "$magic" != 20240520 ] || [ "$version" != 1 ]; then
    echo "its header starts with magic $magic, version $version instead of 20240520, 1 (not an llm.c GPT-2 shard)"
  elif [ "$size" -ne $((1024 + 2 * ntok)) ]; then
    echo "it is $size bytes but its header promises $ntok tokens ($((1024 + 2 * ntok)) bytes)"
  fi
}
# resumable FILE: true when FILE is the start of a shard (valid header, fewer bytes than it promises).
resumable() {
  local size magic version ntok
  size=$(stat -c %s "$1")
  [ "$size" -ge 1024 ] || return 1
  read -r magic version ntok < <(od -An -t d4 -N 12 "$1")
  [ "$magic" = 20240520 ] && [ "$version" = 1 ] && [ "$size" -lt $((1024 + 2 * ntok)) ]
}

files=(edu_fineweb_val_000000.bin)
for ((i = 1; i <= n_train; i++)); do files+=("$(printf 'edu_fineweb_train_%06d.bin' "$i")"); done
echo "download_fineweb: ${#files[@]} files (1 val + $n_train train, about $(( (n_train + 1) * 200 )) MB) from $repo into $dest"

for f in "${files[@]}"; do
  path="$dest/$f"
  if [ -f "$path" ]; then
    why=$(check "$path")
    if [ -z "$why" ]; then
      echo "have $f"
      continue
    fi
    if resumable "$path"; then
      echo "download_fineweb: $path is incomplete ($why); resuming." >&2
      mv "$path" "$path.part"
    else
      echo "download_fineweb: $path is damaged ($why); downloading it again." >&2
      rm -f "$path" "$path.part"
    fi
  fi
  echo "fetch $f"
  if ! fetch "$base/$f" "$path.part"; then
    # A finished .part makes curl's resume fail (nothing left to fetch); accept it if it checks out.
    if [ -f "$path.part" ] && [ -z "$(check "$path.part")" ]; then
      mv "$path.part" "$path"
      continue
    fi
    echo "download_fineweb: downloading $base/$f failed; run the script again to resume." >&2
    exit 1
  fi
  why=$(check "$path.part")
  if [ -n "$why" ]; then
    if resumable "$path.part"; then
      echo "download_fineweb: $f stopped early: $why; run the script again to resume." >&2
    else
      rm -f "$path.part"  # an error page, a Git LFS pointer or an oversized file: start afresh next time
      echo "download_fineweb: $base/$f is not a valid shard: $why." >&2
    fi
    exit 1
  fi
  mv "$path.part" "$path"
done

rel=$(realpath -m --relative-to="$root" "$dest")
case "$rel" in ../*) rel=$(realpath -m "$dest") ;; esac
echo "FineWeb-Edu shards ready in $dest. Train GPT-2 124M on them from $root with:"
echo "  ./train_gpt2 -i '$rel/*train*.bin' -j '$rel/*val*.bin' -e d12 -b 16 -t 1024 -x 5000 -v 250"
echo "(add -d 524288 for llm.c's 0.5M-token steps through gradient accumulation)"

#!/usr/bin/env bash
# An ImageNet-like benchmark corpus from real photographs in Debian packages, as imagenet-1k-wds tar
# shards: OUT/imagenet1k-train-0000.tar, ... with members <key>.jpg, <key>.cls (random label 0-999) and
# <key>.json, in key order. For timing and testing the image pipeline, not for learning anything.
#
#   scripts/prepare_imagenet_like.sh OUT [IMAGES [PER_SHARD]]      (defaults 20000 images, 2000 per shard)
#   SEED=2 SPLIT=validation scripts/prepare_imagenet_like.sh data/imagenet_like_val 5000 1000
#
# Photos (19, all JPEG): 12 photographic wallpapers of plasma-workspace-wallpapers (the largest size of
# each; 94 MB .deb), the 5 puzzle photos of palapeli-data and sklearn's china.jpg and flower.jpg
# (python3-sklearn). The .debs are fetched with apt-get download and unpacked into a scratch folder inside
# OUT with dpkg -x (nothing is installed), and removed at the end. build/make_imagenet_like crops and
# re-encodes them (sizes and formats: see tools/make_imagenet_like.cpp); jpegtran (libjpeg-turbo-progs,
# from PATH or unpacked the same way) makes the ~3% gray samples one-component JPEGs and ~2% progressive,
# skipped with a message if unavailable; GNU tar packs each shard folder in sorted member order.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/prepare_imagenet_like.sh OUT [IMAGES [PER_SHARD]]}
images=${2:-20000}
per_shard=${3:-2000}
seed=${SEED:-1}
split=${SPLIT:-train}

mkdir -p "$out"
out=$(cd "$out" && pwd)  # tar runs inside each shard folder
work=$(mktemp -d "$out/.prepare.XXXXXX")
trap 'rm -rf "$work"' EXIT

make -s build/make_imagenet_like

echo "fetching the photo packages (about 98 MB)..."
if ! (cd "$work" && apt-get download -qq plasma-workspace-wallpapers palapeli-data python3-sklearn 2>"$work/apt.log"); then
  cat "$work/apt.log" >&2
  echo "prepare_imagenet_like: cannot download the photo packages; run 'apt-get update' first, or check the network." >&2
  exit 1
fi
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/x"; done
rm -f "$work"/*.deb

# The photos under readable names (the samples' .json names its source).
mkdir "$work/photos"
for name in BytheWater ColdRipple ColorfulCups DarkestHour EveningGlow FallenLeaf Grey Kite OneStandsOut Path \
  Shell summer_1am; do
  dir="$work/x/usr/share/wallpapers/$name/contents/images"
  # The largest JPEG size of the wallpaper (files are named WIDTHxHEIGHT.jpg).
  best=$(find "$dir" -maxdepth 1 -name '*x*.jpg' -printf '%f\n' | awk -Fx '{print $1 * $2, $0}' | sort -n |
    tail -n 1 | cut -d' ' -f2)
  ln -s "$dir/$best" "$work/photos/$name.jpg"
done
for name in castle-maintenon cincinnati-bridge citrus-fruits european-honey-bee panther-chameleon-female; do
  ln -s "$work/x/usr/share/palapeli/collection/$name.jpg" "$work/photos/$name.jpg"
done
for name in china flower; do
  ln -s "$work/x/usr/lib/python3/dist-packages/sklearn/datasets/images/$name.jpg" "$work/photos/$name.jpg"
done

build/make_imagenet_like -i "$work/photos/*.jpg" --out "$work/stage" -n "$images" --per-shard "$per_shard" \
  --seed "$seed"

# What stb_image_write cannot write: one-component (gray) JPEGs and progressive JPEGs.
jpegtran=$(command -v jpegtran || true)
if [ -z "$jpegtran" ]; then
  if (cd "$work" && apt-get download -q libjpeg-turbo-progs >/dev/null 2>&1); then
    dpkg -x "$work"/libjpeg-turbo-progs_*.deb "$work/jt"
    jpegtran="$work/jt/usr/bin/jpegtran"
  fi
fi
if [ -n "$jpegtran" ] && "$jpegtran" -version </dev/null >/dev/null 2>&1; then
  for kind in grayscale progressive; do  # both lossless: gray samples have neutral chroma
    count=0
    while read -r member; do
      "$jpegtran" "-$kind" -copy none -outfile "$work/stage/$member.tmp" "$work/stage/$member"
      mv "$work/stage/$member.tmp" "$work/stage/$member"
      count=$((count + 1))
    done <"$work/stage/$kind.txt"
    echo "jpegtran -$kind: $count JPEGs"
  done
else
  echo "skipping one-component gray and progressive JPEGs: jpegtran (libjpeg-turbo-progs) is not available."
fi

# One tar per shard folder, members sorted by name (key, then extension), ownership and times fixed so the
# same flags give the same bytes.
for dir in "$work"/stage/[0-9][0-9][0-9][0-9]; do
  tar_name="$out/imagenet1k-$split-$(basename "$dir").tar"
  (cd "$dir" && find . -maxdepth 1 -type f -printf '%P\n' | LC_ALL=C sort |
    tar --format=gnu --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$tar_name.tmp" -T -)
  mv "$tar_name.tmp" "$tar_name"
done
shards=("$out"/imagenet1k-"$split"-*.tar)
echo "wrote ${#shards[@]} shards to $out ($(du -ch "${shards[@]}" | tail -n 1 | cut -f1))"

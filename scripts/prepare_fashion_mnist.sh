#!/usr/bin/env bash
# Fashion-MNIST (Debian's dataset-fashion-mnist, data.md A2; MIT, (c) 2017 Zalando SE) as WebDataset tar
# shards in imagenet-1k-wds layout, for train_vit: fashion-mnist-train-{0000..0005}.tar (60,000 images,
# 10,000 per shard) and fashion-mnist-validation-0000.tar (the 10,000 test images), each sample a 28x28
# PNG and its class index (.cls). About 165 MB: tar's 512-byte blocks outweigh the ~600-byte PNGs.
#
#   scripts/prepare_fashion_mnist.sh [OUT_DIR]     (default data/fashion_mnist)
#   FASHION_MNIST_SRC=DIR scripts/prepare_fashion_mnist.sh   (the four .gz files from elsewhere: no apt)
#
# Installs dataset-fashion-mnist with apt-get where it is missing (and says so) and what the build lacks
# (scripts/setup.sh), builds build/fashion_mnist_to_wds, unpacks the IDX files into a folder under OUT_DIR
# and removes it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/fashion_mnist}
src=${FASHION_MNIST_SRC:-/usr/share/datasets/fashion-mnist}

# apt-get install, as root or through sudo; an index refresh first if the package is unknown.
install_package() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "prepare_fashion_mnist: installing Debian's $1 with apt-get." >&2
  $sudo apt-get install -y "$1" >/dev/null 2>&1 ||
    { $sudo apt-get update >/dev/null 2>&1 && $sudo apt-get install -y "$1" >/dev/null 2>&1; } || {
    echo "prepare_fashion_mnist: 'apt-get install $1' failed; install it (Debian/Ubuntu, online) and retry." >&2
    exit 1
  }
}
[ -f "$src/train-images-idx3-ubyte.gz" ] || install_package dataset-fashion-mnist
scripts/setup.sh
make build/fashion_mnist_to_wds >/dev/null

mkdir -p "$out"
work=$(mktemp -d "$out/idx.XXXXXX")
trap 'rm -rf "$work"' EXIT
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  gzip -dc "$src/$f.gz" >"$work/$f"
done
build/fashion_mnist_to_wds -i "$work" --out "$out"

#!/usr/bin/env bash
# Copies what a machine without apt or network needs into .deps/ (git-ignored), from this machine:
# stb_image's headers (.deps/stb, the Makefile's STB_DIR), GoogleTest's headers and static libraries
# (.deps/gtest, the Makefile's GTEST_DIR), the GPT-2 tokenizer ranks and the KJV shards where this
# checkout has them (.deps/tokenizer, .deps/data/kjv: scripts/setup.sh, prepare_kjv.sh and the device
# scripts take them from there). Run it here (`scripts/setup.sh --vendor`), then carry .deps/ along: the
# lent GPU machine has no libstb-dev, no libgtest-dev and no network.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test  # what is copied must be here first
src_lib=$(dirname "$(find /usr/lib /usr/local/lib -name libgtest.a 2>/dev/null | head -n1)")
if [ ! -d /usr/include/stb ] || [ ! -d /usr/include/gtest ] || [ ! -f "$src_lib/libgtest.a" ]; then
  echo "vendor_deps: stb or GoogleTest is not installed system-wide here (libstb-dev, libgtest-dev); nothing to copy." >&2
  exit 1
fi
mkdir -p .deps/stb/include/stb .deps/gtest/include .deps/gtest/lib
cp /usr/include/stb/stb_image.h /usr/include/stb/stb_image_write.h .deps/stb/include/stb/
cp -r /usr/include/gtest .deps/gtest/include/
cp "$src_lib"/libgtest.a "$src_lib"/libgtest_main.a .deps/gtest/lib/
mkdir -p .deps/tokenizer && cp tokenizer/r50k_base.tiktoken .deps/tokenizer/
if [ -f data/kjv/kjv_val_000000.bin ]; then mkdir -p .deps/data && rm -rf .deps/data/kjv && cp -r data/kjv .deps/data/; fi
echo "vendor_deps: $(du -sh .deps | cut -f1) in .deps/ (stb, gtest, tokenizer$([ -d .deps/data/kjv ] && echo ', data/kjv')); carry it along."

#!/usr/bin/env bash
# Copies this machine's GoogleTest (headers + static libraries) into .deps/gtest, which the Makefile
# uses when present. For machines that have a compiler but no libgtest-dev (e.g. the lent GPU machine,
# which cannot install packages): run it here, then carry .deps along.
set -euo pipefail
cd "$(dirname "$0")/.."
src_inc=/usr/include/gtest
src_lib=$(dirname "$(find /usr/lib /usr/local/lib -name libgtest.a 2>/dev/null | head -n1)")
[ -d "$src_inc" ] && [ -f "$src_lib/libgtest.a" ] || { echo "vendor_gtest: GoogleTest not found; install libgtest-dev." >&2; exit 1; }
mkdir -p .deps/gtest/include .deps/gtest/lib
cp -r "$src_inc" .deps/gtest/include/
cp "$src_lib"/libgtest.a "$src_lib"/libgtest_main.a .deps/gtest/lib/
echo "GoogleTest copied to .deps/gtest"

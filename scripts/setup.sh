#!/usr/bin/env bash
# What a fresh Debian or Ubuntu machine with only the CUDA Toolkit lacks, installed where it is missing, so
# that the README's commands need no other step: `make test` runs `scripts/setup.sh test` first, and
# scripts/prepare_kjv.sh and prepare_fashion_mnist.sh run `scripts/setup.sh`. A second run finds
# everything and changes nothing.
#
#   scripts/setup.sh [test] [fuzz]   the build's needs: make, g++, stb_image (libstb-dev); test: also
#                                    GoogleTest (libgtest-dev) and the GPT-2 tokenizer ranks; fuzz: clang 14
#   scripts/setup.sh --check [test]  installs nothing: one sentence naming what is missing, exit 1 (the
#                                    Makefile's check before compiling, so a missing header is no compiler error)
#   scripts/setup.sh --vendor        copies this machine's stb headers, GoogleTest, tokenizer ranks and KJV
#                                    shards into .deps/, for a machine without apt or network (the lent GPU
#                                    machine): carry .deps/ along and the same commands work there
#
# Packages come from apt-get, through sudo when not root. Where that cannot work (no apt-get, no sudo, no
# network) the script names the packages and the .deps/ path, and exits 1. The CUDA Toolkit and cuDNN 9
# are checked, never installed (NVIDIA's packages, not Debian's).
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUDNN_HOME=${CUDNN_HOME:-$CUDA_HOME}  # the Makefile's default: cuDNN in the toolkit's folders
STB_DIR=${STB_DIR:-.deps/stb}  # the Makefile's default for machines without libstb-dev

check="" test="" fuzz=""
for arg in "$@"; do
  case $arg in
    build) ;;
    test) test=1 ;;
    fuzz) fuzz=1 ;;
    --check) check=1 ;;
    --vendor) exec bash scripts/vendor_deps.sh ;;
    *) echo "setup: unknown argument '$arg'; it takes build, test, fuzz, --check or --vendor." >&2; exit 2 ;;
  esac
done

has_stb() {
  [ -f /usr/include/stb/stb_image.h ] && [ -f /usr/include/stb/stb_image_write.h ] ||
    { [ -f "$STB_DIR/include/stb/stb_image.h" ] && [ -f "$STB_DIR/include/stb/stb_image_write.h" ]; }
}
has_gtest() {
  [ -f .deps/gtest/include/gtest/gtest.h ] ||
    { [ -f /usr/include/gtest/gtest.h ] && [ -n "$(find /usr/lib /usr/local/lib -name libgtest.a 2>/dev/null | head -n1)" ]; }
}
has_cudnn() {  # the header and the library, under CUDNN_HOME or in the system's folders (as the Makefile looks)
  { [ -f "$CUDNN_HOME/include/cudnn.h" ] || [ -f /usr/include/cudnn.h ] || [ -f /usr/include/x86_64-linux-gnu/cudnn.h ]; } &&
    { [ -e "$CUDNN_HOME/lib64/libcudnn.so.9" ] || [ -e "$CUDNN_HOME/lib/libcudnn.so.9" ] ||
      { command -v ldconfig >/dev/null && ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 '; }; }
}
has_fuzzer() {  # clang and its libFuzzer runtime (libclang-rt-14-dev)
  { command -v clang++-14 || command -v clang++; } >/dev/null &&
    [ -n "$(find /usr/lib/llvm-14 /usr/lib/clang -name 'libclang_rt.fuzzer-x86_64.a' 2>/dev/null | head -n1)" ]
}

if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
  echo "setup: the CUDA Toolkit (nvcc) is not at $CUDA_HOME; install it (https://developer.nvidia.com/cuda-downloads) or set CUDA_HOME to where it is." >&2
  exit 1
fi

if ! has_cudnn; then
  echo "setup: cuDNN 9 (cudnn.h and libcudnn.so.9) is not under $CUDNN_HOME nor in the system's folders; install NVIDIA's cuDNN for your CUDA (the libcudnn9-dev-cuda-13 package from NVIDIA's CUDA repository, or pip's nvidia-cudnn-cu13) and set CUDNN_HOME to the folder that holds its include/ and lib/ (or lib64/)." >&2
  exit 1
fi

missing=()
command -v make >/dev/null || missing+=(make)
command -v g++ >/dev/null || missing+=(g++)
has_stb || missing+=(libstb-dev)
[ -z "$test" ] || has_gtest || missing+=(libgtest-dev)
[ -z "$fuzz" ] || has_fuzzer || missing+=(clang libclang-rt-14-dev)
ranks=tokenizer/r50k_base.tiktoken
if [ -n "$test" ] && [ ! -f $ranks ] && [ -f .deps/$ranks ]; then mkdir -p tokenizer && cp .deps/$ranks $ranks; fi
# download_tokenizer.sh fetches with npm or curl (https)
if [ -n "$test" ] && [ -z "$check" ] && [ ! -f $ranks ] && ! command -v npm >/dev/null && ! command -v curl >/dev/null; then
  missing+=(curl ca-certificates)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ -n "$check" ]; then
    echo "setup: this machine lacks ${missing[*]}; run scripts/setup.sh${test:+ test}${fuzz:+ fuzz} (it installs what is missing with apt-get), or see the README's \"Set up\" for machines without apt." >&2
    exit 1
  fi
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  echo "setup: installing ${missing[*]} with apt-get"
  install() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; }
  # An index refresh only when the first try fails (a fresh image has no package lists).
  if ! { command -v apt-get >/dev/null && { [ ${#sudo[@]} = 0 ] || command -v sudo >/dev/null; } &&
         { install || { "${sudo[@]}" apt-get update -qq >/dev/null 2>&1 && install; }; }; }; then
    echo "setup: could not install ${missing[*]} with apt-get (no apt-get, no sudo or no network); install them, or on a machine that has them run scripts/setup.sh --vendor and copy the .deps/ folder it fills into this checkout (the Makefile uses .deps/stb and .deps/gtest)." >&2
    exit 1
  fi
fi

if [ -n "$test" ] && [ -z "$check" ] && [ ! -f $ranks ]; then
  scripts/download_tokenizer.sh || {
    echo "setup: the tests need the GPT-2 tokenizer ranks ($ranks) and they could not be downloaded; copy the file from a machine that has it (scripts/setup.sh --vendor puts it in .deps/)." >&2
    exit 1
  }
fi
[ -n "$check" ] || echo "setup: ready (the build${test:+, the tests}${fuzz:+, the fuzz targets})."

#!/usr/bin/env bash
# Did a refactor change the machine code of any GPU function? Compiles the CUDA files matching the given
# patterns at revision BASE and in the working tree, with the Makefile's flags and -keep (the cubins
# ptxas wrote), and compares them function by function (scripts/compare_cubins.py: instruction bytes,
# registers, frame, parameter and shared-memory sizes; no GPU, cuobjdump or nvdisasm needed).
#
#   scripts/compare_kernels.sh BASE [PATTERN ...]   default patterns: 'optim/*.cu optim/*/*.cu kernels/*.cu'
#
# Work files go to build/kernel_compare/ (GPU_ARCH as in the Makefile, default 90); BASE's cubins are kept
# there and reused while BASE and the patterns stay the same. Exits 1 if a function of BASE has no
# identical function now.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,10p' "$0"; exit 2; }
base=$1
shift
patterns=${*:-'optim/*.cu optim/*/*.cu kernels/*.cu'}
arch=${GPU_ARCH:-90}
nvcc=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
work=build/kernel_compare
stamp="$(git rev-parse "$base") $arch $patterns"
fresh_base=1
[ -f "$work/before.stamp" ] && [ "$(cat "$work/before.stamp")" = "$stamp" ] && fresh_base=0
if [ $fresh_base = 1 ]; then
  rm -rf "$work"
  mkdir -p "$work/base_src" "$work/before"
  git archive "$base" | tar -x -C "$work/base_src"
fi
rm -rf "$work/after"
mkdir -p "$work/after"

compile() {  # compile ROOT OUT: every file of the patterns under ROOT, cubins kept in OUT/<file>/
  local root=$1 out
  out=$(realpath "$2")
  (cd "$root" && for p in $patterns; do for f in $p; do [ -f "$f" ] && echo "$f"; done; done) |
    xargs -P "${JOBS:-2}" -I{} sh -c "mkdir -p '$out/{}' && cd '$root' && '$nvcc' -std=c++17 -O3 -I. \
      -gencode arch=compute_$arch,code=[sm_$arch,compute_$arch] --expt-relaxed-constexpr -diag-suppress 177 \
      -keep -keep-dir '$out/{}' -c {} -o '$out/{}/obj.o' >/dev/null 2>'$out/{}/log' || { cat '$out/{}/log'; exit 255; }"
  find "$out" -type f ! -name '*.cubin' -delete
}
if [ $fresh_base = 1 ]; then
  compile "$work/base_src" "$work/before"
  echo "$stamp" > "$work/before.stamp"
fi
compile . "$work/after"
python3 scripts/compare_cubins.py "$work/before" "$work/after"

# Sourced first by the device check scripts, in the repository root: $OUT (where the device tool collects
# files; .out when run by hand), the KJV shards and tokenizer, copied from the carried .deps/ when the
# checkout has none, and CUDNN_HOME where cuDNN is not in the toolkit's folders but PyTorch's pip package
# has it (some of the lent machines, where the Makefile would otherwise stop and ask for CUDNN_HOME).
OUT=${OUT:-.out}
mkdir -p "$OUT" data
[ -d data/kjv ] || [ ! -d .deps/data/kjv ] || cp -r .deps/data/kjv data/
[ -f tokenizer/r50k_base.tiktoken ] || [ ! -f .deps/tokenizer/r50k_base.tiktoken ] ||
  { mkdir -p tokenizer && cp .deps/tokenizer/r50k_base.tiktoken tokenizer/; }
if [ -z "${CUDNN_HOME:-}" ] && [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cudnn.h" ]; then
  cudnn=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])' 2>/dev/null)
  if [ -n "$cudnn" ] && [ -f "$cudnn/include/cudnn.h" ]; then export CUDNN_HOME=$cudnn; fi
fi

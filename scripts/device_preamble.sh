# Sourced first by the device check scripts, in the repository root: $OUT (where the device tool collects
# files; .out when run by hand) and the KJV shards and tokenizer, copied from the carried .deps/ when the
# checkout has none.
OUT=${OUT:-.out}
mkdir -p "$OUT" data
[ -d data/kjv ] || cp -r .deps/data/kjv data/
[ -f tokenizer/r50k_base.tiktoken ] || { mkdir -p tokenizer && cp .deps/tokenizer/r50k_base.tiktoken tokenizer/; }

#!/usr/bin/env bash
# The default small real corpus: the King James Bible (public domain) from Debian's bible-kjv packages
# (data.md A1), one document per book, tokenized into llm.c shards in data/kjv/ (about 1.02M tokens;
# shard 0 = validation, 100k tokens). Installs what the build lacks (scripts/setup.sh), fetches the
# tokenizer, builds tokenize; the Bible comes from `apt-get download` (no install, needs the network).
# Does nothing when the shards are there; copies them from .deps/data/kjv where that exists (a machine
# without network: scripts/setup.sh --vendor fills it).
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/kjv
if [ ! -f $out/kjv_val_000000.bin ] && [ -f .deps/data/kjv/kjv_val_000000.bin ]; then
  mkdir -p data && cp -r .deps/data/kjv data/
fi
if [ -f $out/kjv_val_000000.bin ] && [ -f $out/kjv_train_000001.bin ]; then echo "KJV ready: $out"; exit 0; fi
scripts/setup.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -f tokenizer/r50k_base.tiktoken ] || scripts/download_tokenizer.sh
make tokenize
(cd "$work" && apt-get download bible-kjv bible-kjv-text >/dev/null 2>&1) || {
  echo "prepare_kjv: 'apt-get download bible-kjv bible-kjv-text' failed; this script needs Debian or Ubuntu with network access." >&2
  exit 1
}
for f in "$work"/*.deb; do dpkg -x "$f" "$work/x"; done
mkdir -p "$out/books"
# "Ge1:1 In the beginning ..." -> one file per book, references stripped.
"$work/x/usr/bin/bible" -p "$work/x/usr/lib/" -f 'gen1:1-rev22:21' |
  awk -v dir="$out/books" '{ book = $1; sub(/[0-9]+:[0-9]+$/, "", book); n = (book != last) ? n + 1 : n; last = book;
                             sub(/^[^ ]+ /, ""); printf "%s\n", $0 > sprintf("%s/%02d_%s.txt", dir, n, book) }'
./tokenize -i "$out/books/*.txt" --out "$out" --name kjv --shard-tokens 1000000 --val-tokens 100000

#!/usr/bin/env bash
# The larger real English corpus for the optimizer comparison: public-domain books (KJV, Austen, Melville,
# Wells, Verne, Dickens, Bierce, the Jargon File) and free-software manuals (Python, Django, PostgreSQL,
# SQLite, Rust, Git, Debian), all from Debian 12 packages, about 9.5M GPT-2 tokens in data/english/
# (english_val_000000.bin + one training shard; data/english/SOURCES.md lists the sources). The texts come
# out of the packages through scripts/english_corpus.py, one document per book or manual page; validation is
# whole documents. Needs apt-get (download only, nothing is installed), dpkg, python3 and the tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/english
max_tokens=15000000  # the shards travel to the GPU machine under a size limit (2 bytes a token)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -f tokenizer/r50k_base.tiktoken ] || scripts/download_tokenizer.sh
[ -x ./tokenize ] || make tokenize

mapfile -t packages < <(python3 scripts/english_corpus.py packages)
mkdir "$work/debs" "$work/pkg"
(cd "$work/debs" && apt-get download "${packages[@]}" >/dev/null 2>&1) || {
  echo "prepare_english: 'apt-get download ${packages[*]}' failed; this script needs Debian 12 (bookworm)" \
    "package lists and network access." >&2
  exit 1
}
declare -A version
for deb in "$work"/debs/*.deb; do
  pkg=$(dpkg-deb -f "$deb" Package)
  version[$pkg]=$(dpkg-deb -f "$deb" Version)
  dpkg -x "$deb" "$work/pkg/$pkg"
done
python3 scripts/english_corpus.py extract "$work/pkg" "$work/docs"

# Tokens of a set of documents: tokenize them into one scratch shard and read its count.
count() {
  rm -rf "$work/count" && mkdir "$work/count"
  ./tokenize "$@" --out "$work/count" --name count --shard-tokens 2000000000 --val-tokens 2000000000 |
    awk '{ print $4 }'  # "tokenize: D documents, T tokens, ..."
}
total=0
{
  echo "| source | packages | license | documents | GPT-2 tokens |"
  echo "|---|---|---|---|---|"
  while IFS=$'\t' read -r source pkgs license docs; do
    n=$(count -i "$work/docs/*/$source-*.txt")
    total=$((total + n))
    versions=$(for p in $pkgs; do printf '%s %s, ' "$p" "${version[$p]}"; done)
    echo "| $source | ${versions%, } | $license | $docs | $n |"
  done < "$work/docs/sources.tsv"
  echo "| total | | | | $total |"
} > "$work/SOURCES.md"
if [ "$total" -gt "$max_tokens" ]; then
  echo "prepare_english: the corpus has $total tokens, more than the $max_tokens allowed;" \
    "leave a source out in scripts/english_corpus.py." >&2
  exit 1
fi

# Validation first, and exactly as long as its documents, so that no document straddles the split; the
# training documents then fit one shard (the trainer shuffles samples within it).
val=$(count -i "$work/docs/val/*.txt")
mkdir -p "$out"
rm -f "$out"/english_*.bin
./tokenize -i "$work/docs/val/*.txt" -i "$work/docs/train/*.txt" --out "$out" --name english \
  --val-tokens "$val" --shard-tokens "$max_tokens"
echo "Validation: $val tokens (whole documents), training: $((total - val)) tokens." >> "$work/SOURCES.md"
cp "$work/SOURCES.md" "$out/SOURCES.md"
cat "$out/SOURCES.md"
ls -l "$out"/english_*.bin

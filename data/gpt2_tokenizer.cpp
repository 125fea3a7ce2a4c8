#include "data/gpt2_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <queue>

#include "common/error.h"

namespace {
struct CodeRange {
  uint32_t lo, hi;
};
#include "data/unicode_tables.inc"

template <size_t N>
bool in_table(const CodeRange (&t)[N], uint32_t cp) {
  auto it = std::upper_bound(t, t + N, cp, [](uint32_t c, const CodeRange& r) { return c < r.lo; });
  return it != t && cp <= (it - 1)->hi;
}
bool is_letter(uint32_t cp) { return cp < 0x80 ? ((cp | 32) >= 'a' && (cp | 32) <= 'z') : in_table(kLetters, cp); }
bool is_number(uint32_t cp) { return cp < 0x80 ? (cp >= '0' && cp <= '9') : in_table(kNumbers, cp); }
bool is_space(uint32_t cp) {  // Unicode White_Space
  return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// The code point at byte i of s and its length in bytes; invalid bytes are U+FFFD of length 1 (they are still
// encoded byte by byte, as the byte-level BPE requires). Decoded where the scanner stands, so the scan needs
// no per-byte arrays (12 bytes per input byte, 600 MB for a 50 MB text).
uint32_t cp_at(const std::string& s, size_t i, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  uint32_t cp = 0xFFFD;
  *len = 1;
  size_t n = 1;
  if (c < 0x80)
    return c;
  else if ((c >> 5) == 6) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c >> 4) == 14) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c >> 3) == 30) {
    n = 4;
    cp = c & 0x07;
  }
  bool ok = n > 1 && i + n <= s.size();
  for (size_t k = 1; ok && k < n; k++) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    ok = (d >> 6) == 2;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (!ok || cp < 0x80) return 0xFFFD;
  *len = n;
  return cp;
}

bool is_other(uint32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }

// Calls emit(begin, end) for each piece of GPT-2's pattern, in order (see the header).
template <class F>
void for_each_piece(const std::string& text, F&& emit) {
  const size_t n = text.size();
  auto run = [&](size_t j, bool (*pred)(uint32_t)) {  // the end of the run of pred from j
    for (size_t len; j < n && pred(cp_at(text, j, &len));) j += len;
    return j;
  };
  for (size_t i = 0; i < n;) {
    size_t l0, l1, l2 = 0;
    const uint32_t c0 = cp_at(text, i, &l0);
    size_t j = i;
    if (c0 == '\'' && i + l0 < n) {  // contractions
      const uint32_t a = cp_at(text, i + l0, &l1), b = i + l0 + l1 < n ? cp_at(text, i + l0 + l1, &l2) : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        j = i + l0 + l1;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        j = i + l0 + l1 + l2;
    }
    if (j == i) {
      const size_t k = (c0 == ' ' && i + l0 < n) ? i + l0 : i;  // " ?" before the three classes
      size_t lk;
      const uint32_t ck = cp_at(text, k, &lk);
      if (is_letter(ck))
        j = run(k, is_letter);
      else if (is_number(ck))
        j = run(k, is_number);
      else if (is_other(ck))
        j = run(k, is_other);
    }
    if (j == i) {  // whitespace: \s+(?!\S), else \s+
      size_t e = i, last = i, count = 0;
      for (size_t len; e < n && is_space(cp_at(text, e, &len)); e += len, count++) last = e;
      j = (e < n && count >= 2) ? last : e;
    }
    emit(i, j);
    i = j;
  }
}

// strtol's reading of a rank ("  42", "+7", "42x": 42) on [p, end), which is not NUL-terminated; -1 if no
// digits. Values past 2^31 only need to stay out of range.
long parse_rank(const char* p, const char* end) {
  while (p != end && (*p == ' ' || (*p >= '\t' && *p <= '\r'))) p++;
  bool neg = false;
  if (p != end && (*p == '+' || *p == '-')) neg = *p++ == '-';
  if (p == end || *p < '0' || *p > '9') return -1;
  long v = 0;
  for (; p != end && *p >= '0' && *p <= '9'; p++) v = std::min(v * 10 + (*p - '0'), 1L << 40);
  return neg ? -v : v;
}

// Decodes base64 [p, end) into *out (cleared first); false for a character outside the alphabet.
bool base64_decode(const char* p, const char* end, std::string* out) {
  static int8_t tab[256];
  static bool init = false;
  if (!init) {
    std::fill(tab, tab + 256, int8_t(-1));
    const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; i++) tab[uint8_t(a[i])] = int8_t(i);
    init = true;
  }
  out->clear();
  uint32_t val = 0;  // unsigned: old bits shift out harmlessly (a signed int overflowed here, UB)
  int bits = -8;
  for (; p != end && *p != '='; p++) {
    const int8_t d = tab[uint8_t(*p)];
    if (d < 0) return false;
    val = (val << 6) | uint32_t(d);
    bits += 6;
    if (bits >= 0) {
      *out += char((val >> bits) & 0xFF);
      bits -= 8;
    }
  }
  return true;
}
}  // namespace

std::vector<std::pair<size_t, size_t>> gpt2_pretokenize(const std::string& text) {
  std::vector<std::pair<size_t, size_t>> out;
  for_each_piece(text, [&](size_t a, size_t b) { out.emplace_back(a, b); });
  return out;
}

// The file is read whole (at most 64 MB) and parsed in place, each token decoded straight into bytes_: a few
// allocations per rank at most (most tokens fit std::string's inline buffer).
namespace {
std::string read_ranks_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) user_error("cannot open the GPT-2 tokenizer '", path, "'; run scripts/download_tokenizer.sh.");
  const std::streamoff size = f.tellg();
  if (size < 0 || size > (std::streamoff(64) << 20))  // r50k_base.tiktoken is 0.8 MB
    user_error("'", path, "' is not a file of GPT-2 ranks (", size, " bytes); run scripts/download_tokenizer.sh.");
  std::string text(size_t(size), '\0');
  f.seekg(0);
  if (!f.read(&text[0], size)) user_error("cannot read the GPT-2 tokenizer '", path, "'.");
  return text;
}
}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& path) : Gpt2Tokenizer(FromBytes{}, read_ranks_file(path), path) {}

Gpt2Tokenizer::Gpt2Tokenizer(FromBytes, const std::string& text, const std::string& path) {
  bytes_.resize(kVocab);
  slots_.assign(size_t(1) << 17, -1);
  std::string tok;
  int lines = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t e = std::min(text.find('\n', i), text.size());
    const char* line = text.data() + i;
    const size_t len = e - i;
    i = e + 1;
    if (len == 0) continue;
    const char* sp = static_cast<const char*>(std::memchr(line, ' ', len));
    bool ok = sp && base64_decode(line, sp, &tok);
    const long rank = ok ? parse_rank(sp + 1, line + len) : -1;
    if (!ok || rank < 0 || rank >= kEot || !bytes_[size_t(rank)].empty())
      user_error("'", path, "' line ", lines + 1,
                 " is not 'base64 rank' with a new rank below 50256; it is not r50k_base.tiktoken.");
    bytes_[size_t(rank)] = tok;
    add_rank(int(rank));
    lines++;
  }
  if (lines != kEot)
    user_error("'", path, "' has ", lines, " ranks but GPT-2 has 50256; the file is incomplete or not r50k_base.");
  for (int b = 0; b < 256; b++) {  // byte-level BPE starts from single bytes: each must be a token
    const char c = char(b);
    if (rank_of(std::string_view(&c, 1)) < 0)
      user_error("'", path, "' has no token for the byte 0x", "0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15],
                 "; it is not r50k_base.tiktoken (run scripts/download_tokenizer.sh).");
  }
  bytes_[kEot] = "<|endoftext|>";
}

int Gpt2Tokenizer::rank_of(std::string_view bytes) const {
  const size_t mask = slots_.size() - 1;
  for (size_t h = std::hash<std::string_view>()(bytes) & mask;; h = (h + 1) & mask) {
    const int32_t id = slots_[h];
    if (id < 0 || bytes_[size_t(id)] == bytes) return id;
  }
}

void Gpt2Tokenizer::add_rank(int id) {
  const size_t mask = slots_.size() - 1;  // at most 50,256 ids in 2^17 slots: probes stay short
  size_t h = std::hash<std::string_view>()(bytes_[size_t(id)]) & mask;
  while (slots_[h] >= 0 && bytes_[size_t(slots_[h])] != bytes_[size_t(id)]) h = (h + 1) & mask;
  slots_[h] = id;
}

// Merges the lowest-ranked adjacent pair, leftmost first, until no pair is a token (GPT-2's BPE). The
// parts are a linked list over the piece's bytes (a part is named by its first byte, next[] holds its end)
// and the candidate pairs sit in a min-heap by (rank, position), so a merge costs O(log n), not a rescan
// of the piece: a 40 KB word takes milliseconds instead of a minute. Heap entries that a merge made
// stale are recognised by their ends and skipped; the merge order is exactly the rescanning one's.
void Gpt2Tokenizer::bpe(const std::string& piece, std::vector<int>* out) const {
  const std::string_view view(piece);
  const int whole = rank_of(view);
  if (whole >= 0) return out->push_back(whole);
  const size_t n = piece.size();
  std::vector<size_t> next(n), prev(n);  // part starting at byte i: [i, next[i]); prev[i] = previous part's start
  for (size_t i = 0; i < n; i++) next[i] = i + 1, prev[i] = i - 1;  // prev[0] wraps: "none"
  struct Pair {
    int rank;
    size_t left, mid, end;  // parts [left, mid) and [mid, end)
    bool operator>(const Pair& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Pair, std::vector<Pair>, std::greater<Pair>> heap;
  auto push = [&](size_t left) {  // the pair of part `left` and the part after it, if it is a token
    const size_t mid = next[left];
    if (mid >= n) return;
    const int rank = rank_of(view.substr(left, next[mid] - left));
    if (rank >= 0) heap.push({rank, left, mid, next[mid]});
  };
  for (size_t i = 0; i + 1 < n; i++) push(i);
  while (!heap.empty()) {
    const Pair p = heap.top();
    heap.pop();
    if (next[p.left] != p.mid || next[p.mid] != p.end) continue;  // stale: one of the parts has changed
    next[p.left] = p.end;
    next[p.mid] = p.mid;  // a merged-away part: no pair of its can match again
    if (p.end < n) prev[p.end] = p.left;
    if (p.left > 0) push(prev[p.left]);
    push(p.left);
  }
  for (size_t i = 0; i < n; i = next[i]) {
    const int rank = rank_of(view.substr(i, next[i] - i));
    CHECK(rank >= 0);  // every part is a single byte or a merge of two tokens
    out->push_back(rank);
  }
}

// A piece longer than kMaxBpeBytes is merged in chunks of that size, cut at a character boundary: the merge
// takes about 60 bytes of memory per byte of its piece (a single 50 MB "word" took 3 GB), and no natural
// text has a 64 KiB word or run (tiktoken would merge it whole; the tokens then differ near the cuts).
std::vector<int> Gpt2Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  for_each_piece(text, [&](size_t a, size_t b) {
    while (b - a > kMaxBpeBytes) {
      size_t cut = a + kMaxBpeBytes;
      while (cut > a + 1 && (static_cast<unsigned char>(text[cut]) >> 6) == 2) cut--;  // not inside a character
      bpe(text.substr(a, cut - a), &ids);
      a = cut;
    }
    bpe(text.substr(a, b - a), &ids);
  });
  return ids;
}

const std::string& Gpt2Tokenizer::token_bytes(int id) const {
  if (id < 0 || id >= kVocab) user_error("token id ", id, " is outside the GPT-2 vocabulary.");
  return bytes_[size_t(id)];
}

std::string Gpt2Tokenizer::decode(const std::vector<int>& ids) const {
  std::string s;
  for (int id : ids) s += token_bytes(id);
  return s;
}

// GPT-2 tokenizer: golden ids produced by the reference JavaScript implementation (npm gpt-tokenizer
// 4.0.0, r50k_base, encode with no special tokens) for text that exercises every branch of the
// pre-tokeniser: contractions, leading spaces, whitespace runs, numbers, punctuation, accents, CJK,
// emoji (multi-token byte pieces), compatibility characters, and the literal "<|endoftext|>".
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>

#include "data/gpt2_tokenizer.h"
#include "tests/test_util.h"

namespace {
const char* kTok = "tokenizer/r50k_base.tiktoken";
}

class Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(kTok)) FAIL() << kTok << " is missing; run scripts/download_tokenizer.sh (the CI script does).";
  }
};

TEST_F(Tokenizer, GoldenIds) {
  Gpt2Tokenizer tok(kTok);
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"Hello world, it's a test.", {15496, 995, 11, 340, 338, 257, 1332, 13}},
      {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}},
      {"  leading spaces and  double  spaces  ", {220, 3756, 9029, 290, 220, 4274, 220, 9029, 220, 220}},
      {"tabs\x09"
       "and\x0a"
       "newlines\x0a"
       "\x0a"
       "\x0a"
       "end",
       {8658, 82, 197, 392, 198, 3605, 6615, 628, 198, 437}},
      {"We'll they're I've you'd she's DON'T", {1135, 1183, 484, 821, 314, 1053, 345, 1549, 673, 338, 23917, 6, 51}},
      {"numbers 12345 and 3.14159, 1,000,000",
       {77, 17024, 17031, 2231, 290, 513, 13, 1415, 19707, 11, 352, 11, 830, 11, 830}},
      {"\xc3"
       "\x9c"
       "n\xc3"
       "\xaf"
       "c\xc3"
       "\xb6"
       "d\xc3"
       "\xa9"
       " na\xc3"
       "\xaf"
       "ve caf\xc3"
       "\xa9"
       " \xe2"
       "\x80"
       "\x94"
       " \xe2"
       "\x80"
       "\x9c"
       "quotes\xe2"
       "\x80"
       "\x9d"
       " \xe2"
       "\x80"
       "\xa6",
       {127, 250, 77, 26884, 66, 9101, 67, 2634, 41492, 40304, 851, 564, 250, 421, 6421, 447, 251, 3926}},
      {"\xe6"
       "\x97"
       "\xa5"
       "\xe6"
       "\x9c"
       "\xac"
       "\xe8"
       "\xaa"
       "\x9e"
       "\xe3"
       "\x81"
       "\xae"
       "\xe3"
       "\x83"
       "\x86"
       "\xe3"
       "\x82"
       "\xad"
       "\xe3"
       "\x82"
       "\xb9"
       "\xe3"
       "\x83"
       "\x88"
       "\xe3"
       "\x80"
       "\x81"
       "\xe4"
       "\xb8"
       "\xad"
       "\xe6"
       "\x96"
       "\x87"
       "\xe5"
       "\xad"
       "\x97"
       "\xe7"
       "\xac"
       "\xa6"
       "\xe3"
       "\x80"
       "\x82",
       {33768, 98,    17312, 105, 45739, 252, 5641, 24336, 25084, 43302,
        23513, 40792, 23877, 229, 27764, 245, 163,  105,   99,    16764}},
      {"emoji \xf0"
       "\x9f"
       "\x8e"
       "\x89"
       "\xf0"
       "\x9f"
       "\x91"
       "\x8d"
       "\xf0"
       "\x9f"
       "\x8f"
       "\xbd"
       " mixed",
       {368, 31370, 12520, 236, 231, 41840, 235, 8582, 237, 121, 7668}},
      {"x = a*b + c/d; // code", {87, 796, 257, 9, 65, 1343, 269, 14, 67, 26, 3373, 2438}},
      {"   \x0a"
       "  \x09"
       " ",
       {220, 220, 220, 198, 220, 220, 197, 220}},
      {"$$$ %%% ^^^", {13702, 3, 4064, 16626, 10563, 18237}},
      {"\xef"
       "\xac"
       "\x81"
       "nance \xc2"
       "\xbd"
       " \xc2"
       "\xb2"
       " \xe2"
       "\x85"
       "\xa7",
       {171, 105, 223, 41601, 25208, 1587, 110, 2343, 227, 100}},
      {"", {}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tok.encode(text), ids) << text;
    EXPECT_EQ(tok.decode(ids), text) << "round trip";
  }
  EXPECT_EQ(tok.decode({Gpt2Tokenizer::kEot}), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(0), "!");
}

TEST_F(Tokenizer, PretokenizerPieces) {
  auto pieces = [](const std::string& s) {
    std::vector<std::string> out;
    for (auto [a, b] : gpt2_pretokenize(s)) out.push_back(s.substr(a, b - a));
    return out;
  };
  EXPECT_EQ(pieces("a  b"), (std::vector<std::string>{"a", " ", " b"}));
  EXPECT_EQ(pieces("it's 42!"), (std::vector<std::string>{"it", "'s", " 42", "!"}));
  EXPECT_EQ(pieces("x \n"), (std::vector<std::string>{"x", " \n"}));
}

TEST(TokenizerFile, BadFilesAreRefused) {
  const std::string d = make_temp_dir();
  expect_user_error([&] { Gpt2Tokenizer t(d + "/missing.tiktoken"); }, "scripts/download_tokenizer.sh");
  write_file(d + "/bad.tiktoken", "IQ== 0\nnot base64 at all\n");
  expect_user_error([&] { Gpt2Tokenizer t(d + "/bad.tiktoken"); }, "line 2");
  write_file(d + "/short.tiktoken", "IQ== 0\nIg== 1\n");
  expect_user_error([&] { Gpt2Tokenizer t(d + "/short.tiktoken"); }, "has 2 ranks");
}

// Security review (issue 12): a ranks file without one of the 256 single-byte tokens used to load and
// then abort tokenize (std::out_of_range) on the first text containing that byte.
TEST_F(Tokenizer, MissingSingleByteTokenIsRefusedAtLoad) {
  const std::string d = make_temp_dir(), f = d + "/r50k.tiktoken";
  std::string ranks = read_file(kTok);
  ASSERT_EQ(ranks.substr(0, 7), "IQ== 0\n");    // rank 0 is the byte '!' (0x21)
  write_file(f, "AAA= 0\n" + ranks.substr(7));  // rank 0 becomes the two bytes 00 00 instead
  expect_user_error([&] { Gpt2Tokenizer t(f); }, "has no token for the byte 0x21");
}

namespace {
// The textbook BPE (merge the lowest-ranked adjacent pair, leftmost first, until none is left), written
// plainly: quadratic, but an independent check of the tokenizer's faster merge.
std::vector<int> naive_encode(const std::map<std::string, int>& ranks, const std::string& text) {
  std::vector<int> ids;
  for (auto [a, b] : gpt2_pretokenize(text)) {
    std::vector<std::string> parts;
    for (size_t k = a; k < b; k++) parts.emplace_back(1, text[k]);
    for (;;) {
      int best = -1;
      size_t at = 0;
      for (size_t k = 0; k + 1 < parts.size(); k++) {
        auto it = ranks.find(parts[k] + parts[k + 1]);
        if (it != ranks.end() && (best < 0 || it->second < best)) {
          best = it->second;
          at = k;
        }
      }
      if (best < 0) break;
      parts[at] += parts[at + 1];
      parts.erase(parts.begin() + long(at) + 1);
    }
    for (const auto& p : parts) ids.push_back(ranks.at(p));
  }
  return ids;
}
}  // namespace

TEST_F(Tokenizer, MergeOrderMatchesTextbookBpe) {
  Gpt2Tokenizer tok(kTok);
  std::map<std::string, int> ranks;
  for (int id = 0; id < Gpt2Tokenizer::kEot; id++) ranks[tok.token_bytes(id)] = id;
  const std::vector<std::string> alphabet = {
      "a", "b", "e",  "n",   "s", "t", "r", "i", "o", " ", ".", "'", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80",
      "1", "0", "\n", "\xff"};
  std::mt19937 rng(12);
  for (int n = 0; n < 300; n++) {
    std::string text;
    const size_t len = 1 + rng() % 200;
    for (size_t k = 0; k < len; k++) text += alphabet[rng() % (k % 7 == 0 ? alphabet.size() : 9)];
    ASSERT_EQ(tok.encode(text), naive_encode(ranks, text)) << text;
  }
}

// One 40 KB "word" took 46 s with a quadratic merge loop; the heap-ordered merge takes milliseconds.
TEST_F(Tokenizer, LongWordEncodesFast) {
  Gpt2Tokenizer tok(kTok);
  std::mt19937 rng(3);
  std::string random_word, repeated(40000, 'a');
  for (int k = 0; k < 40000; k++) random_word += char('a' + rng() % 26);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> r = tok.encode(random_word), a = tok.encode(repeated);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 0.5);
  EXPECT_EQ(tok.decode(r), random_word);
  EXPECT_EQ(tok.decode(a), repeated);
  // 40000 a's: "aa" merges first, then "aaaa" (the longest run of a's in r50k), leftmost first.
  EXPECT_EQ(a, std::vector<int>(10000, 24794));
  EXPECT_EQ(tok.token_bytes(24794), "aaaa");
}

// A 50 MB "word" took 3.08 GB and 67 s. Pieces over kMaxBpeBytes are merged in chunks (cut at a character),
// and the scan keeps no per-byte arrays: a 4 MB word encodes within 8 bytes of address space per input byte
// (RLIMIT_AS, in a child process), and a long piece gives its chunks' tokens.
class TokenizerDeathTest : public Tokenizer {};

TEST_F(TokenizerDeathTest, AHugeWordStaysWithinASmallMultipleOfItsSize) {
  Gpt2Tokenizer tok(kTok);
  std::mt19937 rng(4);
  std::string word(size_t(4) << 20, 'a');
  for (char& c : word) c = char('a' + rng() % 26);
  auto body = [&] {
    alarm(120);
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    rlimit lim;
    getrlimit(RLIMIT_AS, &lim);
    lim.rlim_cur = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + 8 * word.size();
    if (setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(4);
    std::vector<int> ids;
    try {
      ids = tok.encode(word);
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "out of memory\n");
      std::_Exit(2);
    }
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_AS, &lim);
    std::fprintf(stderr, "encoded\n");
    std::_Exit(tok.decode(ids) == word ? 1 : 3);
  };
  EXPECT_EXIT(body(), testing::ExitedWithCode(1), "encoded");
}

TEST_F(Tokenizer, ALongPieceIsMergedInChunks) {
  Gpt2Tokenizer tok(kTok);
  const size_t k = Gpt2Tokenizer::kMaxBpeBytes;
  std::vector<int> want = tok.encode(std::string(k, 'a')), tail = tok.encode("aaaa");
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(tok.encode(std::string(k + 4, 'a')), want);
  // A cut never splits a character: 2-byte letters, the chunk ends a byte early.
  std::string e;
  while (e.size() < k + 10) e += "\xc3\xa9";
  const std::vector<int> ids = tok.encode(e);
  EXPECT_EQ(tok.decode(ids), e);
  std::vector<int> first = tok.encode(e.substr(0, k)), rest = tok.encode(e.substr(k));
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(ids, first) << "k is even: the cut falls between two characters";
}

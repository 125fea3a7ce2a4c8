// The embedding backward (kernels/embedding.h) against a CPU reference that adds in the order the header
// promises, bit for bit: windows of sorted positions, each token's rows summed in position order within a
// window, the windows' sums added in window order. The inputs hold a frequent token whose rows cross many
// windows, tokens that cross one window edge, singletons, a short last window and column counts that leave
// lanes idle; each case first checks that the order matters for its input (else equality would not show it).
#include <algorithm>
#include <numeric>
#include <random>

#include "kernels/embedding.h"
#include "tests/gpu/bf16_test_util.h"
#include "tests/test_util.h"

namespace {
class EmbeddingGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

// dwpe and dwte += the backward of dx (N = B*T rows of C) in encoder_backward's order, windows of `window`
// sorted positions (window >= N: one running sum per token, the order before windows).
void ref_backward(std::vector<float>& dwte, std::vector<float>& dwpe, const std::vector<float>& dx,
                  const std::vector<int>& tok, int B, int T, int C, int window) {
  const int N = B * T;
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) {
      float s = 0.0f;
      for (int b = 0; b < B; b++) s += dx[(size_t(b) * T + t) * C + c];
      dwpe[size_t(t) * C + c] += s;
    }
  std::vector<int> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return tok[size_t(a)] < tok[size_t(b)]; });
  for (int a = 0, e; a < N; a = e) {
    const int v = tok[size_t(order[size_t(a)])];
    for (e = a; e < N && tok[size_t(order[size_t(e)])] == v; e++) {
    }
    const int first = a / window, last = (e - 1) / window;
    for (int c = 0; c < C; c++) {
      float total = 0.0f;
      for (int w = first; w <= last; w++) {
        float acc = 0.0f;
        for (int p = std::max(a, w * window); p < std::min(e, (w + 1) * window); p++)
          acc += dx[size_t(order[size_t(p)]) * C + c];
        total = first == last ? acc : total + acc;
      }
      dwte[size_t(v) * C + c] += total;
    }
  }
}

// One process's token sums as token_sums promises them: per token (ascending ids), the sum of its rows in
// encoder_backward's order; and per position, the sum over the batch.
struct RefSums {
  std::vector<int> ids;
  std::vector<float> rows, wpe;
};
RefSums ref_token_sums(const std::vector<float>& dx, const std::vector<int>& tok, int B, int T, int C, int vocab) {
  std::vector<float> table(size_t(vocab) * C, 0.0f), wpe(size_t(T) * C, 0.0f);
  ref_backward(table, wpe, dx, tok, B, T, C, kEmbeddingWindow);
  std::vector<int> seen(tok);
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  RefSums r{seen, {}, wpe};
  for (int v : seen) r.rows.insert(r.rows.end(), table.begin() + size_t(v) * C, table.begin() + size_t(v + 1) * C);
  return r;
}

// Tokens of a (B, T) batch: `frequent` of them token 7, then token 3 with 10%, the rest uniform in [0, vocab).
std::vector<int> tokens(int N, int vocab, double frequent, uint32_t seed) {
  std::mt19937 r(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> any(0, vocab - 1);
  std::vector<int> t(static_cast<size_t>(N));
  for (auto& x : t) {
    const double q = u(r);
    x = q < frequent ? 7 : q < frequent + 0.1 ? 3 : any(r);
  }
  return t;
}

// The tables bit for bit: the first few differing elements of dwte by token and column, and dwpe.
void expect_tables(const std::vector<float>& got_wte, const std::vector<float>& want_wte,
                   const std::vector<float>& got_wpe, const std::vector<float>& want_wpe, int C) {
  int bad = 0;
  for (size_t i = 0; i < got_wte.size() && bad < 5; i++)
    if (got_wte[i] != want_wte[i]) {
      ADD_FAILURE() << "dwte token " << i / size_t(C) << " column " << i % size_t(C) << ": " << got_wte[i] << " want "
                    << want_wte[i];
      bad++;
    }
  EXPECT_EQ(got_wpe, want_wpe);
}

struct Case {
  const char* name;
  int B, T, C, vocab;
  double frequent;
};

template <class X>
void check(const Case& k) {
  SCOPED_TRACE(k.name);
  const int N = k.B * k.T;
  const std::vector<int> tok = tokens(N, k.vocab, k.frequent, 11);
  // bf16 values for bf16 activations; for fp32 ones full floats, whose sums round (bf16 values of one
  // magnitude add exactly in fp32 for thousands of terms, and no order would show)
  std::vector<float> dx = randv(size_t(N) * k.C, 1.0f, 12);
  if constexpr (sizeof(X) == 4)
    for (size_t i = 0; i < dx.size(); i++) dx[i] *= 1.0f + 1e-3f * float(i % 997) / 997.0f;
  const std::vector<float> wte0 = randv(size_t(k.vocab) * k.C, 0.5f, 13), wpe0 = randv(size_t(k.T) * k.C, 0.5f, 14);
  std::vector<float> want_wte = wte0, want_wpe = wpe0, flat_wte = wte0, flat_wpe = wpe0;
  ref_backward(want_wte, want_wpe, dx, tok, k.B, k.T, k.C, kEmbeddingWindow);
  ref_backward(flat_wte, flat_wpe, dx, tok, k.B, k.T, k.C, N + 1);
  if (N > kEmbeddingWindow) ASSERT_NE(want_wte, flat_wte) << "the windows' order should matter for this input";

  DeviceBuffer<int> d_tok(static_cast<size_t>(N));
  d_tok.upload(tok);
  DeviceBuffer<float> d_wte(wte0.size()), d_wpe(wpe0.size());
  d_wte.upload(wte0);
  d_wpe.upload(wpe0);
  TokenGroups g(N, k.vocab, k.C);
  g.build(d_tok.get(), 0);
  if constexpr (sizeof(X) == 2) {
    DeviceBuffer<__nv_bfloat16> d_dx = to_dev(dx);
    encoder_backward(d_wte.get(), d_wpe.get(), d_dx.get(), g, k.B, k.T, k.C, 0);
  } else {
    DeviceBuffer<float> d_dx(dx.size());
    d_dx.upload(dx);
    encoder_backward(d_wte.get(), d_wpe.get(), d_dx.get(), g, k.B, k.T, k.C, 0);
  }
  const std::vector<float> got_wte = d_wte.download(), got_wpe = d_wpe.download();
  ASSERT_NE(got_wte, wte0);
  expect_tables(got_wte, want_wte, got_wpe, want_wpe, k.C);
}
}  // namespace

// `world` processes' batches (one GPU plays them all): each one's token_sums, then every buffer added rank by
// rank into one table, against the CPU's sums added in that order, bit for bit; the buffers' counts and ids
// too. The order must matter for the input: adding every process's rows in one pass gives other bits.
void check_shared(const Case& k, int world) {
  SCOPED_TRACE(k.name);
  const int N = k.B * k.T;
  // full floats in the tables, so that the order of adding whole sums to them shows in the bits
  std::vector<float> wte0 = randv(size_t(k.vocab) * k.C, 0.5f, 13), wpe0 = randv(size_t(k.T) * k.C, 0.5f, 14);
  for (auto* v : {&wte0, &wpe0})
    for (size_t i = 0; i < v->size(); i++) (*v)[i] *= 1.0f + 1e-3f * float(i % 997) / 997.0f;
  std::vector<float> want_wte = wte0, want_wpe = wpe0, all_dx;
  std::vector<int> all_tok;
  DeviceBuffer<float> d_wte(wte0.size()), d_wpe(wpe0.size());
  d_wte.upload(wte0);
  d_wpe.upload(wpe0);
  std::vector<DeviceBuffer<char>> sums(static_cast<size_t>(world));
  for (int r = 0; r < world; r++) {
    const std::vector<int> tok = tokens(N, k.vocab, k.frequent, 21 + uint32_t(r));
    const std::vector<float> dx = randv(size_t(N) * k.C, 1.0f, 31 + uint32_t(r));
    all_tok.insert(all_tok.end(), tok.begin(), tok.end());
    all_dx.insert(all_dx.end(), dx.begin(), dx.end());
    const RefSums ref = ref_token_sums(dx, tok, k.B, k.T, k.C, k.vocab);
    DeviceBuffer<int> d_tok(static_cast<size_t>(N));
    d_tok.upload(tok);
    TokenGroups g(N, k.vocab, k.C);
    g.keep_runs();
    g.build(d_tok.get(), 0);
    DeviceBuffer<__nv_bfloat16> d_dx = to_dev(dx);
    sums[size_t(r)].alloc(token_sums_bytes(N, k.T, k.C));
    token_sums(sums[size_t(r)].get(), d_dx.get(), g, k.B, k.T, k.C, 0);
    const std::vector<char> got = sums[size_t(r)].download();
    const int count = *reinterpret_cast<const int*>(got.data());
    ASSERT_EQ(count, int(ref.ids.size()));
    const int* ids = reinterpret_cast<const int*>(got.data() + 16);
    EXPECT_EQ(std::vector<int>(ids, ids + count), ref.ids);
    for (size_t i = 0; i < ref.ids.size(); i++)
      for (int c = 0; c < k.C; c++) want_wte[size_t(ref.ids[i]) * k.C + c] += ref.rows[i * k.C + c];
    for (size_t i = 0; i < want_wpe.size(); i++) want_wpe[i] += ref.wpe[i];
  }
  for (int r = 0; r < world; r++) add_token_sums(d_wte.get(), d_wpe.get(), sums[size_t(r)].get(), N, k.T, k.C, 0);
  std::vector<float> one_wte = wte0, one_wpe = wpe0;
  ref_backward(one_wte, one_wpe, all_dx, all_tok, world * k.B, k.T, k.C, kEmbeddingWindow);
  ASSERT_NE(want_wte, one_wte) << "adding rank by rank should differ from one pass over every position here";
  const std::vector<float> got_wte = d_wte.download(), got_wpe = d_wpe.download();
  expect_tables(got_wte, want_wte, got_wpe, want_wpe, k.C);
}

TEST_F(EmbeddingGpu, TokenSumsAddedRankByRank) {
  check_shared({"skewed", 4, 300, 64, 300, 0.4}, 4);
  check_shared({"one token", 2, 250, 16, 20, 1.0}, 3);
  check_shared({"GPT-2's vocabulary", 2, 256, 768, 50257, 0.05}, 2);
}

TEST_F(EmbeddingGpu, Bf16BackwardAddsInTheWindowsOrder) {
  // 40% one token (about 1,200 rows over 38 windows), a short last window, 8 of 32 lanes with columns
  check<__nv_bfloat16>({"skewed", 5, 613, 64, 300, 0.4});
  check<__nv_bfloat16>({"one token", 4, 250, 16, 20, 1.0});
  check<__nv_bfloat16>({"one window", 1, 20, 32, 50, 0.3});
  check<__nv_bfloat16>({"7 column passes", 2, 200, 1600, 40, 0.3});  // 1600 = 6 x 256 + 64
  check<__nv_bfloat16>({"uniform", 8, 128, 768, 50257, 0.0});
}

TEST_F(EmbeddingGpu, Fp32BackwardAddsInTheWindowsOrder) {
  check<float>({"skewed", 2, 300, 12, 100, 0.4});
  check<float>({"4 column passes", 3, 100, 392, 60, 0.2});  // 392 = 3 x 128 + 8
}

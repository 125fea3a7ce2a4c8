// Token + position embedding, forward and a deterministic backward, for fp32 or bf16 activations.
// The backward sums each token's rows in a fixed order: positions are grouped by token on the device
// (a stable radix sort), so no float atomics are needed and a resumed run continues bit for bit.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common/device_buffer.h"

// Positions of a (B, T) batch sorted by token id (stably: equal tokens keep their position order), and the
// backward's scratch for the sums of tokens whose positions cross a window of kEmbeddingWindow (embedding.cu).
// With keep_runs(), build() also numbers the runs of equal tokens in the sorted order (for token_sums).
constexpr int kEmbeddingWindow = 32;
class TokenGroups {
 public:
  TokenGroups(int N, int vocab, int channels);
  void keep_runs();  // before build
  void build(const int* d_tokens, cudaStream_t s);
  int N() const { return N_; }
  int channels() const { return C_; }
  const int* sorted_tokens() const { return keys_out_.get(); }
  const int* sorted_pos() const { return vals_out_.get(); }
  float* partial() const { return partial_.get(); }  // 2 rows of `channels` per window
  // keep_runs: for each sorted position, 1 + the number of its run (the runs of equal tokens counted
  // from 0): the last entry is the number of distinct tokens. Null otherwise.
  const int* runs() const { return runs_.get(); }

 private:
  int N_, C_, bits_;
  DeviceBuffer<int> vals_in_, keys_out_, vals_out_, heads_, runs_;
  DeviceBuffer<float> partial_;
  DeviceBuffer<char> temp_, scan_temp_;
  size_t temp_bytes_ = 0, scan_bytes_ = 0;
};

// A micro-batch on the device: token ids, targets (next tokens), and the tokens grouped by id for the
// embedding backward. Both GPT-2 models take their batches through it.
class TokenBatch {
 public:
  TokenBatch(int N, int vocab, int channels);
  // Starts the copies (host arrays of N ints; targets may be null) and the grouping on stream s.
  void set(const int* tokens, const int* targets, cudaStream_t s);
  const int* tokens() const { return tokens_.get(); }
  const int* targets() const { return targets_.get(); }
  const TokenGroups& groups() const { return groups_; }
  void keep_runs() { groups_.keep_runs(); }

 private:
  int N_;
  DeviceBuffer<int> tokens_, targets_;
  TokenGroups groups_;
};

// x (N, C) = wte[tok] + wpe[n % T], summed in fp32. P: parameter type (fp32 master or bf16 copy).
template <class X, class P>
void encoder_forward(X* x, const int* tok, const P* wte, const P* wpe, int N, int T, int C, cudaStream_t s);
// dwpe[t] += sum_b dx[b, t]; dwte[v] += sum of dx over the positions holding token v, in this order: the
// sorted positions are cut into windows of kEmbeddingWindow; within a window a token's rows are summed in
// position order from 0; a token whose rows lie in several windows adds those windows' sums in window order
// (from 0) before adding the total to its row. g must be built from these tokens, with C channels.
template <class X>
void encoder_backward(float* dwte, float* dwpe, const X* dx, const TokenGroups& g, int B, int T, int C, cudaStream_t s);

// Data parallel on GPUs that read each other's memory (models/gpt2_bf16.cu): each process sums its own
// rows per token into a buffer of token_sums_bytes(B * T, T, C) bytes, and every process adds every
// process's buffer, rank by rank, so that all get the same table. The buffer: the count of distinct tokens
// (an int, 16 bytes), their ids (N ints, padded to 16 bytes), their rows (N x C floats: each the sum of the
// token's rows of dx in encoder_backward's order, the first `count` used), then the position rows (T x C
// floats: sum_b dx[b, t]). g must be built with keep_runs().
size_t token_sums_bytes(int N, int T, int C);
template <class X>
void token_sums(void* sums, const X* dx, const TokenGroups& g, int B, int T, int C, cudaStream_t s);
// dwte[id] += each used row of `sums` (this process's or another's, mapped), dwpe += its position rows. N:
// the B * T of the process that wrote it (the same on every process).
void add_token_sums(float* dwte, float* dwpe, const void* sums, int N, int T, int C, cudaStream_t s);

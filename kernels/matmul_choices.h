// Measured cuBLASLt algorithm choices for the training programs' matmuls: for a plan (LtMatmul's key: the
// transposes, output type, epilogue, shape, leading dimensions and pointer alignments) on one GPU model
// and cuBLASLt version, which of the heuristic's first kMatmulChoiceCandidates algorithms ran fastest.
// Fixed data rather than timing at start-up, so that every run, resumed run and rank on that GPU and
// version computes the same bits; anywhere else the heuristic's first algorithm runs, as before.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

constexpr int kMatmulChoiceCandidates = 8;

// The index into the heuristic's list for the plan `key`, or 0 (its first) where nothing was measured.
int matmul_choice(const std::string& gpu, size_t cublaslt_version, const int64_t (&key)[8]);

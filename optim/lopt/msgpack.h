// The subset of msgpack that flax checkpoints use (flax.serialization.to_bytes): maps with string keys,
// arrays, ints, floats, strings, bin, and arrays as ExtType 1 = [shape, dtype name, raw bytes].
// read_flax_arrays flattens the tree into "a/b/c" paths -> float32 arrays.
#pragma once
#include <string>
#include <vector>

#include "optim/lopt/safetensors.h"

// Path separator '/': a key that itself contains '/' (Haiku's "rnn/linear") simply joins in.
TensorMap read_flax_arrays(const std::string& path);

// Writer for the same subset (tests build JAX-format checkpoints with it): a tree of maps whose leaves
// are float32 arrays, given as "a/b/c" paths; `split_at` lists path prefixes that are single keys
// containing '/' (e.g. "rnn_params/rnn/linear" -> key "rnn/linear" under "rnn_params").
void write_flax_arrays(const std::string& path, const TensorMap& leaves, const std::vector<std::string>& slash_keys);

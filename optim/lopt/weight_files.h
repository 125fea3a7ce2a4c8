// Helpers shared by the weight-file readers (lopt_weights.cpp, celo2_weights.cpp): paths, the one
// sentence for a missing file, and config.json checks.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "optim/lopt/safetensors.h"

bool is_dir_path(const std::string& p);
bool path_exists(const std::string& p);
// A folder's model.safetensors, or the path itself when it names a file.
std::string safetensors_in(const std::string& path);
// "<what> weights not found at '<path>'; <hint>" where the default hint says how to download them.
[[noreturn]] void weights_missing(const std::string& what, const std::string& path, const std::string& hint = "");
// UserError if a value of any tensor of the file is NaN or infinite: meta-weights that would turn every
// step into NaN are refused when read (check_lopt_weights: before any GPU work), not found in a run. The
// readers call it after their name and shape checks, whose messages say more about a damaged file.
void require_finite(const TensorMap& tensors, const std::string& file);
// config.json beside a safetensors file: null (Json::Null) when the folder has none.
Json read_weight_config(const std::string& dir);
// Checks that every key of `want` is in the config and has that number (true/false read as 1/0).
void check_config_numbers(const Json& config, const std::string& path,
                          const std::vector<std::pair<std::string, double>>& want);

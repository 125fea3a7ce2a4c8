// `report plot-log`: the loss curves of one train_gpt2 / train_vit JSON-lines log — training loss and its
// moving average, validation loss, and for train_vit validation top-1 in a second panel.
#pragma once
#include <string>
#include <vector>

#include "common/json.h"
#include "tools/report/svg.h"

namespace report {

struct TrainLog {
  std::vector<double> step, loss;          // training steps ("loss" lines; non-finite losses left out)
  std::vector<double> vstep, vloss, top1;  // validations ("val_loss" lines); top1 in %, NaN where absent
  bool has_top1 = false;
};
TrainLog train_log_of(const std::vector<Json>& lines);

// The mean of the last `k` values at each point (fewer at the start).
std::vector<double> moving_average(const std::vector<double>& v, int k);

// One panel (loss), two with top-1. y runs from the lowest loss - 0.2 to the highest of the first five
// training losses and the first validation + 0.2 (at most 12), so the start does not flatten the rest.
svg::Figure loss_figure(const TrainLog& log, const std::string& title, int smooth);

}  // namespace report

// report trace (tools/report/step_trace.h): STEP_TRACE=1's lines summarised, other output, other ranks and the
// warm-up steps left out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/report/step_trace.h"

namespace {
using namespace report;

// A step of 4 H200s (results/dp_traces.txt): 12 blocks, then the rest.
const char* kStep12 =
    "{\"trace\":12,\"rank\":0,\"ready\":[4.146,4.658,5.154,5.596,6.031,6.516,6.977,7.444,7.915,8.354,8.804,9.274,"
    "9.870],\"summed\":[5.840,6.207,6.544,6.915,7.296,7.664,8.004,8.372,8.810,9.121,9.514,9.810,9.876],"
    "\"backward_end\":9.873,\"comm_end\":9.886,\"step_end\":10.969}\n";

TEST(ReportTrace, OneStepAsWrittenByHand) {
  const std::string text = std::string("step    12/14 | loss 6.85 | 11.0 ms\n") + kStep12 +
                           "{\"trace\":12,\"rank\":1,\"ready\":[1,2,3],\"summed\":[9,9,9],\"backward_end\":50,"
                           "\"comm_end\":60,\"step_end\":70}\n"
                           "{\"trace\":3,\"rank\":0,\"ready\":[1,2,3],\"summed\":[9,9,9],\"backward_end\":50,"
                           "\"comm_end\":60,\"step_end\":70}\n"
                           "{\"trace\":13,\"rank\":0,\"ready\":[4.1,";  // cut off by another process
  const TraceSummary s = summarise_trace(text, 0, 4);
  EXPECT_EQ(s.steps, 1);
  EXPECT_DOUBLE_EQ(s.ready0, 4.146);
  EXPECT_DOUBLE_EQ(s.backward_end, 9.873);
  EXPECT_DOUBLE_EQ(s.comm_end, 9.886);
  EXPECT_DOUBLE_EQ(s.step_end, 10.969);
  EXPECT_NEAR(s.block_gap, (9.274 - 4.146) / 11, 1e-12);
  EXPECT_NEAR(s.sum, (1.027 + 1.148) / 2, 1e-12);  // the middle two of the 12 blocks' lags
  EXPECT_NEAR(s.tail, 0.013, 1e-12);
  EXPECT_NEAR(s.last, 9.873 - 9.274, 1e-12);  // after block 0's gradients: the lookup part
  EXPECT_EQ(trace_line("w4_b4_copy.txt", s),
            "w4_b4_copy.txt       n= 1 ready0   4.15  bwd_end   9.87  comm_end   9.89  step  10.97  blockgap 0.466  "
            "sum 1.087  tail 0.013  last 0.599");
  EXPECT_EQ(trace_ranks(text), (std::vector<int>{0, 1}));
  EXPECT_TRUE(trace_ranks("step 1 | loss 6.85\n").empty());
}

TEST(ReportTrace, MediansOverSteps) {
  std::string text;
  for (int step = 4; step < 7; step++)
    text += "{\"trace\":" + std::to_string(step) + ",\"rank\":2,\"ready\":[1,3,4],\"summed\":[" +
            std::to_string(2 + step) + ",4,5],\"backward_end\":" + std::to_string(10 + step) +
            ",\"comm_end\":20,\"step_end\":30}\n";
  const TraceSummary s = summarise_trace(text, 2, 4);
  EXPECT_EQ(s.steps, 3);
  EXPECT_DOUBLE_EQ(s.backward_end, 15);  // 14, 15, 16
  EXPECT_DOUBLE_EQ(s.block_gap, 2);      // 2 blocks: (3 - 1) / 1
  EXPECT_DOUBLE_EQ(s.sum, 3.5);          // each step the median of (step + 1, 1): 3, 3.5, 4
  EXPECT_DOUBLE_EQ(s.tail, 5);           // 20 - 15
  EXPECT_EQ(summarise_trace(text, 0, 4).steps, 0);
  EXPECT_EQ(summarise_trace(text, 2, 7).steps, 0);
  EXPECT_EQ(s.opt, -1);  // lines without the optimizer's events
}

// The optimizer's events (whole-model steps): its part and the all-gather after it, as medians; a step
// stepped in groups (-1) leaves them out of the summary.
TEST(ReportTrace, TheOptimizerAndTheGather) {
  std::string text;
  for (int step = 4; step < 7; step++)
    text += "{\"trace\":" + std::to_string(step) +
            ",\"rank\":0,\"ready\":[1,3,4],\"summed\":[2,4,5],"
            "\"backward_end\":10,\"comm_end\":11,\"opt_begin\":11.5,\"opt_end\":" +
            std::to_string(12 + step) + ",\"step_end\":20}\n";
  const TraceSummary s = summarise_trace(text, 0, 4);
  EXPECT_DOUBLE_EQ(s.opt, 5.5);     // 16, 17, 18 - 11.5
  EXPECT_DOUBLE_EQ(s.gather, 3.0);  // 20 - 17
  const std::string line = trace_line("x", s), tail = "last 7.000  opt 5.500  gather 3.000";
  EXPECT_EQ(line.substr(line.size() - tail.size()), tail);
  const std::string grouped =
      "{\"trace\":5,\"rank\":0,\"ready\":[1,3,4],\"summed\":[2,4,5],\"backward_end\":10,"
      "\"comm_end\":11,\"opt_begin\":-1,\"opt_end\":-1,\"step_end\":20}\n";
  EXPECT_EQ(summarise_trace(grouped, 0, 4).opt, -1);
}
}  // namespace

// --attention's names, and which cuDNN versions and shapes the cuDNN backward refuses (kernels/attention_kind.h):
// the refusals are checked here for every case, since a GPU machine only shows the cuDNN it happens to load.
#include <gtest/gtest.h>

#include <string>

#include "kernels/attention_kind.h"

namespace {
bool refused(int version, int T, bool causal) { return !cudnn_backward_refusal(version, T, causal).empty(); }
}  // namespace

TEST(AttentionKind, NamesAndBadName) {
  EXPECT_EQ(attention_by_name("ours"), Attention::kOurs);
  EXPECT_EQ(attention_by_name("cudnn"), Attention::kCudnn);
  EXPECT_EQ(attention_by_name("cudnn-nondet"), Attention::kCudnnNondet);
  EXPECT_THROW(attention_by_name("flash"), UserError);
}

TEST(AttentionKind, CudnnBackwardRefusals) {
  EXPECT_FALSE(refused(91900, 197, false));  // ViT-B/16 on a recent cuDNN
  EXPECT_FALSE(refused(91900, 1024, true));
  EXPECT_TRUE(refused(91400, 197, false));  // the non-causal bug, up to 9.15.0, for T not a multiple of 128
  EXPECT_TRUE(refused(91500, 197, false));
  EXPECT_FALSE(refused(91501, 197, false));
  EXPECT_FALSE(refused(91400, 256, false));  // a multiple of 128
  EXPECT_FALSE(refused(91400, 197, true));   // causal
  EXPECT_TRUE(refused(91000, 1024, true));   // 9.10.0 and 9.10.1 in any shape
  EXPECT_TRUE(refused(91001, 1024, true));
  EXPECT_FALSE(refused(91002, 1024, true));
  EXPECT_TRUE(refused(91900, 1, true));  // T = 1
  const std::string why = cudnn_backward_refusal(91400, 197, false);
  EXPECT_NE(why.find("9.15.1"), std::string::npos) << why;
  EXPECT_NE(why.find("--attention ours"), std::string::npos) << why;
}

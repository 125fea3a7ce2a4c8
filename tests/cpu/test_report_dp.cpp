// report dp (tools/report/dp_tables.h): the data-parallel tables from bench_data_parallel.sh's lines, worked
// out by hand on a small run, and the README's two tables held to the file they cite.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "common/error.h"
#include "tools/report/dp_tables.h"
#include "tools/report/jsonl.h"

namespace {
using namespace report;

// One line as bench_gpt2.sh writes it (the fields the tables read).
std::string line(const std::string& model, int B, int world, const std::string& extra, double ms, double rate) {
  const std::string launch =
      world > 1 ? "\"launch\":\"mpirun -np " + std::to_string(world) + "\",\"world\":" + std::to_string(world) + ","
                : "";
  return "{\"model\":\"" + model + "\",\"B\":" + std::to_string(B) + ",\"T\":1024," + launch +
         "\"tok_per_s\":" + std::to_string(rate) + ",\"step_ms\":" + std::to_string(ms) + ",\"extra\":\"" + extra +
         "\"}\n";
}

Paper paper() {
  return Paper(parse_json_lines(
      "{\"item\":\"table3\",\"optimizer\":\"adamw\",\"mode\":\"allreduce\",\"value\":100,\"gpu\":\"4 x H100\"}\n"
      "{\"item\":\"table3\",\"optimizer\":\"adamw\",\"mode\":\"sharded\",\"value\":80,\"gpu\":\"4 x H100\"}\n"
      "{\"item\":\"table3\",\"optimizer\":\"velo\",\"impl\":\"cuda\",\"mode\":\"allreduce\",\"value\":120,"
      "\"gpu\":\"4 x H100\"}\n"
      "{\"item\":\"table3\",\"optimizer\":\"velo\",\"impl\":\"cuda\",\"mode\":\"sharded\",\"value\":88,"
      "\"gpu\":\"4 x H100\"}\n",
      "paper"));
}

// Table 3 on 2 GPUs (fused only), then the weak part: its 124M at 4 x 1024 again (other values: the weak
// table must take these), 355M at 8 x 1024, and VeLO sharded at 355M.
std::string small_run() {
  return line("d12", 4, 1, "-o adamw --qkv fused", 10.0, 400000) +
         line("d12", 4, 1, "-o velo --lopt-random 1 --qkv fused", 12.0, 333333) +
         line("d12", 4, 2, "-o adamw --qkv fused --nccl 1 --grad-sum copy", 11.0, 740000) +
         line("d12", 4, 2, "-o adamw --qkv fused --shard 1 --grad-sum copy", 10.5, 780000) +
         line("d12", 4, 2, "-o velo --lopt-random 1 --qkv fused --nccl 1 --grad-sum copy", 13.0, 630000) +
         line("d12", 4, 2, "-o velo --lopt-random 1 --qkv fused --shard 1 --grad-sum copy", 11.55, 710000) +
         line("d12", 4, 1, "-o adamw --qkv fused", 10.2, 401000) +
         line("d24", 8, 1, "-o adamw --qkv fused", 42, 200000) +
         line("d12", 4, 2, "-o adamw --qkv fused --nccl 1 --grad-sum copy", 11.1, 721800) +
         line("d24", 8, 2, "-o adamw --qkv fused --nccl 1 --grad-sum copy", 44, 380000) +
         line("d24", 8, 1, "-o velo --lopt-random 1 --qkv fused", 48, 170000) +
         line("d24", 8, 2, "-o velo --lopt-random 1 --qkv fused --shard 1 --grad-sum copy", 46.2, 357000) +
         line("d24", 8, 2, "-o adamw --qkv fused --shard 1 --grad-sum copy", 43.0, 390000);
}

TEST(ReportDp, Table3WorkedOutByHand) {
  const std::string t = dp_table3(parse_json_lines(small_run(), "run"), paper());
  EXPECT_EQ(
      t,
      "| optimizer | q/k/v | 1 GPU | 2 all-reduce | 2 sharded | over AdamW's best | PyLO (4 x H100): all-reduce / "
      "sharded |\n"
      "|---|---|---|---|---|---|---|\n"
      "| AdamW | fused | 10.00 | 11.00 | 10.50 | – | 100.00 / 80.00 |\n"
      // 11.55 / min(11.0, 10.5) = 1.1; the paper's 88 / 80 = 1.1
      "| VeLO | fused | 12.00 | 13.00 | 11.55 | +10.0% | 120.00 / 88.00 (+10.0%) |\n");
}

TEST(ReportDp, WeakScalingTakesTheLastLineOfARun) {
  const std::string t = dp_weak(parse_json_lines(small_run(), "run"));
  EXPECT_EQ(t,
            "| per GPU | 1 GPU | 2 GPUs | 2 GPUs, sharded |\n"
            "|---|---|---|---|\n"
            // 721800 / (2 x 401000) = 90.0%; 780000 / 802000 = 97.3%
            "| GPT-2 124M, 4 × 1024 tokens | 10.20 | 11.10 (90.0%) | 10.50 (97.3%) |\n"
            // 380000 / 400000 = 95.0%; 390000 / 400000 = 97.5%
            "| GPT-2 355M, 8 × 1024 tokens | 42.00 | 44.00 (95.0%) | 43.00 (97.5%) |\n"
            // 357000 / 340000 = 105.0%; 46.2 / min(44, 43) = 1.0744
            "| GPT-2 355M, 8 × 1024 tokens, VeLO | 48.00 |  | 46.20 (105.0%; +7.4% over AdamW's best) |\n");
}

TEST(ReportDp, LinesWithoutEitherTableAreRefused) {
  const std::vector<Json> none = parse_json_lines(line("d12", 64, 1, "-o adamw", 100, 600000), "run");
  EXPECT_THROW(dp_tables(none, paper()), UserError);
}

// The tables under "### Data parallel on 1, 2 and 4 GPUs" are `report dp`'s output for the results file the
// section cites first: a rerun that changes the file, or an edit of a cell, fails here.
TEST(ReportDp, TheReadmesTablesAreTheToolsOutput) {
  std::ifstream f("README.md");
  ASSERT_TRUE(f) << "run from the repository root";
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  size_t i = 0;
  while (i < lines.size() && lines[i] != "### Data parallel on 1, 2 and 4 GPUs") i++;
  ASSERT_LT(i, lines.size());
  std::string path;
  std::vector<std::string> tables(1);
  for (; i < lines.size() && tables.size() <= 2; i++) {
    std::smatch m;
    static const std::regex cited(R"(\((results/[^)#" ]+\.jsonl)\))");
    if (path.empty() && std::regex_search(lines[i], m, cited)) path = m[1];
    if (lines[i].rfind("|", 0) == 0) {
      tables.back() += lines[i] + "\n";
    } else if (!tables.back().empty()) {
      tables.push_back("");
    }
  }
  ASSERT_FALSE(path.empty()) << "the section cites no results/*.jsonl file";
  const std::vector<Json> run = read_json_lines(path);
  EXPECT_EQ(tables[0], dp_table3(run, Paper::read("tools/report/pylo_paper.jsonl")));
  EXPECT_EQ(tables[1], dp_weak(run));
}

}  // namespace

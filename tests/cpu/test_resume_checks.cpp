// What the trainers check before any GPU work and before they create anything: a checkpoint's training
// state and optimizer (--resume), and the paths they will write (--log, --ckpt-dir, --nccl-id-file).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <sstream>

#include "common/sections.h"
#include "tests/test_util.h"
#include "train/checkpoint.h"
#include "train/train_flags.h"

namespace {
struct Fields {
  int64_t step = 10;
  std::string rng;  // empty: a valid generator state
  std::string optimizer = "adamw";
  int64_t groups = 1;
};

std::string write_state(const std::string& path, const Fields& f) {
  SectionWriter w(path);
  std::ostringstream rng;
  rng << std::mt19937_64(7);
  w.put_string("optim.name", f.optimizer);
  if (f.groups > 1) w.put_i64("optim.groups", f.groups);
  w.put_i64("train.step", f.step);
  w.put_vector("train.loader", std::vector<int64_t>{0, 1, 2});
  w.put_string("train.sample_rng", f.rng.empty() ? rng.str() : f.rng);
  w.commit();
  return path;
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  return names;
}
}  // namespace

TEST(ResumeChecks, TrainStateIsReadAndItsFlawsRefused) {
  const std::string d = make_temp_dir();
  const TrainState s = read_train_state(SectionReader(write_state(d + "/ok.bin", {})), 10);
  EXPECT_EQ(s.step, 10);
  EXPECT_EQ(s.data, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(s.rng, std::mt19937_64(7));
  Fields f;
  f.step = -5;
  expect_user_error([&] { read_train_state(SectionReader(write_state(d + "/neg.bin", f)), 10); },
                    "section 'train.step' holds step -5, and a step count is never negative; the file is damaged.");
  f.step = INT64_MAX;
  expect_user_error([&] { read_train_state(SectionReader(write_state(d + "/max.bin", f)), 1000); },
                    "is at step 9223372036854775807, beyond this run's 1000 steps (-x); resume it with -x "
                    "9223372036854775807 or more.");
  f = {};
  f.rng = "hello world";
  expect_user_error([&] { read_train_state(SectionReader(write_state(d + "/rng.bin", f)), 10); },
                    "section 'train.sample_rng' is not a saved random generator state; the file is damaged.");
  std::ostringstream rng;
  rng << std::mt19937_64(7);
  f.rng = rng.str() + " 42";  // a whole state, then more
  expect_user_error([&] { read_train_state(SectionReader(write_state(d + "/tail.bin", f)), 10); },
                    "is not a saved random generator state");
}

TEST(ResumeChecks, OptimizerAndOverlapMustMatch) {
  const std::string d = make_temp_dir();
  check_checkpoint_optimizer(SectionReader(write_state(d + "/ok.bin", {})), "adamw", false);
  Fields f;
  f.optimizer = "muon";
  const std::string muon = write_state(d + "/muon.bin", f);
  expect_user_error([&] { check_checkpoint_optimizer(SectionReader(muon), "adamw", false); },
                    "holds the state of optimizer 'muon', not 'adamw'; resume with -o muon, or start afresh without "
                    "--resume.");
  f = {};
  f.groups = 5;
  const std::string grouped = write_state(d + "/grouped.bin", f);
  check_checkpoint_optimizer(SectionReader(grouped), "adamw", true);
  expect_user_error([&] { check_checkpoint_optimizer(SectionReader(grouped), "adamw", false); },
                    "was written with --overlap 1, which orders the optimizer's state by blocks; resume it with "
                    "--overlap 1.");
  expect_user_error([&] { check_checkpoint_optimizer(SectionReader(d + "/ok.bin"), "adamw", true); },
                    "was written without --overlap 1");
}

TEST(ResumeChecks, AFolderIsNotATruncatedFile) {
  const std::string d = make_temp_dir();
  expect_user_error([&] { open_checkpoint(d); },
                    "--resume '" + d + "' is a folder; give a checkpoint file such as <folder>/model_00001000.bin.");
  write_file(d + "/model_00000100.bin", "");
  write_file(d + "/model_00000900.bin", "");
  write_file(d + "/notes.txt", "");
  expect_user_error([&] { open_checkpoint(d); },
                    "give one of its files, such as '" + d + "/model_00000900.bin' (the newest).");
  EXPECT_TRUE(open_checkpoint(write_state(d + "/ok.bin", {}))->has("train.step"));
}

// --log, --ckpt-dir and --nccl-id-file: refused with their reason, and nothing is created either way.
TEST(OutputPaths, CheckedWithoutCreatingAnything) {
  const std::string d = make_temp_dir();
  write_file(d + "/afile", "x");
  std::filesystem::create_directory(d + "/folder");
  const std::vector<std::string> before = listing(d);
  TrainFlags f;
  f.log = d + "/new/run.jsonl";
  const std::string log_message =
      "cannot open the log file '" + d + "/new/run.jsonl' (No such file or directory); choose another --log.";
  expect_user_error([&] { check_output_paths(f); }, log_message);
  f.log = d + "/afile/run.jsonl";
  expect_user_error([&] { check_output_paths(f); }, "(Not a directory)");
  f.log = d + "/folder";
  expect_user_error([&] { check_output_paths(f); }, "(Is a directory)");
  f.log = d + "/run.jsonl";
  f.ckpt_dir = d + "/afile";
  expect_user_error([&] { check_output_paths(f); }, "--ckpt-dir '" + d + "/afile' is a file, not a folder");
  f.ckpt_dir = d + "/afile/ckpt";
  expect_user_error([&] { check_output_paths(f); },
                    "cannot create the checkpoint folder '" + d + "/afile/ckpt' (Not a directory)");
  f.ckpt_dir = d + "/a/b/c";  // a folder to make, three levels down: fine, and not made yet
  f.nccl_id_file = d + "/folder";
  expect_user_error([&] { check_output_paths(f); }, "--nccl-id-file '" + d + "/folder' is a folder");
  f.nccl_id_file = d + "/none/id";
  expect_user_error([&] { check_output_paths(f); }, "is not in an existing folder");
  f.nccl_id_file = d + "/folder/id";
  check_output_paths(f);
  f.log = "run.jsonl";  // relative: the working folder
  f.ckpt_dir = "ckpt_that_is_not_made";
  check_output_paths(f);
  EXPECT_EQ(listing(d), before);
  EXPECT_FALSE(std::filesystem::exists("ckpt_that_is_not_made"));
  if (geteuid() != 0) {  // root may write anywhere
    chmod((d + "/folder").c_str(), 0555);
    f.ckpt_dir = d + "/folder/ckpt";
    expect_user_error([&] { check_output_paths(f); }, "(Permission denied)");
    f.ckpt_dir = d + "/folder";
    expect_user_error([&] { check_output_paths(f); }, "cannot write in the checkpoint folder");
    chmod((d + "/folder").c_str(), 0755);
  }
}

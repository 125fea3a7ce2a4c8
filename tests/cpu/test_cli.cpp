#include "common/cli.h"
#include "tests/test_util.h"

namespace {
struct Args {
  std::string opt = "adamw";
  int batch = 4;
  int64_t steps = 10;
  double lr = 1e-3;
  bool flag = false;
  std::vector<std::string> sets;
  Cli cli{"prog", "test program"};
  Args() {
    cli.add('o', "optimizer", &opt, "optimizer");
    cli.add('b', "batch", &batch, "batch size");
    cli.add(0, "steps", &steps, "steps");
    cli.add('l', "lr", &lr, "learning rate");
    cli.add('z', "zero", &flag, "a switch");
    cli.add('s', "set", &sets, "key=value");
  }
  bool parse(std::vector<std::string> a) {
    a.insert(a.begin(), "prog");
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(&s[0]);
    return cli.parse(int(argv.size()), argv.data());
  }
};
}  // namespace

TEST(Cli, ShortLongAndEquals) {
  Args a;
  EXPECT_TRUE(a.parse({"-o", "muon", "--batch", "64", "--steps=5000", "-l", "6e-4", "-z", "1", "-s", "a=1", "--set", "b=2"}));
  EXPECT_EQ(a.opt, "muon");
  EXPECT_EQ(a.batch, 64);
  EXPECT_EQ(a.steps, 5000);
  EXPECT_EQ(a.lr, 6e-4);
  EXPECT_TRUE(a.flag);
  EXPECT_EQ(a.sets, (std::vector<std::string>{"a=1", "b=2"}));
}

TEST(Cli, HelpListsEveryFlagWithDefault) {
  Args a;
  std::string h = a.cli.help();
  for (const char* s : {"-o, --optimizer", "(default: adamw)", "--steps", "(default: 10)", "-b, --batch", "-h, --help"})
    EXPECT_NE(h.find(s), std::string::npos) << s;
  testing::internal::CaptureStdout();
  EXPECT_FALSE(a.parse({"--help"}));
  EXPECT_EQ(testing::internal::GetCapturedStdout(), h);
}

TEST(Cli, Errors) {
  Args a;
  expect_user_error([&] { a.parse({"-q", "1"}); }, "unknown flag '-q'");
  expect_user_error([&] { a.parse({"--batch"}); }, "needs a value");
  expect_user_error([&] { a.parse({"-b", "sixty"}); }, "--batch needs a number");
  expect_user_error([&] { a.parse({"-b", "1.5"}); }, "needs an integer");
  expect_user_error([&] { a.parse({"-z", "yes"}); }, "needs 0 or 1");
}

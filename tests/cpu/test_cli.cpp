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

// Numbers beyond a type's range are refused as too large (or small), with the range; integers are read
// exactly; values below the smallest double are accepted as the nearest double, as any decimal is rounded.
TEST(Cli, RangesAndRounding) {
  Args a;
  expect_user_error([&] { a.parse({"-b", "99999999999"}); },
                    "flag --batch is too large: got '99999999999' (it takes integers from -2147483648 to 2147483647).");
  expect_user_error([&] { a.parse({"-b", "-3e9"}); }, "flag --batch is too small: got '-3e9'");
  expect_user_error([&] { a.parse({"--steps", "1e19"}); }, "flag --steps is too large: got '1e19' (it takes integers from -9223372036854775808");
  expect_user_error([&] { a.parse({"--steps", "99999999999999999999"}); }, "flag --steps is too large");
  expect_user_error([&] { a.parse({"-l", "1e400"}); }, "flag --lr is too large: got '1e400'");
  expect_user_error([&] { a.parse({"-l", "-1e400"}); }, "flag --lr is too small");
  expect_user_error([&] { a.parse({"-l", "inf"}); }, "flag --lr needs a finite number, got 'inf'.");
  expect_user_error([&] { a.parse({"-l", "nan"}); }, "flag --lr needs a number, got 'nan'.");
  expect_user_error([&] { a.parse({"--steps", "1e-320"}); }, "flag --steps needs an integer");
  EXPECT_TRUE(a.parse({"--steps", "9007199254740993", "-b", "1e3"}));
  EXPECT_EQ(a.steps, 9007199254740993);  // 2^53 + 1: a double would have made it 2^53
  EXPECT_EQ(a.batch, 1000);
  EXPECT_TRUE(a.parse({"-l", "1e-320"}));
  EXPECT_EQ(a.lr, 1e-320);  // a denormal, kept
  EXPECT_TRUE(a.parse({"-l", "1e-400"}));
  EXPECT_EQ(a.lr, 0.0);
  EXPECT_EQ(parse_float("flag --scale", "1e-50"), 0.0f);
  expect_user_error([] { parse_float("flag --scale", "1e39"); }, "flag --scale is too large: got '1e39' (it takes numbers up to about 3.4e38");
}

// The program prefixes every message with its name, so the messages do not repeat it.
TEST(Cli, MessagesDoNotNameTheProgram) {
  Args a;
  for (const std::vector<std::string>& argv : {std::vector<std::string>{"--bogus"}, {"-b"}}) {
    try {
      a.parse(argv);
      ADD_FAILURE() << "no error";
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).find("prog"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("run with --help"), std::string::npos) << e.what();
    }
  }
}

TEST(Cli, HelpEndsWithTheEpilogue) {
  Args a;
  a.cli.set_epilogue("optimizer options:\n  adamw.lr=0.001  learning rate\n");
  const std::string h = a.cli.help();
  const std::string tail = " this text\n\noptimizer options:\n  adamw.lr=0.001  learning rate\n";
  ASSERT_GE(h.size(), tail.size());
  EXPECT_EQ(h.substr(h.size() - tail.size()), tail) << h;
}

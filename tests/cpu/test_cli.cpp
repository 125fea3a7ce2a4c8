#include "common/cli.h"
#include "tests/test_util.h"
#include "train/flags.h"

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
  EXPECT_TRUE(
      a.parse({"-o", "muon", "--batch", "64", "--steps=5000", "-l", "6e-4", "-z", "1", "-s", "a=1", "--set", "b=2"}));
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
  expect_user_error(
      [&] {
        a.parse({"-b", "99999999999"});
      },
      "flag --batch is too large: got '99999999999' (it takes integers from -2147483648 to 2147483647).");
  expect_user_error([&] { a.parse({"-b", "-3e9"}); }, "flag --batch is too small: got '-3e9'");
  expect_user_error(
      [&] {
        a.parse({"--steps", "1e19"});
      },
      "flag --steps is too large: got '1e19' (it takes integers from -9223372036854775808");
  expect_user_error([&] { a.parse({"--steps", "99999999999999999999"}); }, "flag --steps is too large");
  expect_user_error([&] { a.parse({"-l", "1e400"}); }, "flag --lr is too large: got '1e400'");
  expect_user_error([&] { a.parse({"-l", "-1e400"}); }, "flag --lr is too small");
  expect_user_error([&] { a.parse({"-l", "inf"}); }, "flag --lr needs a finite number, got 'inf'.");
  expect_user_error([&] { a.parse({"-l", "nan"}); }, "flag --lr needs a number, got 'nan'.");
  expect_user_error([&] { a.parse({"--steps", "1e-320"}); }, "flag --steps needs an integer");
  // Decimal only: strtod and strtoll(.., 0) would read these as 16, 8 or a NaN.
  expect_user_error([&] { a.parse({"-b", "0x10"}); }, "flag --batch needs a decimal number, got '0x10' (hexadecimal");
  expect_user_error([&] { a.parse({"-l", "-0X1p3"}); }, "flag --lr needs a decimal number, got '-0X1p3'");
  expect_user_error([&] { a.parse({"-b", " 8"}); }, "flag --batch needs a number, got ' 8'.");
  expect_user_error([&] { a.parse({"-l", "1e"}); }, "flag --lr needs a number, got '1e'.");
  expect_user_error([&] { a.parse({"-l", "."}); }, "flag --lr needs a number, got '.'.");
  expect_user_error([&] { a.parse({"-b", "inf"}); }, "flag --batch needs an integer, got 'inf'.");
  expect_user_error([&] { a.parse({"-l", "-Infinity"}); }, "flag --lr needs a finite number, got '-Infinity'.");
  EXPECT_TRUE(a.parse({"-b", "010", "-l", "+.5e-1"}));
  EXPECT_EQ(a.batch, 10);  // not octal
  EXPECT_EQ(a.lr, 0.05);
  EXPECT_TRUE(a.parse({"-l", "5.", "-b", "-2E1"}));
  EXPECT_EQ(a.lr, 5.0);
  EXPECT_EQ(a.batch, -20);
  EXPECT_TRUE(a.parse({"--steps", "9007199254740993", "-b", "1e3"}));
  EXPECT_EQ(a.steps, 9007199254740993);  // 2^53 + 1: a double would have made it 2^53
  EXPECT_EQ(a.batch, 1000);
  EXPECT_TRUE(a.parse({"-l", "1e-320"}));
  EXPECT_EQ(a.lr, 1e-320);  // a denormal, kept
  EXPECT_TRUE(a.parse({"-l", "1e-400"}));
  EXPECT_EQ(a.lr, 0.0);
  EXPECT_EQ(parse_float("flag --scale", "1e-50"), 0.0f);
  expect_user_error([] { parse_float("flag --scale", "1e39"); },
                    "flag --scale is too large: got '1e39' (it takes numbers up to about 3.4e38");
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

// A note on a spelling goes into the message when that spelling is refused: unknown, without a value, or
// with a value its flag cannot take (as short flag, long flag, or --flag=value); a spelling that parses
// is not affected.
TEST(Cli, NotesExplainRefusedSpellings) {
  Args a;
  a.cli.note("-k", "sample every N steps is -s now");
  a.cli.note("-b", "-b is the micro-batch");
  a.cli.note("--opts", "it is --optimizer now");
  expect_user_error(
      [&] {
        a.parse({"-k", "5"});
      },
      "unknown flag '-k' (sample every N steps is -s now); run with --help to list the flags.");
  expect_user_error([&] { a.parse({"--opts=adamw"}); },
                    "unknown flag '--opts=adamw' (it is --optimizer now); run with --help");
  expect_user_error([&] { a.parse({"-b", "x"}); }, "flag --batch needs a number, got 'x' (-b is the micro-batch).");
  expect_user_error([&] { a.parse({"-b"}); }, "flag '-b' needs a value (-b is the micro-batch); run with --help");
  expect_user_error(
      [&] {
        a.parse({"-b", "99999999999"});
      },
      "(it takes integers from -2147483648 to 2147483647) (-b is the micro-batch).");
  // The long spelling of -b has no note of its own.
  expect_user_error([&] { a.parse({"--batch=x"}); }, "flag --batch needs a number, got 'x'.");
  EXPECT_TRUE(a.parse({"-b", "16"}));
  EXPECT_EQ(a.batch, 16);
  EXPECT_THROW(a.cli.note("-k", "twice"), std::logic_error);
}

// Every program reads -e through model_by_name: the same names give the same model everywhere.
TEST(ModelNames, OneReaderForEveryProgram) {
  const unsigned all = kGpt2Sizes | kGpt2Tiny | kVitB16;
  const char* const names[4][3] = {{"d12", "124m", "gpt2-124m"},
                                   {"d24", "355m", "gpt2-355m"},
                                   {"d36", "774m", "gpt2-774m"},
                                   {"d48", "1558m", "gpt2-1558m"}};
  const int64_t params[4] = {124439808, 354823168, 774030080, 1557611200};
  for (int i = 0; i < 4; i++)
    for (const char* n : names[i]) {
      const ModelChoice c = model_by_name(n, kGpt2Sizes);
      EXPECT_EQ(c.kind, kGpt2Sizes) << n;
      EXPECT_EQ(c.gpt2.layers, gpt2_shape(names[i][0]).layers) << n;
      EXPECT_EQ(c.table().num_params(), params[i]) << n;
    }
  const ModelChoice tiny = model_by_name("tiny", all);
  EXPECT_EQ(tiny.kind, kGpt2Tiny);
  EXPECT_EQ(tiny.gpt2.layers, 4);
  EXPECT_EQ(tiny.gpt2.channels, 128);
  EXPECT_EQ(tiny.gpt2.heads, 2);
  EXPECT_EQ(model_by_name("vit-b16", all).table().num_params(), 86567656);
  expect_user_error(
      [] { model_by_name("gpt3", kGpt2Sizes | kGpt2Tiny); },
      "unknown model 'gpt3'; choose d12, d24, d36, d48 (GPT-2 124M to 1558M, also named 124m, ..., 1558m or "
      "gpt2-124m, ..., gpt2-1558m) or tiny (4 layers, 128 channels).");
  expect_user_error([] { model_by_name("gpt2-d12", all); }, "unknown model 'gpt2-d12'");
  expect_user_error([] { model_by_name("vit-b16", kGpt2Sizes); },
                    "the model 'vit-b16' cannot be used here; choose d12, d24, d36 or d48 (");
  expect_user_error([] { model_by_name("tiny", kGpt2Sizes | kVitB16); }, "the model 'tiny' cannot be used here");
}

// The shared flags have one spelling, and each program's earlier spellings are explained.
TEST(FlagVocabulary, SharedFlagsAndNotes) {
  std::string model = "d12", opt = "adamw", tok;
  int64_t steps = 1;
  int sample_tokens = 64;
  double clip = 1;
  std::vector<std::string> sets;
  Cli cli("prog", "test program");
  flags::add_model(cli, &model, kGpt2Sizes, false);
  flags::add_optimizer(cli, &opt, "optimizer");
  flags::add_steps(cli, &steps, "steps");
  flags::add_clip(cli, &clip);
  flags::add_set(cli, &sets);
  flags::add_tokenizer(cli, &tok, "ranks");
  cli.add('g', "sample-tokens", &sample_tokens, "tokens per sample");
  flags::add_flag_notes(cli, "train_gpt2");
  const std::string h = cli.help();
  for (const char* s :
       {"-e, --model", "-o, --optimizer", "-x, --steps", "      --clip", "      --set", "      --tokenizer"})
    EXPECT_NE(h.find(s), std::string::npos) << s;
  std::vector<std::string> args = {"prog", "-e",     "gpt2-355m", "-o",    "muon",     "-x",
                                   "5",    "--clip", "0.5",       "--set", "muon.lr=1"};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(&s[0]);
  EXPECT_TRUE(cli.parse(int(argv.size()), argv.data()));
  EXPECT_EQ(model, "gpt2-355m");
  EXPECT_EQ(opt, "muon");
  EXPECT_EQ(steps, 5);
  EXPECT_EQ(clip, 0.5);
  auto parse = [&](std::vector<std::string> a) {
    a.insert(a.begin(), "prog");
    std::vector<char*> v;
    for (auto& s : a) v.push_back(&s[0]);
    cli.parse(int(v.size()), v.data());
  };
  expect_user_error(
      [&] {
        parse({"-z", "1"});
      },
      "unknown flag '-z' (tokens per sample is -g now, as in llm.c; llm.c's -z (ZeRO stage)");
  expect_user_error(
      [&] {
        parse({"-g", "0.5"});
      },
      "(-g is tokens per sample now, llm.c's genT; the grad-norm clip is --clip).");
  expect_user_error(
      [&] {
        parse({"-y", "1"});
      },
      "unknown flag '-y' (llm.c's -y (resume from the output folder) is --resume FILE here)");
  Cli tok_cli("tokenize", "test");
  flags::add_flag_notes(tok_cli, "tokenize");
  std::vector<std::string> targs = {"tokenize", "-o", "dir"};
  std::vector<char*> tv;
  for (auto& s : targs) tv.push_back(&s[0]);
  expect_user_error([&] { tok_cli.parse(int(tv.size()), tv.data()); },
                    "unknown flag '-o' (the output folder is --out now");
}

TEST(Cli, GivenTellsSetFlagsFromDefaults) {
  Args a;
  ASSERT_TRUE(a.parse({"-b", "8", "--lr=0.5"}));
  EXPECT_TRUE(a.cli.given("batch"));
  EXPECT_TRUE(a.cli.given("lr"));
  EXPECT_FALSE(a.cli.given("optimizer"));
  EXPECT_FALSE(a.cli.given("steps"));
  Args b;
  ASSERT_TRUE(b.parse({"-o", "muon", "--set", "muon.lr=1"}));  // "--set" starts with "--", not "--lr"
  EXPECT_FALSE(b.cli.given("lr"));
  EXPECT_TRUE(b.cli.given("set"));
}

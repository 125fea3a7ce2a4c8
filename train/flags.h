// One flag vocabulary for our programs (train_gpt2, bench_optim, bench_gpt2_ops, tokenize): the flags
// that programs share are defined here once, the model names of -e are read here, and the spellings
// that changed are explained here. The rules (README, "Flags: where we differ from llm.c"):
//
//  - A letter means one thing in every program, and a letter that llm.c's train_gpt2 has means what it
//    means there. One exception: -o is the optimizer (llm.c: the output log folder). -h is --help
//    everywhere (llm.c: HellaSwag).
//  - A flag with no llm.c letter of its meaning has a long name only (--clip, --resume FILE, --set, --out,
//    ...). A long name, too, means one thing in every program (the shared ones are added below).
//  - Spellings that we used to take and now read differently or not at all, and llm.c letters that a
//    program does not take, are refused with a note that names today's spelling (add_flag_notes).
//  - Every program reads -e through model_by_name: d12 | d24 | d36 | d48, also 124m | 355m | 774m | 1558m
//    and gpt2-124m ... gpt2-1558m, plus tiny and vit-b16 in the programs that run them.
//
// The letters: -i input data (glob: train_gpt2's --train shards, tokenize's --input text), -j validation
// data (glob), -e model, -o optimizer, -l learning rate,
// -k LR schedule, -c weight decay, -u LR warmup steps, -q final LR fraction, -x steps, -b micro-batch size,
// -t sequence length, -d tokens per step, -v validate every N steps, -m validation batches, -s sample every
// N steps, -g tokens per sample (llm.c's genT), -n checkpoint every N steps. Each program takes those it
// has use for.
//
// Header-only for now (the Makefile lists its sources one by one); a later refactor moves it.
#pragma once
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/error.h"
#include "models/model_tables.h"

// The kinds of model a program runs, for model_by_name's `accept` (a bitwise or).
enum ModelKind : unsigned { kGpt2Sizes = 1, kGpt2Tiny = 2, kVitB16 = 4 };

struct ModelChoice {
  ModelKind kind = kGpt2Sizes;
  Gpt2Shape gpt2;  // kGpt2Sizes and kGpt2Tiny (separate q/k/v)
  ParamTable table() const { return kind == kVitB16 ? vit_param_table(VitShape{}) : gpt2_param_table(gpt2); }
};

// The model names `accept` allows, for help texts and messages.
inline std::string model_names(unsigned accept) {
  std::vector<std::string> names;
  if (accept & kGpt2Sizes)
    names = {"d12", "d24", "d36",
             "d48 (GPT-2 124M to 1558M, also named 124m, ..., 1558m or gpt2-124m, ..., gpt2-1558m)"};
  if (accept & kGpt2Tiny) names.push_back("tiny (4 layers, 128 channels)");
  if (accept & kVitB16) names.push_back("vit-b16");
  std::string out;
  for (size_t i = 0; i < names.size(); i++) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

// The one reader of model names (-e) for every program; UserError for an unknown name or for a model
// that `accept` leaves out.
inline ModelChoice model_by_name(const std::string& name, unsigned accept) {
  static const char* const sizes[4][2] = {{"d12", "124m"}, {"d24", "355m"}, {"d36", "774m"}, {"d48", "1558m"}};
  ModelChoice c;
  bool known = false;
  for (const auto& s : sizes)
    if (name == s[0] || name == s[1] || name == std::string("gpt2-") + s[1]) {
      c.kind = kGpt2Sizes;
      c.gpt2 = gpt2_shape(s[0]);
      known = true;
    }
  if (name == "tiny") {  // 64 channels per head
    c.kind = kGpt2Tiny;
    c.gpt2.layers = 4;
    c.gpt2.channels = 128;
    c.gpt2.heads = 2;
    known = true;
  }
  if (name == "vit-b16") {
    c.kind = kVitB16;
    known = true;
  }
  if (!known) user_error("unknown model '", name, "'; choose ", model_names(accept), ".");
  if (!(accept & c.kind)) user_error("the model '", name, "' cannot be used here; choose ", model_names(accept), ".");
  return c;
}

namespace flags {
// -e, --model: one model, or (list) a comma-separated list of them; `more` is added to the help.
inline void add_model(Cli& cli, std::string* target, unsigned accept, bool list, const std::string& more = "") {
  cli.add('e', "model", target, (list ? "comma-separated models: " : "model: ") + model_names(accept) + more);
}
// -o, --optimizer: one optimizer or (bench_optim) a list.
inline void add_optimizer(Cli& cli, std::string* target, const std::string& help) {
  cli.add('o', "optimizer", target, help);
}
// -x, --steps: the optimizer steps to run.
template <class Int>
void add_steps(Cli& cli, Int* target, const std::string& help) {
  cli.add('x', "steps", target, help);
}
// -t, --seq: the sequence length T.
inline void add_seq(Cli& cli, int* target, const std::string& help) { cli.add('t', "seq", target, help); }
// --clip: global grad-norm clipping at this norm, 0 = off; `more` is added to the help.
inline void add_clip(Cli& cli, double* target, const std::string& more = "") {
  cli.add(0, "clip", target, "global grad-norm clip (0 = off)" + more);
}
// --set: optimizer options (the program lists the keys in its help epilogue).
inline void add_set(Cli& cli, std::vector<std::string>* target) {
  cli.add(0, "set", target, "optimizer option key=value (repeatable), e.g. --set adamw.beta2=0.99; the keys are below");
}
// --tokenizer: the GPT-2 BPE ranks.
inline void add_tokenizer(Cli& cli, std::string* target, const std::string& help) {
  cli.add(0, "tokenizer", target, help);
}

// The notes of `program` (Cli::note): its earlier spellings, and for train_gpt2 the llm.c letters it
// does not take. A note on a spelling that is still a flag (train_gpt2's -k, -s and -g, which changed
// meaning) shows only when the parser refuses that flag's value.
inline void add_flag_notes(Cli& cli, const char* program) {
  struct Note {
    const char *programs, *spelling, *text;
  };
  static const Note notes[] = {
      {"train_gpt2", "-k", "-k is the LR schedule now, as in llm.c; sample every N steps is -s"},
      {"train_gpt2", "-z", "tokens per sample is -g now, as in llm.c; llm.c's -z (ZeRO stage) is not taken here"},
      {"train_gpt2", "-r",
       "the checkpoint to resume from is --resume FILE now; llm.c's -r (recompute) is not taken here"},
      {"train_gpt2", "-s", "-s is sample every N steps now, as in llm.c; the LR schedule is -k"},
      {"train_gpt2", "-g", "-g is tokens per sample now, llm.c's genT; the grad-norm clip is --clip"},
      {"train_gpt2", "-y", "llm.c's -y (resume from the output folder) is --resume FILE here"},
      {"train_gpt2", "-a", "llm.c's -a (overfit one batch) is not taken here"},
      {"train_gpt2", "-f", "llm.c's -f (TF32) is not taken here; --precision chooses bf16 or fp32"},
      {"train_gpt2", "-w", "llm.c's -w (keep fp32 master weights) is not taken here: they are always fp32"},
      {"bench_optim bench_gpt2_ops", "-m", "the models are -e (--model) now"},
      {"bench_optim bench_gpt2_ops", "--models", "it is --model (-e) now"},
      {"bench_optim", "--opts", "it is --optimizer (-o) now"},
      {"bench_optim", "-n", "the timed steps are -x (--steps) now"},
      {"bench_optim", "-w", "the untimed steps are --untimed now"},
      {"bench_optim", "--warmup", "the untimed steps are --untimed now"},
      {"bench_optim", "-b", "the bf16 copy is --bf16 now"},
      {"bench_optim", "-c", "clipping is --clip now"},
      {"bench_optim", "-s", "optimizer options are --set now"},
      {"bench_gpt2_ops", "-k", "it is --tune now"},
      {"bench_gpt2_ops", "-r", "it is --reps now"},
      {"tokenize", "-o", "the output folder is --out now; -o is the optimizer in our other programs"},
      {"tokenize", "-n", "the shard name prefix is --name now"},
      {"tokenize", "-s", "it is --shard-tokens now"},
      {"tokenize", "-v", "it is --val-tokens now"},
      {"tokenize", "-f", "it is --format now"},
      {"tokenize", "-k", "it is --tokenizer now"},
  };
  const std::string me = std::string(" ") + program + " ";
  for (const auto& n : notes)
    if ((std::string(" ") + n.programs + " ").find(me) != std::string::npos) cli.note(n.spelling, n.text);
}
}  // namespace flags

// tokenize: text or JSONL files -> llm.c token shards (data.md B1: a 1024-byte int32 header, then uint16
// tokens), the way llm.c's fineweb.py writes them: the EOT token before every document, documents split
// across shards where they fall, shard 0 is validation ({name}_val_000000.bin), the rest training
// ({name}_train_000001.bin, ...).
//
//   ./tokenize -i "data/kjv/books/*.txt" --out data/kjv --name kjv
//   ./tokenize -i corpus.jsonl --out data/mine --shard-tokens 100000000   (one document per line, its "text" field)
//
// The dataset of that name in --out is replaced all or nothing (data/shard_writer.h): an error, SIGINT or
// SIGTERM leaves the previous set as it was, and a run killed outright is finished or undone by the next.
//
// Flags: train/flags.h's vocabulary. -i is the input data, as in train_gpt2; the rest are long-only, for
// their letters mean other things in train_gpt2 and llm.c (-o there is the optimizer, -n checkpoints, ...).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>

#include "common/cli.h"
#include "common/error.h"
#include "common/json.h"
#include "data/gpt2_tokenizer.h"
#include "data/shard_writer.h"
#include "data/token_shards.h"
#include "train/flags.h"

namespace {
volatile std::sig_atomic_t g_signal = 0;

// SIGINT and SIGTERM stop the run between documents (SA_RESTART: a write in progress finishes), so that
// the staging folder is removed and the previous dataset stays as it was.
void catch_stop_signals() {
  struct sigaction sa = {};
  sa.sa_handler = [](int sig) { g_signal = sig; };
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void check_signal() {
  if (g_signal)
    user_error("stopped by ", g_signal == SIGINT ? "SIGINT" : "SIGTERM",
               "; the dataset in the output folder was left as it was.");
}

// A whole file, read into one string of its size (a stream copy would hold it twice); a pipe, whose size
// is unknown, as a stream.
std::string read_whole(const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  if (!f) user_error("cannot read '", file, "'.");
  f.seekg(0, std::ios::end);
  const std::streamoff size = f ? std::streamoff(f.tellg()) : -1;
  if (size < 0) {
    f.clear();
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  std::string text(size_t(size), '\0');
  f.seekg(0);
  if (!f.read(&text[0], std::streamsize(text.size()))) user_error("cannot read '", file, "'.");
  return text;
}
struct Args {
  std::vector<std::string> inputs;
  std::string out_dir, name = "data", format = "auto", tokenizer = "tokenizer/r50k_base.tiktoken";
  int64_t shard_tokens = 100000000, val_tokens = 0;
};

// Every mistake the flags can hold, found before the slow work: numbers, names, the output folder, the inputs.
void check_args(const Args& a) {
  if (a.inputs.empty() || a.out_dir.empty())
    user_error("give input files with -i and an output folder with --out; see --help.");
  if (a.shard_tokens < 1 || a.val_tokens < 0 || a.shard_tokens > INT32_MAX || a.val_tokens > INT32_MAX)
    user_error("--shard-tokens must be in [1, ", INT32_MAX, "] and --val-tokens in [0, ", INT32_MAX,
               "] (a shard's header counts its tokens in 32 bits).");
  if (a.format != "auto" && a.format != "text" && a.format != "jsonl")
    user_error("--format must be auto, text or jsonl.");
  if (a.name.empty() || a.name.find('/') != std::string::npos || a.name[0] == '.')  // the shards stay inside --out
    user_error("--name must be non-empty, without '/', and not begin with '.' (got '", a.name, "').");
  struct stat st;  // a wrong output folder should fail now, not after the first shard's worth of input
  if (stat(a.out_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(a.out_dir.c_str(), W_OK) != 0)
    user_error("the output folder '", a.out_dir, "' does not exist or is not writable; create it first.");
  for (const auto& pattern : a.inputs) glob_files(pattern);  // every input pattern matches, before the slow work
}

// One input file's documents: the whole file (text), or each non-empty line's "text" field (JSONL).
void read_documents(const std::string& file, bool jsonl, const std::function<void(const std::string&)>& document) {
  if (!jsonl) {
    document(read_whole(file));
    return;
  }
  std::ifstream f(file, std::ios::binary);
  if (!f) user_error("cannot read '", file, "'.");
  std::string line;
  for (int64_t n = 1; std::getline(f, line); n++) {
    check_signal();
    if (line.empty()) continue;
    Json j = parse_json(line, str_cat("line ", n, " of '", file, "'"));
    if (!j.has("text") || j.at("text").type != Json::String)
      user_error("line ", n, " of '", file, "' has no string field \"text\".");
    document(j.at("text").str);
  }
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  Cli cli("tokenize", "Turns text or JSONL files into GPT-2 token shards (llm.c format; shard 0 = validation).");
  cli.add('i', "input", &a.inputs, "input file or glob pattern (repeatable); a .txt file is one document");
  cli.add(0, "out", &a.out_dir, "output folder (must exist)");
  cli.add(0, "name", &a.name, "shard name prefix");
  cli.add(0, "shard-tokens", &a.shard_tokens, "tokens per training shard");
  cli.add(0, "val-tokens", &a.val_tokens, "tokens in the validation shard (0 = same as --shard-tokens)");
  cli.add(0, "format", &a.format, "auto (by extension), text, or jsonl (one document per line, field \"text\")");
  flags::add_tokenizer(cli, &a.tokenizer, "r50k_base.tiktoken (scripts/download_tokenizer.sh fetches it)");
  flags::add_flag_notes(cli, "tokenize");
  try {
    if (!cli.parse(argc, argv)) return 0;
    check_args(a);
    Gpt2Tokenizer tok(a.tokenizer);
    catch_stop_signals();
    ShardWriter sink(a.out_dir, a.name, a.shard_tokens, a.val_tokens ? a.val_tokens : a.shard_tokens);
    int64_t docs = 0, text_tokens = 0;
    // A document is <|endoftext|> and then its tokens.
    auto document = [&](const std::string& text) {
      check_signal();
      const std::vector<int> body = tok.encode(text);
      sink.add({Gpt2Tokenizer::kEot});
      sink.add(body);
      text_tokens += int64_t(body.size());
      docs++;
    };
    for (const auto& pattern : a.inputs)
      for (const auto& file : glob_files(pattern)) {
        const bool jsonl =
            a.format == "jsonl" || (a.format == "auto" && file.size() > 6 && file.substr(file.size() - 6) == ".jsonl");
        read_documents(file, jsonl, document);
      }
    check_signal();
    if (text_tokens == 0)
      user_error("the input holds no text (", docs == 0 ? "no documents" : str_cat(docs, " empty document(s)"),
                 "); the dataset '", a.name, "' in '", a.out_dir, "' was left as it was.");
    sink.commit();
    std::printf("tokenize: %lld documents, %lld tokens, %d shard(s) in %s\n", (long long)docs, (long long)sink.tokens(),
                sink.shards(), a.out_dir.c_str());
  } catch (const UserError& e) {
    std::fprintf(stderr, "tokenize: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // e.g. out of memory: still one line, and the shards are removed
    std::fprintf(stderr, "tokenize: failed (%s).\n", e.what());
    return 1;
  }
  return 0;
}

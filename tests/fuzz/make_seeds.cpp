// Writes the seed corpus of every fuzz target (`make fuzz-seeds`; the seeds are committed under
// tests/fuzz/corpus/<target>/): small valid files made by the project's own writers, plus a few typical
// bad ones, so that fuzzing starts from inputs that get past the first checks.
#include <sys/stat.h>

#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/sections.h"
#include "data/gpt2_tokenizer.h"
#include "data/image_encode.h"
#include "data/image_loader.h"
#include "data/tar_writer.h"
#include "data/token_shards.h"
#include "optim/lopt/msgpack.h"
#include "optim/lopt/safetensors.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/resume_fixture.h"
#include "tests/image_bombs.h"
#include "tests/jpeg_samples.h"

namespace {
std::string root;

std::string dir(const std::string& target) {
  const std::string d = root + "/" + target;
  mkdir(d.c_str(), 0755);
  return d;
}
void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string path = dir(target) + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0)
    user_error("cannot write '", path, "'.");
}
std::string slurp(const std::string& path) {
  std::string s;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) user_error("cannot read '", path, "'.");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  std::remove(path.c_str());
  return s;
}
F32Tensor tensor(std::vector<int64_t> shape) {
  F32Tensor t{shape, {}};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t i = 0; i < n; i++) t.data.push_back(0.25f * float(i) - 1.0f);
  return t;
}
std::string bytes_of(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

void safetensors_seeds() {
  const std::string tmp = fuzz_dir() + "/x.safetensors";
  write_safetensors(tmp,
                    {{"w", tensor({2, 3})}, {"b", tensor({3})}, {"scalar", tensor({})}, {"empty", tensor({0, 4})}});
  put("safetensors", "four_tensors", slurp(tmp));
  write_safetensors(tmp, {{"w", tensor({2, 3})}});
  const std::string one = slurp(tmp);
  put("safetensors", "one_tensor", one);
  // Hugging Face files start with a "__metadata__" entry (skipped by the reader).
  std::string h =
      "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
  const uint64_t hlen = h.size();
  put("safetensors", "metadata", bytes_of(&hlen, 8) + h + one.substr(one.size() - 24));
  put("safetensors", "truncated", one.substr(0, one.size() - 5));
}

// A few msgpack encoders for the hand-made old-flax namedtuple (write_flax_arrays writes plain maps).
std::string mp_str(const std::string& s) { return char(0xa0 | s.size()) + s; }
std::string mp_array_ext(const F32Tensor& t) {
  std::string p = "\x93";
  p += char(0x90 | t.shape.size());
  for (int64_t d : t.shape) p += char(d);  // positive fixints
  p += mp_str("float32");
  p += '\xc4';
  p += char(t.data.size() * 4);
  p += bytes_of(t.data.data(), t.data.size() * 4);
  return std::string("\xc7") + char(p.size()) + '\x01' + p;
}

void msgpack_seeds() {
  const std::string tmp = fuzz_dir() + "/x.msgpack";
  write_flax_arrays(tmp,
                    {{"lstm/w", tensor({2, 2})}, {"lstm/b", tensor({3})}, {"rnn_params/rnn/linear/w", tensor({2})}},
                    {"rnn_params/rnn/linear"});
  put("msgpack", "tree", slurp(tmp));
  write_flax_arrays(tmp, {{"w", tensor({1, 2, 2})}}, {});
  put("msgpack", "one_array", slurp(tmp));
  // {"state": {"name": "P", "fields": ["a", "b"], "values": [array, array]}, "step": 7}
  std::string nt = "\x83" + mp_str("name") + mp_str("P") + mp_str("fields") + "\x92" + mp_str("a") + mp_str("b") +
                   mp_str("values") + "\x92" + mp_array_ext(tensor({2})) + mp_array_ext(tensor({1, 3}));
  put("msgpack", "namedtuple", "\x82" + mp_str("state") + nt + mp_str("step") + "\x07");
}

void sections_seeds() {
  const std::string tmp = fuzz_dir() + "/x.bin";
  {
    SectionWriter w(tmp);
    const int32_t shape[6] = {2, 8, 2, 64, 16, 1};
    w.put("model.shape", shape, sizeof shape);
    w.put_vector("model.params", std::vector<float>{0.5f, -1.0f, 2.0f, 0.0f, 3.5f, -0.25f});
    w.put_string("model.kernels", "matmul=lt");
    w.put_string("optim.name", "adamw");
    w.put_i64("optim.fingerprint", 123456789);
    w.put_vector("optim.m", std::vector<float>{0.1f, 0.2f, 0.3f});
    w.put_i64("train.step", 42);
    const int64_t lp[3] = {1, 0, 3};
    w.put("train.loader", lp, sizeof lp);
    w.put_string("train.sample_rng", "5489 1 2 3");
    w.commit();
  }
  const std::string ckpt = slurp(tmp);
  put("sections", "checkpoint", ckpt);
  put("sections", "checkpoint_truncated", ckpt.substr(0, ckpt.size() / 2));
  {
    SectionWriter w(tmp);
    w.commit();
  }
  put("sections", "empty", slurp(tmp));
  {
    SectionWriter w(tmp);
    w.put_i64("x", -1);
    w.put_string("optim.name", "");
    w.commit();
  }
  put("sections", "two_sections", slurp(tmp));
}

// 32 bytes of loader settings (see fuzz_token_shards.cpp), then a shard.
std::string loader(int B, int T, int world, int rank, int vocab_idx, int flags, int batches,
                   const int64_t* seek = nullptr) {
  std::string s(32, '\0');
  s[0] = char(B);
  s[1] = char(T);
  s[2] = char(world - 1);
  s[3] = char(rank);
  s[4] = char(vocab_idx);
  s[5] = char(flags);
  s[6] = char(batches);
  s[7] = 7;
  if (seek) std::memcpy(&s[8], seek, 24), s[5] = char(s[5] | 8);
  return s;
}
void token_shards_seeds() {
  const std::string tmp = fuzz_dir() + "/x.bin";
  std::vector<uint16_t> t(200);
  for (size_t i = 0; i < t.size(); i++) t[i] = uint16_t(i * 13 % 250);
  write_token_shard(tmp, t);
  const std::string shard = slurp(tmp);
  put("token_shards", "sequential", loader(2, 4, 1, 0, 0, 0, 30) + shard);
  put("token_shards", "shuffled_two_shards", loader(3, 5, 1, 0, 1, 1 | 2, 40) + shard);
  put("token_shards", "rank1_of_2", loader(2, 8, 2, 1, 0, 4 | 1, 20) + shard);
  const int64_t pos[3] = {1, 0, 3};
  put("token_shards", "resumed", loader(2, 4, 1, 0, 0, 6, 25, pos) + shard);
  // Found by reading, confirmed by this target (tests/cpu TokenLoader.ImpossibleEpochFromACheckpointIsRefused):
  // epoch 2^63-1 from a checkpoint overflowed at the end of the epoch.
  const int64_t last_epoch[3] = {INT64_MAX, 0, 190};  // 199 samples: the epoch ends at batch 10
  put("token_shards", "regress_epoch_overflow", loader(1, 1, 1, 0, 0, 0, 63, last_epoch) + shard);
  t[150] = 300;  // outside a 256-token vocabulary
  write_token_shard(tmp, t);
  put("token_shards", "bad_token", loader(1, 4, 1, 0, 1, 0, 10) + slurp(tmp));
  write_token_shard(tmp, {});
  put("token_shards", "empty_shard", loader(1, 1, 1, 0, 0, 0, 1) + slurp(tmp));
}

// 4 bytes of settings (see fuzz_tar.cpp: classes, shuffle buffer, resume point, seed), then a shard.
std::string tar_settings(int classes_idx, int buffer, int at) { return {char(classes_idx), char(buffer), char(at), 5}; }
std::string tar_of(const std::vector<std::pair<std::string, std::string>>& members) {
  const std::string tmp = fuzz_dir() + "/x.tar";
  TarWriter w(tmp);
  for (const auto& m : members) w.add(m.first, m.second);
  w.commit();
  return slurp(tmp);
}
void tar_seeds() {
  std::vector<std::pair<std::string, std::string>> m;
  for (int i = 0; i < 4; i++) {
    const std::string key = "fmnist_train_00000" + std::to_string(i);
    m.push_back({key + ".png", "\x89PNG" + std::to_string(i)});
    m.push_back({key + ".cls", std::to_string(i * 3 % 10) + "\n"});
  }
  m.push_back({"n01440764/ILSVRC2012_val_00000001.JPEG", "jpeg"});
  m.push_back({"n01440764/ILSVRC2012_val_00000001.cls", " 0 "});
  m.push_back({"n01440764/ILSVRC2012_val_00000001.json", "{\"label\": 0}"});
  const std::string good = tar_of(m);
  put("tar", "samples", tar_settings(0, 3, 2) + good);
  put("tar", "samples_in_order", tar_settings(0, 0, 5) + good);
  // Found by this target: a stream recorded just after a shard's last sample resumed after the end
  // marker, and read the junk that follows it (tests/cpu TarFormat.EndOfArchive).
  put("tar", "regress_resume_after_end", tar_settings(0, 4, 2) + good + "x");
  put("tar", "truncated", tar_settings(0, 2, 1) + good.substr(0, good.size() / 2 + 100));
  const std::string long_key = std::string(120, 'k') + "/" + std::string(130, 'p');  // pax path records
  put("tar", "pax_names",
      tar_settings(2, 4, 1) +
          tar_of({{long_key + ".jpg", "i"}, {long_key + ".cls", "999"}, {"x.jpeg", "j"}, {"x.cls", "1"}}));
  auto gnu_member = [](const std::string& name, const std::string& data) {  // GNU tar's long names, by hand
    return tar_header("././@LongLink", int64_t(name.size()) + 1, 'L') + name + '\0' +
           tar_padding(int64_t(name.size()) + 1) + tar_header(name.substr(0, 100), int64_t(data.size()), '0') + data +
           tar_padding(int64_t(data.size()));
  };
  const std::string gnu_key = std::string(150, 'g');
  put("tar", "gnu_long_name",
      tar_settings(3, 1, 0) + gnu_member(gnu_key + ".png", "g") + tar_header("dir/", 0, '5') +
          gnu_member(gnu_key + ".cls", "2") + std::string(1024, '\0'));
  put("tar", "missing_cls", tar_settings(0, 0, 0) + tar_of({{"a.jpg", "i"}, {"a.json", "{}"}}));
  put("tar", "bad_label", tar_settings(1, 0, 0) + tar_of({{"a.jpg", "i"}, {"a.cls", "1"}}));
}

void tokenizer_seeds() {
  auto lines = [](int from, int to) {
    std::string s;
    for (int r = from; r < to; r++) s += synthetic_rank_line(r);
    return s;
  };
  const std::string whole = "\x01", alone(1, '\0');  // byte 0: odd = completed by the synthetic file
  put("tokenizer_ranks", "complete", whole);
  put("tokenizer_ranks", "head_40", whole + lines(0, 40));
  put("tokenizer_ranks", "head_300_crlf", whole + lines(0, 299) + "d2g= 299\r\n");
  put("tokenizer_ranks", "swapped_lines", whole + lines(1, 2) + lines(0, 1) + lines(2, 20));
  put("tokenizer_ranks", "alone", alone + lines(0, 20));
  const std::string head = lines(0, 5);
  put("tokenizer_ranks", "bad_base64", "\x01" + head.substr(0, 60) + "%%%% 9\n");
  put("tokenizer_ranks", "duplicate_rank", "\x01" + std::string("IQ== 0\nIQ== 0\n"));
  put("tokenizer_ranks", "huge_rank", "\x01" + std::string("IQ== 99999999999999999999\n"));
  put("tokenizer_ranks", "no_rank", "\x01" + std::string("IQ==\n\nIg== \n"));

  put("tokenizer_encode", "english", "Hello world, it's a test. We'll they're I've you'd DON'T");
  put("tokenizer_encode", "spaces", "  leading spaces and  double  spaces  \t\n\n\nend   \n  \t ");
  put("tokenizer_encode", "numbers", "numbers 12345 and 3.14159, 1,000,000 $$$ %%% ^^^ x = a*b + c/d; // code");
  put("tokenizer_encode", "accents",
      "\xc3\x9cn\xc3\xaf"
      "c\xc3\xb6"
      "d\xc3\xa9 na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe2\x80\x9cquotes\xe2\x80\x9d");
  put("tokenizer_encode", "cjk_emoji",
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e emoji \xf0\x9f\x8e\x89\xf0\x9f\x91\x8d mixed \xef\xac\x81nance \xc2\xbd "
      "\xe2\x85\xa7");
  const char bad[] = "a\xff\xfe b\xc3 c\xe2\x82 d\xf0\x9f\x8e e\xc0\xaf f\xed\xa0\x80 \x00 g\xf4\x90\x80\x80";
  put("tokenizer_encode", "invalid_utf8", std::string(bad, sizeof bad - 1));
  put("tokenizer_encode", "endoftext", "<|endoftext|>The end.<|endoftext|>");
  put("tokenizer_encode", "long_word", std::string(2000, 'a') + " " + std::string(500, '!'));
}

void json_seeds() {
  put("json", "safetensors_header",
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},\"__metadata__\":{\"format\":\"pt\"}}");
  put("json", "config",
      "{\"input_size\": 39, \"hidden_size\": 32, \"hidden_layers\": 1, \"use_bias\": true, \"eps\": 1e-6, \"name\": "
      "null}");
  put("json", "jsonl",
      "{\"text\": \"first document\\nwith a newline\"}\n{\"text\": \"caf\\u00e9 \\ud83d\\ude00 \\\"quoted\\\" \\\\ \\/ "
      "\\t\"}\n"
      "{\"id\": 3, \"text\": \"\", \"meta\": {\"tags\": [\"a\", \"b\"], \"score\": -0.5E+2}}\n");
  put("json", "nested", "[[[[[[[[[[{\"a\":[1,2,{\"b\":[]}]}]]]]]]]]]]");
  put("json", "escapes_bad", "{\"text\": \"\\ud800 lone \\u12 short \\x bad\"}");
}

std::string argv_of(const std::vector<std::string>& a) {
  std::string s;
  for (const auto& x : a) s += x + '\0';
  return s;
}
void cli_seeds() {
  put("cli", "train",
      argv_of(
          {"-e", "d12", "-b", "16", "-x", "5000", "-l", "6e-4", "--set", "adamw.beta2=0.95", "--set=muon.lr=0.02"}));
  put("cli", "long_equals",
      argv_of(
          {"--model=tiny", "--batch=4", "--steps=100", "--lr=1e-3", "--scale=0.5", "--cuda-graph=1", "--log=x.jsonl"}));
  put("cli", "help", argv_of({"-b", "2", "--help"}));
  put("cli", "errors",
      argv_of({"-b", "1.5", "--steps", "1e30", "-l", "nan", "--cuda-graph", "maybe", "-q", "--unknown", "-b"}));
}

void options_seeds() {
  put("options", "adamw", "adamw\nadamw.lr=3e-4\nadamw.beta1=0.9\nadamw.beta2=0.95\nadamw.eps=1e-8\nadamw.wd=0.1");
  put("options", "adafactor",
      "adafactor\nadafactor.lr=0.01\nadafactor.beta2_decay=-0.8\nadafactor.eps1=-1\nadafactor.d=1\nadafactor.wd=0");
  put("options", "muon",
      "muon\nmuon.lr=0.02\nmuon.nesterov=false\nmuon.ns_steps=5\nmuon.adjust_lr=match_rms_adamw\n"
      "muon.ns_workspace_mb=256\nmuon.aux.lr=3e-4\nmuon.a=3.4445");
  put("options", "velo", "velo\nvelo.lr=1\nvelo.num_steps=1000\nvelo.tie=swapped\nvelo.weights=weights");
  put("options", "small_fc_lopt",
      "small_fc_lopt\nsmall_fc_lopt.lr=1\nsmall_fc_lopt.mup=1\nsmall_fc_lopt.fast=true\nsmall_fc_lopt.tie=pylo");
  put("options", "bad", "sgd\nadamw.lr\nadamw.lr=fast\nadamw.beta1=1.5\nmuon.ns_steps=2.5\nvelo.tie=jax\nnope=1\n=");
}
}  // namespace

// The first byte is the target's settings (bit 0: three channels; bit 1: bicubic), then the file: JPEGs
// with 4:2:0 (quality 90) and 4:4:4 (95) chroma, one-component and progressive (tests/jpeg_samples.h),
// PNGs in RGB and gray.
void image_seeds() {
  Image rgb(16, 12, 3), gray(9, 7, 1);
  for (size_t i = 0; i < rgb.pixels.size(); i++) rgb.pixels[i] = uint8_t(i * 29 % 256);
  for (size_t i = 0; i < gray.pixels.size(); i++) gray.pixels[i] = uint8_t(i * 31 % 256);
  put("image", "jpeg_420", "\x01" + encode_jpeg(rgb, 90));
  put("image", "jpeg_444", "\x03" + encode_jpeg(rgb, 95));
  put("image", "png_rgb", "\x01" + encode_png(rgb));
  put("image", "png_gray", std::string(1, '\0') + encode_png(gray));
  put("image", "jpeg_gray_one_component", std::string(1, '\0') + std::string(kGrayJpeg, sizeof kGrayJpeg - 1));
  put("image", "jpeg_progressive",
      std::string(1, '\0') + std::string(kGrayProgressiveJpeg, sizeof kGrayProgressiveJpeg - 1));
  // Found by this target: a scan naming a Huffman table no DHT defined (stb 2.27 read it uninitialised),
  // and the PNGs that made stb allocate gigabytes (tests/cpu/test_image_decode.cpp).
  put("image", "regress_undefined_huffman_table", std::string(1, '\0') + progressive_jpeg_with_undefined_table());
  put("image", "regress_idat_claims_2gb", std::string(1, '\0') + idat_claim_png());
  put("image", "regress_huge_header_tiny_data", "\x01" + huge_png());
}

// Checkpoints as train/checkpoint.cu writes them, for the model and loaders of tests/fuzz/resume_fixture.h.
void resume_seeds() {
  using namespace resume_fixture;
  const ParamTable t = table();
  const std::string tmp = fuzz_dir() + "/x.bin";
  auto checkpoint = [&](const std::vector<int64_t>& loader, bool fingerprint, int world) {
    SectionWriter w(tmp);
    const uint64_t f = t.fingerprint();
    if (fingerprint) w.put("model.table", &f, sizeof f);
    if (world > 1) w.put_i64("dp.world", world), w.put_vector("dp.owner", std::vector<int>{0, 1, 1});
    w.put_vector("model.params", std::vector<float>(size_t(t.natural_total()), 0.5f));
    w.put_string("model.kernels", "");
    w.put_string("optim.name", "adamw");
    w.put_i64("train.step", 12);
    w.put_i64("train.dropout_counter", 0);
    w.put_vector("train.loader", loader);
    std::ostringstream rng;
    rng << std::mt19937_64(7);
    w.put_string("train.sample_rng", rng.str());
    w.commit();
    return slurp(tmp);
  };
  put("resume", "gpt2", checkpoint({1, 0, 3}, true, 1));
  put("resume", "gpt2_before_fingerprints", checkpoint({0, 0, 0}, false, 1));
  put("resume", "rank_file_sharded", checkpoint({2, 0, 1}, true, 2));
  WdsStream stream(wds_shards(fuzz_dir()), wds_options());
  WdsSample x;
  for (int served = 0; served <= 8; served++) {
    if (served == 3 || served == 8) {  // in the first epoch, and in the second (a shuffle buffer in flight)
      const ImageLoader::Position p{stream.position(), served, served / kB};
      put("resume", "vit_after_" + std::to_string(served), checkpoint(p.to_ints(), true, 1));
    }
    stream.next(x);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR   (writes CORPUS_DIR/<target>/*)\n", argv[0]);
    return 2;
  }
  root = argv[1];
  mkdir(root.c_str(), 0755);
  try {
    safetensors_seeds();
    msgpack_seeds();
    sections_seeds();
    token_shards_seeds();
    tar_seeds();
    tokenizer_seeds();
    json_seeds();
    cli_seeds();
    options_seeds();
    image_seeds();
    resume_seeds();
  } catch (const UserError& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}

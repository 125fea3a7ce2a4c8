// WebDataset samples from a tar shard, as imagenet-1k-wds stores them: consecutive members that share a
// key form one sample. The key is the member path up to the first dot of its file name, the extension the
// rest (`a/b/n0142.foo.jpg`: key `a/b/n0142`, extension `foo.jpg`), compared case-insensitively.
//
// A sample needs exactly one image, a member whose whole extension is jpg, jpeg or png (what the ImageNet
// shards and our converters write, and stb_image decodes), and exactly one `cls` member: the class index
// in ASCII decimal, whitespace around it allowed, below the caller's class count. Other members (`json`,
// `txt`, `foo.jpg`, no extension) are read past. A key that comes back after other keys starts a new
// sample, as in WebDataset: keys are not remembered across samples (that would grow with the shard), so
// a shard written out of order gives split samples, each refused if it lacks its image or class.
// Errors are UserErrors naming the shard and the key.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/tar_reader.h"

struct WdsSample {
  std::string shard;  // the archive it came from, for messages about it (a bad image)
  std::string key;
  int64_t offset = 0;          // header offset of its first member: reading from there gives this sample again
  std::string image_ext;       // lowercase: jpg, jpeg or png
  std::vector<uint8_t> image;  // the encoded image, as stored
  int label = -1;
};

// Splits a member name into key and extension (see above); the extension is not lowercased.
void split_wds_name(const std::string& name, std::string* key, std::string* ext);

class WdsSampleReader {
 public:
  WdsSampleReader(std::unique_ptr<TarReader> tar, int num_classes);
  // Opens the shard at `path`, starting at `offset` (0, or a WdsSample::offset / offset() seen before).
  WdsSampleReader(const std::string& path, int num_classes, int64_t offset = 0, size_t buffer_bytes = size_t(1) << 20);
  // The next sample; false at the end of the shard. `s`'s buffers are reused.
  bool next(WdsSample& s);
  // Where the next sample begins: a new reader opened there continues with it.
  int64_t offset() const { return has_pending_ ? pending_.offset : tar_->offset(); }
  void seek(int64_t offset);
  const std::string& path() const { return tar_->path(); }

 private:
  void add_member(WdsSample& s, const std::string& ext, bool* has_image, bool* has_label);
  [[noreturn]] void fail(const std::string& key, const std::string& why) const;

  std::unique_ptr<TarReader> tar_;
  int num_classes_;
  bool has_pending_ = false;  // the first member of the next sample, read to see where this one ends
  TarMember pending_;
  std::vector<uint8_t> pending_data_;
};

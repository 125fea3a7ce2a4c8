#include "optim/lopt/msgpack.h"

#include <cstring>
#include <fstream>
#include <map>

#include "common/error.h"

namespace {
struct Reader {
  const std::vector<uint8_t>& b;
  const std::string& file;
  size_t i = 0;
  int depth = 0;

  [[noreturn]] void fail(const std::string& why) {
    user_error("'", file, "' is not a flax msgpack checkpoint (", why, " at byte ", i, ").");
  }
  void need(size_t n) {
    if (i + n > b.size()) user_error("'", file, "' is truncated (needs ", n, " more bytes at byte ", i, ").");
  }
  uint64_t be(size_t n) {
    need(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++) v = (v << 8) | b[i + k];
    i += n;
    return v;
  }
  struct Value {
    enum Kind { Nil, Bool, Int, Float, Str, Bin, Arr, Map, Ext } kind = Nil;
    int64_t ival = 0;
    double fval = 0;
    std::string str;  // Str and Bin bytes
    int8_t ext_type = 0;
    std::vector<Value> items;                          // Arr
    std::vector<std::pair<std::string, Value>> pairs;  // Map (string keys)
  };
  std::string raw(size_t n) {
    need(n);
    std::string s(reinterpret_cast<const char*>(b.data() + i), n);
    i += n;
    return s;
  }
  Value read() {
    if (++depth > 64) fail("nesting too deep");
    need(1);
    uint8_t t = b[i++];
    Value v;
    // Every element takes at least one byte (a pair two): a count beyond the bytes left is refused
    // before the loop, so a hostile count cannot make the reader build more values than the file has bytes.
    auto arr = [&](size_t n) {
      need(n);
      v.kind = Value::Arr;
      for (size_t k = 0; k < n; k++) v.items.push_back(read());
    };
    auto map = [&](size_t n) {
      need(2 * n);
      v.kind = Value::Map;
      for (size_t k = 0; k < n; k++) {
        Value key = read();
        if (key.kind != Value::Str && key.kind != Value::Int) fail("a map key that is not a string");
        std::string ks = key.kind == Value::Str ? key.str : std::to_string(key.ival);
        v.pairs.emplace_back(ks, read());
      }
    };
    auto ext = [&](size_t n) {
      need(1);
      v.kind = Value::Ext;
      v.ext_type = int8_t(b[i++]);
      v.str = raw(n);
    };
    if (t <= 0x7f) {
      v.kind = Value::Int;
      v.ival = t;
    } else if (t >= 0xe0) {
      v.kind = Value::Int;
      v.ival = int8_t(t);
    } else if ((t & 0xf0) == 0x80)
      map(t & 0x0f);
    else if ((t & 0xf0) == 0x90)
      arr(t & 0x0f);
    else if ((t & 0xe0) == 0xa0) {
      v.kind = Value::Str;
      v.str = raw(t & 0x1f);
    } else
      switch (t) {
        case 0xc0:
          break;
        case 0xc2:
          v.kind = Value::Bool;
          v.ival = 0;
          break;
        case 0xc3:
          v.kind = Value::Bool;
          v.ival = 1;
          break;
        case 0xc4:
          v.kind = Value::Bin;
          v.str = raw(be(1));
          break;
        case 0xc5:
          v.kind = Value::Bin;
          v.str = raw(be(2));
          break;
        case 0xc6:
          v.kind = Value::Bin;
          v.str = raw(be(4));
          break;
        case 0xc7:
          ext(be(1));
          break;
        case 0xc8:
          ext(be(2));
          break;
        case 0xc9:
          ext(be(4));
          break;
        case 0xca: {
          uint32_t u = uint32_t(be(4));
          float f;
          std::memcpy(&f, &u, 4);
          v.kind = Value::Float;
          v.fval = f;
          break;
        }
        case 0xcb: {
          uint64_t u = be(8);
          double d;
          std::memcpy(&d, &u, 8);
          v.kind = Value::Float;
          v.fval = d;
          break;
        }
        case 0xcc:
          v.kind = Value::Int;
          v.ival = int64_t(be(1));
          break;
        case 0xcd:
          v.kind = Value::Int;
          v.ival = int64_t(be(2));
          break;
        case 0xce:
          v.kind = Value::Int;
          v.ival = int64_t(be(4));
          break;
        case 0xcf:
          v.kind = Value::Int;
          v.ival = int64_t(be(8));
          break;
        case 0xd0:
          v.kind = Value::Int;
          v.ival = int8_t(be(1));
          break;
        case 0xd1:
          v.kind = Value::Int;
          v.ival = int16_t(be(2));
          break;
        case 0xd2:
          v.kind = Value::Int;
          v.ival = int32_t(be(4));
          break;
        case 0xd3:
          v.kind = Value::Int;
          v.ival = int64_t(be(8));
          break;
        case 0xd4:
          ext(1);
          break;
        case 0xd5:
          ext(2);
          break;
        case 0xd6:
          ext(4);
          break;
        case 0xd7:
          ext(8);
          break;
        case 0xd8:
          ext(16);
          break;
        case 0xd9:
          v.kind = Value::Str;
          v.str = raw(be(1));
          break;
        case 0xda:
          v.kind = Value::Str;
          v.str = raw(be(2));
          break;
        case 0xdb:
          v.kind = Value::Str;
          v.str = raw(be(4));
          break;
        case 0xdc:
          arr(be(2));
          break;
        case 0xdd:
          arr(be(4));
          break;
        case 0xde:
          map(be(2));
          break;
        case 0xdf:
          map(be(4));
          break;
        default:
          fail("an unsupported msgpack type byte");
      }
    depth--;
    return v;
  }
};

void flatten(Reader& r, const Reader::Value& v, const std::string& prefix, TensorMap* out) {
  using V = Reader::Value;
  if (v.kind == V::Map) {
    // Old flax namedtuples: {"name", "fields": [...], "values": [...]}.
    const V *fields = nullptr, *values = nullptr;
    for (const auto& [k, x] : v.pairs) {
      if (k == "fields" && x.kind == V::Arr) fields = &x;
      if (k == "values" && x.kind == V::Arr) values = &x;
    }
    if (fields && values && fields->items.size() == values->items.size()) {
      for (size_t k = 0; k < fields->items.size(); k++)
        flatten(r, values->items[k], prefix + (prefix.empty() ? "" : "/") + fields->items[k].str, out);
      return;
    }
    for (const auto& [k, x] : v.pairs) flatten(r, x, prefix + (prefix.empty() ? "" : "/") + k, out);
    return;
  }
  if (v.kind != V::Ext || v.ext_type != 1) return;  // ints, strings (gen_id, step) are not arrays
  std::vector<uint8_t> payload(v.str.begin(), v.str.end());
  Reader sub{payload, r.file};
  V a = sub.read();
  if (a.kind != V::Arr || a.items.size() != 3 || a.items[0].kind != V::Arr || a.items[1].kind != V::Str ||
      a.items[2].kind != V::Bin)
    user_error("'", r.file, "': array '", prefix, "' is not encoded as [shape, dtype, bytes].");
  if (a.items[1].str != "float32" && a.items[1].str != "<f4")
    user_error("'", r.file, "': array '", prefix, "' has dtype ", a.items[1].str, " but float32 is required.");
  F32Tensor t;
  for (const auto& d : a.items[0].items) {
    if (d.kind != V::Int || d.ival < 0)
      user_error("'", r.file, "': array '", prefix, "' has a bad shape (dimensions must be non-negative integers).");
    t.shape.push_back(d.ival);
  }
  // Checked against the bytes present before anything is allocated: a shape of (2^62) is refused here.
  const uint64_t n = float32_count(t.shape, a.items[2].str.size(), str_cat("'", r.file, "': array '", prefix, "'"));
  t.data.resize(size_t(n));
  if (n) std::memcpy(t.data.data(), a.items[2].str.data(), size_t(n * 4));
  (*out)[prefix] = std::move(t);
}

// ------------------------------------------------------------------ writer
struct Writer {
  std::string out;
  void be(uint64_t v, int n) {
    for (int k = n - 1; k >= 0; k--) out += char((v >> (8 * k)) & 0xff);
  }
  void str(const std::string& s) {
    if (s.size() < 32) {
      out += char(0xa0 | s.size());
    } else {
      out += char(0xdb);
      be(s.size(), 4);
    }
    out += s;
  }
  void map_header(size_t n) {
    out += char(0xdf);
    be(n, 4);
  }
  void array(const F32Tensor& t) {
    Writer p;
    p.out += char(0x93);
    p.out += char(0xdd);
    p.be(t.shape.size(), 4);
    for (int64_t d : t.shape) p.out += char(0xd3), p.be(uint64_t(d), 8);
    p.str("float32");
    p.out += char(0xc6);
    p.be(t.data.size() * 4, 4);
    p.out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
    out += char(0xc9);
    be(p.out.size(), 4);
    out += char(1);
    out += p.out;
  }
};

struct Node {
  std::map<std::string, Node> kids;
  const F32Tensor* leaf = nullptr;
};

void emit(Writer& w, const Node& n) {
  if (n.leaf) return w.array(*n.leaf);
  w.map_header(n.kids.size());
  for (const auto& [k, c] : n.kids) {
    w.str(k);
    emit(w, c);
  }
}
}  // namespace

TensorMap read_flax_arrays(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) user_error("cannot open weight file '", path, "'.");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
  Reader r{bytes, path};
  Reader::Value root = r.read();
  if (root.kind != Reader::Value::Map) r.fail("the top level is not a map");
  if (r.i != bytes.size()) r.fail("trailing bytes after the checkpoint");
  TensorMap out;
  flatten(r, root, "", &out);
  return out;
}

void write_flax_arrays(const std::string& path, const TensorMap& leaves, const std::vector<std::string>& slash_keys) {
  Node root;
  for (const auto& [p, t] : leaves) {
    std::vector<std::string> parts;
    std::string rest = p;
    while (!rest.empty()) {
      bool joined = false;
      for (const auto& sk : slash_keys) {  // a key containing '/' is taken whole
        std::string done;
        for (const auto& x : parts) done += (done.empty() ? "" : "/") + x;
        std::string full = done.empty() ? rest : done + "/" + rest;
        if (full.rfind(sk, 0) == 0 && sk.size() > done.size()) {
          std::string key = sk.substr(done.empty() ? 0 : done.size() + 1);
          if (rest.rfind(key, 0) == 0 && (rest.size() == key.size() || rest[key.size()] == '/')) {
            parts.push_back(key);
            rest = rest.size() == key.size() ? "" : rest.substr(key.size() + 1);
            joined = true;
            break;
          }
        }
      }
      if (joined) continue;
      auto slash = rest.find('/');
      parts.push_back(rest.substr(0, slash));
      rest = slash == std::string::npos ? "" : rest.substr(slash + 1);
    }
    Node* n = &root;
    for (const auto& x : parts) n = &n->kids[x];
    n->leaf = &t;
  }
  Writer w;
  emit(w, root);
  std::ofstream f(path, std::ios::binary);
  f.write(w.out.data(), std::streamsize(w.out.size()));
  if (!f) user_error("writing '", path, "' failed.");
}

#include <cstdio>
#include <cstring>
#include <utility>

#include "data/tar_reader.h"
#include "data/tar_writer.h"
#include "tests/test_util.h"

namespace {
using Members = std::vector<std::pair<std::string, std::string>>;  // name, data

std::string bytes(int n, int seed) {
  std::string s(size_t(n), '\0');
  for (int i = 0; i < n; i++) s[size_t(i)] = char((i * 131 + seed * 7) & 0xff);
  return s;
}

Members read_all(TarReader& r) {
  Members out;
  TarMember m;
  std::vector<uint8_t> d;
  while (r.next(m, d)) out.push_back({m.name, std::string(d.begin(), d.end())});
  return out;
}
Members read_bytes(const std::string& archive, const std::string& label = "mem.tar") {
  TarReader r(reinterpret_cast<const uint8_t*>(archive.data()), archive.size(), label);
  return read_all(r);
}

void write_tar(const std::string& path, const Members& members) {
  TarWriter w(path);
  for (const auto& m : members) w.add(m.first, m.second);
  w.commit();
}

// A regular member built by hand: header, data, padding.
std::string member(const std::string& name, const std::string& data, char type = '0') {
  return tar_header(name, int64_t(data.size()), type) + data + tar_padding(int64_t(data.size()));
}
const std::string kEnd(1024, '\0');

// Recomputes a hand-edited header's checksum (the unsigned sum) in place.
void fix_checksum(std::string& a, size_t at) {
  std::memset(&a[at + 148], ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < 512; i++) sum += uint8_t(a[at + i]);
  std::snprintf(&a[at + 148], 8, "%06o", sum);
}

// The members a round trip must keep: sizes around the block size, a 100-byte name, a long name split
// into the ustar prefix, and names only a pax header can hold.
Members sample_members() {
  const std::string dir60(60, 'd'), base90(90, 'b');
  return {{"a.txt", "hello"},
          {"empty.bin", ""},
          {"block.bin", bytes(512, 1)},
          {"block_plus_one.bin", bytes(513, 2)},
          {std::string(96, 'n') + ".jpg", bytes(700, 3)},
          {dir60 + "/" + base90 + ".cls", "7"},                   // ustar prefix + name
          {std::string(150, 'x') + ".png", bytes(1500, 4)},       // no slash: pax
          {dir60 + "/" + std::string(120, 'y') + ".jpg", "img"},  // base over 100: pax
          {std::string(4000, 'z'), "long"}};
}
}  // namespace

TEST(TarFormat, RoundTripKeepsNamesAndBytes) {
  const std::string d = make_temp_dir(), f = d + "/rt.tar";
  const Members in = sample_members();
  write_tar(f, in);
  TarReader r(f);
  EXPECT_EQ(read_all(r), in);
  EXPECT_EQ(read_bytes(read_file(f)), in);
  EXPECT_EQ(dir_names(d), std::vector<std::string>{"rt.tar"});  // the temporary file was renamed
  const std::string a = read_file(f);
  EXPECT_EQ(a.size() % 512, 0u);
  EXPECT_EQ(a.substr(a.size() - 1024), kEnd);
  // The prefix member has no pax header: its own header holds the 60-byte prefix at 345.
  const size_t prefixed = a.find(std::string(90, 'b') + ".cls");
  ASSERT_NE(prefixed, std::string::npos);
  EXPECT_EQ(a[prefixed + 156], '0');
  EXPECT_EQ(a.substr(prefixed + 345, 61), std::string(60, 'd') + '\0');
  // The 150-byte name went into a pax record.
  EXPECT_NE(a.find("164 path=" + std::string(150, 'x') + ".png\n"), std::string::npos);
}

TEST(TarFormat, OffsetsAreRestartPoints) {
  const std::string d = make_temp_dir(), f = d + "/rt.tar";
  const Members in = sample_members();
  write_tar(f, in);
  std::vector<int64_t> offsets;
  {
    TarReader r(f);
    TarMember m;
    std::vector<uint8_t> data;
    while (r.next(m, data)) offsets.push_back(m.offset);
  }
  ASSERT_EQ(offsets.size(), in.size());
  for (size_t i = 0; i < in.size(); i++) {  // the pax members restart at their pax header
    TarReader r(f, offsets[i], 4096);
    EXPECT_EQ(read_all(r), Members(in.begin() + long(i), in.end())) << i;
    r.seek(offsets[0]);
    EXPECT_EQ(read_all(r), in);
  }
  expect_user_error([&] { TarReader(f, 100); }, "cannot resume tar archive '" + f + "' at byte 100");
  expect_user_error([&] { TarReader(f, int64_t(read_file(f).size()) + 512); }, "no header can start there");
}

TEST(TarFormat, GnuLongNamesGlobalHeadersAndOtherTypes) {
  const std::string long_name = std::string(130, 'q') + "/" + std::string(200, 'r') + ".jpg";
  std::string a = tar_header("././@LongLink", int64_t(long_name.size()) + 1, 'L') + long_name + '\0' +
                  tar_padding(int64_t(long_name.size()) + 1) + member(long_name.substr(0, 100), "gnu");
  const std::string g = "21 comment=a comment\n";
  a += member("pax_global_header", g, 'g');
  a += member("folder/", "", '5') + member("link", "", '2');
  const std::string other = "20 mtime=1700000000\n27 path=renamed/by_pax.cls\n";
  a += member("PaxHeader/x", other, 'x') + member("x.cls", "3");
  a += member("../.././@LongLink", "zzz", 'K') + member("c.txt", "c", '7');
  a += kEnd;
  EXPECT_EQ(read_bytes(a), (Members{{long_name, "gnu"}, {"renamed/by_pax.cls", "3"}, {"c.txt", "c"}}));
}

TEST(TarFormat, EndOfArchive) {
  const std::string body = member("a", "1") + member("b", "22");
  const Members want = {{"a", "1"}, {"b", "22"}};
  EXPECT_EQ(read_bytes(body + kEnd), want);
  EXPECT_EQ(read_bytes(body), want);  // no end blocks: accepted, as GNU tar does
  EXPECT_EQ(read_bytes(body + std::string(512, '\0')), want);
  EXPECT_EQ(read_bytes(body + kEnd + std::string(8192, '\0') + "junk after the end"), want);  // not read
  EXPECT_EQ(read_bytes(""), Members{});
  // At the end the offset is the end marker's, so a reader restarted there ends too (fuzzing found the
  // offset after the marker, where a restart read the junk that follows).
  const std::string junk = body + kEnd + "x";
  TarReader r(reinterpret_cast<const uint8_t*>(junk.data()), junk.size(), "mem.tar");
  EXPECT_EQ(read_all(r), want);
  EXPECT_EQ(r.offset(), int64_t(body.size()));
  TarReader again(reinterpret_cast<const uint8_t*>(junk.data()), junk.size(), "mem.tar", r.offset());
  EXPECT_EQ(read_all(again), Members{});
  expect_user_error([&] { read_bytes(body + std::string(512, '\0') + member("c", "3")); },
                    "tar archive 'mem.tar': the header at byte 2560 follows a lone zero block");
}

// Every cut of an archive either ends at a member boundary (accepted: the members before it) or is
// refused as truncated, with the archive's name.
TEST(TarFormat, TruncatedAtEveryByteIsRefusedOrEndsAtAMember) {
  const std::string d = make_temp_dir(), f = d + "/cut.tar";
  const Members in = {{"a.jpg", bytes(700, 1)}, {std::string(150, 'p') + ".cls", "5"}, {"b.png", bytes(512, 2)}};
  write_tar(f, in);
  const std::string a = read_file(f);
  // Boundaries: 0, after a (header + 1024), after the pax member (pax header + record + header + block),
  // after b, and after the first end block.
  const std::vector<size_t> bounds = {0, 1536, 1536 + 2048, 1536 + 2048 + 1024, a.size() - 512, a.size()};
  int refused = 0;
  for (size_t cut = 0; cut <= a.size(); cut++) {
    const auto at = std::find(bounds.begin(), bounds.end(), cut);
    try {
      const Members got = read_bytes(a.substr(0, cut), "cut.tar");
      ASSERT_NE(at, bounds.end()) << "cut at " << cut << " was accepted";
      EXPECT_EQ(got, Members(in.begin(), in.begin() + std::min<long>(at - bounds.begin(), 3))) << cut;
    } catch (const UserError& e) {
      ASSERT_EQ(at, bounds.end()) << "cut at " << cut << ": " << e.what();
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tar archive 'cut.tar'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
      refused++;
    }
  }
  EXPECT_EQ(refused, int(a.size() + 1 - bounds.size()));
  // A cut in the data names the member; a file on disk too.
  write_file(f, a.substr(0, 1000));
  expect_user_error(
      [&] {
        TarReader r(f);
        read_all(r);
      },
      "tar archive '" + f + "': member 'a.jpg' (header at byte 0) is cut short");
}

TEST(TarFormat, CorruptHeadersAreRefusedWithTheMember) {
  const std::string good = member("a.jpg", "x") + member("b.cls", "12") + kEnd;
  std::string a = good;
  a[1024 + 1]++;  // the name of the second header
  expect_user_error([&] { read_bytes(a); }, "member 'b/cls' (header at byte 1024) has a bad checksum");
  a = good;
  a[1024 + 150] = 'x';  // the checksum field itself
  expect_user_error([&] { read_bytes(a); }, "(header at byte 1024) has a checksum field that is not an octal number");
  a = good;
  std::memcpy(&a[1024 + 124], "0000000001x", 11);  // size
  fix_checksum(a, 1024);
  expect_user_error([&] { read_bytes(a); },
                    "member 'b.cls' (header at byte 1024) has a size field that does not parse");
  a = good;
  std::memcpy(&a[1024 + 124], "00400000001", 11);  // 64 MiB + 1
  fix_checksum(a, 1024);
  expect_user_error([&] { read_bytes(a); }, "member 'b.cls' (header at byte 1024) is 67108865 bytes, over the 64 MiB");
  a = good;  // GNU base-256: 0x80 then big-endian; 2 bytes as in the octal field
  std::memcpy(&a[1024 + 124], "\x80\0\0\0\0\0\0\0\0\0\0\x02", 12);
  fix_checksum(a, 1024);
  EXPECT_EQ(read_bytes(a), (Members{{"a.jpg", "x"}, {"b.cls", "12"}}));
  a[1024 + 124] = '\xff';  // negative
  fix_checksum(a, 1024);
  expect_user_error([&] { read_bytes(a); }, "has a size field that does not parse");
  std::memcpy(&a[1024 + 124], "\x80\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 12);  // beyond int64
  fix_checksum(a, 1024);
  expect_user_error([&] { read_bytes(a); }, "has a size field that does not parse");
}

TEST(TarFormat, SignedChecksumOfOldTarsIsAccepted) {
  std::string a = member("caf\xc3\xa9.cls", "1") + kEnd;
  std::memset(&a[148], ' ', 8);
  int sum = 0;
  for (int i = 0; i < 512; i++) sum += int8_t(a[size_t(i)]);
  std::snprintf(&a[148], 8, "%06o", unsigned(sum));
  EXPECT_EQ(read_bytes(a), (Members{{"caf\xc3\xa9.cls", "1"}}));
}

TEST(TarFormat, BadExtendedHeadersAreRefused) {
  const std::string tail = member("x.cls", "1") + kEnd;
  for (const std::string rec :
       {"5 path=abc\n", "10 path=abc", "x path=abc\n", "11 pathabc\n", "8 =abc\n", "12 size=1z2\n", "0 \n"})
    expect_user_error([&] { read_bytes(member("PaxHeader/x", rec, 'x') + tail); },
                      "tar archive 'mem.tar': the header at byte 0 is a pax header whose records do not parse");
  const std::string huge_name(5000, 'n');
  expect_user_error([&] { read_bytes(member("PaxHeader/x", "5011 path=" + huge_name + "\n", 'x') + tail); },
                    "gives a member name of 5000 bytes, over the limit of 4096");
  expect_user_error([&] { read_bytes(member("././@LongLink", huge_name + '\0', 'L') + tail); },
                    "over the limit of 4096");
  expect_user_error([&] { read_bytes(member("PaxHeader/x", std::string(70000, ' '), 'x') + tail); },
                    "is an extended header of 70000 bytes");
  // A pax size record overrides the header's size.
  EXPECT_EQ(read_bytes(member("PaxHeader/x", "10 size=2\n", 'x') + tar_header("y.cls", 0, '0') + "42" + tar_padding(2) +
                       kEnd),
            (Members{{"y.cls", "42"}}));
}

TEST(TarFormat, WriterRefusesWhatTheReaderWould) {
  const std::string d = make_temp_dir(), f = d + "/w.tar";
  {
    TarWriter w(f);
    w.add("ok.cls", "1");
    expect_user_error([&] { w.add("", "1"); }, "a name must have 1 to 4096 bytes");
    expect_user_error([&] { w.add(std::string(4097, 'a'), "1"); }, "a name must have 1 to 4096 bytes");
    expect_user_error([&] { w.add("big.bin", std::string(size_t(64 << 20) + 1, 'b')); }, "limited to 64 MiB");
  }  // no commit: nothing left behind
  EXPECT_TRUE(dir_names(d).empty());
  expect_user_error([&] { TarWriter(d + "/no/such/folder/x.tar"); }, "cannot write");
  expect_user_error([&] { TarReader(d + "/none.tar"); }, "cannot open tar archive '" + d + "/none.tar'");
  expect_user_error([&] { TarReader r(d); }, "is not a regular file");
}

namespace {
bool have_gnu_tar() { return std::system("tar --version 2>/dev/null | grep -q 'GNU tar'") == 0; }
std::string quoted(const std::string& s) { return "'" + s + "'"; }
}  // namespace

// Archives made by GNU tar, in its GNU ('L' long names) and pax formats, read back; and ours listed by it.
TEST(TarFormat, InteroperatesWithGnuTar) {
  if (!have_gnu_tar()) GTEST_SKIP() << "GNU tar is not installed";
  const std::string d = make_temp_dir(), src = d + "/src", sub = std::string(40, 's');
  const std::string long_base = std::string(150, 'L') + ".jpg";
  ASSERT_EQ(std::system(("mkdir -p " + quoted(src + "/" + sub)).c_str()), 0);
  const Members files = {{"a.cls", "12\n"}, {sub + "/" + long_base, bytes(3000, 5)}, {"z.json", "{}"}};
  for (const auto& m : files) write_file(src + "/" + m.first, m.second);
  for (const std::string format : {"gnu", "pax", "ustar"}) {
    const std::string t = d + "/" + format + ".tar";
    const std::string cmd = "tar --format=" + format + " -cf " + quoted(t) + " -C " + quoted(src) + " a.cls " +
                            quoted(sub + "/" + long_base) + " z.json 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      EXPECT_EQ(format, "ustar") << "tar could not write " << format;  // ustar cannot hold a 150-byte base name
      continue;
    }
    TarReader r(t);
    EXPECT_EQ(read_all(r), files) << format;
  }
  const std::string ours = d + "/ours.tar";
  write_tar(ours, sample_members());
  FILE* p = popen(("tar -tf " + quoted(ours)).c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string listing;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) listing.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  std::string want;
  for (const auto& m : sample_members()) want += m.first + "\n";
  EXPECT_EQ(listing, want);
}

//===- NpzTest.cpp - .npz archives a hostile file cannot blow up ------------===//
//
// loadNpz reads np.savez archives. A member's claimed size is checked against what
// its compressed bytes can expand to before any memory is taken, memory grows with
// the bytes that arrive, and a member shorter than it claims is an error saying how
// far it got (not a zip library's "No error").
//
//===----------------------------------------------------------------------===//
#include "switchyard/Runtime/Npz.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace npz_test {

using namespace switchyard::npy;

namespace {

uint32_t crc32(const std::string &data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put16(std::string &s, uint32_t v) { s += char(v & 0xFF), s += char((v >> 8) & 0xFF); }
void put32(std::string &s, uint32_t v) { put16(s, v & 0xFFFF), put16(s, v >> 16); }

/// A zip archive with one stored member `name` holding `data`, whose headers claim
/// `claimed` uncompressed bytes (the truth when claimed == data.size()).
std::string storedZip(const std::string &name, const std::string &data, uint32_t claimed) {
  uint32_t crc = crc32(data);
  std::string z;
  put32(z, 0x04034b50), put16(z, 20), put16(z, 0), put16(z, 0), put16(z, 0), put16(z, 0x21);
  put32(z, crc), put32(z, uint32_t(data.size())), put32(z, claimed);
  put16(z, uint32_t(name.size())), put16(z, 0);
  z += name + data;
  uint32_t central = uint32_t(z.size());
  put32(z, 0x02014b50), put16(z, 20), put16(z, 20), put16(z, 0), put16(z, 0), put16(z, 0);
  put16(z, 0x21), put32(z, crc), put32(z, uint32_t(data.size())), put32(z, claimed);
  put16(z, uint32_t(name.size())), put16(z, 0), put16(z, 0), put16(z, 0), put16(z, 0);
  put32(z, 0), put32(z, 0);
  z += name;
  uint32_t centralSize = uint32_t(z.size()) - central;
  put32(z, 0x06054b50), put16(z, 0), put16(z, 0), put16(z, 1), put16(z, 1);
  put32(z, centralSize), put32(z, central), put16(z, 0);
  return z;
}

/// A version-1 .npy of a float32 vector of `n` elements (n < 10).
std::string npyVector(int n) {
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' '); // 10 + len % 64 == 0
  header += '\n';
  std::string s = "\x93NUMPY";
  s += char(1), s += char(0);
  put16(s, uint32_t(header.size()));
  s += header;
  for (int i = 0; i < n; ++i) {
    float v = float(i) + 0.5f;
    s.append(reinterpret_cast<const char *>(&v), sizeof v);
  }
  return s;
}

class NpzTest : public ::testing::Test {
protected:
  std::string path = "/tmp/switchyard-npz-test-" + std::to_string(getpid()) + ".npz";
  void TearDown() override { std::remove(path.c_str()); }
  void write(const std::string &bytes) { std::ofstream(path, std::ios::binary) << bytes; }
};

TEST_F(NpzTest, AStoredArchiveLoads) {
  std::string npy = npyVector(3);
  write(storedZip("x.npy", npy, uint32_t(npy.size())));
  std::map<std::string, Array> arrays;
  std::string error;
  ASSERT_TRUE(loadNpz(path, "replay", arrays, error)) << error;
  ASSERT_EQ(arrays.count("x"), 1u);
  EXPECT_EQ(arrays["x"].shape, std::vector<int64_t>{3});
}

TEST_F(NpzTest, AClaimBeyondWhatTheDataCanExpandToIsRefusedBeforeAllocating) {
  // 4 GiB claimed by a member of 128 stored bytes (the fuzzer's 378-byte archive).
  std::string npy = npyVector(3);
  write(storedZip("x.npy", npy, 0xFFFFFFF0u));
  std::map<std::string, Array> arrays;
  std::string error;
  EXPECT_FALSE(loadNpz(path, "replay", arrays, error));
  EXPECT_EQ(error, "replay: member 'x.npy' claims 4294967280 bytes from " +
                       std::to_string(npy.size()) +
                       " compressed bytes: more than any zip member expands to");
}

TEST_F(NpzTest, AMemberShorterThanItClaimsSaysHowFarItGot) {
  // Within what deflate could give, but the stored data ends early.
  std::string npy = npyVector(3);
  write(storedZip("x.npy", npy, uint32_t(npy.size()) + 1000));
  std::map<std::string, Array> arrays;
  std::string error;
  EXPECT_FALSE(loadNpz(path, "replay", arrays, error));
  EXPECT_NE(error.find("replay: member 'x.npy' is truncated or corrupt"), std::string::npos)
      << error;
  EXPECT_EQ(error.find("No error"), std::string::npos) << error;
}

} // namespace

} // namespace npz_test

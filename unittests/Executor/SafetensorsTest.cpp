//===- SafetensorsTest.cpp - safetensors files and checkpoint directories --===//
//
// Well-formed files (every dtype the executor computes with, shards with an index) and
// every kind of malformed file: each one a clear error, never an out-of-bounds read
// (the sanitizer build runs these too).
//
//===----------------------------------------------------------------------===//
#include "switchyard/Model/Safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace safetensors_test {

using namespace switchyard::model;

namespace {

struct TempDir {
  std::string path;
  std::vector<std::string> files;
  TempDir() {
    char name[] = "/tmp/switchyard-st-XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() {
    for (const std::string &f : files)
      std::remove((path + "/" + f).c_str());
    rmdir(path.c_str());
  }
  std::string write(const std::string &file, const std::string &bytes) {
    std::ofstream(path + "/" + file, std::ios::binary) << bytes;
    files.push_back(file);
    return path + "/" + file;
  }
};

std::string safetensors(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string s;
  for (float v : values)
    s.append(reinterpret_cast<const char *>(&v), 4);
  return s;
}

TEST(Safetensors, ReadsEveryComputeDtype) {
  TempDir dir;
  // bf16 0x3FC0 = 1.5, f16 0x3C00 = 1.0, 0xC000 = -2.0.
  std::string data = floats({1.0f, -2.5f}) + std::string("\xC0\x3F\x00\x3C\x00\xC0", 6) +
                     std::string(8, '\0');
  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]},)"
                       R"("c":{"dtype":"F16","shape":[1,2],"data_offsets":[10,14]},)"
                       R"("d":{"dtype":"I64","shape":[1],"data_offsets":[14,22]}})";
  dir.write("model.safetensors", safetensors(header, data));
  std::string error;
  auto ckpt = SafetensorsCheckpoint::open(dir.path, error);
  ASSERT_TRUE(ckpt) << error;
  EXPECT_EQ(ckpt->size(), 4u);
  float out[2];
  widenToFloat(*ckpt->require("a", {2}, error), 0, 2, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.5f);
  widenToFloat(*ckpt->require("b", {1}, error), 0, 1, out);
  EXPECT_EQ(out[0], 1.5f);
  widenToFloat(*ckpt->require("c", {1, 2}, error), 0, 2, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  // Present but not computable, absent, or the wrong shape: named errors.
  EXPECT_EQ(ckpt->require("d", {1}, error), nullptr);
  EXPECT_NE(error.find("tensor 'd' is I64"), std::string::npos) << error;
  EXPECT_EQ(ckpt->require("zz", {1}, error), nullptr);
  EXPECT_NE(error.find("no tensor 'zz'"), std::string::npos) << error;
  EXPECT_EQ(ckpt->require("a", {3}, error), nullptr);
  EXPECT_NE(error.find("has shape [2], expected [3]"), std::string::npos) << error;
}

TEST(Safetensors, ReadsShardsThroughTheIndex) {
  TempDir dir;
  dir.write("s1.safetensors",
            safetensors(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                        floats({3.0f})));
  dir.write("s2.safetensors",
            safetensors(R"({"y":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                        floats({4.0f})));
  dir.write("model.safetensors.index.json",
            R"({"metadata":{},"weight_map":{"x":"s1.safetensors","y":"s2.safetensors"}})");
  std::string error;
  auto ckpt = SafetensorsCheckpoint::open(dir.path, error);
  ASSERT_TRUE(ckpt) << error;
  float v;
  widenToFloat(*ckpt->find("y"), 0, 1, &v);
  EXPECT_EQ(v, 4.0f);
  EXPECT_NE(ckpt->find("x"), nullptr);
}

TEST(Safetensors, RejectsMalformedFiles) {
  struct Case {
    std::string name, bytes, expected;
  };
  std::string one = floats({1.0f});
  auto tensor = [&](const std::string &fields) {
    return safetensors("{\"t\":{" + fields + "}}", one);
  };
  std::vector<Case> cases = {
      {"empty", "", "8-byte header length is missing"},
      {"short", "abc", "8-byte header length is missing"},
      {"huge header", std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}",
       "past the end"},
      {"header past end", safetensors("{}", "").substr(0, 9), "past the end"},
      {"not json", safetensors("{oops", ""), "not a JSON object"},
      {"array header", safetensors("[1]", ""), "not a JSON object"},
      {"tensor not object", safetensors(R"({"t":3})", ""), "not an object"},
      {"no dtype", tensor(R"("shape":[1],"data_offsets":[0,4])"),
       "tensor 't': dtype is missing"},
      {"bad dtype", tensor(R"("dtype":"F33","shape":[1],"data_offsets":[0,4])"),
       "unknown dtype 'F33'"},
      {"shape not array", tensor(R"("dtype":"F32","shape":1,"data_offsets":[0,4])"),
       "shape must be an array, got 1"},
      {"negative extent", tensor(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])"),
       "non-negative integers"},
      {"float extent", tensor(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])"),
       "non-negative integers"},
      {"overflowing shape",
       tensor(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4])"),
       "too many elements"},
      {"offsets reversed", tensor(R"("dtype":"F32","shape":[1],"data_offsets":[4,0])"),
       "outside the"},
      {"offsets past end", tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,8])"),
       "outside the 4 data bytes"},
      {"one offset", tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0])"),
       "data_offsets must be two"},
      {"size mismatch", tensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])"),
       "expected 8"},
      {"overlap",
       safetensors(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                   R"("b":{"dtype":"F16","shape":[1],"data_offsets":[2,4]}})",
                   one),
       "overlap"},
  };
  for (const Case &c : cases) {
    TempDir dir;
    std::string path = dir.write("model.safetensors", c.bytes);
    std::string error;
    EXPECT_EQ(SafetensorsFile::open(path, error), nullptr) << c.name;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(path), std::string::npos) << c.name << ": " << error;
  }
}

TEST(Safetensors, RejectsBadCheckpointDirectories) {
  std::string error;
  EXPECT_EQ(SafetensorsCheckpoint::open("/nonexistent-dir", error), nullptr);
  EXPECT_NE(error.find("neither model.safetensors nor"), std::string::npos) << error;
  TempDir dir;
  dir.write("model.safetensors.index.json", R"({"weight_map":{"x":"../etc/passwd"}})");
  EXPECT_EQ(SafetensorsCheckpoint::open(dir.path, error), nullptr);
  EXPECT_NE(error.find("must name a file in"), std::string::npos) << error;
  dir.write("model.safetensors.index.json", R"({"weight_map":{"x":"gone.safetensors"}})");
  EXPECT_EQ(SafetensorsCheckpoint::open(dir.path, error), nullptr);
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
  dir.write("model.safetensors.index.json", R"({"weights":{}})");
  EXPECT_EQ(SafetensorsCheckpoint::open(dir.path, error), nullptr);
  EXPECT_NE(error.find("\"weight_map\""), std::string::npos) << error;
}

} // namespace

} // namespace safetensors_test

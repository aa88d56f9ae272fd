//===- UntrustedFileTest.cpp - bounded reads and type-checked JSON --------===//
//
// The helpers every runtime reader of an untrusted file goes through: only a regular
// file of at most its kind's size is read (never a FIFO, a device or a directory), and
// a JSON key of the wrong type is an error naming the file and the key.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Runtime/UntrustedFile.h"
#include "switchyard/Runtime/JsonAccess.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace untrusted_file_test {

using namespace switchyard::runtime;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char buffer[] = "/tmp/untrusted-file-test-XXXXXX";
    path = mkdtemp(buffer);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string &name, const std::string &text) {
    std::string file = path + "/" + name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }
};

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(UntrustedFile, ReadsASmallRegularFile) {
  TempDir d;
  std::string path = d.write("a.json", "{\"x\": 1}"), text, error;
  ASSERT_TRUE(readBoundedFile(path, "config.json", 64, text, error)) << error;
  EXPECT_EQ(text, "{\"x\": 1}");
  uint64_t size = 0;
  ASSERT_TRUE(checkRegularFile(path, "config.json", 64, size, error)) << error;
  EXPECT_EQ(size, 8u);
}

TEST(UntrustedFile, RefusesWhatIsNoSmallRegularFile) {
  TempDir d;
  std::string text, error;
  std::string big = d.write("big.json", std::string(100, ' '));
  EXPECT_FALSE(readBoundedFile(big, "config.json", 64, text, error));
  EXPECT_EQ(error, big + ": 100 bytes, more than a config.json has (64 bytes)");
  EXPECT_FALSE(readBoundedFile("/dev/zero", "config.json", 64, text, error));
  EXPECT_EQ(error, "/dev/zero: not a regular file");
  EXPECT_FALSE(readBoundedFile(d.path, "config.json", 64, text, error));
  EXPECT_EQ(error, d.path + ": is a directory, not a config.json");
  EXPECT_FALSE(readBoundedFile(d.path + "/none", "config.json", 64, text, error));
  EXPECT_TRUE(contains(error, "cannot open config.json '" + d.path + "/none'")) << error;
  // A FIFO with no writer: refused at once instead of blocking.
  std::string fifo = d.path + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(readBoundedFile(fifo, "checkpoint index", 64, text, error));
  EXPECT_EQ(error, fifo + ": not a regular file");
  EXPECT_EQ(formatByteLimit(uint64_t(16) << 20), "16 MiB");
  EXPECT_EQ(formatByteLimit(uint64_t(1) << 30), "1 GiB");
}

TEST(JsonAccess, ParsesOnlyObjects) {
  TempDir d;
  nlohmann::json j;
  std::string error;
  std::string bad = d.write("bad.json", "{");
  EXPECT_FALSE(parseJsonFile(bad, "config.json", 1 << 20, j, error));
  EXPECT_EQ(error, bad + ": not a JSON object (it does not parse as JSON)");
  std::string list = d.write("list.json", "[1, 2]");
  EXPECT_FALSE(parseJsonFile(list, "config.json", 1 << 20, j, error));
  EXPECT_EQ(error, list + ": not a JSON object (got [1,2])");
  EXPECT_TRUE(parseJsonFile(list, "config.json", 1 << 20, j, error, false)) << error;
  // Deep nesting parses without recursion and is simply not an object.
  std::string deep =
      d.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_FALSE(parseJsonFile(deep, "config.json", 1 << 20, j, error));
}

TEST(JsonAccess, ChecksTypesAndNamesFileAndKey) {
  nlohmann::json j = nlohmann::json::parse(
      R"({"s": "x", "i": 8, "f": 8.0, "big": 18446744073709551615, "b": true,
          "a": [1], "o": {"k": 1}, "n": null, "neg": -3})");
  std::string error;
  JsonAccess r(j, "c.json", error);
  std::string s = "default";
  int64_t i = 0;
  double f = 0;
  bool b = false;
  const nlohmann::json *node = nullptr;
  EXPECT_TRUE(r.string("s", s, Need::Required) && s == "x");
  EXPECT_TRUE(r.string("n", s, Need::Optional) && s == "x"); // null: the default stays
  EXPECT_FALSE(r.string("i", s, Need::Optional));
  EXPECT_EQ(error, "c.json: i must be a string, got 8");
  EXPECT_FALSE(r.string("missing", s, Need::Required));
  EXPECT_EQ(error, "c.json: missing is missing");
  EXPECT_TRUE(r.integer("i", i, Need::Required, 1, 16) && i == 8);
  EXPECT_FALSE(r.integer("f", i, Need::Required));
  EXPECT_EQ(error, "c.json: f must be an integer, got 8.0");
  EXPECT_FALSE(r.integer("big", i, Need::Required, 1, 16));
  EXPECT_EQ(error, "c.json: big = 18446744073709551615 is outside [1, 16]");
  EXPECT_FALSE(r.integer("neg", i, Need::Required, 0));
  EXPECT_TRUE(contains(error, "neg = -3 is outside [0, ")) << error;
  EXPECT_TRUE(r.number("f", f, Need::Required, 0, 10) && f == 8.0);
  EXPECT_FALSE(r.number("s", f, Need::Required));
  EXPECT_EQ(error, "c.json: s must be a number, got \"x\"");
  EXPECT_TRUE(r.boolean("b", b, Need::Required) && b);
  EXPECT_FALSE(r.boolean("i", b, Need::Required));
  EXPECT_TRUE(r.array("a", node, Need::Required) && node && node->size() == 1);
  EXPECT_FALSE(r.array("o", node, Need::Required));
  EXPECT_EQ(error, "c.json: o must be an array, got {\"k\":1}");
  EXPECT_TRUE(r.object("o", node, Need::Required));
  EXPECT_TRUE(r.nested("o", *node).integer("k", i, Need::Required) && i == 1);
  EXPECT_FALSE(r.nested("o", *node).integer("z", i, Need::Required));
  EXPECT_EQ(error, "c.json: o: z is missing");
  EXPECT_TRUE(r.array("none", node, Need::Optional) && node == nullptr);
  // Not an object at all: every key reads as absent.
  nlohmann::json number = 3;
  JsonAccess n(number, "x.json", error);
  EXPECT_FALSE(n.integer("k", i, Need::Required));
  EXPECT_EQ(error, "x.json: k is missing");
}

} // namespace

namespace {
TEST(JsonAccess, SnippetsOfDeepValuesDoNotRecurse) {
  std::string text = "{\"k\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  nlohmann::json j = nlohmann::json::parse(text);
  std::string error;
  int64_t i = 0;
  EXPECT_FALSE(JsonAccess(j, "c.json", error).integer("k", i, Need::Required));
  EXPECT_EQ(error, "c.json: k must be an integer, got [[[[...]]]]");
}
} // namespace

} // namespace untrusted_file_test

//===- ManifestTest.cpp - the artifact directory's manifest.json ----------===//
#include "switchyard/Runtime/Manifest.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace manifest_test {

using namespace switchyard::runtime;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/switchyard-manifest-XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() {
    std::remove((path + "/manifest.json").c_str());
    rmdir(path.c_str());
  }
  void write(const std::string &text) const {
    std::ofstream(path + "/manifest.json") << text;
  }
};

Manifest sample() {
  Manifest m;
  m.policy = "policies/xshare.mlir";
  m.target = "all";
  m.command = {"moe-compile", "policies/xshare.mlir"};
  ManifestEntry e;
  e.signature.entry = "xshare";
  Param logits;
  logits.name = "logits";
  logits.kind = ParamKind::Tensor;
  logits.dtype = DType::F32;
  logits.shape = {-1, 8};
  e.signature.params.push_back(logits);
  e.experts = 8;
  e.topK = 2;
  e.hostLibrary = "libxshare.so";
  e.hostSymbol = "xshare_packed";
  e.ptx = "xshare.ptx";
  e.sizeClasses.push_back(SizeClass{"decode", 0, 1024, 1});
  e.files["libxshare.so"] = FileDigest{4096, std::string(64, 'a')};
  e.files["xshare.ptx"] = FileDigest{100, std::string(64, 'b')};
  m.entries.push_back(e);
  ManifestEntry rule;
  rule.signature.entry = "plan";
  rule.signature.kind = EntryKind::Balance;
  m.entries.push_back(rule);
  return m;
}

TEST(Manifest, RoundTrips) {
  TempDir dir;
  dir.write(toJson(sample()));
  Manifest m;
  std::string error;
  ASSERT_TRUE(readManifest(dir.path, m, error)) << error;
  ASSERT_EQ(m.entries.size(), 2u);
  EXPECT_EQ(m.entries[0].signature.entry, "xshare");
  EXPECT_EQ(m.entries[0].signature.params[0].shape, (std::vector<int64_t>{-1, 8}));
  EXPECT_EQ(m.entries[0].topK, 2);
  EXPECT_EQ(m.entries[0].hostSymbol, "xshare_packed");
  ASSERT_EQ(m.entries[0].sizeClasses.size(), 1u);
  EXPECT_EQ(m.entries[0].sizeClasses[0].maxTokens, 1024);
  EXPECT_EQ(m.entries[0].files.at("libxshare.so"),
            (FileDigest{4096, std::string(64, 'a')}));
  EXPECT_EQ(m.entries[0].files.size(), 2u);
  // The only router is found without a name; a rule by its name.
  EXPECT_EQ(m.find("", error), &m.entries[0]);
  EXPECT_EQ(m.find("plan", error), &m.entries[1]);
  EXPECT_EQ(m.find("nope", error), nullptr);
  EXPECT_NE(error.find("no entry @nope"), std::string::npos) << error;
  EXPECT_NE(error.find("@xshare, @plan"), std::string::npos) << error;
}

TEST(Manifest, RejectsMalformedFiles) {
  TempDir dir;
  Manifest m;
  std::string error;
  EXPECT_FALSE(readManifest(dir.path, m, error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
  struct Case {
    std::string text, expected;
  };
  std::string good = toJson(sample());
  auto replace = [&](const std::string &from, const std::string &to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  std::vector<Case> cases = {
      {"[", "is not a JSON object"},
      {"{}", "manifest.format must be a string"},
      {replace("\"version\": 2", "\"version\": 7"), "version 7"},
      {replace("\"libxshare.so\": {", "\"other.so\": {"),
       "files[\"libxshare.so\"] must be an object"},
      {replace(std::string(64, 'b'), "B"), "64 lowercase hex digits"},
      {replace("\"host_library\": \"libxshare.so\"", "\"host_library\": \"../evil.so\""),
       "outside the artifact directory"},
      {replace("\"top_k\": 2", "\"top_k\": \"2\""),
       "entries[0].shape.top_k must be an integer"},
      {replace("\"max_tokens\": 1024", "\"max_tokens\": []"),
       "max_tokens must be an integer"},
  };
  for (const Case &c : cases) {
    dir.write(c.text);
    error.clear();
    EXPECT_FALSE(readManifest(dir.path, m, error)) << c.text;
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
  }
}

} // namespace

TEST(Manifest, FileDigestsCatchADamagedArtifact) {
  TempDir dir;
  const std::string library = dir.path + "/libxshare.so";
  std::ofstream(library) << "a library's bytes";
  Manifest m = sample();
  m.entries[0].ptx.clear();
  std::string error;
  ASSERT_TRUE(recordFileDigests(dir.path, m, error)) << error;
  // The size and SHA-256 of the 17 bytes above (as `sha256sum` prints it).
  EXPECT_EQ(
      m.entries[0].files.at("libxshare.so"),
      (FileDigest{17, "f301d817069cd63ce25af9ce030378a813cf9e714166a82e069e40f165e225fc"}));
  EXPECT_TRUE(checkFileDigests(dir.path, m, error)) << error;
  std::ofstream(library) << "a library's byteZ"; // same size, one byte flipped
  EXPECT_FALSE(checkFileDigests(dir.path, m, error));
  EXPECT_NE(error.find("does not match its manifest"), std::string::npos) << error;
  std::ofstream(library) << "short"; // truncated
  EXPECT_FALSE(checkFileDigests(dir.path, m, error));
  EXPECT_NE(error.find("5 bytes"), std::string::npos) << error;
  std::remove(library.c_str());
}

} // namespace manifest_test

//===- BatchTest.cpp - phase and speculative structure of a batch ----------===//
#include "switchyard/Executor/Batch.h"

#include <gtest/gtest.h>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace batch_test {

using namespace switchyard::exec;

namespace {

BatchInfo batch(std::vector<int32_t> ids, std::vector<int32_t> positions) {
  BatchInfo b;
  b.tokens = static_cast<int64_t>(ids.empty() ? positions.size() : ids.size());
  b.requestIds = std::move(ids);
  b.positions = std::move(positions);
  return b;
}

TEST(Batch, DerivesPhaseAndDrafts) {
  std::string error;
  BatchInfo decode = batch({}, {});
  decode.tokens = 3;
  ASSERT_TRUE(decode.derive(nullptr, error)) << error;
  EXPECT_EQ(decode.phase, Phase::Decode);
  EXPECT_EQ(decode.requests, 3);

  BatchInfo prefill = batch({7, 7, 7}, {0, 1, 2});
  ASSERT_TRUE(prefill.derive(nullptr, error)) << error;
  EXPECT_EQ(prefill.phase, Phase::Prefill);
  EXPECT_EQ(prefill.draftMask, (std::vector<uint8_t>{0, 0, 0}));

  // Request 1 verifies two drafts after its accepted token; request 2 decodes one.
  BatchInfo verify = batch({1, 1, 1, 2}, {40, 41, 42, 9});
  ASSERT_TRUE(verify.derive(nullptr, error)) << error;
  EXPECT_EQ(verify.phase, Phase::Decode);
  EXPECT_EQ(verify.verifyRequests, 1);
  EXPECT_EQ(verify.draftMask, (std::vector<uint8_t>{0, 1, 1, 0}));

  BatchInfo mixed = batch({1, 1, 2}, {0, 1, 17});
  ASSERT_TRUE(mixed.derive(nullptr, error)) << error;
  EXPECT_EQ(mixed.phase, Phase::Mixed);

  Phase given = Phase::Prefill;
  BatchInfo forced = batch({1}, {5});
  ASSERT_TRUE(forced.derive(&given, error)) << error;
  EXPECT_EQ(forced.phase, Phase::Prefill);
}

TEST(Batch, RejectsInconsistentMetadata) {
  std::string error;
  BatchInfo gap = batch({1, 1}, {3, 5});
  EXPECT_FALSE(gap.derive(nullptr, error));
  EXPECT_NE(error.find("expected 4"), std::string::npos) << error;
  BatchInfo negative = batch({-1}, {0});
  EXPECT_FALSE(negative.derive(nullptr, error));
  EXPECT_NE(error.find("non-negative"), std::string::npos) << error;
  BatchInfo lengths = batch({1, 2}, {0});
  EXPECT_FALSE(lengths.derive(nullptr, error));
  EXPECT_NE(error.find("one entry per token"), std::string::npos) << error;
  Phase p;
  EXPECT_FALSE(parsePhase("warmup", p));
  EXPECT_TRUE(parsePhase("mixed", p));
  EXPECT_EQ(p, Phase::Mixed);
}

} // namespace

} // namespace batch_test

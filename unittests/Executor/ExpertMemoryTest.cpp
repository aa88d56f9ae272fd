//===- ExpertMemoryTest.cpp - the on-demand cache driving real layers -------===//
//
// ExpertMemory in on-demand mode (no compiled rule needed) over a 3-layer checkpoint
// written by the test, with a cache smaller than a step's working set and copies that
// fail or stall: every step's outputs are bit-identical to the layers run without
// expert memory, the budget holds, the store's invariants hold at every boundary, and
// swap-ins come in waves. Runs under executor/asan and executor/tsan too (the layers'
// FFN workers, the migration worker and the controller together).
//
//===----------------------------------------------------------------------===//
#include "switchyard/Memory/ExpertMemory.h"
#include "DirectBlock.h"
#include "TinyCheckpoint.h"

#include <gtest/gtest.h>

#include <cstring>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace expert_memory_test {

using namespace switchyard;
using namespace switchyard::memory;

namespace {

constexpr int64_t L = 3, H = 64, I = 32, E = 8, T = 6;

/// The checkpoint's L layers, loaded.
struct Layers {
  model::MoeConfig config;
  std::unique_ptr<model::SafetensorsCheckpoint> file;
  std::vector<std::unique_ptr<exec::MoeLayer>> owned;
  std::vector<exec::MoeLayer *> pointers;
  explicit Layers(const unittest::TinyCheckpoint &ckpt) {
    std::string error;
    EXPECT_TRUE(model::readMoeConfig(ckpt.dir, config, error)) << error;
    file = model::SafetensorsCheckpoint::open(ckpt.dir, error);
    for (int64_t l = 0; l < L; ++l) {
      owned.push_back(exec::MoeLayer::load(config, *file, l, error));
      EXPECT_TRUE(owned.back()) << error;
      owned.back()->setWorkers(2);
      pointers.push_back(owned.back().get());
    }
  }
};

TEST(ExpertMemory, OnDemandWithFaultsMatchesTheLayersWithoutIt) {
  unittest::TinyCheckpoint ckpt(false, L, H, I, E, 31);
  Layers model(ckpt);
  std::string error;
  auto &layers = model.owned;
  exec::BatchInfo batch;
  batch.tokens = T;
  ASSERT_TRUE(batch.derive(nullptr, error)) << error;
  // The steps and their outputs without expert memory.
  std::mt19937 rng(8);
  std::normal_distribution<float> normal;
  const int steps = 12;
  std::vector<std::vector<float>> xs;
  std::vector<std::vector<exec::Routing>> routings;
  std::vector<std::vector<std::vector<float>>> want;
  for (int s = 0; s < steps; ++s) {
    xs.emplace_back(T * H);
    for (float &v : xs.back())
      v = normal(rng);
    routings.emplace_back();
    want.emplace_back();
    for (int64_t l = 0; l < L; ++l) {
      routings.back().push_back(unittest::roundRobinRouting(T, E, unsigned(rng())));
      std::vector<float> y(T * H);
      exec::Routing scratch;
      exec::LayerMetrics metrics;
      ASSERT_TRUE(layers[size_t(l)]->forward(xs.back().data(), T, batch,
                                             &routings.back()[l], scratch, y.data(),
                                             metrics, error))
          << error;
      want.back().push_back(y);
    }
  }
  const int64_t hi = 3 * H * I * 4;
  MemoryOptions options;
  options.mode = MemoryMode::OnDemand;
  options.budgetBytes = L * 3 * hi; // 3 slots per layer; a step routes up to 6 experts
  options.link.bytesPerSecond = 2e8;
  options.link.failureRate = 0.25;
  options.link.maxDelaySeconds = 0.001;
  options.checkInvariants = true;
  runtime::PolicyCache cache("/nonexistent-not-used");
  auto memory = ExpertMemory::create(options, model.config, model.pointers, cache, error);
  ASSERT_TRUE(memory) << error;
  for (int s = 0; s < steps; ++s) {
    ASSERT_TRUE(memory->beginStep(error)) << "step " << s << ": " << error;
    for (int64_t l = 0; l < L; ++l) {
      std::vector<float> y(T * H);
      exec::Routing scratch;
      exec::LayerMetrics metrics;
      ASSERT_TRUE(layers[size_t(l)]->forward(xs[size_t(s)].data(), T, batch,
                                             &routings[size_t(s)][size_t(l)], scratch,
                                             y.data(), metrics, error))
          << "step " << s << " layer " << l << ": " << error;
      EXPECT_EQ(0, std::memcmp(y.data(), want[size_t(s)][size_t(l)].data(), y.size() * 4))
          << "step " << s << " layer " << l;
    }
    exec::MemoryMetrics m = memory->endStep();
    EXPECT_LE(m.peak, options.budgetBytes);
  }
  std::string check;
  ASSERT_TRUE(memory->beginStep(check)) << check; // the invariants once more
  const StoreCounters &c = memory->store().counters();
  EXPECT_GT(c.loads, 0);
  EXPECT_GT(c.evictions, 0);
  EXPECT_GT(c.failedCopies, 0);
}

TEST(ExpertMemory, ABudgetWithoutOneExpertPerLayerIsAnError) {
  unittest::TinyCheckpoint ckpt(false, L, H, I, E, 32);
  Layers model(ckpt);
  std::string error;
  MemoryOptions options;
  options.mode = MemoryMode::OnDemand;
  options.budgetBytes = 2 * 3 * H * I * 4; // two experts for three layers
  runtime::PolicyCache cache("/nonexistent-not-used");
  EXPECT_FALSE(ExpertMemory::create(options, model.config, model.pointers, cache, error));
  EXPECT_NE(error.find("fewer than one per MoE layer (3)"), std::string::npos) << error;
}

} // namespace

} // namespace expert_memory_test

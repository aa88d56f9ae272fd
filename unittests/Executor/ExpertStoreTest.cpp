//===- ExpertStoreTest.cpp - versioned residency under a budget, with faults ===//
//
// The expert store on a 3-layer checkpoint written by the test: budgets that cannot
// hold a mode are errors; promotions are admitted only when the budget reserves their
// blocks and publish only after their copy lands; and randomized stress runs (random
// promotions, demotions, loads and evictions, random budgets, copies that fail or stall
// on the emulated link) check after every step that every handle resolves to a
// complete version, that the budget holds, and that each layer's output equals its
// definition on the versions the handles resolve to (re-made by the test from the
// checkpoint). executor/asan and executor/tsan run these too.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Memory/ExpertStore.h"
#include "DirectBlock.h"
#include "TinyCheckpoint.h"

#include <gtest/gtest.h>

#include <chrono>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace expert_store_test {

using namespace switchyard;
using namespace switchyard::memory;

namespace {

constexpr int64_t L = 3, H = 64, I = 32, E = 8;

struct Model {
  unittest::TinyCheckpoint ckpt{false, L, H, I, E, 21};
  model::MoeConfig config;
  std::unique_ptr<model::SafetensorsCheckpoint> file;
  std::vector<std::unique_ptr<exec::MoeLayer>> layers;
  std::vector<exec::MoeLayer *> pointers;
  std::vector<exec::FfnWeights> original; // [l * E + e], the checkpoint's views
  Model() {
    std::string error;
    EXPECT_TRUE(model::readMoeConfig(ckpt.dir, config, error)) << error;
    file = model::SafetensorsCheckpoint::open(ckpt.dir, error);
    for (int64_t l = 0; l < L; ++l) {
      layers.push_back(exec::MoeLayer::load(config, *file, l, error));
      EXPECT_TRUE(layers.back()) << error;
      pointers.push_back(layers.back().get());
      for (int64_t e = 0; e < E; ++e)
        original.push_back(layers.back()->expertWeights(e));
    }
  }
};

LinkOptions fastLink(double failureRate = 0, double maxDelay = 0, uint64_t seed = 1) {
  LinkOptions link;
  link.bytesPerSecond = 2e8; // a 24 KiB expert in ~0.1 ms
  link.failureRate = failureRate;
  link.maxDelaySeconds = maxDelay;
  link.seed = seed;
  return link;
}

/// Runs advance() until nothing is in flight (or a second passes).
void settle(ExpertStore &store) {
  for (int i = 0; i < 1000; ++i) {
    store.advance();
    bool busy = false;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t e = 0; e < E; ++e)
        busy |= store.state(l, e) == Residency::Promoting ||
                store.state(l, e) == Residency::Loading;
    if (!busy)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// Every layer on a random batch equals its definition on the versions its handles
/// resolve to, re-made from the checkpoint by the test.
void expectLayersMatchTheirVersions(Model &m, ExpertStore &store, std::mt19937 &rng,
                                    const std::string &when) {
  const int64_t T = 5;
  std::normal_distribution<float> normal;
  std::vector<float> x(T * H);
  for (float &v : x)
    v = normal(rng);
  exec::BatchInfo batch;
  batch.tokens = T;
  std::string error;
  ASSERT_TRUE(batch.derive(nullptr, error)) << error;
  for (int64_t l = 0; l < L; ++l) {
    exec::Routing routing = unittest::roundRobinRouting(T, E, unsigned(rng()));
    // Only resident experts can run: route the rest to -1 (offloading tests load first).
    for (int32_t &id : routing.ids)
      if (id >= 0 && !store.resident(l, id))
        id = -1;
    std::vector<VersionImage> remade(E);
    for (int64_t e = 0; e < E; ++e) {
      Precision p;
      if (store.activePrecision(l, e, p)) {
        ASSERT_TRUE(
            makeVersion(m.original[size_t(l * E + e)], p, 0, remade[size_t(e)], error));
      }
    }
    const std::vector<float> want = unittest::directBlock(
        [&](int32_t e) { return remade[size_t(e)].weights(); }, x, routing, H);
    std::vector<float> y(T * H);
    exec::Routing scratch;
    exec::LayerMetrics metrics;
    ASSERT_TRUE(m.layers[size_t(l)]->forward(x.data(), T, batch, &routing, scratch,
                                             y.data(), metrics, error))
        << when << ": " << error;
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], want[i], 1e-4) << when << ", layer " << l << ", element " << i;
  }
}

TEST(ExpertStore, ABudgetThatCannotHoldTheModeIsAnError) {
  Model m;
  std::string error;
  auto probe =
      ExpertStore::create(m.pointers, 1 << 30, Precision::Int4, 0, fastLink(), error);
  ASSERT_TRUE(probe) << error;
  const int64_t lo = probe->loBytes(), hi = probe->hiBytes();
  EXPECT_LT(lo * 4, hi); // int4 is under a quarter of f32 (scales included)
  probe.reset();
  auto store = ExpertStore::create(m.pointers, L * E * lo - 1, Precision::Int4, 0,
                                   fastLink(), error);
  ASSERT_TRUE(store) << error;
  EXPECT_FALSE(store->placeAll(Precision::Int4, error));
  EXPECT_NE(error.find("holds 23 of the 24 int4 expert versions"), std::string::npos)
      << error;
  EXPECT_FALSE(ExpertStore::create(m.pointers, 0, Precision::Int4, 0, fastLink(), error));
  EXPECT_NE(error.find("must be positive"), std::string::npos) << error;
}

TEST(ExpertStore, PromotionsWaitForTheBudgetAndPublishOnlyWhenLanded) {
  Model m;
  std::string error;
  auto probe =
      ExpertStore::create(m.pointers, 1 << 30, Precision::Int8, 0, fastLink(), error);
  const int64_t lo = probe->loBytes(), hi = probe->hiBytes();
  probe.reset();
  LinkOptions slow = fastLink();
  slow.bytesPerSecond = 1e6; // ~25 ms per promotion: observable in flight
  auto store =
      ExpertStore::create(m.pointers, L * E * lo + 2 * hi, Precision::Int8, 0, slow, error);
  ASSERT_TRUE(store && store->placeAll(Precision::Int8, error)) << error;
  ASSERT_TRUE(store->check(error)) << error;
  store->requestPromotion(0, 1);
  store->requestPromotion(0, 2);
  store->requestPromotion(1, 3);
  store->advance();
  EXPECT_EQ(store->state(0, 1), Residency::Promoting);
  EXPECT_EQ(store->state(0, 2), Residency::Promoting);
  EXPECT_EQ(store->state(1, 3), Residency::ResidentLo); // the budget said wait
  EXPECT_EQ(store->counters().deferredPromotions, 1);
  Precision p;
  ASSERT_TRUE(store->activePrecision(0, 1, p));
  EXPECT_EQ(p, Precision::Int8); // still the low version while the copy runs
  ASSERT_TRUE(store->check(error)) << error;
  settle(*store);
  EXPECT_EQ(store->state(0, 1), Residency::ResidentHi);
  ASSERT_TRUE(store->activePrecision(0, 1, p));
  EXPECT_EQ(p, Precision::High);
  // A demotion gives its block back; the waiting promotion goes in.
  store->requestDemotion(0, 2);
  store->advance();
  EXPECT_EQ(store->state(0, 2), Residency::ResidentLo);
  EXPECT_EQ(store->state(1, 3), Residency::Promoting);
  settle(*store);
  EXPECT_EQ(store->state(1, 3), Residency::ResidentHi);
  ASSERT_TRUE(store->check(error)) << error;
  EXPECT_EQ(store->counters().promotions, 3);
  EXPECT_EQ(store->counters().demotions, 1);
  EXPECT_LE(store->budget().peak(), store->budget().budget());
  std::mt19937 rng(1);
  expectLayersMatchTheirVersions(m, *store, rng, "after the transitions");
}

TEST(ExpertStore, RandomTransitionsWithFaultsKeepTheInvariants) {
  Model m;
  std::mt19937 rng(2024);
  for (int round = 0; round < 3; ++round) {
    std::string error;
    auto probe =
        ExpertStore::create(m.pointers, 1 << 30, Precision::Int4, 0, fastLink(), error);
    const int64_t lo = probe->loBytes(), hi = probe->hiBytes();
    probe.reset();
    // From one high version per layer to every expert in high precision.
    const int64_t budget = L * E * lo + hi * int64_t(L + rng() % (L * E - L + 1));
    auto store = ExpertStore::create(m.pointers, budget, Precision::Int4, 0,
                                     fastLink(0.25, 0.002, rng()), error);
    ASSERT_TRUE(store && store->placeAll(Precision::Int4, error)) << error;
    for (int step = 0; step < 60; ++step) {
      for (int i = 0; i < 4; ++i) {
        const int64_t l = rng() % L, e = rng() % E;
        if (rng() % 3)
          store->requestPromotion(l, e);
        else
          store->requestDemotion(l, e);
      }
      store->advance();
      ASSERT_TRUE(store->check(error))
          << "round " << round << " step " << step << ": " << error;
      expectLayersMatchTheirVersions(m, *store, rng, "step " + std::to_string(step));
      if (HasFatalFailure())
        return;
    }
    settle(*store);
    ASSERT_TRUE(store->check(error)) << error;
    const StoreCounters &c = store->counters();
    EXPECT_GT(c.promotions, 0);
    EXPECT_GT(c.demotions, 0);
    EXPECT_GT(c.failedCopies, 0);
    EXPECT_LE(store->budget().peak(), budget);
  }
}

TEST(ExpertStore, OffloadingLoadsOnDemandAndEvicts) {
  Model m;
  std::mt19937 rng(77);
  std::string error;
  auto probe =
      ExpertStore::create(m.pointers, 1 << 30, Precision::Int4, 0, fastLink(), error);
  const int64_t hi = probe->hiBytes();
  probe.reset();
  const int64_t capacity = 5; // device slots for 24 experts
  auto store = ExpertStore::create(m.pointers, capacity * hi, Precision::Int4, 0,
                                   fastLink(0.2, 0.001, 9), error);
  ASSERT_TRUE(store) << error;
  store->placeNone();
  ASSERT_TRUE(store->check(error)) << error;
  // An offloaded expert routed to a layer is an error, not a crash.
  {
    exec::Routing routing = unittest::roundRobinRouting(2, E, 1);
    exec::BatchInfo batch;
    batch.tokens = 2;
    ASSERT_TRUE(batch.derive(nullptr, error));
    std::vector<float> x(2 * H, 0.5f), y(2 * H);
    exec::Routing scratch;
    exec::LayerMetrics metrics;
    EXPECT_FALSE(m.layers[0]->forward(x.data(), 2, batch, &routing, scratch, y.data(),
                                      metrics, error));
    EXPECT_NE(error.find("has no resident version"), std::string::npos) << error;
  }
  std::vector<int64_t> lastUse(L * E, -1);
  for (int step = 0; step < 80; ++step) {
    const int64_t l = rng() % L;
    std::vector<int64_t> wanted = {int64_t(rng() % E), int64_t(rng() % E)};
    for (int64_t e : wanted) {
      // Make room: evict the least recently used resident expert not wanted now.
      while (!store->resident(l, e) && store->state(l, e) != Residency::Loading &&
             store->budget().used() + hi > store->budget().budget()) {
        int64_t victim = -1;
        for (int64_t i = 0; i < L * E; ++i)
          if (store->state(i / E, i % E) == Residency::ResidentHi &&
              !(i / E == l && (i % E == wanted[0] || i % E == wanted[1])) &&
              (victim < 0 || lastUse[size_t(i)] < lastUse[size_t(victim)]))
            victim = i;
        ASSERT_GE(victim, 0);
        store->evict(victim / E, victim % E);
      }
      ASSERT_TRUE(store->waitResident(l, e, error)) << error;
      lastUse[size_t(l * E + e)] = step;
    }
    // A prefetch now and then (it may not fit: that is fine).
    const int64_t p = rng() % E;
    store->requestLoad((l + 1) % L, p);
    store->advance();
    ASSERT_TRUE(store->check(error)) << "step " << step << ": " << error;
    expectLayersMatchTheirVersions(m, *store, rng, "offload step " + std::to_string(step));
    if (HasFatalFailure())
      return;
  }
  const StoreCounters &c = store->counters();
  EXPECT_GT(c.loads, 0);
  EXPECT_GT(c.evictions, 0);
  EXPECT_GT(c.stalls, 0);
  EXPECT_GT(c.failedCopies, 0);
  EXPECT_LE(store->budget().peak(), capacity * hi);
}

} // namespace

} // namespace expert_store_test

//===- BalancerTest.cpp - the balancers' state and plans, worked by hand ---===//
//
// Live EPLB and Libra without ranks: the load history a window keeps, the plan made from
// it (the compiled rules stood in for by hand-worked ones that check what they are
// given), the transfers that realise a plan, Libra's remote slot assignment and its
// prediction statistics; and both balancers through the Balancer interface on a job of
// one rank. Moving weights between ranks is ExpertTransferTest's and
// test/exec/test_ep.py's.
//
//===----------------------------------------------------------------------===//
#include "TinyCheckpoint.h"

#include "switchyard/Executor/Balance/BalancePlan.h"
#include "switchyard/Executor/Balance/BalanceState.h"
#include "switchyard/Executor/Balance/EplbBalancer.h"
#include "switchyard/Executor/Balance/LibraBalancer.h"
#include "switchyard/Executor/MoeLayer.h"

#include <gtest/gtest.h>

#include <cstring>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace balancer_test {

using namespace switchyard;
using namespace switchyard::exec;

namespace {

Routing routingOf(int64_t k, std::vector<int32_t> ids) {
  Routing r;
  r.k = k;
  r.tokens = static_cast<int64_t>(ids.size()) / k;
  r.ids = std::move(ids);
  r.weights.assign(r.ids.size(), 1.0f);
  return r;
}

bool sameTransfers(const std::vector<ExpertTransfer> &got,
                   const std::vector<ExpertTransfer> &want) {
  if (got.size() != want.size())
    return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].expert != want[i].expert || got[i].from != want[i].from ||
        got[i].to != want[i].to || got[i].bytes != want[i].bytes)
      return false;
  return true;
}

ExpertBytes bytesOf = [](int32_t expert) { return int64_t(100 + expert); };

/// The eplb rule for one load history: the phy2log worked out by hand for `loads`.
class HandEplbRule : public EplbRule {
public:
  HandEplbRule(std::vector<float> loads, std::vector<int32_t> phy2log)
      : expected(std::move(loads)), answer(std::move(phy2log)) {}
  bool plan(const std::vector<float> &loads, std::vector<int32_t> &phy2log,
            std::string &error) const override {
    if (loads != expected) {
      error = "the rule was given other loads";
      return false;
    }
    phy2log = answer;
    return true;
  }

private:
  std::vector<float> expected;
  std::vector<int32_t> answer;
};

/// @libra for one prediction: the placement worked out by hand.
class HandLibraRules : public LibraRules {
public:
  HandLibraRules(std::vector<int32_t> ids, std::vector<int32_t> tokenRank,
                 std::vector<int32_t> placement)
      : ids(std::move(ids)), tokenRank(std::move(tokenRank)),
        placement(std::move(placement)) {}
  bool plan(const std::vector<int32_t> &predicted, const std::vector<int32_t> &ranks,
            Plan &out, std::string &error) const override {
    if (predicted != ids || ranks != tokenRank) {
      error = "@libra was given another prediction";
      return false;
    }
    out.placement = placement;
    out.imbalanceAfter = 1.25f;
    return true;
  }

private:
  std::vector<int32_t> ids, tokenRank, placement;
};

/// A job of one rank: every collective is a copy.
class SoloComm final : public comm::Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char *backend() const override { return "solo"; }
  bool onDevice() const override { return false; }
  bool allGather(const void *send, size_t bytes, void *recv, std::string &) override {
    std::memcpy(recv, send, bytes);
    return true;
  }
  bool exchangeCounts(const std::vector<int64_t> &sendCounts,
                      std::vector<int64_t> &recvCounts, std::string &) override {
    recvCounts = sendCounts;
    return true;
  }
  bool allToAllV(const void *send, const std::vector<int64_t> &sendBytes, void *recv,
                 const std::vector<int64_t> &, std::string &) override {
    if (sendBytes[0])
      std::memcpy(recv, send, static_cast<size_t>(sendBytes[0]));
    return true;
  }
  bool allReduceSum(float *, size_t, std::string &) override { return true; }
  bool allReduceSum(int64_t *, size_t, std::string &) override { return true; }
  bool broadcast(void *, size_t, int, std::string &) override { return true; }
  bool barrier(std::string &) override { return true; }
  std::unique_ptr<comm::Communicator> duplicate(std::string &) override {
    return std::make_unique<SoloComm>();
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

/// A one-layer checkpoint's MoE block (4 experts), its checkpoint and config kept beside
/// it.
struct TinyLayer {
  unittest::TinyCheckpoint files{false};
  model::MoeConfig config; // the layer keeps a pointer to it
  std::unique_ptr<model::SafetensorsCheckpoint> ckpt;
  std::unique_ptr<MoeLayer> layer;
  TinyLayer() {
    std::string error;
    EXPECT_TRUE(model::readMoeConfig(files.dir, config, error)) << error;
    ckpt = model::SafetensorsCheckpoint::open(files.dir, error);
    EXPECT_TRUE(ckpt) << error;
    if (ckpt)
      layer = MoeLayer::load(config, *ckpt, 0, error);
    EXPECT_TRUE(layer) << error;
  }
};

} // namespace

// Through the interface, one rank: the window fills over two steps, the plan is made at
// its end (a second slot for expert 0, nothing to move on one rank) and published at the
// next step boundary as placement version 1.
TEST(EplbBalancer, PlansAtTheWindowsEndAndPublishesAtTheNextBoundary) {
  TinyLayer tiny;
  ASSERT_TRUE(tiny.layer);
  MoeLayer &layer = *tiny.layer;
  SoloComm comm;
  ExpertMover mover(comm);
  auto rule = std::make_shared<HandEplbRule>(std::vector<float>{4, 2, 1, 2},
                                             std::vector<int32_t>{0, 1, 2, 3, 0});
  EplbOptions options;
  options.window = 2;
  options.slots = 5;
  EplbBalancer eplb(rule, options, layer, 0, mover);
  Balancer &balancer = eplb;
  ExpertPlacement placement = ExpertPlacement::contiguous(4, 1);
  std::string error;
  int64_t moved = -1;
  ASSERT_TRUE(balancer.beginStep(placement, moved, error)) << error;
  ASSERT_TRUE(balancer.endStep(placement, routingOf(2, {0, 1, 0, 2, -1, 0}), error));
  EXPECT_FALSE(eplb.pendingMigration());
  ASSERT_TRUE(balancer.endStep(placement, routingOf(2, {3, 0, 3, 1}), error)) << error;
  ASSERT_TRUE(eplb.pendingMigration());
  EXPECT_TRUE(eplb.pendingMigration()->transfers.empty());
  EXPECT_EQ(eplb.loadWindow().stepsSeen(), 0);
  EXPECT_EQ(placement.version, 0); // not before the boundary
  moved = -1;
  ASSERT_TRUE(balancer.beginStep(placement, moved, error)) << error;
  EXPECT_EQ(moved, 0);
  EXPECT_EQ(placement.version, 1);
  EXPECT_EQ(placement.phy2log, (std::vector<int32_t>{0, 1, 2, 3, 0}));
  EXPECT_EQ(placement.log2phy[0], (std::vector<int64_t>{0, 4}));
  EXPECT_FALSE(eplb.pendingMigration());
}

// The first layer of a Libra stack has no predecessor: it runs on the home placement,
// nothing planned.
TEST(LibraBalancer, TheFirstLayerRunsOnTheHomePlacement) {
  TinyLayer tiny;
  ASSERT_TRUE(tiny.layer);
  MoeLayer &layer = *tiny.layer;
  SoloComm comm;
  ExpertMover mover(comm);
  LibraBalancer libra(nullptr, layer, comm, mover);
  libra.prepare(nullptr);
  Balancer &balancer = libra;
  ExpertPlacement placement = ExpertPlacement::contiguous(4, 1);
  std::string error;
  int64_t moved = 0;
  ASSERT_TRUE(balancer.beginStep(placement, moved, error)) << error;
  EXPECT_EQ(libra.holders(), (std::vector<int32_t>{1, 1, 1, 1}));
  LibraMetrics metrics;
  const Routing routing = routingOf(2, {0, 1, 2, 3});
  libra.report(placement, routing, metrics);
  EXPECT_EQ(metrics.plannedImbalance, -1);
  EXPECT_EQ(metrics.predictionHitRate, -1);
  EXPECT_EQ(metrics.replicas, (std::vector<std::vector<int32_t>>{{}}));
  ASSERT_TRUE(balancer.endStep(placement, routing, error));
}

TEST(LoadWindow, CountsRoutedSlotsOverItsSteps) {
  LoadWindow window(4, 2);
  window.record(routingOf(2, {0, 1, 0, 2, -1, 0})); // a dropped slot counts nowhere
  EXPECT_FALSE(window.full());
  EXPECT_EQ(window.loads(), (std::vector<float>{3, 1, 1, 0}));
  window.record(routingOf(2, {3, 0, 3, 1}));
  EXPECT_TRUE(window.full());
  EXPECT_EQ(window.loads(), (std::vector<float>{4, 2, 1, 2}));
  window.clear();
  EXPECT_FALSE(window.full());
  EXPECT_EQ(window.loads(), (std::vector<float>{0, 0, 0, 0}));
}

// 4 experts on 2 ranks, contiguous: rank 0 serves {0, 1}, rank 1 {2, 3}. After the
// window's loads [4, 2, 1, 2] the rule gives 6 slots, 3 a rank: rank 0 {0, 1, 3}, rank 1
// {0, 2, 3}. Rank 0 newly serves 3 (from rank 1, the only holder), rank 1 newly serves
// 0 (from rank 0); nothing else moves.
TEST(EplbPlan, MovesWhatEachRankNewlyServesFromTheLowestHolder) {
  LoadWindow window(4, 2);
  window.record(routingOf(2, {0, 1, 0, 2, -1, 0}));
  window.record(routingOf(2, {3, 0, 3, 1}));
  HandEplbRule rule({4, 2, 1, 2}, {0, 1, 3, 0, 2, 3});
  ExpertPlacement current = ExpertPlacement::contiguous(4, 2);
  MigrationPlan plan;
  std::string error;
  ASSERT_TRUE(planMigration(rule, window.loads(), current, bytesOf, plan, error)) << error;
  EXPECT_EQ(plan.next.version, current.version + 1);
  EXPECT_EQ(plan.next.phy2log, (std::vector<int32_t>{0, 1, 3, 0, 2, 3}));
  EXPECT_TRUE(plan.next.holds(0, 3) && plan.next.holds(1, 0));
  EXPECT_TRUE(sameTransfers(plan.transfers, {{3, 1, 0, 103}, {0, 0, 1, 100}}));

  // From there, a plan that takes expert 0's second copy away and gives rank 1 expert 1
  // twice: rank 1's 1 comes from rank 0, the lowest (and only) holder.
  HandEplbRule again({4, 2, 1, 2}, {0, 1, 3, 1, 2, 1});
  MigrationPlan second;
  ASSERT_TRUE(planMigration(again, window.loads(), plan.next, bytesOf, second, error))
      << error;
  EXPECT_EQ(second.next.version, 2);
  EXPECT_TRUE(sameTransfers(second.transfers, {{1, 0, 1, 101}}));
}

TEST(EplbPlan, ARuleLeavingAnExpertWithoutASlotIsAnError) {
  HandEplbRule rule({1, 1, 1, 1}, {0, 1, 1, 0, 2, 2}); // expert 3 nowhere
  MigrationPlan plan;
  std::string error;
  EXPECT_FALSE(planMigration(rule, {1, 1, 1, 1}, ExpertPlacement::contiguous(4, 2), bytesOf,
                             plan, error));
  EXPECT_NE(error.find("expert 3 has no slot"), std::string::npos) << error;
}

TEST(TokenRanks, EachTokenItsSlicesRank) {
  TokenSlices slices{{0, 2, 5}};
  EXPECT_EQ(tokenRanks(slices), (std::vector<int32_t>{0, 0, 1, 1, 1}));
}

// Home: experts {0, 1} on rank 0, {2, 3} on rank 1. @libra replicates 0 onto rank 1 and
// 3 onto rank 0: each copy from its home rank, expert by expert.
TEST(LibraPlan, ReplicasComeFromTheirHomeRanks) {
  const std::vector<int32_t> predicted = {0, 3, 0, 1, 3, 2};
  const std::vector<int32_t> owners = tokenRanks(TokenSlices{{0, 2, 3}});
  HandLibraRules rules(predicted, owners, {1, 1, 1, 0, 0, 1, 1, 1});
  ReplicaPlan plan;
  std::string error;
  ASSERT_TRUE(planReplicas(rules, predicted, owners, ExpertPlacement::contiguous(4, 2),
                           bytesOf, plan, error))
      << error;
  EXPECT_EQ(plan.holders.placement, (std::vector<int32_t>{1, 1, 1, 0, 0, 1, 1, 1}));
  EXPECT_FLOAT_EQ(plan.holders.imbalanceAfter, 1.25f);
  EXPECT_TRUE(sameTransfers(plan.transfers, {{0, 0, 1, 100}, {3, 1, 0, 103}}));
}

// Tokens 0 and 1 on rank 0, token 2 on rank 1, with the holders above. Token 0's expert
// 2 and token 2's expert 1 are not on their token's rank: remote. The shard plan gives
// rank 1 one slot of expert 2 and rank 0 one of expert 1.
TEST(LibraPlan, RemoteSlotsGoToTheRanksTheShardPlanNames) {
  const std::vector<int32_t> holders = {1, 1, 1, 0, 0, 1, 1, 1};
  const std::vector<int32_t> ids = {0, 2, 3, 0, 0, 1};
  const int32_t R = LibraBalancer::kRemote;
  const std::vector<int32_t> server = {0, R, 0, 0, 1, R};
  std::vector<int32_t> remoteServer;
  std::string error;
  ASSERT_TRUE(assignRemoteSlots(ids, server, R, {0, 1, 0, 0, 0, 0, 1, 0}, holders, 2, 4,
                                remoteServer, error))
      << error;
  EXPECT_EQ(remoteServer, (std::vector<int32_t>{-1, 1, -1, -1, -1, 0}));

  // A shard plan giving rank 0 expert 2, which it does not hold; one with a slot too
  // many; one with a slot too few.
  EXPECT_FALSE(assignRemoteSlots(ids, server, R, {0, 1, 1, 0, 0, 0, 0, 0}, holders, 2, 4,
                                 remoteServer, error));
  EXPECT_NE(error.find("gives rank 0 remote slots of expert 2, which it does not hold"),
            std::string::npos)
      << error;
  EXPECT_FALSE(assignRemoteSlots(ids, server, R, {0, 2, 0, 0, 0, 0, 1, 0}, holders, 2, 4,
                                 remoteServer, error));
  EXPECT_NE(error.find("serves more remote slots of expert 1"), std::string::npos) << error;
  EXPECT_FALSE(assignRemoteSlots(ids, server, R, {0, 0, 0, 0, 0, 0, 1, 0}, holders, 2, 4,
                                 remoteServer, error));
  EXPECT_NE(error.find("serves fewer remote slots of expert 1"), std::string::npos)
      << error;
}

TEST(ReplicaForecast, HitRateIsTheShareOfRoutedPairsPredicted) {
  ReplicaForecast forecast;
  EXPECT_EQ(forecast.hitRate(routingOf(2, {0, 3, 3, -1})), -1); // nothing predicted
  forecast.predictedIds = {0, 1, 2, 3};
  // Token 0: 0 predicted, 3 not; token 1: 3 predicted; the dropped slot counts nowhere.
  EXPECT_DOUBLE_EQ(forecast.hitRate(routingOf(2, {0, 3, 3, -1})), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(forecast.hitRate(routingOf(2, {-1, -1, -1, -1})), 1.0);
}

} // namespace balancer_test

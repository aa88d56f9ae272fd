//===- BalancerTest.cpp - the balancers' state and plans, worked by hand ---===//
//
// The parts of live EPLB and Libra that need no ranks: the load history a window
// keeps, the plan made from it (the compiled rules stood in for by hand-worked ones
// that check what they are given), the transfers that realise a plan, Libra's remote
// slot assignment and its prediction statistics. Moving the weights between ranks is
// ExpertTransferTest's and test/exec/test_ep.py's.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Executor/Balance/BalancePlan.h"
#include "switchyard/Executor/Balance/BalanceState.h"
#include "switchyard/Executor/Balance/LibraBalancer.h"

#include <gtest/gtest.h>

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

} // namespace

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

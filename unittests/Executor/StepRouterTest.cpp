//===- StepRouterTest.cpp - the engines' routing call, across threads ---------===//
//
// runtime::StepRouter on shipped policies compiled by the test (moe-compile from
// SWITCHYARD_MOE_COMPILE into a temporary cache): the step's metadata and knobs are
// per-thread state, knob groups route as batches of their own, the empty-slot contract
// holds, and bad metadata is an error naming it. Several threads route at once with
// their own step states and the shared knob cache: under executor/tsan a data race is
// a report, under executor/asan a bad access. (It lives with the executor's tests for
// their sanitizer builds; the router itself is runtime code.)
//
//===----------------------------------------------------------------------===//
#include "switchyard/Runtime/StepRouter.h"
#include "switchyard/Runtime/PolicyCache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace step_router_test {

using namespace switchyard;
using namespace switchyard::runtime;

namespace {

constexpr int64_t E = 16, K = 4, T = 24;

/// `policy` (a shipped policy's file name) compiled for E experts, top-K, loaded.
/// The test's policy cache, removed at exit.
struct TempCache {
  std::string root;
  TempCache() {
    char name[] = "/tmp/sy-steprouter-XXXXXX";
    root = mkdtemp(name);
  }
  ~TempCache() { std::filesystem::remove_all(root); }
};

std::shared_ptr<const HostPolicy> compiled(const std::string &policy) {
  static TempCache temp;
  static PolicyCache cache(temp.root);
  CompileRequest request;
  request.policyPath = std::string(SWITCHYARD_SOURCE_DIR) + "/policies/" + policy + ".mlir";
  request.flags = {"--experts", std::to_string(E), "--top-k", std::to_string(K),
                   "--outputs", "topk_ids,topk_weights",
                   // single-threaded host code, as engines run it
                   "--host-threads-min-work=0"};
  std::string dir, error;
  if (!cache.artifacts(request, dir, error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  Status status;
  std::shared_ptr<const HostPolicy> loaded = HostPolicy::load(dir, "", status);
  EXPECT_TRUE(loaded) << status.message();
  return loaded;
}

std::unique_ptr<StepRouter> router(const std::string &policy,
                                   std::vector<std::string> knobs = {}) {
  std::shared_ptr<const HostPolicy> host = compiled(policy);
  if (!host)
    return nullptr;
  Status status;
  std::unique_ptr<StepRouter> step =
      StepRouter::create({{host}}, {}, E, knobs, "@" + policy, status);
  EXPECT_TRUE(step) << status.message();
  return step;
}

std::vector<float> logits(unsigned seed, int64_t tokens = T) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(tokens * E));
  for (float &v : x)
    v = normal(rng);
  return x;
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  Status status;
};

Routed route(const StepRouter &step, const std::vector<float> &x,
             std::shared_ptr<const StepState> state) {
  setStepState(std::move(state));
  int64_t tokens = static_cast<int64_t>(x.size()) / E;
  Routed out{std::vector<int32_t>(static_cast<size_t>(tokens * K)),
             std::vector<float>(static_cast<size_t>(tokens * K)),
             {}};
  out.status = step.route(tokens, x.data(), npy::DType::F32, nullptr, nullptr,
                          out.ids.data(), out.weights.data());
  setStepState(nullptr);
  return out;
}

std::shared_ptr<const StepState> requests(std::vector<int32_t> ids,
                                          std::vector<std::string> knobs = {}) {
  auto state = std::make_shared<StepState>();
  state->requestIds = std::move(ids);
  state->knobs = std::move(knobs);
  return state;
}

std::vector<int32_t> perRequest(int64_t tokensPerRequest) {
  std::vector<int32_t> ids(T);
  for (int64_t t = 0; t < T; ++t)
    ids[static_cast<size_t>(t)] = static_cast<int32_t>(t / tokensPerRequest);
  return ids;
}

TEST(StepRouter, MetadataIsTheCallingThreadsAndNamedWhenMissing) {
  std::unique_ptr<StepRouter> spec = router("xshare_spec");
  ASSERT_TRUE(spec);
  std::vector<float> x = logits(1);
  Routed none = route(*spec, x, nullptr);
  EXPECT_EQ(none.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status.message().find("needs request_ids"), std::string::npos)
      << none.status.message();
  Routed shortIds = route(*spec, x, requests(std::vector<int32_t>(5, 0)));
  EXPECT_NE(shortIds.status.message().find("has 5 entries for 24 tokens"),
            std::string::npos)
      << shortIds.status.message();
  // Requests of 4 tokens and one request: different routings, each repeatable.
  Routed four = route(*spec, x, requests(perRequest(4)));
  Routed one = route(*spec, x, requests(perRequest(T)));
  ASSERT_TRUE(four.status.isOk() && one.status.isOk()) << four.status.message();
  EXPECT_NE(four.ids, one.ids);
  for (int32_t id : four.ids)
    EXPECT_TRUE(id >= 0 && id < E);

  // Threads with their own step states route at once: each gets its own routing.
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      const Routed &want = i % 2 ? one : four;
      auto state = requests(perRequest(i % 2 ? T : 4));
      for (int round = 0; round < 25; ++round) {
        Routed got = route(*spec, x, state);
        if (!got.status.isOk() || got.ids != want.ids || got.weights != want.weights)
          ++mismatches[static_cast<size_t>(i)];
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(StepRouter, KnobGroupsRouteAsBatchesOfTheirOwn) {
  std::unique_ptr<StepRouter> xshare = router("xshare");
  ASSERT_TRUE(xshare);
  std::vector<float> x = logits(2);
  auto withKnobs = [&](std::vector<std::string> knobs) {
    auto state = std::make_shared<StepState>();
    state->knobs = std::move(knobs);
    return state;
  };
  // Rows 0-9 with budget 1, 10-19 with budget 6, the rest with the step's (defaults).
  auto groups = std::make_shared<StepState>();
  std::vector<int64_t> a, b, rest;
  for (int64_t t = 0; t < T; ++t)
    (t < 10 ? a : t < 20 ? b : rest).push_back(t);
  groups->groups = {{a, {"budget=1"}}, {b, {"budget=6"}}};
  Routed together = route(*xshare, x, groups);
  ASSERT_TRUE(together.status.isOk()) << together.status.message();
  auto rowsOf = [&](const std::vector<int64_t> &rows) {
    std::vector<float> sub;
    for (int64_t t : rows)
      sub.insert(sub.end(), x.begin() + t * E, x.begin() + (t + 1) * E);
    return sub;
  };
  std::vector<std::pair<std::vector<int64_t>, std::vector<std::string>>> parts = {
      {a, {"budget=1"}}, {b, {"budget=6"}}, {rest, {}}};
  for (const auto &[rows, knobs] : parts) {
    Routed alone = route(*xshare, rowsOf(rows), withKnobs(knobs));
    ASSERT_TRUE(alone.status.isOk()) << alone.status.message();
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t j = 0; j < K; ++j) {
        size_t at = static_cast<size_t>(rows[r] * K + j), from = r * K + j;
        EXPECT_EQ(together.ids[at], alone.ids[from]) << "row " << rows[r];
        EXPECT_EQ(together.weights[at], alone.weights[from]) << "row " << rows[r];
      }
  }
  groups->groups.push_back({{T + 3}, {"budget=2"}});
  Routed past = route(*xshare, x, groups);
  EXPECT_NE(past.status.message().find("token row 27 of a 24-token batch"),
            std::string::npos)
      << past.status.message();
  Routed bad = route(*xshare, x, withKnobs({"budget=-1"}));
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidKnob);
  EXPECT_NE(bad.status.message().find("budget must be in [0, inf]"), std::string::npos);

  // The knob cache under threads: each thread its own budget, many rounds.
  std::vector<Routed> want;
  for (int i = 0; i < 4; ++i)
    want.push_back(route(*xshare, x, withKnobs({"budget=" + std::to_string(i)})));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      auto state = withKnobs({"budget=" + std::to_string(i)});
      for (int round = 0; round < 25; ++round)
        if (route(*xshare, x, state).ids != want[static_cast<size_t>(i)].ids)
          ++mismatches[static_cast<size_t>(i)];
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(StepRouter, EmptySlotsFollowTheEngineContract) {
  // A quarter of each expert's fair share of slots: capacity drops leave slots empty.
  std::unique_ptr<StepRouter> capacity = router("capacity_topk", {"capacity_factor=0.25"});
  ASSERT_TRUE(capacity);
  Routed out = route(*capacity, logits(3), nullptr);
  ASSERT_TRUE(out.status.isOk()) << out.status.message();
  int64_t zeroWeights = 0;
  for (size_t i = 0; i < out.ids.size(); ++i) {
    EXPECT_TRUE(out.ids[i] >= 0 && out.ids[i] < E) << i;
    zeroWeights += out.weights[i] == 0.0f;
  }
  EXPECT_GT(zeroWeights, 0) << "dropped slots: filled with weight 0";
}

} // namespace

} // namespace step_router_test

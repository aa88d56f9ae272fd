//===- ExpertTransferTest.cpp - placements and weights moving between ranks ===//
//
// The ranks of an expert-parallel job as threads of one process, joined by an
// in-process communicator (a shared mailbox per collective), so that the mover's
// background channel runs under the sanitizers (executor/asan, executor/tsan): batches
// submitted by every rank arrive intact while the ranks keep running collectives on
// their main channel; a library without a second channel moves the batch on the
// caller's thread; a channel that cannot be made is an error when the batch is waited
// for. And the placement tables the layers and policies read.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Executor/ExpertTransfer.h"
#include "switchyard/Executor/Placement.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace expert_transfer_test {

using namespace switchyard;
using namespace switchyard::exec;

namespace {

/// A reusable barrier for `count` threads.
class Meet {
public:
  explicit Meet(int count) : count(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex);
    const uint64_t mine = generation;
    if (++arrived == count) {
      arrived = 0;
      ++generation;
      changed.notify_all();
      return;
    }
    changed.wait(lock, [&] { return generation != mine; });
  }

private:
  std::mutex mutex;
  std::condition_variable changed;
  int count, arrived = 0;
  uint64_t generation = 0;
};

/// What the ranks of one channel share: each rank's posted buffers for the current
/// collective and a barrier to meet at.
struct Hub {
  explicit Hub(int ranks) : ranks(ranks), meet(ranks), posts(size_t(ranks)) {}
  struct Post {
    const char *send = nullptr;
    std::vector<int64_t> offsets; // send offset per peer
    std::vector<int64_t> bytes;   // send bytes per peer
  };
  int ranks;
  Meet meet;
  std::vector<Post> posts;
  std::mutex mutex;
  std::vector<std::shared_ptr<Hub>> children; // one per duplicate() round
};

/// One rank's view of a Hub. duplicate(): a second hub per round, the same for every
/// rank; `multiple` false stands for an MPI without MPI_THREAD_MULTIPLE, `broken` for
/// a channel that cannot be made.
class ThreadComm final : public comm::Communicator {
public:
  ThreadComm(std::shared_ptr<Hub> hub, int rank, bool multiple = true, bool broken = false)
      : hub(std::move(hub)), r(rank), multiple(multiple), broken(broken) {}
  int rank() const override { return r; }
  int size() const override { return hub->ranks; }
  const char *backend() const override { return "threads"; }
  bool onDevice() const override { return false; }

  bool allGather(const void *send, size_t bytes, void *recv, std::string &) override {
    std::vector<int64_t> each(static_cast<size_t>(size()), static_cast<int64_t>(bytes));
    std::vector<int64_t> offsets(static_cast<size_t>(size()), 0);
    post(send, offsets, each);
    for (int p = 0; p < size(); ++p)
      std::memcpy(static_cast<char *>(recv) + p * bytes, hub->posts[size_t(p)].send, bytes);
    hub->meet.arrive_and_wait();
    return true;
  }
  bool exchangeCounts(const std::vector<int64_t> &, std::vector<int64_t> &,
                      std::string &error) override {
    error = "not used";
    return false;
  }
  bool allToAllV(const void *send, const std::vector<int64_t> &sendBytes, void *recv,
                 const std::vector<int64_t> &recvBytes, std::string &error) override {
    std::vector<int64_t> offsets(static_cast<size_t>(size()), 0);
    for (int p = 1; p < size(); ++p)
      offsets[size_t(p)] = offsets[size_t(p - 1)] + sendBytes[size_t(p - 1)];
    post(send, offsets, sendBytes);
    int64_t at = 0;
    bool ok = true;
    for (int p = 0; p < size(); ++p) {
      const Hub::Post &from = hub->posts[size_t(p)];
      ok = ok && from.bytes[size_t(r)] == recvBytes[size_t(p)];
      if (recvBytes[size_t(p)] > 0)
        std::memcpy(static_cast<char *>(recv) + at, from.send + from.offsets[size_t(r)],
                    size_t(recvBytes[size_t(p)]));
      at += recvBytes[size_t(p)];
    }
    hub->meet.arrive_and_wait();
    if (!ok)
      error = "allToAllV: byte counts disagree";
    return ok;
  }
  bool allReduceSum(float *, size_t, std::string &error) override { return unused(error); }
  bool allReduceSum(int64_t *, size_t, std::string &error) override {
    return unused(error);
  }
  bool broadcast(void *, size_t, int, std::string &error) override { return unused(error); }
  bool barrier(std::string &) override {
    hub->meet.arrive_and_wait();
    return true;
  }
  std::unique_ptr<Communicator> duplicate(std::string &error) override {
    if (broken) {
      error = "duplicate: the peer is gone";
      return nullptr;
    }
    if (!multiple) {
      error = "no MPI_THREAD_MULTIPLE here";
      return nullptr;
    }
    std::shared_ptr<Hub> child;
    {
      std::lock_guard<std::mutex> lock(hub->mutex);
      size_t round = size_t(rounds++);
      if (hub->children.size() <= round)
        hub->children.push_back(std::make_shared<Hub>(size()));
      child = hub->children[round];
    }
    return std::make_unique<ThreadComm>(child, r);
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }

private:
  void post(const void *send, const std::vector<int64_t> &offsets,
            const std::vector<int64_t> &bytes) {
    hub->meet.arrive_and_wait(); // the previous collective's readers are done
    hub->posts[size_t(r)] = {static_cast<const char *>(send), offsets, bytes};
    hub->meet.arrive_and_wait(); // every rank has posted
  }
  static bool unused(std::string &error) {
    error = "not used";
    return false;
  }
  std::shared_ptr<Hub> hub;
  int r;
  bool multiple, broken;
  int rounds = 0;
};

/// Expert e's fake weights: gate, up, down of distinct sizes filled with e-dependent
/// bytes.
struct FakeExperts {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<model::TensorView> views;
  std::map<int32_t, FfnWeights> weights;
  explicit FakeExperts(int experts) {
    storage.resize(size_t(experts * 3));
    views.resize(size_t(experts * 3));
    for (int e = 0; e < experts; ++e)
      for (int j = 0; j < 3; ++j) {
        std::vector<uint8_t> &bytes = storage[size_t(e * 3 + j)];
        bytes.resize(size_t(64 + 16 * j));
        for (size_t i = 0; i < bytes.size(); ++i)
          bytes[i] = uint8_t(e * 31 + j * 7 + int(i));
        model::TensorView &v = views[size_t(e * 3 + j)];
        v.name = "expert" + std::to_string(e) + "." + std::to_string(j);
        v.dtype = model::DType::BF16;
        v.shape = {int64_t(bytes.size() / 2)};
        v.data = bytes.data();
        v.bytes = bytes.size();
      }
    for (int e = 0; e < experts; ++e)
      weights[e] = {&views[size_t(e * 3)], &views[size_t(e * 3 + 1)],
                    &views[size_t(e * 3 + 2)]};
  }
};

/// Runs `body(rank, comm)` on `ranks` threads joined by one hub.
template <typename Body> void onRanks(int ranks, bool multiple, bool broken, Body body) {
  auto hub = std::make_shared<Hub>(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      ThreadComm comm(hub, r, multiple, broken);
      body(r, comm);
    });
  for (std::thread &t : threads)
    t.join();
}

void expectCopies(const FakeExperts &source, int rank,
                  const std::vector<ExpertTransfer> &batch,
                  const std::map<int32_t, ExpertCopy> &got) {
  size_t expected = 0;
  for (const ExpertTransfer &t : batch) {
    if (t.to != rank)
      continue;
    ++expected;
    ASSERT_TRUE(got.count(t.expert)) << "rank " << rank << " expert " << t.expert;
    const ExpertCopy &copy = got.at(t.expert);
    const FfnWeights &w = source.weights.at(t.expert);
    const model::TensorView *want[3] = {w.gate, w.up, w.down};
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(copy.views[j].shape, want[j]->shape);
      EXPECT_EQ(copy.views[j].dtype, want[j]->dtype);
      ASSERT_EQ(copy.views[j].bytes, want[j]->bytes);
      EXPECT_EQ(0, std::memcmp(copy.views[j].data, want[j]->data, want[j]->bytes));
      EXPECT_NE(copy.views[j].data, want[j]->data); // its own copy
    }
  }
  EXPECT_EQ(got.size(), expected);
}

} // namespace

TEST(ExpertMover, BatchesArriveWhileTheMainChannelRuns) {
  const FakeExperts experts(6);
  const int64_t bytes = experts.weights.at(0).bytes();
  const std::vector<ExpertTransfer> first = {
      {0, 0, 1, bytes}, {1, 0, 2, bytes}, {4, 2, 0, bytes}};
  const std::vector<ExpertTransfer> second = {
      {5, 2, 1, bytes}, {2, 1, 0, bytes}, {2, 1, 2, bytes}};
  onRanks(3, true, false, [&](int rank, ThreadComm &comm) {
    ExpertMover mover(comm);
    ExpertMover::Ticket a = mover.submit({first, experts.weights});
    ExpertMover::Ticket b = mover.submit({second, experts.weights});
    // The main channel keeps running collectives meanwhile.
    std::string error;
    for (int step = 0; step < 20; ++step) {
      int64_t mine = rank * 100 + step, all[3];
      ASSERT_TRUE(comm.allGather(&mine, sizeof mine, all, error)) << error;
      EXPECT_EQ(all[2], 200 + step);
    }
    EXPECT_EQ(mover.synchronousReason(), "");
    std::map<int32_t, ExpertCopy> got;
    int64_t moved = 0;
    ASSERT_TRUE(mover.wait(a, got, moved, error)) << error;
    EXPECT_EQ(moved, 3 * bytes);
    expectCopies(experts, rank, first, got);
    ASSERT_TRUE(mover.wait(b, got, moved, error)) << error;
    expectCopies(experts, rank, second, got);
  });
}

TEST(ExpertMover, WithoutASecondChannelTheCallerMovesTheBatch) {
  const FakeExperts experts(4);
  const int64_t bytes = experts.weights.at(0).bytes();
  const std::vector<ExpertTransfer> batch = {{3, 1, 0, bytes}, {0, 0, 1, bytes}};
  onRanks(2, false, false, [&](int rank, ThreadComm &comm) {
    ExpertMover mover(comm);
    ExpertMover::Ticket t = mover.submit({batch, experts.weights});
    EXPECT_NE(mover.synchronousReason().find("MPI_THREAD_MULTIPLE"), std::string::npos);
    std::map<int32_t, ExpertCopy> got;
    int64_t moved = 0;
    std::string error;
    ASSERT_TRUE(mover.wait(t, got, moved, error)) << error;
    expectCopies(experts, rank, batch, got);
  });
}

TEST(ExpertMover, AChannelThatCannotBeMadeIsAnError) {
  const FakeExperts experts(2);
  onRanks(2, true, true, [&](int, ThreadComm &comm) {
    ExpertMover mover(comm);
    ExpertMover::Ticket t =
        mover.submit({{{0, 0, 1, experts.weights.at(0).bytes()}}, experts.weights});
    std::map<int32_t, ExpertCopy> got;
    int64_t moved = 0;
    std::string error;
    EXPECT_FALSE(mover.wait(t, got, moved, error));
    EXPECT_NE(error.find("the peer is gone"), std::string::npos) << error;
  });
}

TEST(ExpertPlacement, ReplicasServeTokensInTurn) {
  ExpertPlacement p;
  std::string error;
  // 4 experts, 6 slots over 2 ranks: expert 0 on both ranks, expert 3 twice on rank 1.
  ASSERT_TRUE(ExpertPlacement::fromPhy2Log({0, 1, 2, 0, 3, 3}, 4, 2, p, error)) << error;
  EXPECT_EQ(p.slotsPerRank(), 3);
  EXPECT_EQ(p.rankFor(0, 0), 0);
  EXPECT_EQ(p.rankFor(0, 1), 1);
  EXPECT_EQ(p.rankFor(3, 5), 1);
  EXPECT_EQ(p.rankFor(-1, 0), -1);
  EXPECT_TRUE(p.holds(1, 0));
  EXPECT_FALSE(p.holds(1, 1));
  EXPECT_EQ(p.maxReplicas(), 3);
  EXPECT_EQ(p.log2phyTable(),
            (std::vector<int32_t>{0, 3, -1, 1, -1, -1, 2, -1, -1, 4, 5, -1}));
}

TEST(ExpertPlacement, BadPlansAreErrors) {
  ExpertPlacement p;
  std::string error;
  EXPECT_FALSE(ExpertPlacement::fromPhy2Log({0, 1, 1}, 3, 1, p, error));
  EXPECT_NE(error.find("expert 2 has no slot"), std::string::npos) << error;
  EXPECT_FALSE(ExpertPlacement::fromPhy2Log({0, 5}, 2, 1, p, error));
  EXPECT_NE(error.find("outside [0, 2)"), std::string::npos) << error;
  ExpertPlacement c = ExpertPlacement::contiguous(8, 4);
  EXPECT_EQ(c.rankFor(5, 0), 2);
  TokenSlices slices{{0, 3, 3, 7}};
  EXPECT_EQ(slices.owner(0), 0);
  EXPECT_EQ(slices.owner(3), 2);
  EXPECT_EQ(slices.count(1), 0);
}

} // namespace expert_transfer_test

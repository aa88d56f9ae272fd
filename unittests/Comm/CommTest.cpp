//===- CommTest.cpp - the MPI collectives, run by every rank of a job ------===//
//
// mpirun -np N comm-test: each case runs on every rank with rank-dependent data and
// checks what the collective must deliver; the job fails when any rank fails. The
// last cases check the failure modes: a rank that fails to start, a wrong world size,
// and a collective a peer joins too late (a timeout, not a hang).
//
//===----------------------------------------------------------------------===//
#include "switchyard/Comm/Communicator.h"
#include "switchyard/Cuda/DeviceNodes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace switchyard::comm;

namespace {

Communicator *world = nullptr;

TEST(Mpi, AllGatherInRankOrder) {
  int n = world->size(), r = world->rank();
  std::vector<int32_t> mine = {r, 10 * r, 100 * r}, all(size_t(3 * n), -1);
  std::string error;
  ASSERT_TRUE(world->allGather(mine.data(), 12, all.data(), error)) << error;
  for (int p = 0; p < n; ++p) {
    EXPECT_EQ(all[size_t(3 * p)], p);
    EXPECT_EQ(all[size_t(3 * p + 2)], 100 * p);
  }
}

TEST(Mpi, AllToAllWithPerPeerCounts) {
  int n = world->size(), r = world->rank();
  // Rank r sends (r + p) % 3 values to rank p (some peers get nothing): r*1000 + p*10 + i.
  std::vector<int64_t> sendCounts(static_cast<size_t>(n)), recvCounts;
  std::vector<int32_t> send;
  for (int p = 0; p < n; ++p) {
    sendCounts[size_t(p)] = (r + p) % 3;
    for (int i = 0; i < sendCounts[size_t(p)]; ++i)
      send.push_back(r * 1000 + p * 10 + i);
  }
  std::string error;
  ASSERT_TRUE(world->exchangeCounts(sendCounts, recvCounts, error)) << error;
  std::vector<int64_t> sendBytes(static_cast<size_t>(n)), recvBytes(static_cast<size_t>(n));
  int64_t total = 0;
  for (int p = 0; p < n; ++p) {
    EXPECT_EQ(recvCounts[size_t(p)], (p + r) % 3) << "from rank " << p;
    sendBytes[size_t(p)] = 4 * sendCounts[size_t(p)];
    recvBytes[size_t(p)] = 4 * recvCounts[size_t(p)];
    total += recvCounts[size_t(p)];
  }
  std::vector<int32_t> recv(size_t(total), -1);
  ASSERT_TRUE(world->allToAllV(send.data(), sendBytes, recv.data(), recvBytes, error))
      << error;
  size_t at = 0;
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < recvCounts[size_t(p)]; ++i)
      EXPECT_EQ(recv[at++], p * 1000 + r * 10 + i) << "from rank " << p;
}

TEST(Mpi, AllReduceBroadcastBarrier) {
  int n = world->size(), r = world->rank();
  std::vector<float> x = {float(r), 1.5f};
  std::vector<int64_t> c = {int64_t(1) << 40, r};
  std::string error;
  ASSERT_TRUE(world->allReduceSum(x.data(), 2, error)) << error;
  ASSERT_TRUE(world->allReduceSum(c.data(), 2, error)) << error;
  EXPECT_EQ(x[0], float(n * (n - 1) / 2));
  EXPECT_EQ(x[1], 1.5f * float(n));
  EXPECT_EQ(c[0], int64_t(n) << 40);
  char text[32] = {0};
  if (r == n - 1)
    std::snprintf(text, sizeof text, "from %d", r);
  ASSERT_TRUE(world->broadcast(text, sizeof text, n - 1, error)) << error;
  EXPECT_EQ(std::string(text), "from " + std::to_string(n - 1));
  EXPECT_TRUE(world->barrier(error)) << error;
  EXPECT_FALSE(world->broadcast(text, 4, n, error));
  EXPECT_NE(error.find("root " + std::to_string(n) + " is not a rank"), std::string::npos);
}

TEST(Mpi, EveryRankLearnsWhichRankFailedToStart) {
  std::string error;
  EXPECT_TRUE(agreeAllStarted(*world, true, "", error)) << error;
  bool ok = world->rank() != 1;
  EXPECT_FALSE(agreeAllStarted(*world, ok, ok ? "" : "config.json: no such file", error));
  EXPECT_EQ(error, "rank 1 failed to start: config.json: no such file");
}

TEST(Mpi, AWrongWorldSizeIsAnErrorOnEveryRank) {
  std::string error;
  EXPECT_TRUE(checkWorldSize(*world, world->size(), error));
  EXPECT_FALSE(checkWorldSize(*world, world->size() + 1, error));
  EXPECT_NE(error.find("asks for " + std::to_string(world->size() + 1) +
                       " ranks but the job has " + std::to_string(world->size())),
            std::string::npos)
      << error;
}

// Runs last: rank 0 joins a barrier 2 s late; the others, with a 0.3 s deadline, get a
// timeout (and an unusable communicator) instead of hanging.
TEST(Mpi, ZLateCollectiveTimesOutInsteadOfHanging) {
  std::string error;
  CommOptions quick;
  quick.timeoutSeconds = 0.3;
  std::unique_ptr<Communicator> impatient = createMpiCommunicator(quick, error);
  ASSERT_TRUE(impatient) << error;
  if (world->rank() == 0) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    CommOptions patient;
    patient.timeoutSeconds = 30;
    std::unique_ptr<Communicator> late = createMpiCommunicator(patient, error);
    EXPECT_TRUE(late->barrier(error)) << error;
  } else {
    EXPECT_FALSE(impatient->barrier(error));
    EXPECT_NE(error.find("mpi barrier on rank " + std::to_string(world->rank())),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("timed out after 0 s waiting for the other ranks"),
              std::string::npos)
        << error;
    EXPECT_FALSE(impatient->barrier(error));
    EXPECT_NE(error.find("unusable after a timed-out collective"), std::string::npos)
        << error;
  }
  EXPECT_TRUE(world->barrier(error)) << error; // everyone again in step
}

/// NVIDIA GPUs this machine exposes: decides which outcome the NCCL test expects.
int nvidiaDevices() { return switchyard::cuda::nvidiaDeviceNodes(); }

// One GPU per rank: NCCL starts and is the backend. Fewer (none here; or ranks
// sharing a GPU): no communicator, and the error names NCCL and the reason.
TEST(Nccl, StartsWithAGpuPerRankElseTheReasonIsGiven) {
  std::string error;
  std::unique_ptr<Communicator> nccl =
      createNcclCommunicator(*world, world->rank(), nullptr, {}, error);
  if (nvidiaDevices() >= world->size()) {
    ASSERT_TRUE(nccl) << error;
    EXPECT_STREQ(nccl->backend(), "nccl");
    return;
  }
  ASSERT_FALSE(nccl) << "NCCL started with " << nvidiaDevices() << " GPU(s) for "
                     << world->size() << " ranks";
  EXPECT_NE(error.find("nccl:"), std::string::npos) << error;
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string error;
  std::unique_ptr<Communicator> comm = createMpiCommunicator({}, error);
  if (!comm) {
    std::fprintf(stderr, "comm-test: %s\n", error.c_str());
    return 1;
  }
  world = comm.get();
  if (world->rank() != 0) { // one rank prints; every rank's failures still count
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int64_t failed = RUN_ALL_TESTS() != 0;
  if (failed)
    std::fprintf(stderr, "comm-test: rank %d had failures\n", world->rank());
  if (!world->allReduceSum(&failed, 1, error)) {
    std::fprintf(stderr, "comm-test: %s\n", error.c_str());
    return 1;
  }
  world = nullptr;
  comm.reset();
  return failed ? 1 : 0;
}

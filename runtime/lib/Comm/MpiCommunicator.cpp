//===- MpiCommunicator.cpp - collectives over MPI, host buffers ------------===//
//
// Every collective is MPI's non-blocking form polled against a deadline, so a peer that
// died or never joined becomes an error instead of a hang. The all-to-all is grouped
// point-to-point (Irecv from every peer, then Isend to every peer), the shape NCCL
// gives it too. Built as the plug-in libSwitchyardCommMpi.so (MpiPlugin.h).
//
//===----------------------------------------------------------------------===//
#include "MpiPlugin.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace switchyard::comm {

namespace {

int liveCommunicators = 0;
bool weInitialised = false;
int threadLevel = MPI_THREAD_SINGLE; // what MPI provides (MULTIPLE: channels on threads)

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(MPI_Comm comm, double timeout) : comm(comm), timeout(timeout) {
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    ++liveCommunicators;
  }
  ~MpiCommunicator() override {
    if (comm != MPI_COMM_WORLD && !poisoned)
      MPI_Comm_free(&comm);
    // A timed-out request may never complete: leave MPI as it is then (the process is
    // about to exit with an error anyway).
    if (--liveCommunicators == 0 && weInitialised && !poisoned) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized)
        MPI_Finalize();
    }
  }
  int rank() const override { return r; }
  int size() const override { return n; }
  const char *backend() const override { return "mpi"; }
  bool onDevice() const override { return false; }

  bool allGather(const void *send, size_t bytes, void *recv, std::string &error) override {
    if (!usable("allGather", error) || !fits(bytes, "allGather", error))
      return false;
    MPI_Request request;
    MPI_Iallgather(send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, comm, &request);
    return wait(&request, 1, "allGather", error);
  }

  bool exchangeCounts(const std::vector<int64_t> &sendCounts,
                      std::vector<int64_t> &recvCounts, std::string &error) override {
    if (!usable("exchangeCounts", error))
      return false;
    if (sendCounts.size() != size_t(n)) {
      error = "exchangeCounts: " + std::to_string(sendCounts.size()) + " counts for " +
              std::to_string(n) + " ranks";
      return false;
    }
    recvCounts.assign(size_t(n), 0);
    MPI_Request request;
    MPI_Ialltoall(sendCounts.data(), 1, MPI_INT64_T, recvCounts.data(), 1, MPI_INT64_T,
                  comm, &request);
    return wait(&request, 1, "exchangeCounts", error);
  }

  bool allToAllV(const void *send, const std::vector<int64_t> &sendBytes, void *recv,
                 const std::vector<int64_t> &recvBytes, std::string &error) override {
    if (!usable("allToAllV", error))
      return false;
    if (sendBytes.size() != size_t(n) || recvBytes.size() != size_t(n)) {
      error = "allToAllV: byte counts for " + std::to_string(sendBytes.size()) + " / " +
              std::to_string(recvBytes.size()) + " peers, the job has " + std::to_string(n);
      return false;
    }
    std::vector<MPI_Request> requests;
    const char *out = static_cast<const char *>(send);
    char *in = static_cast<char *>(recv);
    int64_t sendOffset = 0, recvOffset = 0;
    std::vector<int64_t> sendAt(static_cast<size_t>(n)), recvAt(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      if (sendBytes[p] < 0 || recvBytes[p] < 0) {
        error = "allToAllV: a negative byte count for rank " + std::to_string(p);
        return false;
      }
      if (!fits(size_t(sendBytes[p]), "allToAllV", error) ||
          !fits(size_t(recvBytes[p]), "allToAllV", error))
        return false;
      sendAt[p] = sendOffset;
      recvAt[p] = recvOffset;
      sendOffset += sendBytes[p];
      recvOffset += recvBytes[p];
    }
    if (sendBytes[r] != recvBytes[r]) {
      error = "allToAllV: rank " + std::to_string(r) + " sends itself " +
              std::to_string(sendBytes[r]) + " bytes but expects " +
              std::to_string(recvBytes[r]);
      return false;
    }
    constexpr int kTag = 0x5a;
    for (int p = 0; p < n; ++p)
      if (p != r && recvBytes[p] > 0) {
        requests.emplace_back();
        MPI_Irecv(in + recvAt[p], int(recvBytes[p]), MPI_BYTE, p, kTag, comm,
                  &requests.back());
      }
    for (int p = 0; p < n; ++p)
      if (p != r && sendBytes[p] > 0) {
        requests.emplace_back();
        MPI_Isend(out + sendAt[p], int(sendBytes[p]), MPI_BYTE, p, kTag, comm,
                  &requests.back());
      }
    if (sendBytes[r] > 0)
      std::memcpy(in + recvAt[r], out + sendAt[r], size_t(sendBytes[r]));
    return wait(requests.data(), int(requests.size()), "allToAllV", error);
  }

  bool allReduceSum(float *data, size_t count, std::string &error) override {
    return reduce(data, count, MPI_FLOAT, error);
  }
  bool allReduceSum(int64_t *data, size_t count, std::string &error) override {
    return reduce(data, count, MPI_INT64_T, error);
  }

  bool broadcast(void *data, size_t bytes, int root, std::string &error) override {
    if (!usable("broadcast", error) || !fits(bytes, "broadcast", error))
      return false;
    if (root < 0 || root >= n) {
      error = "broadcast: root " + std::to_string(root) + " is not a rank of " +
              std::to_string(n);
      return false;
    }
    MPI_Request request;
    MPI_Ibcast(data, int(bytes), MPI_BYTE, root, comm, &request);
    return wait(&request, 1, "broadcast", error);
  }

  bool barrier(std::string &error) override {
    if (!usable("barrier", error))
      return false;
    MPI_Request request;
    MPI_Ibarrier(comm, &request);
    return wait(&request, 1, "barrier", error);
  }

  std::unique_ptr<Communicator> duplicate(std::string &error) override {
    if (!usable("duplicate", error))
      return nullptr;
    if (threadLevel < MPI_THREAD_MULTIPLE) {
      error = "mpi duplicate: this MPI library gives no MPI_THREAD_MULTIPLE, so a second "
              "channel cannot run on another thread";
      return nullptr;
    }
    // Non-blocking, so that a rank that is gone is a timeout, not a hang.
    MPI_Comm copy;
    MPI_Request request;
    if (MPI_Comm_idup(comm, &copy, &request) != MPI_SUCCESS) {
      error = "mpi duplicate: MPI_Comm_idup failed";
      return nullptr;
    }
    if (!wait(&request, 1, "duplicate", error))
      return nullptr;
    return std::make_unique<MpiCommunicator>(copy, timeout);
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort(); // MPI_Abort does not return; keep the compiler sure of it
  }

private:
  bool reduce(void *data, size_t count, MPI_Datatype type, std::string &error) {
    if (!usable("allReduceSum", error) || !fits(count, "allReduceSum", error))
      return false;
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data, int(count), type, MPI_SUM, comm, &request);
    return wait(&request, 1, "allReduceSum", error);
  }

  bool usable(const char *what, std::string &error) const {
    if (!poisoned)
      return true;
    error = std::string("mpi ") + what +
            ": the communicator is unusable after a timed-out "
            "collective";
    return false;
  }

  static bool fits(size_t count, const char *what, std::string &error) {
    if (count <= size_t(INT_MAX))
      return true;
    error = std::string("mpi ") + what + ": " + std::to_string(count) +
            " elements in one message is more than MPI's int counts allow";
    return false;
  }

  /// Polls `requests` until all complete or the deadline passes.
  bool wait(MPI_Request *requests, int count, const char *what, std::string &error) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout);
    for (int spin = 0;; ++spin) {
      int done = 0;
      MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
      if (done)
        return true;
      if (Clock::now() > deadline) {
        poisoned = true;
        error = std::string("mpi ") + what + " on rank " + std::to_string(r) + " of " +
                std::to_string(n) + ": timed out after " + std::to_string(int(timeout)) +
                " s waiting for the other ranks (a rank exited, failed or is stuck; "
                "$SWITCHYARD_COMM_TIMEOUT sets the limit)";
        return false;
      }
      if (spin > 1000)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  MPI_Comm comm;
  int r = 0, n = 1;
  double timeout;
  bool poisoned = false;
};

} // namespace

std::unique_ptr<Communicator> createMpi(const CommOptions &options, std::string &error) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    // MULTIPLE: a duplicate channel (expert weight transfers) runs on its own thread.
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &threadLevel) !=
        MPI_SUCCESS) {
      error = "MPI_Init_thread failed (is the program started by mpirun?)";
      return nullptr;
    }
    weInitialised = true;
  } else {
    MPI_Query_thread(&threadLevel);
  }
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, collectiveTimeout(options));
}

} // namespace switchyard::comm

extern "C" __attribute__((visibility("default"))) const switchyard::comm::MpiPlugin *
switchyard_mpi_plugin() {
  static const switchyard::comm::MpiPlugin plugin{switchyard::comm::MpiPlugin::kVersion,
                                                  switchyard::comm::createMpi};
  return &plugin;
}

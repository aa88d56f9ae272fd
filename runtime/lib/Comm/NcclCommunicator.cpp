//===- NcclCommunicator.cpp - collectives over NCCL, device buffers -------===//
//
// One rank per GPU. Bootstrap as nccl-tests do: rank 0's ncclUniqueId is broadcast over
// the host communicator, then ncclCommInitRank, non-blocking (ncclConfig_t.blocking = 0)
// so that the deadline applies to initialisation too. Collectives are enqueued on the
// caller's stream and waited for by polling the stream and ncclCommGetAsyncError; past
// the deadline the communicator is aborted (ncclCommAbort) and every later call fails.
// The count exchange of the all-to-all goes through the device too (int64 counts, one
// grouped send/recv).
//
// Built into libSwitchyardCommNccl.so (cudart, NCCL), which libSwitchyardComm loads on
// first use; NcclPlugin.h is its one entry point.
//
//===----------------------------------------------------------------------===//
#include "NcclPlugin.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace switchyard::comm {

namespace {

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Communicator &bootstrap, cudaStream_t stream, double timeout)
      : host(bootstrap), stream(stream), timeout(timeout) {}
  ~NcclCommunicator() override {
    if (comm)
      aborted ? (void)0 : (void)ncclCommDestroy(comm);
    if (counts)
      cudaFree(counts);
    if (ownsStream)
      cudaStreamDestroy(stream);
  }

  bool init(int device, std::string &error) {
    if (cudaSetDevice(device) != cudaSuccess) {
      error = "nccl: cudaSetDevice(" + std::to_string(device) +
              ") failed: " + cudaGetErrorString(cudaGetLastError());
      return false;
    }
    ncclUniqueId id;
    if (host.rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
      error = "nccl: ncclGetUniqueId failed";
      return false;
    }
    if (!host.broadcast(&id, sizeof id, 0, error))
      return false;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t result =
        ncclCommInitRankConfig(&comm, host.size(), id, host.rank(), &config);
    if (result != ncclSuccess && result != ncclInProgress) {
      error = std::string("nccl: ncclCommInitRank failed: ") + ncclGetErrorString(result);
      return false;
    }
    if (!waitComm("init", error))
      return false;
    if (cudaMalloc(&counts, sizeof(int64_t) * 2 * size_t(host.size())) != cudaSuccess) {
      error = "nccl: cudaMalloc of the count buffer failed";
      return false;
    }
    return true;
  }

  int rank() const override { return host.rank(); }
  int size() const override { return host.size(); }
  const char *backend() const override { return "nccl"; }
  bool onDevice() const override { return true; }

  bool allGather(const void *send, size_t bytes, void *recv, std::string &error) override {
    return usable("allGather", error) &&
           enqueued(ncclAllGather(send, recv, bytes, ncclUint8, comm, stream), "allGather",
                    error) &&
           waitStream("allGather", error);
  }

  bool exchangeCounts(const std::vector<int64_t> &sendCounts,
                      std::vector<int64_t> &recvCounts, std::string &error) override {
    if (!usable("exchangeCounts", error))
      return false;
    size_t n = size_t(size());
    if (sendCounts.size() != n) {
      error = "exchangeCounts: " + std::to_string(sendCounts.size()) + " counts for " +
              std::to_string(n) + " ranks";
      return false;
    }
    cudaMemcpyAsync(counts, sendCounts.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice,
                    stream);
    ncclGroupStart();
    for (int p = 0; p < size(); ++p) {
      ncclSend(counts + p, 1, ncclInt64, p, comm, stream);
      ncclRecv(counts + n + size_t(p), 1, ncclInt64, p, comm, stream);
    }
    if (!enqueued(ncclGroupEnd(), "exchangeCounts", error))
      return false;
    recvCounts.assign(n, 0);
    cudaMemcpyAsync(recvCounts.data(), counts + n, n * sizeof(int64_t),
                    cudaMemcpyDeviceToHost, stream);
    return waitStream("exchangeCounts", error);
  }

  bool allToAllV(const void *send, const std::vector<int64_t> &sendBytes, void *recv,
                 const std::vector<int64_t> &recvBytes, std::string &error) override {
    if (!usable("allToAllV", error))
      return false;
    const char *out = static_cast<const char *>(send);
    char *in = static_cast<char *>(recv);
    int64_t sendAt = 0, recvAt = 0;
    ncclGroupStart();
    for (int p = 0; p < size(); ++p) {
      if (sendBytes[p] > 0)
        ncclSend(out + sendAt, size_t(sendBytes[p]), ncclUint8, p, comm, stream);
      if (recvBytes[p] > 0)
        ncclRecv(in + recvAt, size_t(recvBytes[p]), ncclUint8, p, comm, stream);
      sendAt += sendBytes[p];
      recvAt += recvBytes[p];
    }
    return enqueued(ncclGroupEnd(), "allToAllV", error) && waitStream("allToAllV", error);
  }

  bool allReduceSum(float *data, size_t count, std::string &error) override {
    return usable("allReduceSum", error) &&
           enqueued(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream),
                    "allReduceSum", error) &&
           waitStream("allReduceSum", error);
  }
  bool allReduceSum(int64_t *data, size_t count, std::string &error) override {
    return usable("allReduceSum", error) &&
           enqueued(ncclAllReduce(data, data, count, ncclInt64, ncclSum, comm, stream),
                    "allReduceSum", error) &&
           waitStream("allReduceSum", error);
  }
  bool broadcast(void *data, size_t bytes, int root, std::string &error) override {
    return usable("broadcast", error) &&
           enqueued(ncclBroadcast(data, data, bytes, ncclUint8, root, comm, stream),
                    "broadcast", error) &&
           waitStream("broadcast", error);
  }
  bool barrier(std::string &error) override {
    // NCCL has no barrier: an all-reduce of one value on the device is one.
    return allReduceSum(reinterpret_cast<int64_t *>(counts), 1, error);
  }
  /// A second communicator over the same ranks (ncclCommSplit with one colour) on a
  /// stream of its own, for a background thread (expert weight transfers).
  std::unique_ptr<Communicator> duplicate(std::string &error) override {
    if (!usable("duplicate", error))
      return nullptr;
    cudaStream_t own;
    if (cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess) {
      error = "nccl duplicate: cudaStreamCreate failed";
      return nullptr;
    }
    auto copy = std::make_unique<NcclCommunicator>(host, own, timeout);
    copy->ownsStream = true;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    if (!enqueued(ncclCommSplit(comm, 0, rank(), &copy->comm, &config), "duplicate",
                  error) ||
        !copy->waitComm("duplicate", error) ||
        cudaMalloc(&copy->counts, sizeof(int64_t) * 2 * size_t(size())) != cudaSuccess) {
      if (error.empty())
        error = "nccl duplicate: cudaMalloc of the count buffer failed";
      return nullptr;
    }
    return copy;
  }

  [[noreturn]] void abort(int code) override {
    if (comm && !aborted) {
      ncclCommAbort(comm);
      aborted = true;
    }
    host.abort(code);
    std::abort(); // host.abort does not return; a virtual call hides that from the compiler
  }

private:
  bool usable(const char *what, std::string &error) const {
    if (!aborted)
      return true;
    error = std::string("nccl ") + what + ": the communicator was aborted after a timeout";
    return false;
  }
  bool enqueued(ncclResult_t result, const char *what, std::string &error) {
    if (result == ncclSuccess || result == ncclInProgress)
      return true;
    error = std::string("nccl ") + what + ": " + ncclGetErrorString(result);
    return false;
  }
  bool timedOut(const char *what, std::string &error) {
    ncclCommAbort(comm);
    aborted = true;
    error =
        std::string("nccl ") + what + " on rank " + std::to_string(rank()) + " of " +
        std::to_string(size()) + ": timed out after " + std::to_string(int(timeout)) +
        " s (a rank exited, failed or is stuck; $SWITCHYARD_COMM_TIMEOUT sets the limit)";
    return false;
  }
  bool waitComm(const char *what, std::string &error) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm, &state);
      if (state == ncclSuccess)
        return true;
      if (state != ncclInProgress) {
        error = std::string("nccl ") + what + ": " + ncclGetErrorString(state);
        return false;
      }
      if (std::chrono::steady_clock::now() > deadline)
        return timedOut(what, error);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  bool waitStream(const char *what, std::string &error) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    for (;;) {
      cudaError_t state = cudaStreamQuery(stream);
      if (state == cudaSuccess)
        return true;
      if (state != cudaErrorNotReady) {
        error = std::string("nccl ") + what + ": " + cudaGetErrorString(state);
        return false;
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        error = std::string("nccl ") + what + ": " + ncclGetErrorString(async);
        return false;
      }
      if (std::chrono::steady_clock::now() > deadline)
        return timedOut(what, error);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  Communicator &host;
  cudaStream_t stream;
  double timeout;
  ncclComm_t comm = nullptr;
  int64_t *counts = nullptr; // device: this rank's send counts, then the received ones
  bool aborted = false;
  bool ownsStream = false;
};

// An internal name: libSwitchyardComm's createNcclCommunicator (the loader) would
// otherwise interpose on it.
std::unique_ptr<Communicator> createNccl(Communicator &bootstrap, int device, void *stream,
                                         const CommOptions &options, std::string &error) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    error = "nccl: no CUDA device is available on rank " + std::to_string(bootstrap.rank());
    return nullptr;
  }
  if (device < 0 || device >= devices) {
    error = "nccl: rank " + std::to_string(bootstrap.rank()) + " asks for CUDA device " +
            std::to_string(device) + " of " + std::to_string(devices);
    return nullptr;
  }
  auto comm = std::make_unique<NcclCommunicator>(
      bootstrap, static_cast<cudaStream_t>(stream), collectiveTimeout(options));
  if (!comm->init(device, error))
    return nullptr;
  return comm;
}

} // namespace

} // namespace switchyard::comm

extern "C" __attribute__((visibility("default"))) const switchyard::comm::NcclPlugin *
switchyard_nccl_plugin() {
  static const switchyard::comm::NcclPlugin plugin{switchyard::comm::NcclPlugin::kVersion,
                                                   switchyard::comm::createNccl};
  return &plugin;
}

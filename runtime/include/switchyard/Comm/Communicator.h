//===- Communicator.h - collectives between the ranks of an EP job -*- C++ -*-===//
//
// Expert parallelism runs one process per device (launched by mpirun), as vLLM, SGLang
// and DeepEP do. A Communicator is one rank's view of the job: the collectives the
// expert-parallel layer needs, on host buffers (MPI) or device buffers (NCCL, on a
// CUDA stream). Every collective has a deadline: a peer that died or never joined is
// an error naming the collective, never a hang; after a timeout the communicator is
// unusable (the job should exit; abort() ends every rank).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMM_COMMUNICATOR_H
#define SWITCHYARD_COMM_COMMUNICATOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace switchyard::comm {

struct CommOptions {
  double timeoutSeconds = 120; // per collective ($SWITCHYARD_COMM_TIMEOUT overrides)
};

class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" (host buffers) or "nccl" (device buffers).
  virtual const char *backend() const = 0;
  virtual bool onDevice() const = 0;

  /// Every rank contributes `bytes` bytes; `recv` gets size() * bytes in rank order.
  virtual bool allGather(const void *send, size_t bytes, void *recv,
                         std::string &error) = 0;
  /// sendCounts[p]: how many elements this rank sends to rank p; recvCounts (host) gets
  /// how many it receives from each (the count exchange of an all-to-all).
  virtual bool exchangeCounts(const std::vector<int64_t> &sendCounts,
                              std::vector<int64_t> &recvCounts, std::string &error) = 0;
  /// All-to-all with per-peer byte counts: rank p gets sendBytes[p] bytes from `send`
  /// (peers' blocks back to back, rank order) and this rank receives recvBytes[p]
  /// bytes from rank p into `recv` (same layout). Grouped point-to-point underneath.
  virtual bool allToAllV(const void *send, const std::vector<int64_t> &sendBytes,
                         void *recv, const std::vector<int64_t> &recvBytes,
                         std::string &error) = 0;
  /// In-place sums over the ranks.
  virtual bool allReduceSum(float *data, size_t count, std::string &error) = 0;
  virtual bool allReduceSum(int64_t *data, size_t count, std::string &error) = 0;
  /// `root`'s `bytes` bytes to every rank.
  virtual bool broadcast(void *data, size_t bytes, int root, std::string &error) = 0;
  virtual bool barrier(std::string &error) = 0;
  /// A second communicator over the same ranks whose collectives may run on another
  /// thread, concurrently with this one's (MPI: MPI_Comm_dup under MPI_THREAD_MULTIPLE;
  /// NCCL: ncclCommSplit on a stream of its own). Collective: every rank calls it.
  /// nullptr with the reason where the library cannot.
  virtual std::unique_ptr<Communicator> duplicate(std::string &error) = 0;
  /// Ends the whole job (every rank) with `code`.
  [[noreturn]] virtual void abort(int code) = 0;
};

/// The job's ranks over MPI (MPI_COMM_WORLD; initialises MPI when needed, finalises it
/// when the last MPI communicator goes). Host buffers.
std::unique_ptr<Communicator> createMpiCommunicator(const CommOptions &options,
                                                    std::string &error);

/// NCCL over the ranks of `bootstrap` (rank 0's ncclUniqueId broadcast over it), one
/// rank per CUDA device `device`, collectives enqueued on `stream` (a cudaStream_t) and
/// waited for with the deadline. Device buffers. An error (with the reason) where the
/// build has no NCCL or the machine no GPU.
std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap, int device,
                                                     void *stream,
                                                     const CommOptions &options,
                                                     std::string &error);

/// Every rank says whether it started (`ok`, else `message`); true on every rank when all
/// did, else false on every rank with "rank R failed to start: MESSAGE" (the first).
bool agreeAllStarted(Communicator &comm, bool ok, const std::string &message,
                     std::string &error);

/// `expected` ranks asked for (--ep N): an error on every rank when the job has another
/// size.
bool checkWorldSize(const Communicator &comm, int expected, std::string &error);

/// The deadline of a collective: options.timeoutSeconds, or $SWITCHYARD_COMM_TIMEOUT.
double collectiveTimeout(const CommOptions &options);

} // namespace switchyard::comm

#endif

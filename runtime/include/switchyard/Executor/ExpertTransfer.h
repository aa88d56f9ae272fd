//===- ExpertTransfer.h - expert weights moving between ranks ---*- C++ -*-===//
//
// Balancers (live EPLB, Libra's replicas) move expert weights between the ranks of an
// expert-parallel job while the layers keep computing. An ExpertMover runs batches of
// transfers on a channel of their own (a duplicate communicator) on a background
// thread: a batch is submitted (the same list, in the same order, on every rank), runs
// while the caller computes, and is waited for at a step or layer boundary. Batches run
// one at a time in submission order, so every rank's channel sees the same collectives.
// Where the communicator cannot be duplicated (MPI without MPI_THREAD_MULTIPLE), a batch
// runs on the caller's thread when it is submitted.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_EXPERTTRANSFER_H
#define SWITCHYARD_EXECUTOR_EXPERTTRANSFER_H

#include "switchyard/Comm/Communicator.h"
#include "switchyard/Executor/MoeLayer.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace switchyard::exec {

/// One expert's weights (gate, up, down) moving from rank `from` to rank `to`.
struct ExpertTransfer {
  int32_t expert;
  int from, to;
  int64_t bytes;
};

/// A rank's own copy of an expert's weights and views of it in the source's dtypes and
/// shapes.
struct ExpertCopy {
  std::vector<uint8_t> bytes;
  model::TensorView views[3];
  FfnWeights weights() const { return {&views[0], &views[1], &views[2]}; }
};

/// What one batch moves: the transfers, and the current weights of every expert they
/// name (read when this rank sends it; their shapes and dtypes when it receives it).
/// Sent weights must stay valid and unchanged until the batch is waited for.
struct TransferBatch {
  std::vector<ExpertTransfer> transfers;
  std::map<int32_t, FfnWeights> weights;
};

class ExpertMover {
public:
  using Ticket = uint64_t;

  /// `comm`: the job's communicator; a duplicate of it, made at the first submit (the
  /// ranks submit the same batches in the same order, so they duplicate together),
  /// carries the transfers.
  explicit ExpertMover(comm::Communicator &comm);
  ~ExpertMover();
  ExpertMover(const ExpertMover &) = delete;
  ExpertMover &operator=(const ExpertMover &) = delete;

  /// Whether batches run on a background thread ("" when they do, else why not).
  const std::string &synchronousReason() const { return whyNotBackground; }
  Ticket submit(TransferBatch batch);
  /// Waits for `ticket`'s batch; `received`: the copies this rank got; `moved`: the bytes
  /// the batch moved between all ranks.
  bool wait(Ticket ticket, std::map<int32_t, ExpertCopy> &received, int64_t &moved,
            std::string &error);

private:
  struct Result {
    bool ok = false;
    std::string error;
    std::map<int32_t, ExpertCopy> received;
    int64_t moved = 0;
  };
  bool start(std::string &error);
  Result run(const TransferBatch &batch);
  void loop();

  comm::Communicator &main;
  std::unique_ptr<comm::Communicator> channel; // nullptr: batches run on `main`
  std::string whyNotBackground;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::pair<Ticket, TransferBatch>> queue;
  std::map<Ticket, Result> done;
  Ticket nextTicket = 1;
  bool stopping = false, started = false;
  std::thread worker;
};

} // namespace switchyard::exec

#endif

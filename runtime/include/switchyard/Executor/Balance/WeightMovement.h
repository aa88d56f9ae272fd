//===- WeightMovement.h - executing a balancer's plan -----------*- C++ -*-===//
//
// A plan's transfers run on the ExpertMover's background channel while the layers
// compute; what arrives is a rank's own copy of an expert, and the layer is pointed at
// it (and back at the checkpoint when the copy goes). EPLB moves a migration in chunks
// of bounded size, one chunk per step; Libra copies a layer's replicas in one batch.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_BALANCE_WEIGHTMOVEMENT_H
#define SWITCHYARD_EXECUTOR_BALANCE_WEIGHTMOVEMENT_H

#include "switchyard/Executor/ExpertTransfer.h"
#include "switchyard/Executor/MoeLayer.h"

#include <functional>
#include <map>

namespace switchyard::exec {

/// A layer's experts pointed at copies this rank received, and back at the checkpoint.
class ExpertCopies {
public:
  explicit ExpertCopies(MoeLayer &layer) : layer(layer) {}
  /// The layer computes `expert` with `copy` from now on (a copy it had is freed).
  void install(int32_t expert, ExpertCopy copy);
  /// Every copy for which `keep` is false goes; the layer points back at the checkpoint.
  void restoreUnless(const std::function<bool(int32_t expert)> &keep);
  void restoreAll() {
    restoreUnless([](int32_t) { return false; });
  }

private:
  MoeLayer &layer;
  std::map<int32_t, FfnWeights> checkpointViews; // what a replaced expert points back to
  std::map<int32_t, ExpertCopy> copies;
};

/// A list of transfers moved in chunks: each chunk the next transfers up to
/// `bytesPerStep` bytes (at least one transfer), one chunk in flight at a time.
class ChunkedMigration {
public:
  ChunkedMigration(ExpertMover &mover, const MoeLayer &layer, int64_t bytesPerStep)
      : mover(mover), layer(layer), bytesPerStep(bytesPerStep) {}
  /// Starts moving `transfers` (the first chunk now).
  void start(std::vector<ExpertTransfer> transfers);
  bool active() const { return moving; }
  /// At a step boundary: waits for the chunk in flight and keeps what it brought, then
  /// starts the next chunk. `complete`: every chunk has arrived (take the copies with
  /// takeArrived; the migration is then over).
  bool advance(int64_t &moved, bool &complete, std::string &error);
  std::map<int32_t, ExpertCopy> takeArrived();

private:
  void submitChunk();

  ExpertMover &mover;
  const MoeLayer &layer;
  int64_t bytesPerStep;
  bool moving = false;
  std::vector<ExpertTransfer> pending; // in the order every rank agrees on
  size_t submitted = 0;
  ExpertMover::Ticket inFlight = 0;
  std::map<int32_t, ExpertCopy> arrived;
};

} // namespace switchyard::exec

#endif

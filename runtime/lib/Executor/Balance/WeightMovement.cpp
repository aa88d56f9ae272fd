//===- WeightMovement.cpp - executing a balancer's plan -------------------===//
#include "switchyard/Executor/Balance/WeightMovement.h"

namespace switchyard::exec {

void ExpertCopies::install(int32_t expert, ExpertCopy copy) {
  checkpointViews.emplace(expert, layer.expertWeights(expert)); // the first time only
  ExpertCopy &slot = copies[expert];
  slot = std::move(copy);
  layer.setExpertWeights(expert, slot.weights());
}

void ExpertCopies::restoreUnless(const std::function<bool(int32_t)> &keep) {
  for (auto it = copies.begin(); it != copies.end();) {
    if (keep(it->first)) {
      ++it;
      continue;
    }
    layer.setExpertWeights(it->first, checkpointViews.at(it->first));
    it = copies.erase(it);
  }
}

void ChunkedMigration::start(std::vector<ExpertTransfer> transfers) {
  pending = std::move(transfers);
  submitted = 0;
  moving = true;
  submitChunk(); // moves while the rest of the stack computes
}

void ChunkedMigration::submitChunk() {
  TransferBatch batch;
  int64_t bytes = 0;
  while (submitted < pending.size() &&
         (batch.transfers.empty() || bytes + pending[submitted].bytes <= bytesPerStep)) {
    const ExpertTransfer &t = pending[submitted++];
    bytes += t.bytes;
    batch.transfers.push_back(t);
    batch.weights.emplace(t.expert, layer.expertWeights(t.expert));
  }
  inFlight = mover.submit(std::move(batch));
}

bool ChunkedMigration::advance(int64_t &moved, bool &complete, std::string &error) {
  complete = false;
  if (!moving)
    return true;
  if (inFlight) {
    std::map<int32_t, ExpertCopy> got;
    if (!mover.wait(inFlight, got, moved, error))
      return false;
    inFlight = 0;
    for (auto &[expert, copy] : got)
      arrived[expert] = std::move(copy);
  }
  if (submitted < pending.size()) {
    submitChunk(); // moves during this step; this step still runs the old placement
    return true;
  }
  // Every rank has every byte (the same chunks everywhere).
  moving = false;
  complete = true;
  return true;
}

std::map<int32_t, ExpertCopy> ChunkedMigration::takeArrived() {
  std::map<int32_t, ExpertCopy> out;
  out.swap(arrived);
  return out;
}

} // namespace switchyard::exec

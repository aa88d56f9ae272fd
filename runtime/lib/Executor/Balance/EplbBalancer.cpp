//===- EplbBalancer.cpp - live EPLB as a balancer -------------------------===//
#include "switchyard/Executor/Balance/EplbBalancer.h"

namespace switchyard::exec {

EplbBalancer::EplbBalancer(std::shared_ptr<const EplbRule> rule, const EplbOptions &options,
                           MoeLayer &layer, int rank, ExpertMover &mover)
    : rule(std::move(rule)), layer(layer), rank(rank),
      window(layer.modelConfig().experts, options.window),
      movement(mover, layer, options.bytesPerStep), copies(layer) {}

bool EplbBalancer::beginStep(ExpertPlacement &placement, int64_t &moved,
                             std::string &error) {
  bool complete = false;
  if (!movement.advance(moved, complete, error))
    return false;
  if (!complete)
    return true;
  for (auto &[expert, copy] : movement.takeArrived())
    copies.install(expert, std::move(copy));
  placement = plan.next;
  // Evicted after publication: copies of experts this rank no longer serves.
  copies.restoreUnless([&](int32_t expert) { return placement.holds(rank, expert); });
  return true;
}

bool EplbBalancer::endStep(const ExpertPlacement &placement, const Routing &routing,
                           std::string &error) {
  window.record(routing);
  if (!window.full() || movement.active())
    return true;
  // Every rank plans from the same loads (the routing is global): the same plan.
  auto bytes = [&](int32_t expert) { return layer.expertWeights(expert).bytes(); };
  if (!planMigration(*rule, window.loads(), placement, bytes, plan, error))
    return false;
  window.clear();
  movement.start(plan.transfers);
  return true;
}

} // namespace switchyard::exec

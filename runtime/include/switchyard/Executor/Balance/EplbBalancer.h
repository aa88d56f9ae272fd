//===- EplbBalancer.h - live EPLB as a balancer -----------------*- C++ -*-===//
//
// Live EPLB (DeepSeek's expert-parallel load balancer): every `window` steps the
// compiled eplb rule plans a placement from the window's loads; the expert weights a
// rank newly serves are sent to it by a rank that holds them, at most `bytesPerStep`
// bytes per layer and step, on the mover's background channel while the layers
// compute; the new placement is published at the first step boundary where every rank
// has every byte, so no step ever sees a half-moved expert. Copies of experts a rank no
// longer serves are dropped after publication.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_BALANCE_EPLBBALANCER_H
#define SWITCHYARD_EXECUTOR_BALANCE_EPLBBALANCER_H

#include "switchyard/Executor/Balance/BalancePlan.h"
#include "switchyard/Executor/Balance/BalanceState.h"
#include "switchyard/Executor/Balance/Balancer.h"
#include "switchyard/Executor/Balance/WeightMovement.h"

#include <memory>

namespace switchyard::exec {

struct EplbOptions {
  int64_t window = 0;              // steps per plan; 0: no live balancing
  int64_t slots = 0;               // physical slots (experts + redundant)
  int64_t bytesPerStep = 64 << 20; // weight bytes moved per layer and step
};

class EplbBalancer : public Balancer {
public:
  /// `rank`: this rank in the job; `layer`: the MoE block whose experts move.
  EplbBalancer(std::shared_ptr<const EplbRule> rule, const EplbOptions &options,
               MoeLayer &layer, int rank, ExpertMover &mover);
  /// Publishes a migration whose every chunk has arrived, else moves the next chunk.
  bool beginStep(ExpertPlacement &placement, int64_t &moved, std::string &error) override;
  /// Records the loads; at the end of a window (and no migration moving) plans the next
  /// placement and starts moving it.
  bool endStep(const ExpertPlacement &placement, const Routing &routing,
               std::string &error) override;

  const LoadWindow &loadWindow() const { return window; }
  /// The migration being moved (nullptr when none).
  const MigrationPlan *pendingMigration() const {
    return movement.active() ? &plan : nullptr;
  }

private:
  std::shared_ptr<const EplbRule> rule;
  MoeLayer &layer;
  int rank;
  LoadWindow window;
  MigrationPlan plan;
  ChunkedMigration movement;
  ExpertCopies copies;
};

} // namespace switchyard::exec

#endif

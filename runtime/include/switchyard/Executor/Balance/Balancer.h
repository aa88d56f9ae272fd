//===- Balancer.h - what an expert-parallel layer asks a balancer -*- C++ -*-===//
//
// A balancer moves experts between the ranks of an expert-parallel job while it runs,
// apart from the layer that dispatches and combines (vLLM keeps its EPLB the same way:
// state, algorithm and weight movement beside the layer). Each balancer has three
// parts, each in a header of its own:
//   - state (BalanceState.h): what it keeps between steps (EPLB: the window's loads;
//     Libra: the prediction and plan made for this layer);
//   - plan (BalancePlan.h): the compiled rules of its policy (BalanceRules.h) turned
//     into a placement and the expert transfers that realise it;
//   - weight movement (WeightMovement.h): the transfers run on the mover
//     (ExpertTransfer.h) while the layers compute, and the layer pointed at the copies.
// The layer calls the three hooks below at fixed points of every step, on every rank in
// the same order (the balancers' collectives must match across ranks).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_BALANCE_BALANCER_H
#define SWITCHYARD_EXECUTOR_BALANCE_BALANCER_H

#include "switchyard/Executor/Placement.h"
#include "switchyard/Executor/Routing.h"

#include <string>

namespace switchyard::exec {

/// What a balancer may read of a step before its experts run.
struct StepInput {
  const float *x;                   // this rank's tokens [T_local, H]
  int64_t tokens;                   // T_local
  const TokenSlices *slices;        // where every rank's tokens are in the global batch
  const ExpertPlacement *placement; // the placement the step dispatches with
};

class Balancer {
public:
  virtual ~Balancer();
  /// At the step boundary, before the layer routes: movement that has finished takes
  /// effect (the layer's experts point at the new copies; `placement` may change).
  /// `moved`: the weight bytes moved between all ranks that this boundary waited for.
  virtual bool beginStep(ExpertPlacement &placement, int64_t &moved,
                         std::string &error) = 0;
  /// After the global batch is routed, before the experts run.
  virtual bool afterRouting(const StepInput &input, double &commSeconds,
                            std::string &error) {
    (void)input, (void)commSeconds, (void)error;
    return true;
  }
  /// After the step (its metrics are written): the state records the step's routing;
  /// a plan is made and its movement started when the policy says so.
  virtual bool endStep(const ExpertPlacement &placement, const Routing &routing,
                       std::string &error) = 0;
};

} // namespace switchyard::exec

#endif

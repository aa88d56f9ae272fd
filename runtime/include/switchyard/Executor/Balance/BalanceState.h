//===- BalanceState.h - what balancers keep between steps -------*- C++ -*-===//
//
// EPLB keeps the routed slots per expert over a window of steps (vLLM's
// expert_load_window, one window at a time); Libra keeps, per layer, the replica plan
// its predecessor made from a prediction of this layer's routing, and how well that
// prediction hit.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_BALANCE_BALANCESTATE_H
#define SWITCHYARD_EXECUTOR_BALANCE_BALANCESTATE_H

#include "switchyard/Executor/BalanceRules.h"
#include "switchyard/Executor/Routing.h"

#include <cstdint>
#include <vector>

namespace switchyard::exec {

/// EPLB's load history: routed slots per expert since the window began.
class LoadWindow {
public:
  /// `steps`: steps per window (a plan at most every `steps` steps).
  LoadWindow(int64_t experts, int64_t steps);
  /// Adds one step's routed slots (ids < 0 are dropped slots).
  void record(const Routing &routing);
  /// Whether the window has seen its steps (it keeps counting while a plan moves).
  bool full() const { return seen >= steps; }
  const std::vector<float> &loads() const { return perExpert; }
  int64_t stepsSeen() const { return seen; }
  /// A new window: after a plan is made from this one.
  void clear();

private:
  std::vector<float> perExpert;
  int64_t steps, seen = 0;
};

/// Libra's state for one layer: the placement it runs with this step and the
/// predecessor's prediction of its routing.
struct ReplicaForecast {
  bool planned = false;              // false: the home placement, nothing predicted
  LibraRules::Plan plan;             // which ranks hold each expert [E, G]
  std::vector<int32_t> predictedIds; // [T, k'] the predecessor predicted
  /// The share of routed (token, expert) pairs the prediction had among its k' ids; -1
  /// without a prediction (or tokens).
  double hitRate(const Routing &routing) const;
};

} // namespace switchyard::exec

#endif

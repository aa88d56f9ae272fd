//===- LibraBalancer.h - Libra's lookahead replicas as a balancer -*- C++ -*-===//
//
// Libra (§3): each layer predicts the next layer's routing from its own input with the
// compiled @libra_predict (the next layer's gate on the current hidden states), plans
// that layer's replicas with @libra and starts copying them while it computes; the next
// layer waits for them at its step boundary, runs with them (two-stage execution: its
// remote slots are sharded by @libra_shard, see EpMoeLayer.h) and drops them after the
// step. The first layer runs on the home placement.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_BALANCE_LIBRABALANCER_H
#define SWITCHYARD_EXECUTOR_BALANCE_LIBRABALANCER_H

#include "switchyard/Comm/Communicator.h"
#include "switchyard/Executor/Balance/BalancePlan.h"
#include "switchyard/Executor/Balance/BalanceState.h"
#include "switchyard/Executor/Balance/Balancer.h"
#include "switchyard/Executor/Balance/WeightMovement.h"
#include "switchyard/Executor/Metrics.h"

#include <memory>

namespace switchyard::exec {

class LibraBalancer : public Balancer {
public:
  /// A slot of `server` that two-stage execution serves remotely, its rank still to come.
  static constexpr int32_t kRemote = -2;

  LibraBalancer(std::shared_ptr<const LibraRules> rules, MoeLayer &layer,
                comm::Communicator &comm, ExpertMover &mover);
  /// This layer prepares `next`'s replicas (nullptr: the last layer, nothing to prepare).
  void prepare(LibraBalancer *next);

  /// Waits for the replicas planned for this layer and points the layer at them; the
  /// home placement when nothing was planned.
  bool beginStep(ExpertPlacement &placement, int64_t &moved, std::string &error) override;
  /// Predicts the next layer's routing, plans its replicas and starts copying them.
  bool afterRouting(const StepInput &input, double &commSeconds,
                    std::string &error) override;
  /// Drops this step's replicas.
  bool endStep(const ExpertPlacement &placement, const Routing &routing,
               std::string &error) override;

  /// Which ranks hold each expert this step [E, G] (home or replica).
  const std::vector<int32_t> &holders() const { return forecast.plan.placement; }
  /// @libra_shard on the actual routing, then each slot marked kRemote in `server`
  /// [T * k] given to a rank holding its expert: remoteServer [T * k]; `imbalance` after
  /// sharding. Safe to run on another thread while the layer computes.
  bool shardRemoteSlots(const Routing &routing, const std::vector<int32_t> &tokenRank,
                        const std::vector<int32_t> &server,
                        std::vector<int32_t> &remoteServer, float &imbalance,
                        std::string &error) const;
  /// What the balancer did for this layer: replicas per rank, planned imbalance and the
  /// prediction's hit rate on the actual `routing`.
  void report(const ExpertPlacement &home, const Routing &routing,
              LibraMetrics &metrics) const;

private:
  std::shared_ptr<const LibraRules> rules;
  MoeLayer &layer;
  comm::Communicator &comm;
  ExpertMover &mover;
  LibraBalancer *successor = nullptr;
  std::vector<float> gateForPredecessor; // this layer's gate [H, E]
  ReplicaForecast forecast;
  ExpertMover::Ticket replicaTicket = 0;
  ExpertCopies copies;
};

} // namespace switchyard::exec

#endif

//===- EpMoeLayer.h - one MoE block, experts spread over ranks --*- C++ -*-===//
//
// Expert parallelism on the host: rank r holds the experts of its slots (phy2log in
// contiguous blocks; vLLM's default placement to start with) and the tokens of a
// contiguous slice of the batch. Per layer:
//   1. router GEMM on the local tokens; the logits are all-gathered, so that the
//      compiled policy routes the GLOBAL batch (batch-aware policies - LYNX, XShare,
//      XShare-spec - see every rank's tokens, not a slice; XShare-EP gets the live
//      placement); every rank computes the same routing;
//   2. every routed slot gets the rank that serves it, and then either
//      - all-to-all (default, live EPLB): each local token's normed row goes once to
//        every rank serving one of its slots; those ranks run their experts on the
//        rows they received (other slots masked); the partial sums come back; or
//      - Libra's two-stage locality-aware execution (§3.1): slots whose expert is on
//        the token's own rank (home or a replica copied while the previous layer ran)
//        are computed at once (MoE_local), while the compiled @libra_shard shards the
//        remote slots on a CPU thread and the rows are all-gathered (Libra's
//        dispatch); then each rank serves the remote slots the plan gives it
//        (MoE_remote) and the partial sums go back;
//   3. the token's owner adds the partial sums in rank order after its own: the
//      single-rank result up to float summation order.
// Balancing runs live: EPLB re-plans every W steps and migrates weights in bounded
// chunks on a background channel, publishing at a step boundary; Libra predicts the
// next layer's routing from the current hidden states and plans and copies its
// replicas while this layer computes.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_EPMOELAYER_H
#define SWITCHYARD_EXECUTOR_EPMOELAYER_H

#include "switchyard/Comm/Communicator.h"
#include "switchyard/Executor/BalanceRules.h"
#include "switchyard/Executor/ExpertTransfer.h"
#include "switchyard/Executor/MoeLayer.h"
#include "switchyard/Executor/Placement.h"

#include <functional>
#include <map>

namespace switchyard::exec {

/// Live EPLB (DeepSeek's expert-parallel load balancer): every `window` steps the
/// compiled eplb rule plans a placement from the window's loads; the expert weights a
/// rank newly serves are sent to it by a rank that holds them, at most `bytesPerStep`
/// bytes per layer and step, on the mover's background channel while the layers
/// compute; the new placement is published at the first step boundary where every rank
/// has every byte, so no step ever sees a half-moved expert.
struct EplbOptions {
  int64_t window = 0;              // steps per plan; 0: no live balancing
  int64_t slots = 0;               // physical slots (experts + redundant)
  int64_t bytesPerStep = 64 << 20; // weight bytes moved per layer and step
};

class EpMoeLayer : public Layer {
public:
  /// `mover` carries balancers' weight transfers (shared by the layers; may be null
  /// without balancing).
  EpMoeLayer(std::unique_ptr<MoeLayer> inner, comm::Communicator &comm,
             std::shared_ptr<ExpertMover> mover);
  /// Turns live EPLB on (the rule is shared by the layers).
  void balanceWith(std::shared_ptr<const EplbRule> rule, const EplbOptions &options);
  /// Turns Libra on: this layer predicts and prepares `successor`'s replicas (nullptr
  /// for the last layer); the first layer runs on the home placement.
  void balanceWith(std::shared_ptr<const LibraRules> rules, EpMoeLayer *successor);

  int64_t index() const override { return local->index(); }
  const std::vector<float> &postAttentionNorm() const override {
    return local->postAttentionNorm();
  }
  /// x, y: this rank's tokens [T_local, H]; batch: the GLOBAL batch's metadata;
  /// routing: the global routing (the same on every rank).
  bool forward(const float *x, int64_t tokens, const BatchInfo &batch,
               const Routing *replay, Routing &routing, float *y, LayerMetrics &metrics,
               std::string &error) override;

private:
  /// What one forward pass works with.
  struct Step {
    const float *x;
    int64_t tokens;
    const BatchInfo *batch;
    TokenSlices slices;
    const Routing *routing;
    std::vector<int32_t> server; // [T * k]: the rank serving each slot, -1 for none
    float *y;
    LayerMetrics *metrics;
    double commSeconds = 0;
    int64_t bytesSent = 0; // hidden rows this rank sent to others (dispatch + combine)
  };
  bool forwardAllToAll(Step &s, std::string &error);
  bool forwardTwoStage(Step &s, std::string &error);
  /// out = the MoE block on `rows` [served, H] (the rows of global tokens `served`):
  /// the slots this rank serves when `routed`, the shared experts when `withShared`.
  bool computeServed(Step &s, const float *rows, const std::vector<int64_t> &served,
                     bool routed, bool withShared, float *out, std::string &error);
  /// This rank's tokens as global indices.
  std::vector<int64_t> ownTokens(const Step &s) const;
  /// Sends the partial sums of `served` tokens back to their owners; each rank adds what
  /// it gets for its own tokens into y in rank order. `computed(token, rank)`: whether
  /// `rank` sent a partial sum for `token`.
  bool returnPartials(Step &s, const std::vector<int64_t> &served, const float *partials,
                      const std::function<bool(int64_t, int)> &computed,
                      std::string &error);

  // Live EPLB.
  /// At a step boundary: waits for the migration chunk in flight, publishes the new
  /// placement when every chunk has arrived, else starts the next chunk.
  bool advanceMigration(int64_t &moved, std::string &error);
  /// After a step: counts the loads, and at the end of a window plans the next placement.
  bool countAndPlan(const Routing &routing, std::string &error);
  void submitChunk();

  // Libra.
  /// Predicts `successor`'s routing from this layer's input, plans its replicas with
  /// @libra and starts copying them.
  bool planSuccessor(Step &s, std::string &error);
  /// Called by the predecessor: the placement this layer will run with, and the ticket
  /// of the replica copies.
  void acceptPlan(const LibraRules::Plan &plan, ExpertMover::Ticket ticket,
                  std::vector<int32_t> predictedIds);
  /// Waits for the replicas planned for this layer and points the layer at them.
  bool installReplicas(int64_t &moved, std::string &error);
  void dropReplicas();
  /// @libra_shard on the actual routing, then each remote slot (server kRemote) given
  /// to a rank holding its expert: remoteServer [T * k].
  bool shardRemoteSlots(const Step &s, std::vector<int32_t> &remoteServer, float &imbalance,
                        std::string &error) const;
  static constexpr int32_t kRemote = -2; // a slot MoE_remote serves, rank still to come

  std::unique_ptr<MoeLayer> local;
  comm::Communicator &comm;
  std::shared_ptr<ExpertMover> mover;
  ExpertPlacement placement;
  std::vector<float> localLogits, globalLogits, sendRows, recvRows, partial, back, allRows;
  std::map<int32_t, FfnWeights> checkpointViews; // what a replaced expert points back to
  // Live EPLB.
  std::shared_ptr<const EplbRule> eplb;
  EplbOptions eplbOptions;
  std::vector<float> loads; // routed slots per expert over the window
  int64_t stepsInWindow = 0;
  bool migrating = false;
  ExpertPlacement next;
  std::vector<ExpertTransfer> transfers; // the pending migration, in the agreed order
  size_t transfersSubmitted = 0;
  ExpertMover::Ticket chunkInFlight = 0;
  std::map<int32_t, ExpertCopy> owned, incoming;
  // Libra.
  std::shared_ptr<const LibraRules> libra;
  EpMoeLayer *successor = nullptr;
  std::vector<float> gateForPredecessor; // this layer's gate [H, E]
  bool planned = false;
  LibraRules::Plan plan; // this layer's placement [E, G]
  ExpertMover::Ticket replicaTicket = 0;
  std::vector<int32_t> predictedIds; // the predecessor's prediction [T, k]
  std::map<int32_t, ExpertCopy> replicas;
};

} // namespace switchyard::exec

#endif

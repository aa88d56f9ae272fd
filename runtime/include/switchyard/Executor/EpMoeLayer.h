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
// Balancing is a Balancer's (Balance/Balancer.h), called at the step boundary, after
// routing and after the step: live EPLB (Balance/EplbBalancer.h) re-plans every W steps
// and migrates weights in bounded chunks, publishing a new placement at a step boundary;
// Libra (Balance/LibraBalancer.h) predicts the next layer's routing and copies its
// replicas while this layer computes, and gives the two-stage execution its plan.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_EPMOELAYER_H
#define SWITCHYARD_EXECUTOR_EPMOELAYER_H

#include "switchyard/Comm/Communicator.h"
#include "switchyard/Executor/Balance/EplbBalancer.h"
#include "switchyard/Executor/Balance/LibraBalancer.h"
#include "switchyard/Executor/ExpertTransfer.h"
#include "switchyard/Executor/MoeLayer.h"
#include "switchyard/Executor/Placement.h"

#include <functional>

namespace switchyard::exec {

class EpMoeLayer : public Layer {
public:
  /// `mover` carries balancers' weight transfers (shared by the layers; may be null
  /// without balancing).
  EpMoeLayer(std::unique_ptr<MoeLayer> inner, comm::Communicator &comm,
             std::shared_ptr<ExpertMover> mover);
  /// Turns live EPLB on (the rule is shared by the layers; see EplbBalancer).
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

  std::unique_ptr<MoeLayer> local;
  comm::Communicator &comm;
  std::shared_ptr<ExpertMover> mover;
  ExpertPlacement placement;
  std::vector<float> localLogits, globalLogits, sendRows, recvRows, partial, back, allRows;
  std::unique_ptr<Balancer> balancer; // nullptr: the contiguous placement throughout
  LibraBalancer *libra = nullptr;     // `balancer` when it is Libra's: two-stage execution
};

} // namespace switchyard::exec

#endif

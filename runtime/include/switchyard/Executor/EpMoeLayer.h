//===- EpMoeLayer.h - one MoE block, experts spread over ranks --*- C++ -*-===//
//
// Expert parallelism on the host: rank r holds the experts of a contiguous block
// (phy2log = identity, experts / ranks per rank, as vLLM's default placement) and the
// tokens of a contiguous slice of the batch. Per layer:
//   1. router GEMM on the local tokens; the logits are all-gathered, so that the
//      compiled policy routes the GLOBAL batch (batch-aware policies - LYNX, XShare,
//      XShare-spec - see every rank's tokens, not a slice); every rank computes the
//      same routing;
//   2. dispatch: each local token's normed row goes once to every rank holding one of
//      its experts (all-to-all with per-peer counts; receivers know the order from the
//      routing, so only rows travel);
//   3. the local experts' FFNs on the received rows (slots of other ranks' experts
//      masked), weighted;
//   4. combine: the partial sums go back to the token's owner, which adds them in rank
//      order after its shared experts: the single-rank result up to float summation
//      order.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_EPMOELAYER_H
#define SWITCHYARD_EXECUTOR_EPMOELAYER_H

#include "switchyard/Comm/Communicator.h"
#include "switchyard/Executor/MoeLayer.h"
#include "switchyard/Runtime/HostPolicy.h"
#include "switchyard/Runtime/PolicyCache.h"

#include <map>

namespace switchyard::exec {

/// Which rank serves which expert: physical slots (phy2log, vLLM's
/// physical_to_logical_map) split over the ranks in contiguous blocks of
/// ceil(slots / ranks); an expert with several replicas serves its tokens in turn
/// (token index modulo its replica count).
struct ExpertPlacement {
  int64_t experts = 0;
  int ranks = 1;
  int64_t version = 0;
  std::vector<int32_t> phy2log;              // [slots]
  std::vector<std::vector<int64_t>> log2phy; // per expert, its slots in ascending order

  /// One slot per expert, expert e in slot e (vLLM's default placement).
  static ExpertPlacement contiguous(int64_t experts, int ranks);
  /// From a plan's phy2log; false when an expert has no slot or an id is out of range.
  static bool fromPhy2Log(const std::vector<int32_t> &phy2log, int64_t experts, int ranks,
                          ExpertPlacement &out, std::string &error);
  int64_t slotsPerRank() const {
    return (static_cast<int64_t>(phy2log.size()) + ranks - 1) / ranks;
  }
  int rankOfSlot(int64_t slot) const { return static_cast<int>(slot / slotsPerRank()); }
  /// The rank that serves `token`'s slot of `expert` (-1 for no expert).
  int rankFor(int32_t expert, int64_t token) const {
    if (expert < 0)
      return -1;
    const std::vector<int64_t> &slots = log2phy[static_cast<size_t>(expert)];
    return rankOfSlot(slots[static_cast<size_t>(token) % slots.size()]);
  }
  bool holds(int rank, int32_t expert) const;
};

/// Where each rank's tokens start: contiguous slices, as the ranks hold them.
struct TokenSlices {
  std::vector<int64_t> begin; // [ranks + 1]
  int owner(int64_t token) const;
};

class EplbRule;

/// Live EPLB (DeepSeek's expert-parallel load balancer): every `window` steps the
/// compiled eplb rule plans a placement from the window's loads; the expert weights a
/// rank newly serves are sent to it by a rank that holds them, at most `bytesPerStep`
/// bytes per step (in a fixed order all ranks agree on); the new placement is published
/// at the first step boundary where every rank has every byte, so no step ever sees a
/// half-moved expert.
struct EplbOptions {
  int64_t window = 0;               // steps per plan; 0: no live balancing
  int64_t slots = 0;                // physical slots (experts + redundant)
  int64_t bytesPerStep = 64 << 20;  // weight bytes moved per step (all transfers)
};

class EpMoeLayer : public Layer {
public:
  EpMoeLayer(std::unique_ptr<MoeLayer> inner, comm::Communicator &comm);
  /// Turns live EPLB on (the rule is shared by the layers).
  void balanceWith(std::shared_ptr<const EplbRule> rule, const EplbOptions &options) {
    eplb = std::move(rule);
    eplbOptions = options;
  }
  int64_t index() const override { return local->index(); }
  const std::vector<float> &postAttentionNorm() const override {
    return local->postAttentionNorm();
  }
  /// x, y: this rank's tokens [T_local, H]; batch: the GLOBAL batch's metadata;
  /// routing: the global routing (the same on every rank).
  bool forward(const float *x, int64_t tokens, const BatchInfo &batch, const Routing *replay,
               Routing &routing, float *y, LayerMetrics &metrics, std::string &error) override;

private:
  /// One expert's weights moving from rank `from` to rank `to`.
  struct Transfer {
    int32_t expert;
    int from, to;
    int64_t bytes;
  };
  /// Weights a rank received: its own copy, and views of it the FFN uses.
  struct OwnedExpert {
    std::vector<uint8_t> bytes;
    model::TensorView views[3];
  };
  /// Advances a pending migration by one bounded chunk; publishes it when every rank has
  /// everything. `moved`: bytes moved in this step (all ranks).
  bool migrateStep(int64_t &moved, std::string &error);
  /// After a step: counts the loads, and at the end of a window plans the next placement.
  bool countAndPlan(const Routing &routing, std::string &error);

  std::unique_ptr<MoeLayer> local;
  comm::Communicator &comm;
  ExpertPlacement placement;
  std::vector<float> localLogits, globalLogits, sendRows, recvRows, partial, back;
  // Live balancing.
  std::shared_ptr<const EplbRule> eplb;
  EplbOptions eplbOptions;
  std::vector<float> loads;           // routed slots per expert over the window
  int64_t stepsInWindow = 0;
  bool migrating = false;
  ExpertPlacement next;
  std::vector<Transfer> transfers;    // the pending migration, in the agreed order
  size_t transfersDone = 0;
  std::map<int32_t, OwnedExpert> owned, incoming;
  std::map<int32_t, FfnWeights> checkpointViews; // what an evicted expert points back to
};

/// The compiled eplb rule (policies/eplb.mlir) for one model and job.
class EplbRule {
public:
  static std::shared_ptr<EplbRule> create(const model::MoeConfig &config, int ranks,
                                          int64_t slots, runtime::PolicyCache &cache,
                                          std::string &error);
  /// The plan for `loads` [E]: a phy2log of `slots` entries.
  bool plan(const std::vector<float> &loads, std::vector<int32_t> &phy2log,
            std::string &error) const;

private:
  std::shared_ptr<runtime::HostPolicy> policy;
};

/// Each rank's token count all-gathered into slices.
bool gatherSlices(comm::Communicator &comm, int64_t localTokens, TokenSlices &slices,
                  std::string &error);

/// Every rank's rows [T_r, width] gathered into out [T, width] in rank order (on every
/// rank).
bool gatherRows(comm::Communicator &comm, const float *mine, int64_t rows, int64_t width,
                const TokenSlices &slices, std::vector<float> &out, std::string &error);

/// Rank r's share of T tokens: [T * r / N, T * (r + 1) / N).
inline std::pair<int64_t, int64_t> tokenSlice(int64_t tokens, int rank, int ranks) {
  return {tokens * rank / ranks, tokens * (rank + 1) / ranks};
}

} // namespace switchyard::exec

#endif

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

namespace switchyard::exec {

/// Which rank holds which expert: contiguous blocks of ceil(E / ranks).
struct ExpertPlacement {
  int64_t experts = 0, ranks = 1;
  int64_t perRank() const { return (experts + ranks - 1) / ranks; }
  int owner(int64_t expert) const { return static_cast<int>(expert / perRank()); }
  bool holds(int rank, int64_t expert) const { return expert >= 0 && owner(expert) == rank; }
};

/// Where each rank's tokens start: contiguous slices, as the ranks hold them.
struct TokenSlices {
  std::vector<int64_t> begin; // [ranks + 1]
  int owner(int64_t token) const;
};

class EpMoeLayer : public Layer {
public:
  EpMoeLayer(std::unique_ptr<MoeLayer> inner, comm::Communicator &comm);
  int64_t index() const override { return local->index(); }
  const std::vector<float> &postAttentionNorm() const override {
    return local->postAttentionNorm();
  }
  /// x, y: this rank's tokens [T_local, H]; batch: the GLOBAL batch's metadata;
  /// routing: the global routing (the same on every rank).
  bool forward(const float *x, int64_t tokens, const BatchInfo &batch, const Routing *replay,
               Routing &routing, float *y, LayerMetrics &metrics, std::string &error) override;

private:
  std::unique_ptr<MoeLayer> local;
  comm::Communicator &comm;
  ExpertPlacement placement;
  std::vector<float> localLogits, globalLogits, sendRows, recvRows, partial, back;
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

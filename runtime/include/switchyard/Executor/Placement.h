//===- Placement.h - where experts and tokens live in an EP job -*- C++ -*-===//
//
// Expert parallelism's two maps: which rank serves each expert (physical slots, vLLM's
// physical_to_logical_map, split over the ranks in contiguous blocks) and which rank
// holds each token (contiguous slices of the global batch), with the collectives that
// assemble the global batch from the slices.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_PLACEMENT_H
#define SWITCHYARD_EXECUTOR_PLACEMENT_H

#include "switchyard/Comm/Communicator.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace switchyard::exec {

/// Which rank serves which expert: physical slots (phy2log) split over the ranks in
/// contiguous blocks of ceil(slots / ranks); an expert with several replicas serves its
/// tokens in turn (token index modulo its replica count).
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
  /// The EPLB/vLLM log2phy table a policy's `!moe.placement` argument binds: [E, R],
  /// R = slots - experts + 1, each row the expert's slots padded with -1.
  std::vector<int32_t> log2phyTable() const;
  int64_t maxReplicas() const { return static_cast<int64_t>(phy2log.size()) - experts + 1; }
};

/// Where each rank's tokens start: contiguous slices, as the ranks hold them.
struct TokenSlices {
  std::vector<int64_t> begin; // [ranks + 1]
  int owner(int64_t token) const;
  int64_t count(int rank) const { return begin[rank + 1] - begin[rank]; }
};

/// The rank holding each global token [T].
std::vector<int32_t> tokenRanks(const TokenSlices &slices);

/// Rank r's share of T tokens: [T * r / N, T * (r + 1) / N).
inline std::pair<int64_t, int64_t> tokenSlice(int64_t tokens, int rank, int ranks) {
  return {tokens * rank / ranks, tokens * (rank + 1) / ranks};
}

/// Each rank's token count all-gathered into slices.
bool gatherSlices(comm::Communicator &comm, int64_t localTokens, TokenSlices &slices,
                  std::string &error);

/// Every rank's rows [T_r, width] gathered into out [T, width] in rank order (on every
/// rank).
template <typename T>
bool gatherRows(comm::Communicator &comm, const T *mine, int64_t rows, int64_t width,
                const TokenSlices &slices, std::vector<T> &out, std::string &error);

} // namespace switchyard::exec

#endif

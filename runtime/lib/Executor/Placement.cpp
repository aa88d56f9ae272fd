//===- Placement.cpp - where experts and tokens live in an EP job ---------===//
#include "switchyard/Executor/Placement.h"

#include <algorithm>

namespace switchyard::exec {

ExpertPlacement ExpertPlacement::contiguous(int64_t experts, int ranks) {
  ExpertPlacement p;
  std::vector<int32_t> identity(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e)
    identity[static_cast<size_t>(e)] = static_cast<int32_t>(e);
  std::string unused;
  fromPhy2Log(identity, experts, ranks, p, unused);
  return p;
}

bool ExpertPlacement::fromPhy2Log(const std::vector<int32_t> &phy2log, int64_t experts,
                                  int ranks, ExpertPlacement &out, std::string &error) {
  out.experts = experts;
  out.ranks = ranks;
  out.phy2log = phy2log;
  out.log2phy.assign(static_cast<size_t>(experts), {});
  for (size_t slot = 0; slot < phy2log.size(); ++slot) {
    int32_t e = phy2log[slot];
    if (e < 0 || e >= experts) {
      error = "placement: slot " + std::to_string(slot) + " holds expert " +
              std::to_string(e) + ", outside [0, " + std::to_string(experts) + ")";
      return false;
    }
    out.log2phy[static_cast<size_t>(e)].push_back(static_cast<int64_t>(slot));
  }
  for (int64_t e = 0; e < experts; ++e)
    if (out.log2phy[static_cast<size_t>(e)].empty()) {
      error = "placement: expert " + std::to_string(e) + " has no slot";
      return false;
    }
  return true;
}

bool ExpertPlacement::holds(int rank, int32_t expert) const {
  if (expert < 0)
    return false;
  for (int64_t slot : log2phy[static_cast<size_t>(expert)])
    if (rankOfSlot(slot) == rank)
      return true;
  return false;
}

std::vector<int32_t> ExpertPlacement::log2phyTable() const {
  const int64_t width = maxReplicas();
  std::vector<int32_t> table(static_cast<size_t>(experts * width), -1);
  for (int64_t e = 0; e < experts; ++e) {
    const std::vector<int64_t> &slots = log2phy[static_cast<size_t>(e)];
    for (size_t r = 0; r < slots.size() && int64_t(r) < width; ++r)
      table[static_cast<size_t>(e * width) + r] = static_cast<int32_t>(slots[r]);
  }
  return table;
}

int TokenSlices::owner(int64_t token) const {
  auto it = std::upper_bound(begin.begin(), begin.end(), token);
  return static_cast<int>(it - begin.begin()) - 1;
}

std::vector<int32_t> tokenRanks(const TokenSlices &slices) {
  std::vector<int32_t> ranks(static_cast<size_t>(slices.begin.back()));
  for (size_t r = 0; r + 1 < slices.begin.size(); ++r)
    std::fill(ranks.begin() + slices.begin[r], ranks.begin() + slices.begin[r + 1],
              static_cast<int32_t>(r));
  return ranks;
}

bool gatherSlices(comm::Communicator &comm, int64_t localTokens, TokenSlices &slices,
                  std::string &error) {
  std::vector<int64_t> counts(static_cast<size_t>(comm.size()));
  if (!comm.allGather(&localTokens, sizeof localTokens, counts.data(), error))
    return false;
  slices.begin.assign(1, 0);
  for (int64_t c : counts)
    slices.begin.push_back(slices.begin.back() + c);
  return true;
}

template <typename T>
bool gatherRows(comm::Communicator &comm, const T *mine, int64_t rows, int64_t width,
                const TokenSlices &slices, std::vector<T> &out, std::string &error) {
  // A padded all-gather: every rank sends max-rows blocks.
  const int n = comm.size();
  int64_t most = 0;
  for (int p = 0; p < n; ++p)
    most = std::max(most, slices.count(p));
  std::vector<T> padded(static_cast<size_t>(most * width), T{});
  std::copy(mine, mine + rows * width, padded.begin());
  std::vector<T> all(static_cast<size_t>(n * most * width));
  if (!comm.allGather(padded.data(), padded.size() * sizeof(T), all.data(), error))
    return false;
  out.resize(static_cast<size_t>(slices.begin[n] * width));
  for (int p = 0; p < n; ++p)
    std::copy_n(all.begin() + p * most * width, slices.count(p) * width,
                out.begin() + slices.begin[p] * width);
  return true;
}

template bool gatherRows<float>(comm::Communicator &, const float *, int64_t, int64_t,
                                const TokenSlices &, std::vector<float> &, std::string &);
template bool gatherRows<int32_t>(comm::Communicator &, const int32_t *, int64_t, int64_t,
                                  const TokenSlices &, std::vector<int32_t> &,
                                  std::string &);

} // namespace switchyard::exec

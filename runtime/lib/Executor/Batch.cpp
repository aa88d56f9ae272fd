//===- Batch.cpp - what the executor knows about the tokens of a batch -----===//
#include "switchyard/Executor/Batch.h"

#include <map>

namespace switchyard::exec {

const char *phaseName(Phase phase) {
  switch (phase) {
  case Phase::Prefill:
    return "prefill";
  case Phase::Decode:
    return "decode";
  case Phase::Mixed:
    return "mixed";
  }
  return "?";
}

bool parsePhase(const std::string &text, Phase &phase) {
  if (text == "prefill")
    phase = Phase::Prefill;
  else if (text == "decode")
    phase = Phase::Decode;
  else if (text == "mixed")
    phase = Phase::Mixed;
  else
    return false;
  return true;
}

bool BatchInfo::derive(const Phase *givenPhase, std::string &error) {
  size_t t = static_cast<size_t>(tokens);
  if (requestIds.empty()) {
    requestIds.resize(t);
    for (size_t i = 0; i < t; ++i)
      requestIds[i] = static_cast<int32_t>(i);
  }
  if (positions.empty())
    positions.assign(t, 0);
  if (requestIds.size() != t || positions.size() != t) {
    error = "--request-ids and --positions need one entry per token (" + std::to_string(t) +
            "), got " + std::to_string(requestIds.size()) + " and " +
            std::to_string(positions.size());
    return false;
  }
  struct Request {
    int64_t count = 0;
    int32_t first = 0, last = 0;
  };
  std::map<int32_t, Request> byId;
  for (size_t i = 0; i < t; ++i) {
    if (requestIds[i] < 0 || positions[i] < 0) {
      error = "token " + std::to_string(i) + ": request id " +
              std::to_string(requestIds[i]) + " and position " +
              std::to_string(positions[i]) + " must be non-negative";
      return false;
    }
    Request &r = byId[requestIds[i]];
    if (r.count > 0 && positions[i] != r.last + 1) {
      error = "token " + std::to_string(i) + " of request " +
              std::to_string(requestIds[i]) + " is at position " +
              std::to_string(positions[i]) + ", expected " + std::to_string(r.last + 1) +
              " (a request's tokens are consecutive, in order)";
      return false;
    }
    if (r.count == 0)
      r.first = positions[i];
    r.last = positions[i];
    ++r.count;
  }
  requests = static_cast<int64_t>(byId.size());
  draftMask.assign(t, 0);
  bool anyPrefill = false, anyDecode = false;
  verifyRequests = 0;
  for (const auto &[id, r] : byId) {
    bool prefill = r.count > 1 && r.first == 0;
    anyPrefill |= prefill;
    anyDecode |= !prefill;
    verifyRequests += r.count > 1 && !prefill;
  }
  for (size_t i = 0; i < t; ++i) {
    const Request &r = byId[requestIds[i]];
    draftMask[i] = r.count > 1 && r.first > 0 && positions[i] != r.first;
  }
  phase = givenPhase                ? *givenPhase
          : anyPrefill && anyDecode ? Phase::Mixed
          : anyPrefill              ? Phase::Prefill
                                    : Phase::Decode;
  return true;
}

} // namespace switchyard::exec

//===- Batch.h - what the executor knows about the tokens of a batch -*- C++ -*-===//
//
// Per-token request ids and positions, the phase (prefill, decode or mixed: given, or
// derived from them) and the speculative-decoding structure (which tokens are draft
// tokens of a verify step). A policy that declares an input with one of these names
// (`phase`, `request_ids`, `positions`, `draft_mask`) gets it bound.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_BATCH_H
#define SWITCHYARD_EXECUTOR_BATCH_H

#include <cstdint>
#include <string>
#include <vector>

namespace switchyard::exec {

/// The phase codes of the policy ABI (Param::values == "phase").
enum class Phase : int32_t { Prefill = 0, Decode = 1, Mixed = 2 };

const char *phaseName(Phase phase);
/// "prefill", "decode" or "mixed"; false otherwise.
bool parsePhase(const std::string &text, Phase &phase);

struct BatchInfo {
  int64_t tokens = 0;
  std::vector<int32_t> requestIds; // [T]
  std::vector<int32_t> positions;  // [T]
  std::vector<uint8_t> draftMask;  // [T]: 1 for a draft token of a verify step
  Phase phase = Phase::Decode;
  int64_t requests = 0, verifyRequests = 0;

  /// Fills what was not given: one request per token at position 0 (a batch of
  /// single-token decode steps) when neither ids nor positions are given, and the
  /// structure derived from them:
  ///  - a request with one token is a decode step; one with several tokens starting
  ///    at position 0 is a prefill; several tokens starting later are a speculative
  ///    verify step (the first is the last accepted token, the rest are drafts) and
  ///    count as decode;
  ///  - the phase is prefill / decode when every request is one, mixed otherwise,
  ///    unless `givenPhase` is set.
  /// A request's tokens must have consecutive positions, in order.
  bool derive(const Phase *givenPhase, std::string &error);
};

} // namespace switchyard::exec

#endif

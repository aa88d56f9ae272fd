//===- BoundCall.cpp - a host entry's call bound once, run per step -------===//
#include "switchyard/Runtime/BoundCall.h"

#include <algorithm>
#include <cstring>

namespace switchyard::runtime {

std::unique_ptr<BoundCall> BoundCall::create(const HostPolicy &policy,
                                             const std::vector<std::string> &inputs,
                                             const std::vector<std::string> &results,
                                             std::string &error) {
  const Signature &sig = policy.signature();
  std::unique_ptr<BoundCall> call(new BoundCall(policy));
  call->inputSlot.assign(sig.params.size(), -1);
  call->resultSlot.assign(sig.params.size(), -1);
  call->numInputs = inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    // A parameter by its ABI name ("placement.log2phy": one part of an input that
    // spans several), else an input by its name.
    int64_t index = -1;
    for (size_t j = 0; j < sig.params.size() && index < 0; ++j)
      if (!sig.params[j].isOutput && sig.params[j].name == inputs[i])
        index = static_cast<int64_t>(j);
    if (index < 0)
      index = sig.findInput(inputs[i]);
    if (index < 0) {
      error = "unknown argument '" + inputs[i] + "' for @" + sig.entry;
      return nullptr;
    }
    const Param &p = sig.params[index];
    if (p.kind == ParamKind::Set) {
      error = "argument '" + inputs[i] + "' (" + spelling(p.kind) +
              ") cannot be bound for a " + "per-step call";
      return nullptr;
    }
    if (call->inputSlot[index] >= 0) {
      error = "argument '" + inputs[i] + "' named twice";
      return nullptr;
    }
    call->inputSlot[index] = static_cast<int>(i);
  }
  for (size_t i = 0; i < sig.params.size(); ++i)
    if (!sig.params[i].isOutput && call->inputSlot[i] < 0) {
      error =
          "missing required argument '" + sig.params[i].inputName() + "' of @" + sig.entry;
      return nullptr;
    }
  for (size_t j = 0; j < results.size(); ++j) {
    int64_t index = -1;
    for (size_t i = 0; i < sig.params.size(); ++i)
      if (sig.params[i].isOutput && sig.params[i].name == results[j])
        index = static_cast<int64_t>(i);
    if (index < 0) {
      error = "unknown result '" + results[j] + "' of @" + sig.entry;
      return nullptr;
    }
    call->resultSlot[index] = static_cast<int>(j);
    call->resultIndex.push_back(static_cast<size_t>(index));
  }
  return call;
}

namespace {
/// Per-thread scratch: one buffer per ABI parameter, grown, never shrunk.
std::vector<std::vector<uint8_t>> &scratch(size_t params) {
  thread_local std::vector<std::vector<uint8_t>> buffers;
  if (buffers.size() < params)
    buffers.resize(params);
  return buffers;
}

void widen(const uint16_t *in, float *out, size_t n, bool bf16) {
  if (bf16) {
    // bfloat16 is the top half of a float32: exact, vectorisable.
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
      std::memcpy(&out[i], &bits, sizeof bits);
    }
  } else {
    for (size_t i = 0; i < n; ++i)
      out[i] = npy::halfToFloat(in[i]);
  }
}
} // namespace

Status BoundCall::run(int64_t tokens, const void *const *inputs, const npy::DType *dtypes,
                      void *const *results, const uint8_t *knobs) const {
  const Signature &sig = policy.signature();
  // Everything checked here is an argument of the call.
  std::string error;
  auto invalid = [&]() { return Status(StatusCode::kInvalidArgument, error); };
  if (tokens < 0 || tokens > kMaxTokens) {
    error = "@" + sig.entry + ": " + std::to_string(tokens) + " tokens is outside [0, " +
            std::to_string(kMaxTokens) + "]";
    return invalid();
  }
  std::vector<std::vector<uint8_t>> &temp = scratch(sig.params.size());
  std::vector<void *> buffers(sig.params.size(), nullptr);
  std::vector<int64_t> scalars(sig.params.size(), 0);
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const Param &p = sig.params[i];
    if (!p.isOutput) {
      int slot = inputSlot[i];
      if (p.kind == ParamKind::Scalar) {
        scalars[i] = *static_cast<const int64_t *>(inputs[slot]);
        continue;
      }
      npy::DType dtype = dtypes[slot];
      bool widened =
          p.dtype == DType::F32 && (dtype == npy::DType::BF16 || dtype == npy::DType::F16);
      // An entry compiled with --input-dtype NAME=bf16 reads the caller's bf16 in place.
      bool exact = (p.dtype == DType::F32 && dtype == npy::DType::F32) ||
                   (p.dtype == DType::I32 && dtype == npy::DType::I32) ||
                   (p.dtype == DType::BF16 && dtype == npy::DType::BF16) ||
                   (p.dtype == DType::F16 && dtype == npy::DType::F16);
      if (!widened && !exact) {
        error = "argument '" + p.name + "': element type " + npy::dtypeName(dtype) +
                " does not match the entry's " + npy::dtypeName(p.dtype) +
                (p.dtype == DType::BF16 || p.dtype == DType::F16
                     ? " (compiled with --input-dtype; narrowing would round)"
                     : "");
        return invalid();
      }
      if (!widened) {
        buffers[i] = const_cast<void *>(inputs[slot]);
        continue;
      }
      std::optional<int64_t> n = p.elementsFor(tokens);
      if (!n) {
        error = "argument '" + p.name + "': too large for " + std::to_string(tokens) +
                " tokens";
        return invalid();
      }
      temp[i].resize(static_cast<size_t>(*n) * sizeof(float));
      widen(static_cast<const uint16_t *>(inputs[slot]),
            reinterpret_cast<float *>(temp[i].data()), static_cast<size_t>(*n),
            dtype == npy::DType::BF16);
      buffers[i] = temp[i].data();
      continue;
    }
    if (resultSlot[i] >= 0) {
      buffers[i] = results[resultSlot[i]];
      continue;
    }
    std::optional<int64_t> n = p.elementsFor(tokens);
    if (!n || *n > kMaxOutputBytes / p.elementBytes()) {
      error =
          "result '" + p.name + "' for " + std::to_string(tokens) + " tokens is too large";
      return invalid();
    }
    temp[i].resize(std::max<size_t>(1, static_cast<size_t>(*n * p.elementBytes())));
    buffers[i] = temp[i].data();
  }
  PackedArguments packed(sig, tokens, buffers, scalars,
                         sig.knobs.empty() ? nullptr : knobs);
  return policy.call(packed);
}

int64_t fillEmptySlots(int32_t *ids, float *weights, int64_t tokens, int64_t k,
                       int64_t experts) {
  auto valid = [experts](int32_t id) { return id >= 0 && id < experts; };
  // The lowest expert the batch routes to (moe.fill_empty_slots' rule), else 0.
  int32_t batchFallback = -1;
  for (int64_t i = 0; i < tokens * k; ++i)
    if (valid(ids[i]) && (batchFallback < 0 || ids[i] < batchFallback))
      batchFallback = ids[i];
  if (batchFallback < 0)
    batchFallback = 0;
  int64_t filled = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t *row = ids + t * k;
    float *w = weights + t * k;
    int32_t own = -1;
    for (int64_t j = 0; j < k && own < 0; ++j)
      if (valid(row[j]))
        own = row[j];
    for (int64_t j = 0; j < k; ++j)
      if (!valid(row[j])) {
        row[j] = own >= 0 ? own : batchFallback;
        w[j] = 0.0f;
        ++filled;
      }
  }
  return filled;
}

} // namespace switchyard::runtime

//===- ModelConfig.h - a model's MoE shape from its config.json -*- C++ -*-===//
//
// Reads the MoE fields of a Hugging Face `config.json` into the values a generic
// policy is bound to (moe::ShapeRequest), naming the file and key of each value so that
// a conflict or an unused value is reported as `config.json: n_group = 8 ...`. The keys
// of each parameter, per model family, are ShapeParameters.def's CONFIG_KEYS
// (experts: num_local_experts | num_experts | n_routed_experts; top_k:
// num_experts_per_tok | experts_per_token; n_group, topk_group (1 and 1 mean none);
// n_shared_experts; hidden_size; routed_scaling_factor; norm_topk_prob).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMPILER_MODELCONFIG_H
#define SWITCHYARD_COMPILER_MODELCONFIG_H

#include "switchyard/Dialect/Moe/Transforms/Specialize.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace switchyard::compiler {

/// Fills `request` from the config file at `path`; false with `error` set when the file
/// cannot be read, is not a JSON object, has a field of the wrong type, gives one value
/// twice with different numbers, or has no expert count.
bool readModelConfig(llvm::StringRef path, moe::ShapeRequest &request, std::string &error);

/// Puts `flag` into `slot`, unless `slot` already holds another value (from the
/// config): then false with `error` naming both.
template <typename T>
bool mergeBound(std::optional<moe::Bound<T>> &slot, const moe::Bound<T> &flag,
                std::string &error) {
  if (slot && slot->value != flag.value) {
    error = flag.source + " conflicts with " + slot->source;
    return false;
  }
  slot = flag;
  return true;
}

} // namespace switchyard::compiler

#endif

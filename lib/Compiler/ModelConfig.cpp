//===- ModelConfig.cpp - a model's MoE shape from its config.json ---------===//
#include "switchyard/Compiler/ModelConfig.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>

using namespace switchyard;
namespace json = llvm::json;

namespace {
/// One config file being read: every error names the file and the key.
struct ConfigReader {
  std::string path;
  const json::Object &object;
  std::string &error;

  std::string source(llvm::StringRef key, const std::string &value) const {
    return path + ": " + key.str() + " = " + value;
  }

  /// The first present key among `keys` (all present ones must agree).
  bool readInt(std::initializer_list<llvm::StringRef> keys,
               std::optional<moe::Bound<int64_t>> &into) {
    for (llvm::StringRef key : keys) {
      const json::Value *v = object.get(key);
      if (!v || v->kind() == json::Value::Null)
        continue;
      std::optional<int64_t> n = v->getAsInteger();
      if (!n) {
        error = path + ": " + key.str() + " must be an integer";
        return false;
      }
      moe::Bound<int64_t> bound{*n, source(key, std::to_string(*n)), /*fromModel=*/true};
      if (into && into->value != *n) {
        error = bound.source + " disagrees with " + into->source;
        return false;
      }
      if (!into)
        into = bound;
    }
    return true;
  }

  bool readNumber(llvm::StringRef key, std::optional<moe::Bound<double>> &into) {
    const json::Value *v = object.get(key);
    if (!v || v->kind() == json::Value::Null)
      return true;
    std::optional<double> d = v->getAsNumber();
    if (!d || !std::isfinite(*d)) {
      error = path + ": " + key.str() + " must be a finite number";
      return false;
    }
    json::Value printed(*d);
    std::string text;
    llvm::raw_string_ostream(text) << printed;
    into = moe::Bound<double>{*d, source(key, text), /*fromModel=*/true};
    return true;
  }

  bool readBool(llvm::StringRef key, std::optional<moe::Bound<bool>> &into) {
    const json::Value *v = object.get(key);
    if (!v || v->kind() == json::Value::Null)
      return true;
    std::optional<bool> b = v->getAsBoolean();
    if (!b) {
      error = path + ": " + key.str() + " must be true or false";
      return false;
    }
    into = moe::Bound<bool>{*b, source(key, *b ? "true" : "false"), /*fromModel=*/true};
    return true;
  }
};
} // namespace

/// The deepest nesting of arrays and objects in JSON text (strings skipped).
/// llvm::json::parse recurses once per level: a config is checked before it is
/// parsed, so that a file of a million '[' is an error, not a stack overflow.
static size_t jsonNesting(llvm::StringRef text) {
  size_t depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i; // the escaped character
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth) {
      --depth;
    }
  }
  return deepest;
}

/// A Hugging Face config nests a few levels (rope_scaling, quantization_config, ...).
constexpr size_t kMaxConfigNesting = 64;

bool host::readModelConfig(llvm::StringRef path, moe::ShapeRequest &request,
                           std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    error = "--model: cannot read '" + path.str() + "': " + buffer.getError().message();
    return false;
  }
  if (jsonNesting((*buffer)->getBuffer()) > kMaxConfigNesting) {
    error = path.str() + ": not a config.json: arrays and objects nest more than " +
            std::to_string(kMaxConfigNesting) + " levels deep";
    return false;
  }
  llvm::Expected<json::Value> parsed = json::parse((*buffer)->getBuffer());
  if (!parsed) {
    error = path.str() + ": not valid JSON: " + llvm::toString(parsed.takeError());
    return false;
  }
  const json::Object *object = parsed->getAsObject();
  if (!object) {
    error = path.str() + ": a config.json holds one JSON object";
    return false;
  }
  ConfigReader r{path.str(), *object, error};
  if (!r.readInt({"num_local_experts", "num_experts", "n_routed_experts"},
                 request.experts) ||
      !r.readInt({"num_experts_per_tok", "experts_per_token"}, request.topK) ||
      !r.readInt({"n_group"}, request.groups) ||
      !r.readInt({"topk_group"}, request.topkGroups) ||
      !r.readInt({"n_shared_experts"}, request.sharedExperts) ||
      !r.readInt({"hidden_size"}, request.hidden) ||
      !r.readNumber("routed_scaling_factor", request.scaling) ||
      !r.readBool("norm_topk_prob", request.normTopkProb))
    return false;
  if (!request.experts) {
    error = path.str() + ": no expert count (num_local_experts, num_experts or "
                         "n_routed_experts): not a MoE model's config";
    return false;
  }
  // One group kept out of one is no grouping (Kimi-K2 writes n_group = topk_group = 1).
  if (request.groups && request.groups->value == 1 &&
      (!request.topkGroups || request.topkGroups->value == 1)) {
    request.groups.reset();
    request.topkGroups.reset();
  }
  // No shared experts is every policy's default.
  if (request.sharedExperts && request.sharedExperts->value == 0)
    request.sharedExperts.reset();
  return true;
}

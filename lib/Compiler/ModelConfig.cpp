//===- ModelConfig.cpp - a model's MoE shape from its config.json ---------===//
#include "switchyard/Compiler/ModelConfig.h"

#include "llvm/ADT/StringExtras.h"
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

  /// `key`'s value as an integer (Int), a finite number (Number) or true/false (Bool):
  /// nullopt with `error` set when it has another type. `text` is how it prints.
  std::optional<int64_t> parse(llvm::StringRef key, const json::Value &v, int64_t *,
                               std::string &text) {
    std::optional<int64_t> n = v.getAsInteger();
    if (!n)
      error = path + ": " + key.str() + " must be an integer";
    else
      text = std::to_string(*n);
    return n;
  }
  std::optional<double> parse(llvm::StringRef key, const json::Value &v, double *,
                              std::string &text) {
    std::optional<double> d = v.getAsNumber();
    if (!d || !std::isfinite(*d)) {
      error = path + ": " + key.str() + " must be a finite number";
      return std::nullopt;
    }
    llvm::raw_string_ostream(text) << json::Value(*d);
    return d;
  }
  std::optional<bool> parse(llvm::StringRef key, const json::Value &v, bool *,
                            std::string &text) {
    std::optional<bool> b = v.getAsBoolean();
    if (!b)
      error = path + ": " + key.str() + " must be true or false";
    else
      text = *b ? "true" : "false";
    return b;
  }

  /// The first present key among `keys` (space-separated: ShapeParameters.def's
  /// CONFIG_KEYS); every present one must agree.
  template <typename T>
  bool read(llvm::StringRef keys, std::optional<moe::Bound<T>> &into) {
    llvm::SmallVector<llvm::StringRef> list;
    keys.split(list, ' ', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
    for (llvm::StringRef key : list) {
      const json::Value *v = object.get(key);
      if (!v || v->kind() == json::Value::Null)
        continue;
      std::string text;
      std::optional<T> value = parse(key, *v, static_cast<T *>(nullptr), text);
      if (!value)
        return false;
      moe::Bound<T> bound{*value, source(key, text), /*fromModel=*/true};
      if (into && into->value != *value) {
        error = bound.source + " disagrees with " + into->source;
        return false;
      }
      if (!into)
        into = bound;
    }
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

bool compiler::readModelConfig(llvm::StringRef path, moe::ShapeRequest &request,
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
  // Every row of ShapeParameters.def with config keys.
#define SHAPE_PARAMETER(FIELD, KIND, NAME, FLAG, VALUE_DESC, CONFIG_KEYS, ...)             \
  if (!r.read(CONFIG_KEYS, request.FIELD))                                                 \
    return false;
#include "switchyard/Dialect/Moe/ShapeParameters.def"
  if (!request.experts) {
    llvm::SmallVector<llvm::StringRef> keys;
    moe::lookupShapeParameter("experts")->configKeys.split(keys, ' ');
    error = path.str() + ": no expert count (" +
            llvm::join(llvm::ArrayRef(keys).drop_back(), ", ") + " or " +
            keys.back().str() + "): not a MoE model's config";
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

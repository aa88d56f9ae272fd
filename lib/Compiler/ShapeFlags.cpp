//===- ShapeFlags.cpp - the tools' shape flags and --model ----------------===//
//
// Kept apart from ToolSetup.cpp: moe-opt registers the shape flags but not --entry /
// --set.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Compiler/ModelConfig.h"
#include "switchyard/Compiler/ToolSetup.h"

#include <cstdio>

namespace cl = llvm::cl;

namespace switchyard::tools {

cl::OptionCategory &category() {
  static cl::OptionCategory options("Switchyard options");
  return options;
}

namespace {
/// The shape a generic policy is bound to (moe-specialize): one flag per row of
/// ShapeParameters.def, named FIELD##Flag (a Bool flag has no value name), and --model,
/// --allow-unused-sizes. Made by registerShapeOptions() (a multi-call binary registers
/// only what the running tool takes).
#define SHAPE_FLAG_VALUE_DESC_Int(VALUE_DESC) , cl::value_desc(VALUE_DESC)
#define SHAPE_FLAG_VALUE_DESC_Number(VALUE_DESC) , cl::value_desc(VALUE_DESC)
#define SHAPE_FLAG_VALUE_DESC_Bool(VALUE_DESC)
struct ShapeOptions {
#define SHAPE_PARAMETER(FIELD, KIND, NAME, FLAG, VALUE_DESC, CONFIG_KEYS, PARAM, USES,     \
                        HELP)                                                              \
  cl::opt<SHAPE_PARAMETER_TYPE(KIND)> FIELD##Flag{                                         \
      FLAG, cl::desc(HELP) SHAPE_FLAG_VALUE_DESC_##KIND(VALUE_DESC), cl::cat(category())};
#include "switchyard/Dialect/Moe/ShapeParameters.def"
  cl::opt<std::string> model{"model",
                             cl::desc("bind the shape of a Hugging Face model "
                                      "(its config.json)"),
                             cl::value_desc("config.json"), cl::cat(category())};
  cl::opt<bool> allowUnused{
      "allow-unused-sizes",
      cl::desc("ignore shape values no policy in the file has a parameter for (what an "
               "engine binding any policy to a model wants), instead of reporting them"),
      cl::cat(category())};
};
#undef SHAPE_FLAG_VALUE_DESC_Int
#undef SHAPE_FLAG_VALUE_DESC_Number
#undef SHAPE_FLAG_VALUE_DESC_Bool
} // namespace

static ShapeOptions &shapeOptions() {
  static ShapeOptions options;
  return options;
}

void registerShapeOptions() { (void)shapeOptions(); }

static std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// How a flag's value is named in diagnostics ("--experts 8", "--scaling 2.5",
/// "--norm-topk-prob=false").
static std::string flagText(const cl::opt<int64_t> &flag) {
  return "--" + flag.ArgStr.str() + " " + std::to_string(flag.getValue());
}
static std::string flagText(const cl::opt<double> &flag) {
  return "--" + flag.ArgStr.str() + " " + formatNumber(flag.getValue());
}
static std::string flagText(const cl::opt<bool> &flag) {
  return "--" + flag.ArgStr.str() + "=" + (flag.getValue() ? "true" : "false");
}

template <typename T>
static bool mergeFlag(std::optional<moe::Bound<T>> &slot, const cl::opt<T> &flag,
                      std::string &error) {
  if (!flag.getNumOccurrences())
    return true;
  return compiler::mergeBound(slot, moe::Bound<T>{flag.getValue(), flagText(flag)}, error);
}

bool shapeRequest(moe::ShapeRequest &request, std::string &error) {
  const ShapeOptions &options = shapeOptions();
  request = moe::ShapeRequest();
  request.allowUnused = options.allowUnused;
  if (!options.model.empty() && !compiler::readModelConfig(options.model, request, error))
    return false;
#define SHAPE_PARAMETER(FIELD, ...)                                                        \
  if (!mergeFlag(request.FIELD, options.FIELD##Flag, error))                               \
    return false;
#include "switchyard/Dialect/Moe/ShapeParameters.def"
  return true;
}

} // namespace switchyard::tools

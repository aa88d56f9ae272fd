//===- ShapeFlags.cpp - the tools' shape flags and --model ----------------===//
//
// Kept apart from ToolSetup.cpp so that moe-opt, which takes the shape flags but not
// --entry / --set, links only these.
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

// The shape a generic policy is bound to (moe-specialize): one flag per row of
// ShapeParameters.def, named FIELD##Flag. A Bool flag has no value name.
#define SHAPE_FLAG_VALUE_DESC_Int(VALUE_DESC) , cl::value_desc(VALUE_DESC)
#define SHAPE_FLAG_VALUE_DESC_Number(VALUE_DESC) , cl::value_desc(VALUE_DESC)
#define SHAPE_FLAG_VALUE_DESC_Bool(VALUE_DESC)
#define SHAPE_PARAMETER(FIELD, KIND, NAME, FLAG, VALUE_DESC, CONFIG_KEYS, PARAM, USES,     \
                        HELP)                                                              \
  static cl::opt<SHAPE_PARAMETER_TYPE(KIND)> FIELD##Flag(                                  \
      FLAG, cl::desc(HELP) SHAPE_FLAG_VALUE_DESC_##KIND(VALUE_DESC), cl::cat(category()));
#include "switchyard/Dialect/Moe/ShapeParameters.def"
#undef SHAPE_FLAG_VALUE_DESC_Int
#undef SHAPE_FLAG_VALUE_DESC_Number
#undef SHAPE_FLAG_VALUE_DESC_Bool

static cl::opt<std::string> model("model",
                                  cl::desc("bind the shape of a Hugging Face model "
                                           "(its config.json)"),
                                  cl::value_desc("config.json"), cl::cat(category()));

static cl::opt<bool> allowUnused(
    "allow-unused-sizes",
    cl::desc(
        "ignore shape values no policy in the file has a parameter for (what an engine "
        "binding any policy to a model wants), instead of reporting them"),
    cl::cat(category()));

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
  request = moe::ShapeRequest();
  request.allowUnused = allowUnused;
  if (!model.empty() && !compiler::readModelConfig(model, request, error))
    return false;
#define SHAPE_PARAMETER(FIELD, ...)                                                        \
  if (!mergeFlag(request.FIELD, FIELD##Flag, error))                                       \
    return false;
#include "switchyard/Dialect/Moe/ShapeParameters.def"
  return true;
}

} // namespace switchyard::tools

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

// The shape a generic policy is bound to (moe-specialize).
static cl::opt<int64_t> experts("experts", cl::desc("bind the number of routed experts E"),
                                cl::value_desc("E"), cl::cat(category()));
static cl::opt<int64_t> topK("top-k", cl::desc("bind the experts per token k"),
                             cl::value_desc("k"), cl::cat(category()));
static cl::opt<int64_t>
    groups("groups", cl::desc("bind the expert groups (moe.group_limit, moe.eplb)"),
           cl::value_desc("n"), cl::cat(category()));
static cl::opt<int64_t> topkGroups("topk-groups",
                                   cl::desc("bind the groups each token keeps"),
                                   cl::value_desc("n"), cl::cat(category()));
static cl::opt<int64_t> devices("devices",
                                cl::desc("bind the devices (GPUs) of a placement or plan"),
                                cl::value_desc("n"), cl::cat(category()));
static cl::opt<int64_t> slots("slots",
                              cl::desc("bind the physical expert slots of a placement "
                                       "(default: E) or an EPLB plan"),
                              cl::value_desc("n"), cl::cat(category()));
static cl::opt<int64_t> nodes("nodes", cl::desc("bind the nodes of an EPLB plan"),
                              cl::value_desc("n"), cl::cat(category()));
static cl::opt<int64_t> hiddenSize("hidden-size",
                                   cl::desc("bind the model's hidden size (moe.gate)"),
                                   cl::value_desc("n"), cl::cat(category()));
static cl::opt<int64_t> sharedExperts("shared-experts", cl::desc("bind the shared experts"),
                                      cl::value_desc("n"), cl::cat(category()));
static cl::opt<double> scaling("scaling", cl::desc("bind the routed scaling factor"),
                               cl::value_desc("x"), cl::cat(category()));
static cl::opt<bool> normTopkProb("norm-topk-prob",
                                  cl::desc("bind renormalization of the top-k weights "
                                           "(--norm-topk-prob=false to turn it off)"),
                                  cl::cat(category()));
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

template <typename T>
static bool mergeFlag(std::optional<moe::Bound<T>> &slot, const cl::opt<T> &flag,
                      const std::string &text, std::string &error) {
  if (!flag.getNumOccurrences())
    return true;
  return host::mergeBound(slot, moe::Bound<T>{flag.getValue(), text}, error);
}

bool shapeRequest(moe::ShapeRequest &request, std::string &error) {
  request = moe::ShapeRequest();
  request.allowUnused = allowUnused;
  if (!model.empty() && !host::readModelConfig(model, request, error))
    return false;
  auto text = [](const cl::opt<int64_t> &flag) {
    return "--" + flag.ArgStr.str() + " " + std::to_string(flag.getValue());
  };
  return mergeFlag(request.experts, experts, text(experts), error) &&
         mergeFlag(request.topK, topK, text(topK), error) &&
         mergeFlag(request.groups, groups, text(groups), error) &&
         mergeFlag(request.topkGroups, topkGroups, text(topkGroups), error) &&
         mergeFlag(request.devices, devices, text(devices), error) &&
         mergeFlag(request.slots, slots, text(slots), error) &&
         mergeFlag(request.nodes, nodes, text(nodes), error) &&
         mergeFlag(request.hidden, hiddenSize, text(hiddenSize), error) &&
         mergeFlag(request.sharedExperts, sharedExperts, text(sharedExperts), error) &&
         mergeFlag(request.scaling, scaling,
                   "--scaling " + formatNumber(scaling.getValue()), error) &&
         mergeFlag(request.normTopkProb, normTopkProb,
                   std::string("--norm-topk-prob=") + (normTopkProb ? "true" : "false"),
                   error);
}

} // namespace switchyard::tools

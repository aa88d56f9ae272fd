//===- MoeConfig.cpp - the MoE blocks of a Hugging Face model -------------===//
#include "switchyard/Model/MoeConfig.h"

#include "switchyard/Runtime/JsonAccess.h"
#include "switchyard/Runtime/UntrustedFile.h"

#include <algorithm>
#include <sys/stat.h>

namespace switchyard::model {

const char *MoeConfig::familyName() const {
  switch (family) {
  case Family::Mixtral:
    return "mixtral";
  case Family::Qwen2Moe:
    return "qwen2_moe";
  case Family::Qwen3Moe:
    return "qwen3_moe";
  case Family::Olmoe:
    return "olmoe";
  case Family::DeepseekV3:
    return "deepseek_v3";
  }
  return "?";
}

std::string MoeConfig::nativePolicy() const {
  return family == Family::DeepseekV3 ? "deepseek_v3" : "topk_softmax";
}

static std::string layerPrefix(int64_t l) {
  return "model.layers." + std::to_string(l) + ".";
}

std::string MoeConfig::routerWeight(int64_t l) const {
  return layerPrefix(l) + (family == Family::Mixtral ? "block_sparse_moe." : "mlp.") +
         "gate.weight";
}

std::string MoeConfig::correctionBias(int64_t l) const {
  return layerPrefix(l) + "mlp.gate.e_score_correction_bias";
}

std::string MoeConfig::expertWeight(int64_t l, int64_t e, const char *proj) const {
  std::string p(proj);
  if (family == Family::Mixtral) // w1: gate, w3: up, w2: down
    return layerPrefix(l) + "block_sparse_moe.experts." + std::to_string(e) + "." +
           (p == "gate" ? "w1"
            : p == "up" ? "w3"
                        : "w2") +
           ".weight";
  return layerPrefix(l) + "mlp.experts." + std::to_string(e) + "." + p + "_proj.weight";
}

std::string MoeConfig::sharedWeight(int64_t l, const char *proj) const {
  return layerPrefix(l) +
         (family == Family::DeepseekV3 ? "mlp.shared_experts." : "mlp.shared_expert.") +
         proj + "_proj.weight";
}

std::string MoeConfig::sharedGateWeight(int64_t l) const {
  return layerPrefix(l) + "mlp.shared_expert_gate.weight";
}

std::string MoeConfig::postAttentionNorm(int64_t l) const {
  return layerPrefix(l) + "post_attention_layernorm.weight";
}

namespace {
using runtime::JsonAccess;
using runtime::Need;

/// config.json's fields through the runtime's type-checked JSON access, with the
/// executor's ranges: sizes in [min, 2^24], scales positive and at most 1e6.
struct Reader {
  const JsonAccess &json;

  bool fail(const char *key, const std::string &what) { return json.fail(key, what); }
  bool has(const char *key) const { return json.has(key); }
  /// `agree`: another spelling of the same value, already read into `out` when
  /// present; the two must be equal.
  bool integer(const char *key, int64_t &out, bool required, int64_t min = 1,
               const char *agree = nullptr) {
    int64_t value = out;
    if (!json.integer(key, value, required ? Need::Required : Need::Optional, min,
                      int64_t(1) << 24))
      return false;
    if (!has(key))
      return true;
    if (agree && has(agree) && value != out)
      return fail(key, "= " + std::to_string(value) + " disagrees with " + agree + " = " +
                           std::to_string(out) + " (two spellings of one value)");
    out = value;
    return true;
  }
  bool number(const char *key, double &out) {
    return json.number(key, out, Need::Optional, 1e-300, 1e6);
  }
  /// A string field; absent or null keeps `out` (the default).
  bool string(const char *key, std::string &out) {
    return json.string(key, out, Need::Optional);
  }
  bool boolean(const char *key, bool &out) {
    return json.boolean(key, out, Need::Optional);
  }
};
} // namespace

bool readMoeConfig(const std::string &path, MoeConfig &config, std::string &error) {
  std::string file = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    file = path + "/config.json";
  // A config is a small regular file: a FIFO would block and /dev/zero never ends.
  nlohmann::json j;
  if (!runtime::parseJsonFile(file, "config.json", runtime::limits::kConfigJson, j,
                              error)) {
    if (stat(file.c_str(), &st) != 0)
      error += " (a Hugging Face checkpoint directory has config.json)";
    return false;
  }
  JsonAccess access(j, file, error);
  Reader r{access};
  MoeConfig c;
  c.path = file;
  std::string modelType;
  if (!r.string("model_type", modelType))
    return false;
  const nlohmann::json *architectures = nullptr;
  if (!access.array("architectures", architectures, Need::Optional))
    return false;
  if (architectures && !architectures->empty()) {
    if (!(*architectures)[0].is_string())
      return r.fail("architectures", "must be an array of strings, got " +
                                         runtime::jsonSnippet(*architectures));
    c.architecture = (*architectures)[0].get<std::string>();
  }
  struct Known {
    const char *architecture, *modelType;
    Family family;
  };
  static const Known known[] = {
      {"MixtralForCausalLM", "mixtral", Family::Mixtral},
      {"Qwen2MoeForCausalLM", "qwen2_moe", Family::Qwen2Moe},
      {"Qwen3MoeForCausalLM", "qwen3_moe", Family::Qwen3Moe},
      {"OlmoeForCausalLM", "olmoe", Family::Olmoe},
      {"DeepseekV3ForCausalLM", "deepseek_v3", Family::DeepseekV3}};
  const Known *match = nullptr;
  for (const Known &k : known)
    if (c.architecture == k.architecture ||
        (c.architecture.empty() && modelType == k.modelType))
      match = &k;
  if (!match) {
    error = file + ": architectures = [\"" + c.architecture + "\"], model_type = \"" +
            modelType +
            "\" is not a MoE model the executor runs (Mixtral, Qwen2-MoE, "
            "Qwen3-MoE, OLMoE, DeepSeek-V3)";
    return false;
  }
  c.family = match->family;
  if (!c.architecture.empty() && !modelType.empty() && modelType != match->modelType)
    return r.fail("model_type", "= \"" + modelType + "\" contradicts architectures = [\"" +
                                    c.architecture + "\"]");
  if (!r.integer("hidden_size", c.hidden, true) ||
      !r.integer("num_hidden_layers", c.layers, true) ||
      !r.integer("num_experts_per_tok", c.topK, true) ||
      !r.number("rms_norm_eps", c.rmsNormEps))
    return false;
  // transformers 5 writes "dtype", earlier versions "torch_dtype" (metadata only).
  if (!r.string("dtype", c.torchDtype) ||
      (c.torchDtype.empty() && !r.string("torch_dtype", c.torchDtype)))
    return false;
  // The expert count has two spellings: the family's own key (what the hub's
  // checkpoints have) and transformers' standard name for it (its attribute_map): the
  // Qwen3MoeConfig of transformers 5 saves num_experts as num_local_experts, OLMoE's
  // and DeepSeek-V3's read num_local_experts, Mixtral's reads num_experts (Qwen2-MoE's
  // has no alias yet; num_local_experts is accepted there too). Either spelling is
  // accepted; where a config has both, they must agree.
  const char *expertsKey = c.family == Family::Mixtral      ? "num_local_experts"
                           : c.family == Family::DeepseekV3 ? "n_routed_experts"
                                                            : "num_experts";
  const char *expertsAlias =
      c.family == Family::Mixtral ? "num_experts" : "num_local_experts";
  if (!r.has(expertsKey) && !r.has(expertsAlias))
    return r.fail(expertsKey, std::string("(or ") + expertsAlias + ") is missing");
  if (!r.integer(expertsKey, c.experts, false) ||
      !r.integer(expertsAlias, c.experts, false, 1, /*agree=*/expertsKey))
    return false;
  // OLMoE, like Mixtral, sizes its experts with intermediate_size.
  const char *widthKey = c.family == Family::Mixtral || c.family == Family::Olmoe
                             ? "intermediate_size"
                             : "moe_intermediate_size";
  if (!r.integer(widthKey, c.expertIntermediate, true))
    return false;
  if (c.topK > c.experts)
    return r.fail("num_experts_per_tok", "= " + std::to_string(c.topK) +
                                             " is more than the " +
                                             std::to_string(c.experts) + " experts");
  c.normTopkProb = c.family == Family::Mixtral || c.family == Family::DeepseekV3 ||
                   c.family == Family::Qwen3Moe;
  if (c.family != Family::Mixtral && !r.boolean("norm_topk_prob", c.normTopkProb))
    return false;
  std::vector<int64_t> mlpOnly;
  int64_t sparseStep = 1, firstDense = 0, moeFreq = 1;
  switch (c.family) {
  case Family::Qwen2Moe:
    if (!r.integer("shared_expert_intermediate_size", c.sharedIntermediate, false, 0))
      return false;
    c.sharedExpertGate = c.sharedIntermediate > 0;
    [[fallthrough]];
  case Family::Qwen3Moe: {
    if (!r.integer("decoder_sparse_step", sparseStep, false))
      return false;
    const nlohmann::json *layers = nullptr;
    if (!access.array("mlp_only_layers", layers, Need::Optional))
      return false;
    if (layers) {
      for (const nlohmann::json &l : *layers) {
        if (!l.is_number_integer())
          return r.fail("mlp_only_layers", "must be an array of layer indices");
        mlpOnly.push_back(l.get<int64_t>());
      }
    }
    break;
  }
  case Family::DeepseekV3: {
    int64_t shared = 0;
    if (!r.integer("n_shared_experts", shared, false, 0) ||
        !r.integer("n_group", c.groups, false) ||
        !r.integer("topk_group", c.topkGroups, false) ||
        !r.number("routed_scaling_factor", c.routedScaling) ||
        !r.integer("first_k_dense_replace", firstDense, false, 0) ||
        !r.integer("moe_layer_freq", moeFreq, false))
      return false;
    c.sharedIntermediate = shared * c.expertIntermediate;
    c.sigmoidScoring = true;
    std::string scoring = "sigmoid";
    if (!r.string("scoring_func", scoring))
      return false;
    if (scoring != "sigmoid")
      return r.fail("scoring_func",
                    "= \"" + scoring + "\": DeepSeek-V3 routing scores with sigmoid");
    if (c.experts % c.groups != 0 || c.topkGroups > c.groups)
      return r.fail("n_group", "= " + std::to_string(c.groups) + " must divide the " +
                                   std::to_string(c.experts) +
                                   " experts and be >= topk_group");
    // The kept groups must hold the top-k, else every token gets empty slots.
    if (c.topK > c.topkGroups * (c.experts / c.groups))
      return r.fail("num_experts_per_tok",
                    "= " + std::to_string(c.topK) + " is more than the " +
                        std::to_string(c.topkGroups * (c.experts / c.groups)) +
                        " experts of the topk_group = " + std::to_string(c.topkGroups) +
                        " kept groups (n_group = " + std::to_string(c.groups) + ")");
    break;
  }
  default:
    break;
  }
  std::sort(mlpOnly.begin(), mlpOnly.end()); // one lookup per layer: log, not linear
  for (int64_t l = 0; l < c.layers; ++l) {
    bool moe = c.family == Family::DeepseekV3
                   ? l >= firstDense && l % moeFreq == 0
                   : !std::binary_search(mlpOnly.begin(), mlpOnly.end(), l) &&
                         (l + 1) % sparseStep == 0;
    if (moe)
      c.moeLayers.push_back(l);
  }
  if (c.moeLayers.empty())
    return r.fail("num_hidden_layers",
                  "= " + std::to_string(c.layers) + ": no layer has a MoE block");
  config = std::move(c);
  return true;
}

} // namespace switchyard::model

//===- MoeConfig.cpp - the MoE blocks of a Hugging Face model -------------===//
#include "switchyard/Model/MoeConfig.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
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
/// The largest config.json read (the hub's biggest are a few KiB).
constexpr off_t kMaxConfigBytes = off_t(16) << 20;

struct Reader {
  const nlohmann::json &j;
  std::string file;
  std::string &error;

  bool fail(const std::string &key, const std::string &what) {
    error = file + ": " + key + " " + what;
    return false;
  }
  bool has(const char *key) const { return j.contains(key) && !j[key].is_null(); }
  /// `agree`: another spelling of the same value, already read into `out` when
  /// present; the two must be equal.
  bool integer(const char *key, int64_t &out, bool required, int64_t min = 1,
               const char *agree = nullptr) {
    if (!has(key))
      return required ? fail(key, "is missing") : true;
    if (!j[key].is_number_integer())
      return fail(key, "must be an integer, got " + j[key].dump());
    int64_t value = j[key].get<int64_t>();
    if (value < min || value > (int64_t(1) << 24))
      return fail(key, "= " + std::to_string(value) + " is outside [" +
                           std::to_string(min) + ", 16777216]");
    if (agree && has(agree) && value != out)
      return fail(key, "= " + std::to_string(value) + " disagrees with " + agree + " = " +
                           std::to_string(out) + " (two spellings of one value)");
    out = value;
    return true;
  }
  bool number(const char *key, double &out) {
    if (!has(key))
      return true;
    if (!j[key].is_number())
      return fail(key, "must be a number, got " + j[key].dump());
    out = j[key].get<double>();
    if (!(out > 0) || out > 1e6)
      return fail(key, "= " + j[key].dump() + " must be positive");
    return true;
  }
  /// A string field; absent or null keeps `out` (the default).
  bool string(const char *key, std::string &out) {
    if (!has(key))
      return true;
    if (!j[key].is_string())
      return fail(key, "must be a string, got " + j[key].dump());
    out = j[key].get<std::string>();
    return true;
  }
  bool boolean(const char *key, bool &out) {
    if (!has(key))
      return true;
    if (!j[key].is_boolean())
      return fail(key, "must be true or false, got " + j[key].dump());
    out = j[key].get<bool>();
    return true;
  }
};
} // namespace

bool readMoeConfig(const std::string &path, MoeConfig &config, std::string &error) {
  std::string file = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    file = path + "/config.json";
  // A config is a small regular file: a FIFO would block and /dev/zero never ends.
  if (stat(file.c_str(), &st) == 0 &&
      (!S_ISREG(st.st_mode) || st.st_size > kMaxConfigBytes)) {
    error = file + (S_ISREG(st.st_mode) ? ": " + std::to_string(st.st_size) +
                                              " bytes, more than a config.json has (16 MiB)"
                                        : ": not a regular file");
    return false;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    error =
        "cannot open '" + file + "' (a Hugging Face checkpoint directory has config.json)";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    error = file + ": not a JSON object";
    return false;
  }
  Reader r{j, file, error};
  MoeConfig c;
  c.path = file;
  std::string modelType;
  if (!r.string("model_type", modelType))
    return false;
  if (j.contains("architectures") && j["architectures"].is_array() &&
      !j["architectures"].empty() && j["architectures"][0].is_string())
    c.architecture = j["architectures"][0].get<std::string>();
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
  case Family::Qwen3Moe:
    if (!r.integer("decoder_sparse_step", sparseStep, false))
      return false;
    if (r.has("mlp_only_layers")) {
      if (!j["mlp_only_layers"].is_array())
        return r.fail("mlp_only_layers", "must be an array of layer indices");
      for (const nlohmann::json &l : j["mlp_only_layers"]) {
        if (!l.is_number_integer())
          return r.fail("mlp_only_layers", "must be an array of layer indices");
        mlpOnly.push_back(l.get<int64_t>());
      }
    }
    break;
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

//===- MoeConfig.h - the MoE blocks of a Hugging Face model -----*- C++ -*-===//
//
// What the executor needs from a checkpoint's config.json: the model family (from
// `architectures` / `model_type`), the MoE sizes, which decoder layers have a MoE block
// (DeepSeek-V3's first_k_dense_replace, Qwen's decoder_sparse_step / mlp_only_layers),
// the native routing, and the exact tensor names each family uses:
//
//   Mixtral        model.layers.L.block_sparse_moe.{gate, experts.E.{w1,w3,w2}}.weight
//   Qwen2/3-MoE,   model.layers.L.mlp.{gate, experts.E.{gate,up,down}_proj}.weight
//   OLMoE          (+ Qwen2-MoE: mlp.shared_expert.*, mlp.shared_expert_gate.weight)
//   DeepSeek-V3    model.layers.L.mlp.{gate.weight, gate.e_score_correction_bias,
//                  experts.E.*, shared_experts.*}
//   every family   model.layers.L.post_attention_layernorm.weight
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MODEL_MOECONFIG_H
#define SWITCHYARD_MODEL_MOECONFIG_H

#include <cstdint>
#include <string>
#include <vector>

namespace switchyard::model {

enum class Family { Mixtral, Qwen2Moe, Qwen3Moe, Olmoe, DeepseekV3 };

struct MoeConfig {
  Family family = Family::Mixtral;
  std::string architecture; // "MixtralForCausalLM", ...
  std::string path;         // the config.json read
  int64_t hidden = 0, layers = 0, experts = 0, topK = 0;
  int64_t expertIntermediate = 0; // one routed expert's FFN width
  int64_t sharedIntermediate = 0; // the shared expert(s) FFN width; 0: none
  bool sharedExpertGate = false;  // Qwen2-MoE: sigmoid(x . w) scales the shared expert
  bool normTopkProb = true;
  bool sigmoidScoring = false; // DeepSeek-V3: sigmoid scores + correction bias
  int64_t groups = 1, topkGroups = 1;
  double routedScaling = 1.0;
  double rmsNormEps = 1e-6;
  std::vector<int64_t> moeLayers; // checkpoint layer indices with a MoE block
  // The weights' dtype as config.json writes it ("dtype" / "torch_dtype"); "" if absent.
  std::string torchDtype;

  /// The shipped policy that is this model's own routing: "topk_softmax" (softmax,
  /// top-k, renormalized per norm_topk_prob) or "deepseek_v3".
  std::string nativePolicy() const;
  const char *familyName() const;

  // Tensor names of layer `l` (expert `e`).
  std::string routerWeight(int64_t l) const;
  std::string correctionBias(int64_t l) const;
  std::string expertWeight(int64_t l, int64_t e, const char *proj) const; // gate|up|down
  std::string sharedWeight(int64_t l, const char *proj) const;
  std::string sharedGateWeight(int64_t l) const;
  std::string postAttentionNorm(int64_t l) const;
};

/// Reads DIR/config.json (or a config.json path); false with a message naming the file
/// and key when it is unreadable, not a supported MoE architecture, or inconsistent.
bool readMoeConfig(const std::string &path, MoeConfig &config, std::string &error);

} // namespace switchyard::model

#endif

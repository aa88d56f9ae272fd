//===- TinyCheckpoint.h - a Mixtral-layout checkpoint written by a test -*- C++ -*-===//
//
// Random float32 or bfloat16 expert weights in a temporary directory (config.json +
// model.safetensors), and the values as the layers see them (bf16 rounded), for tests
// that compare a layer with its definition.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_UNITTESTS_TINYCHECKPOINT_H
#define SWITCHYARD_UNITTESTS_TINYCHECKPOINT_H

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace switchyard::unittest {

struct TinyCheckpoint {
  std::string dir;
  std::map<std::string, std::vector<float>> tensors; // as the layer sees them (rounded)
  int64_t hidden, inter, experts, layers;

  explicit TinyCheckpoint(bool bf16, int64_t layers = 1, int64_t hidden = 16,
                          int64_t inter = 8, int64_t experts = 4, unsigned seed = 7)
      : hidden(hidden), inter(inter), experts(experts), layers(layers) {
    char name[] = "/tmp/switchyard-layer-XXXXXX";
    dir = mkdtemp(name);
    std::ofstream(dir + "/config.json")
        << R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral",)"
        << R"("hidden_size":)" << hidden << R"(,"intermediate_size":)" << inter
        << R"(,"num_hidden_layers":)" << layers << R"(,"num_local_experts":)" << experts
        << R"(,"num_experts_per_tok":2,"rms_norm_eps":1e-5})";
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    std::string header = "{", data;
    auto add = [&](const std::string &tensor, std::vector<int64_t> shape, bool router) {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      std::vector<float> values(static_cast<size_t>(n));
      bool half = bf16 && !router;
      size_t begin = data.size();
      for (float &v : values) {
        v = normal(rng);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        if (half) { // truncate to bfloat16 (what the layer will widen back exactly)
          bits &= 0xffff0000u;
          std::memcpy(&v, &bits, 4);
          data.append(reinterpret_cast<const char *>(&bits) + 2, 2);
        } else {
          data.append(reinterpret_cast<const char *>(&v), 4);
        }
      }
      tensors[tensor] = values;
      header += (header.size() > 1 ? "," : "") + std::string("\"") + tensor +
                "\":{\"dtype\":\"" + (half ? "BF16" : "F32") + "\",\"shape\":[" +
                std::to_string(shape[0]) +
                (shape.size() > 1 ? "," + std::to_string(shape[1]) : "") +
                "],\"data_offsets\":[" + std::to_string(begin) + "," +
                std::to_string(data.size()) + "]}";
    };
    for (int64_t l = 0; l < layers; ++l) {
      std::string p = "model.layers." + std::to_string(l) + ".";
      add(p + "post_attention_layernorm.weight", {hidden}, true);
      add(p + "block_sparse_moe.gate.weight", {experts, hidden}, true);
      for (int64_t e = 0; e < experts; ++e) {
        std::string x = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
        add(x + "w1.weight", {inter, hidden}, false);
        add(x + "w3.weight", {inter, hidden}, false);
        add(x + "w2.weight", {hidden, inter}, false);
      }
    }
    header += "}";
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
      bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    std::ofstream(dir + "/model.safetensors", std::ios::binary) << bytes << header << data;
  }
  ~TinyCheckpoint() {
    std::remove((dir + "/config.json").c_str());
    std::remove((dir + "/model.safetensors").c_str());
    rmdir(dir.c_str());
  }
  /// Expert e's (w1, w3, w2) of layer l as the layer sees them.
  const std::vector<float> &weight(int64_t l, int64_t e, const char *w) const {
    return tensors.at("model.layers." + std::to_string(l) + ".block_sparse_moe.experts." +
                      std::to_string(e) + "." + w + ".weight");
  }
};

} // namespace switchyard::unittest

#endif

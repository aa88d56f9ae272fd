//===- MoeConfigTest.cpp - config.json as the hub and transformers write it ---===//
//
// readMoeConfig takes each family's expert count under the hub's key and under the key
// transformers saves or reads (Qwen3MoeConfig of transformers 5.19-5.24 saves
// num_experts as num_local_experts); both present must agree; none is an error.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Model/MoeConfig.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace switchyard;

namespace {

struct Spelling {
  const char *architecture, *modelType, *key, *alias, *width;
};

// The hub's key first, then transformers' other spelling of the expert count.
const Spelling kFamilies[] = {
    {"MixtralForCausalLM", "mixtral", "num_local_experts", "num_experts", "intermediate_size"},
    {"Qwen2MoeForCausalLM", "qwen2_moe", "num_experts", "num_local_experts",
     "moe_intermediate_size"},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "num_experts", "num_local_experts",
     "moe_intermediate_size"},
    {"OlmoeForCausalLM", "olmoe", "num_experts", "num_local_experts", "intermediate_size"},
    {"DeepseekV3ForCausalLM", "deepseek_v3", "n_routed_experts", "num_local_experts",
     "moe_intermediate_size"},
};

class ConfigDir {
public:
  ConfigDir() {
    char name[] = "/tmp/switchyard-config-XXXXXX";
    dir = mkdtemp(name);
  }
  ~ConfigDir() {
    std::remove((dir + "/config.json").c_str());
    rmdir(dir.c_str());
  }
  /// Writes config.json with `counts` ("\"key\": 8, ...") and reads it back.
  bool read(const Spelling &f, const std::string &counts, model::MoeConfig &config,
            std::string &error) {
    std::ofstream(dir + "/config.json")
        << "{\"architectures\": [\"" << f.architecture << "\"], \"model_type\": \""
        << f.modelType << "\", \"hidden_size\": 16, \"num_hidden_layers\": 2, \"" << f.width
        << "\": 8, \"num_experts_per_tok\": 2" << (counts.empty() ? "" : ", ") << counts
        << "}";
    return model::readMoeConfig(dir, config, error);
  }
  std::string file() const { return dir + "/config.json"; }

private:
  std::string dir;
};

std::string count(const char *key, int n) {
  return std::string("\"") + key + "\": " + std::to_string(n);
}

TEST(MoeConfig, ExpertCountUnderEitherSpelling) {
  for (const Spelling &f : kFamilies) {
    SCOPED_TRACE(f.modelType);
    ConfigDir d;
    model::MoeConfig config;
    std::string error;
    ASSERT_TRUE(d.read(f, count(f.key, 8), config, error)) << error;
    EXPECT_EQ(config.experts, 8);
    ASSERT_TRUE(d.read(f, count(f.alias, 6), config, error)) << error;
    EXPECT_EQ(config.experts, 6);
    ASSERT_TRUE(d.read(f, count(f.key, 4) + ", " + count(f.alias, 4), config, error)) << error;
    EXPECT_EQ(config.experts, 4);
  }
}

TEST(MoeConfig, ExpertCountErrorsNameFileAndKey) {
  for (const Spelling &f : kFamilies) {
    SCOPED_TRACE(f.modelType);
    ConfigDir d;
    model::MoeConfig config;
    std::string error;
    EXPECT_FALSE(d.read(f, count(f.key, 8) + ", " + count(f.alias, 16), config, error));
    EXPECT_EQ(error, d.file() + ": " + f.alias + " = 16 disagrees with " + f.key +
                         " = 8 (two spellings of one value)");
    EXPECT_FALSE(d.read(f, "", config, error));
    EXPECT_EQ(error, d.file() + ": " + f.key + " (or " + f.alias + ") is missing");
    EXPECT_FALSE(d.read(f, std::string("\"") + f.alias + "\": \"8\"", config, error));
    EXPECT_EQ(error, d.file() + ": " + f.alias + " must be an integer, got \"8\"");
    EXPECT_FALSE(d.read(f, count(f.alias, 0), config, error));
    EXPECT_EQ(error, d.file() + ": " + f.alias + " = 0 is outside [1, 16777216]");
    // A null spelling is an absent one (transformers writes null for unset values).
    ASSERT_TRUE(d.read(f, count(f.key, 8) + ", \"" + f.alias + "\": null", config, error))
        << error;
    EXPECT_EQ(config.experts, 8);
  }
}

} // namespace

//===- MoeConfigTest.cpp - config.json as the hub and transformers write it ---===//
//
// readMoeConfig takes each family's expert count under the hub's key and under the key
// transformers saves or reads (Qwen3MoeConfig of transformers 5.19-5.24 saves
// num_experts as num_local_experts); both present must agree; none is an error. A
// config it cannot trust (a field of the wrong type, a top-k the kept groups cannot
// hold, no regular file, a huge file, a huge mlp_only_layers) is an error naming the
// file and key, never an exception, a hang or a silent fallback.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Model/MoeConfig.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace moe_config_test {

using namespace switchyard;

namespace {

struct Spelling {
  const char *architecture, *modelType, *key, *alias, *width;
};

// The hub's key first, then transformers' other spelling of the expert count.
const Spelling kFamilies[] = {
    {"MixtralForCausalLM", "mixtral", "num_local_experts", "num_experts",
     "intermediate_size"},
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
  /// Writes config.json as `text` and reads it back.
  bool readText(const std::string &text, model::MoeConfig &config, std::string &error) {
    std::ofstream(dir + "/config.json") << text;
    return model::readMoeConfig(dir, config, error);
  }
  std::string file() const { return dir + "/config.json"; }
  const std::string &path() const { return dir; }

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
    ASSERT_TRUE(d.read(f, count(f.key, 4) + ", " + count(f.alias, 4), config, error))
        << error;
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

TEST(MoeConfig, FieldsOfTheWrongTypeAreErrorsNotExceptions) {
  ConfigDir d;
  model::MoeConfig config;
  std::string error;
  const std::string mixtral = "\"hidden_size\": 16, \"num_hidden_layers\": 2, "
                              "\"intermediate_size\": 8, \"num_experts_per_tok\": 2, "
                              "\"num_local_experts\": 8";
  EXPECT_FALSE(d.readText("{\"model_type\": 7, " + mixtral + "}", config, error));
  EXPECT_EQ(error, d.file() + ": model_type must be a string, got 7");
  EXPECT_FALSE(
      d.readText("{\"model_type\": [\"mixtral\"], " + mixtral + "}", config, error));
  EXPECT_EQ(error, d.file() + ": model_type must be a string, got [\"mixtral\"]");
  // null is unset: the architecture decides.
  EXPECT_TRUE(
      d.readText("{\"architectures\": [\"MixtralForCausalLM\"], \"model_type\": null, " +
                     mixtral + "}",
                 config, error))
      << error;
  const std::string deepseek = "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 16, "
                               "\"num_hidden_layers\": 2, \"moe_intermediate_size\": 8, "
                               "\"num_experts_per_tok\": 2, \"n_routed_experts\": 8, ";
  EXPECT_FALSE(d.readText(deepseek + "\"scoring_func\": 1}", config, error));
  EXPECT_EQ(error, d.file() + ": scoring_func must be a string, got 1");
  EXPECT_FALSE(d.readText(deepseek + "\"scoring_func\": \"softmax\"}", config, error));
  EXPECT_NE(error.find("scoring_func = \"softmax\""), std::string::npos) << error;
}

TEST(MoeConfig, DeepseekTopKBeyondTheKeptGroupsIsAnError) {
  ConfigDir d;
  model::MoeConfig config;
  std::string error;
  const std::string head = "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 16, "
                           "\"num_hidden_layers\": 2, \"moe_intermediate_size\": 8, "
                           "\"n_routed_experts\": 16, \"n_group\": 4, \"topk_group\": 1, ";
  // 1 kept group of 4 experts cannot give 8: every token would get empty slots.
  EXPECT_FALSE(d.readText(head + "\"num_experts_per_tok\": 8}", config, error));
  EXPECT_EQ(error, d.file() + ": num_experts_per_tok = 8 is more than the 4 experts of the "
                              "topk_group = 1 kept groups (n_group = 4)");
  EXPECT_TRUE(d.readText(head + "\"num_experts_per_tok\": 4}", config, error)) << error;
}

TEST(MoeConfig, ManyMlpOnlyLayersAreReadInLinearTime) {
  // 100k mlp_only_layers over 2^20 layers: a lookup per layer that scanned the list
  // would take 10^11 steps (the test would time out).
  std::string layers;
  for (int l = 0; l < 100000; ++l)
    layers += (l ? "," : "") + std::to_string(2 * l);
  ConfigDir d;
  model::MoeConfig config;
  std::string error;
  ASSERT_TRUE(d.readText("{\"model_type\": \"qwen3_moe\", \"hidden_size\": 16, "
                         "\"num_hidden_layers\": 1048576, \"moe_intermediate_size\": 8, "
                         "\"num_experts_per_tok\": 2, \"num_experts\": 8, "
                         "\"mlp_only_layers\": [" +
                             layers + "]}",
                         config, error))
      << error;
  EXPECT_EQ(config.moeLayers.size(), size_t(1048576 - 100000));
  EXPECT_EQ(config.moeLayers.front(), 1);
}

TEST(MoeConfig, OnlyASmallRegularFileIsRead) {
  ConfigDir d;
  model::MoeConfig config;
  std::string error;
  // A FIFO would block the reader forever.
  ASSERT_EQ(mkfifo(d.file().c_str(), 0600), 0);
  EXPECT_FALSE(model::readMoeConfig(d.path(), config, error));
  EXPECT_EQ(error, d.file() + ": not a regular file");
  std::remove(d.file().c_str());
  // More than any config.json has (16 MiB): refused before reading.
  {
    std::ofstream big(d.file());
    big << "{\"pad\": \"" << std::string(17 << 20, 'x') << "\"}";
  }
  EXPECT_FALSE(model::readMoeConfig(d.path(), config, error));
  EXPECT_NE(error.find("more than a config.json has (16 MiB)"), std::string::npos) << error;
}

} // namespace

} // namespace moe_config_test

//===- moe-exec.cpp - run the MoE layers of a checkpoint with a compiled policy ===//
//
//   moe-exec MODEL_DIR --input hidden.npy --out DIR [--policy P.mlir] [--entry NAME]
//            [--set knob=v ...] [--request-ids r.npy] [--positions p.npy]
//            [--phase prefill|decode|mixed] [--layers A:B] [--block-only]
//            [--replay DIR] [--device host] [--repeat N]
//
// Writes DIR/hidden.npy (the stack h <- h + MoE_l(RMSNorm_l(h))) or, with --block-only,
// DIR/block_<l>.npy (each MoE block on the same input), DIR/topk_ids_<l>.npy,
// DIR/topk_weights_<l>.npy and DIR/metrics.json; prints one line per layer.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Executor/Executor.h"
#include "switchyard/Runtime/Npy.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

using namespace switchyard;

namespace {

const char *kUsage =
    "usage: moe-exec MODEL_DIR --input hidden.npy --out DIR [options]\n"
    "  --policy P.mlir        routing policy (default: the model's native routing)\n"
    "  --entry NAME           the router in the policy file\n"
    "  --set knob=value       a run-time knob of the policy (repeatable)\n"
    "  --request-ids r.npy    int32 [T] request of each token\n"
    "  --positions p.npy      int32 [T] position of each token in its request\n"
    "  --phase P              prefill | decode | mixed (default: derived)\n"
    "  --layers A:B           checkpoint layers A <= l < B (default: all)\n"
    "  --block-only           each MoE block on the same input: DIR/block_<l>.npy\n"
    "  --replay DIR           replay the routing recorded in DIR/topk_{ids,weights}_<l>.npy\n"
    "  --device host          where to run (host)\n"

    "  --repeat N             run N times, report the fastest (timing)\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "moe-exec: error: %s\n", message.c_str());
  return 1;
}

bool readInt32s(const std::string &path, const std::string &flag, int64_t tokens,
                std::vector<int32_t> &out, std::string &error) {
  npy::Array a;
  std::string what = flag + " (" + path + ")";
  if (!npy::load(path, what, a, error) || !npy::toInt32(a, what, out, error))
    return false;
  if (a.shape.size() != 1 || a.shape[0] != tokens) {
    error = what + ": expected shape (" + std::to_string(tokens) + ",), got " +
            npy::formatShape(a.shape);
    return false;
  }
  return true;
}

bool parseRange(const std::string &text, int64_t &first, int64_t &last) {
  size_t colon = text.find(':');
  if (colon == std::string::npos)
    return false;
  char *end = nullptr;
  std::string a = text.substr(0, colon), b = text.substr(colon + 1);
  first = a.empty() ? 0 : std::strtoll(a.c_str(), &end, 10);
  if (!a.empty() && *end)
    return false;
  last = b.empty() ? -1 : std::strtoll(b.c_str(), &end, 10);
  return b.empty() || !*end;
}

bool writeArray(const std::string &path, const npy::Array &a, std::string &error) {
  return npy::save(path, a, error);
}

} // namespace

int main(int argc, char **argv) {
  exec::ExecutorOptions options;
  std::string input, out, requestIdsPath, positionsPath, phaseText, replayDir;
  bool blockOnly = false;
  int64_t repeat = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &slot) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "moe-exec: error: %s needs a value\n%s", a.c_str(), kUsage);
        std::exit(1);
      }
      slot = argv[++i];
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--input") {
      value(input);
    } else if (a == "--out") {
      value(out);
    } else if (a == "--policy") {
      value(options.policyPath);
    } else if (a == "--entry") {
      value(options.entry);
    } else if (a == "--set") {
      value(v);
      if (v.find('=') == std::string::npos)
        return fail("--set '" + v + "' is not of the form knob=value");
      options.knobSettings.push_back(v);
    } else if (a == "--request-ids") {
      value(requestIdsPath);
    } else if (a == "--positions") {
      value(positionsPath);
    } else if (a == "--phase") {
      value(phaseText);
    } else if (a == "--layers") {
      value(v);
      if (!parseRange(v, options.firstLayer, options.lastLayer))
        return fail("--layers '" + v + "' is not A:B (checkpoint layer indices, A <= l < B)");
    } else if (a == "--block-only") {
      blockOnly = true;
    } else if (a == "--replay") {
      value(replayDir);
    } else if (a == "--device") {
      value(options.device);

    } else if (a == "--repeat") {
      value(v);
      char *end = nullptr;
      repeat = std::strtoll(v.c_str(), &end, 10);
      if (*end || repeat < 1 || repeat > 100000)
        return fail("--repeat '" + v + "' is not an integer in [1, 100000]");
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "'\n" + kUsage);
    } else if (options.modelDir.empty()) {
      options.modelDir = a;
    } else {
      return fail("unexpected argument '" + a + "' (one MODEL_DIR)\n" + kUsage);
    }
  }
  if (options.modelDir.empty() || input.empty() || out.empty())
    return fail(std::string("MODEL_DIR, --input and --out are required\n") + kUsage);
  exec::Phase givenPhase;
  if (!phaseText.empty() && !exec::parsePhase(phaseText, givenPhase))
    return fail("--phase '" + phaseText + "' is not prefill, decode or mixed");

  std::string error;
  runtime::PolicyCache cache;
  std::unique_ptr<exec::Executor> executor = exec::Executor::create(options, cache, error);
  if (!executor)
    return fail(error);
  const model::MoeConfig &config = executor->config();
  std::vector<std::string> inputs = executor->policySignature().inputNames();
  if (!config.sigmoidScoring && std::count(inputs.begin(), inputs.end(), "bias"))
    std::printf("moe-exec: note: @%s takes a correction bias; %s has none, so it is zero\n",
                executor->policySignature().entry.c_str(), config.path.c_str());

  npy::Array hiddenArray;
  std::vector<float> hidden;
  std::string what = "--input (" + input + ")";
  if (!npy::load(input, what, hiddenArray, error) ||
      !npy::toFloat32(hiddenArray, what, hidden, error))
    return fail(error);
  if (hiddenArray.shape.size() != 2 || hiddenArray.shape[1] != config.hidden)
    return fail(what + ": expected hidden states [T, " + std::to_string(config.hidden) +
                "] (hidden_size of " + config.path + "), got " +
                npy::formatShape(hiddenArray.shape));
  int64_t tokens = hiddenArray.shape[0];

  exec::BatchInfo batch;
  batch.tokens = tokens;
  if ((!requestIdsPath.empty() &&
       !readInt32s(requestIdsPath, "--request-ids", tokens, batch.requestIds, error)) ||
      (!positionsPath.empty() &&
       !readInt32s(positionsPath, "--positions", tokens, batch.positions, error)) ||
      !batch.derive(phaseText.empty() ? nullptr : &givenPhase, error))
    return fail(error);

  std::map<int64_t, exec::Routing> replay;
  if (!replayDir.empty())
    for (const auto &layer : executor->layers()) {
      std::string l = std::to_string(layer->index());
      npy::Array ids, weights;
      exec::Routing &r = replay[layer->index()];
      std::string idsPath = replayDir + "/topk_ids_" + l + ".npy";
      std::string weightsPath = replayDir + "/topk_weights_" + l + ".npy";
      if (!npy::load(idsPath, "--replay (" + idsPath + ")", ids, error) ||
          !npy::toInt32(ids, "--replay (" + idsPath + ")", r.ids, error) ||
          !npy::load(weightsPath, "--replay (" + weightsPath + ")", weights, error) ||
          !npy::toFloat32(weights, "--replay (" + weightsPath + ")", r.weights, error))
        return fail(error);
      if (ids.shape.size() != 2 || ids.shape[0] != tokens || weights.shape != ids.shape)
        return fail("--replay: " + idsPath + " and " + weightsPath + " must both be [" +
                    std::to_string(tokens) + ", k], got " + npy::formatShape(ids.shape) +
                    " and " + npy::formatShape(weights.shape));
      r.tokens = tokens;
      r.k = ids.shape[1];
    }

  std::map<int64_t, exec::Routing> routings;
  std::map<int64_t, std::vector<float>> blocks;
  std::vector<exec::LayerMetrics> metrics, best;
  std::vector<float> result;
  for (int64_t run = 0; run < repeat; ++run) {
    bool ok;
    if (blockOnly) {
      ok = executor->runBlocks(hidden, tokens, batch, replayDir.empty() ? nullptr : &replay,
                               routings, blocks, metrics, error);
    } else {
      result = hidden;
      ok = executor->runStack(result, tokens, batch, replayDir.empty() ? nullptr : &replay,
                              routings, metrics, error);
    }
    if (!ok)
      return fail(error);
    for (size_t i = 0; i < metrics.size(); ++i)
      if (best.size() < metrics.size())
        best = metrics;
      else if (metrics[i].seconds.total() < best[i].seconds.total())
        best[i] = metrics[i];
  }

  if (mkdir(out.c_str(), 0755) != 0 && errno != EEXIST)
    return fail("cannot create '" + out + "': " + std::strerror(errno));
  const int64_t h = config.hidden;
  if (blockOnly) {
    for (const auto &[layer, y] : blocks)
      if (!writeArray(out + "/block_" + std::to_string(layer) + ".npy",
                      npy::makeF32({tokens, h}, y.data()), error))
        return fail(error);
  } else if (!writeArray(out + "/hidden.npy", npy::makeF32({tokens, h}, result.data()), error)) {
    return fail(error);
  }
  for (const auto &[layer, r] : routings) {
    std::string l = std::to_string(layer);
    if (!writeArray(out + "/topk_ids_" + l + ".npy", npy::makeI32({tokens, r.k}, r.ids.data()),
                    error) ||
        !writeArray(out + "/topk_weights_" + l + ".npy",
                    npy::makeF32({tokens, r.k}, r.weights.data()), error))
      return fail(error);
  }
  std::ofstream(out + "/metrics.json") << exec::metricsToJson(best);

  std::printf("moe-exec: %s (%s), %zu MoE layers, policy %s @%s, %lld tokens (%s, %lld "
              "requests)%s\n",
              options.modelDir.c_str(), config.architecture.c_str(), executor->layers().size(),
              executor->policyPath().c_str(), executor->policySignature().entry.c_str(),
              static_cast<long long>(tokens), exec::phaseName(batch.phase),
              static_cast<long long>(batch.requests), replayDir.empty() ? "" : ", replayed");
  std::printf("%6s %7s %9s %12s %10s %9s %9s %9s %9s %9s\n", "layer", "tokens", "experts",
              "bytes", "total_ms", "router", "policy", "permute", "ffn", "combine");
  for (const exec::LayerMetrics &m : best)
    std::printf("%6lld %7lld %9lld %12lld %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n",
                static_cast<long long>(m.layer), static_cast<long long>(m.tokens),
                static_cast<long long>(m.activeExperts), static_cast<long long>(m.expertBytes),
                1e3 * m.seconds.total(), 1e3 * m.seconds.routerGemm, 1e3 * m.seconds.policy,
                1e3 * m.seconds.permute, 1e3 * m.seconds.ffn, 1e3 * m.seconds.combine);
  std::printf("moe-exec: wrote %s/{%s,topk_ids_<l>,topk_weights_<l>}.npy, metrics.json\n",
              out.c_str(), blockOnly ? "block_<l>" : "hidden");
  return 0;
}

//===- TraceCapture.cpp - an executor's routing as a routing trace --------===//
#include "switchyard/Executor/TraceCapture.h"
#include "switchyard/Runtime/Npy.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace switchyard::exec {

namespace {

/// The trace's phase of each token (0 prefill, 1 decode, 2 verify): draft tokens of a
/// verify step are 2; otherwise the batch's phase, and in a mixed batch a request of
/// several tokens from position 0 is a prefill, any other a decode.
std::vector<uint8_t> tokenPhases(const BatchInfo &batch) {
  const size_t t = static_cast<size_t>(batch.tokens);
  std::map<int32_t, std::pair<int64_t, int32_t>> requests; // id -> {tokens, first}
  if (batch.phase == Phase::Mixed)
    for (size_t i = 0; i < t; ++i) {
      auto [it, added] = requests.try_emplace(batch.requestIds[i], 0, batch.positions[i]);
      ++it->second.first;
      it->second.second = std::min(it->second.second, batch.positions[i]);
    }
  std::vector<uint8_t> phase(t);
  for (size_t i = 0; i < t; ++i) {
    if (i < batch.draftMask.size() && batch.draftMask[i])
      phase[i] = 2;
    else if (batch.phase != Phase::Mixed)
      phase[i] = batch.phase == Phase::Prefill ? 0 : 1;
    else {
      const auto &[count, first] = requests[batch.requestIds[i]];
      phase[i] = count > 1 && first == 0 ? 0 : 1;
    }
  }
  return phase;
}

npy::Array makeU8(std::vector<int64_t> shape, const uint8_t *data) {
  npy::Array a;
  a.dtype = npy::DType::U8;
  a.shape = std::move(shape);
  a.bytes.assign(data, data + a.numel());
  return a;
}

} // namespace

bool TraceCapture::open(std::string &error) const {
  // mkdir first (EEXIST is fine: ranks of an EP job may race here), then what is there.
  struct stat st;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    error = flag + " '" + dir + "': cannot create the directory: " + std::strerror(errno);
    return false;
  }
  if (stat(dir.c_str(), &st) != 0) {
    error = flag + " '" + dir + "': " + std::strerror(errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    error = flag + " '" + dir + "': exists and is not a directory";
    return false;
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    error = flag + " '" + dir + "': not a writable directory: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool TraceCapture::record(const std::map<int64_t, Routing> &routings,
                          const BatchInfo &batch, int64_t experts, std::string &warning) {
  if (full)
    return false;
  const int64_t t = batch.tokens;
  if (recorded + t > maxTokens) {
    full = true;
    warning = flag + "-max-tokens " + std::to_string(maxTokens) +
              " reached: " + std::to_string(recorded) + " tokens of " +
              std::to_string(step) + " steps recorded, step " + std::to_string(step) +
              " (" + std::to_string(t) + " tokens) and later ones are not";
    return false;
  }
  for (const auto &[layer, r] : routings)
    if (r.tokens != t || r.logits.size() != static_cast<size_t>(t * experts) ||
        (k && r.k != k) || (!layers.empty() && !layers.count(layer))) {
      full = true;
      warning = flag + ": layer " + std::to_string(layer) +
                " has no router logits of this step (a replayed routing?); nothing more "
                "is recorded";
      return false;
    }
  for (const auto &[layer, r] : routings) {
    Layer &l = layers[layer];
    l.logits.insert(l.logits.end(), r.logits.begin(), r.logits.end());
    l.ids.insert(l.ids.end(), r.ids.begin(), r.ids.end());
    l.weights.insert(l.weights.end(), r.weights.begin(), r.weights.end());
    k = r.k;
  }
  requestIds.insert(requestIds.end(), batch.requestIds.begin(), batch.requestIds.end());
  positions.insert(positions.end(), batch.positions.begin(), batch.positions.end());
  std::vector<uint8_t> phase = tokenPhases(batch);
  phases.insert(phases.end(), phase.begin(), phase.end());
  stepOf.insert(stepOf.end(), static_cast<size_t>(t), static_cast<int32_t>(step));
  recorded += t;
  ++step;
  return true;
}

bool TraceCapture::write(const TraceMeta &meta, std::string &error) const {
  auto fail = [&](const std::string &message) {
    error = flag + ": " + message;
    return false;
  };
  const int64_t t = recorded, e = meta.experts, topK = k ? k : meta.topK;
  nlohmann::json layerList = nlohmann::json::array();
  std::string omitted;
  const Layer none;
  for (int64_t layer : meta.layers) {
    auto it = layers.find(layer);
    const Layer &l = it == layers.end() ? none : it->second;
    layerList.push_back(layer);
    std::string base = dir + "/layer_" + std::to_string(layer);
    if (!npy::save(base + ".logits.npy", npy::makeF32({t, e}, l.logits.data()), error))
      return fail(error);
    // The format has no empty slot: a layer whose policy left one (-1) keeps its logits
    // only.
    bool complete = true;
    for (int32_t id : l.ids)
      complete &= id >= 0 && id < e;
    if (!complete) {
      omitted += (omitted.empty() ? "" : ", ") + std::to_string(layer);
      continue;
    }
    bool ok;
    if (e <= 256) {
      std::vector<uint8_t> ids(l.ids.begin(), l.ids.end());
      ok = npy::save(base + ".ids.npy", makeU8({t, topK}, ids.data()), error);
    } else {
      std::vector<uint16_t> ids(l.ids.begin(), l.ids.end());
      ok = npy::saveUInt16(base + ".ids.npy", {t, topK}, ids.data(), error);
    }
    if (!ok ||
        !npy::save(base + ".weights.npy", npy::makeF32({t, topK}, l.weights.data()), error))
      return fail(error);
  }
  if (!npy::save(dir + "/request_ids.npy", npy::makeI32({t}, requestIds.data()), error) ||
      !npy::save(dir + "/positions.npy", npy::makeI32({t}, positions.data()), error) ||
      !npy::save(dir + "/phase.npy", makeU8({t}, phases.data()), error) ||
      !npy::save(dir + "/step.npy", npy::makeI32({t}, stepOf.data()), error))
    return fail(error);
  nlohmann::json j = {{"format", "switchyard-trace"},
                      {"version", 1},
                      {"model", meta.model},
                      {"num_experts", e},
                      {"top_k", topK},
                      {"groups", nullptr},
                      {"source", meta.source},
                      {"dtype", "float32"},
                      {"layers", layerList},
                      {"tokens", t},
                      {"steps", step}};
  if (meta.groups > 1)
    j["groups"] = meta.groups;
  if (meta.hiddenSize > 0 && meta.moeIntermediateSize > 0) {
    j["hidden_size"] = meta.hiddenSize;
    j["moe_intermediate_size"] = meta.moeIntermediateSize;
  }
  if (!meta.torchDtype.empty())
    j["torch_dtype"] = meta.torchDtype;
  if (!omitted.empty())
    j["no_ids_layers"] = "ids and weights not recorded for layers " + omitted +
                         ": the policy left slots empty (-1)";
  std::string path = dir + "/meta.json";
  errno = 0;
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.flush();
  if (!out)
    return fail("cannot write '" + path +
                "': " + (errno ? std::strerror(errno) : "write failed"));
  return true;
}

} // namespace switchyard::exec

//===- ExecutorBinding.cpp - the MoE executor, driven from Python ---------===//
//
// switchyard.Executor: a checkpoint's MoE layers with a compiled policy in the forward
// pass (the C++ executor of moe-exec). Batches are float32 hidden states [T, H] with
// optional per-token request ids / positions and a phase; results come back as NumPy
// arrays, the per-layer routing as (ids, weights) pairs that a later call can replay,
// and the metrics as moe-exec's metrics.json text.
//
//===----------------------------------------------------------------------===//
#include "Bindings.h"

#include "switchyard/Executor/Executor.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

namespace switchyard::python {

namespace {

using Floats = nb::ndarray<nb::numpy, float>;
using Ints = nb::ndarray<nb::numpy, int32_t>;

/// A NumPy array that owns a copy of `values` with `shape`.
template <typename T>
nb::ndarray<nb::numpy, T> toNumpy(const std::vector<T> &values, std::vector<size_t> shape) {
  auto *copy = new std::vector<T>(values);
  nb::capsule owner(copy,
                    [](void *p) noexcept { delete static_cast<std::vector<T> *>(p); });
  return nb::ndarray<nb::numpy, T>(copy->data(), shape.size(), shape.data(), owner);
}

/// Host memory of `array` as `T` values (converted as the tools convert .npy data).
template <typename T> std::vector<T> hostValues(nb::handle array, const std::string &what) {
  nb::ndarray<> a;
  if (!nb::try_cast(array, a))
    fail(what + ": expected an array");
  runtime::TensorView view = viewOf(a, what);
  if (view.onDevice)
    fail(what + ": the executor takes host memory");
  npy::Array copy;
  copy.dtype = view.dtype;
  copy.shape = view.shape;
  copy.bytes.resize(size_t(copy.numel()) * npy::dtypeSize(view.dtype));
  if (!copy.bytes.empty())
    std::memcpy(copy.bytes.data(), view.data, copy.bytes.size());
  std::vector<T> out;
  std::string error;
  bool ok;
  if constexpr (std::is_same_v<T, float>)
    ok = npy::toFloat32(copy, what, out, error);
  else
    ok = npy::toInt32(copy, what, out, error);
  if (!ok)
    fail(error);
  if (view.shape.empty())
    fail(what + ": expected an array with a token dimension, got a scalar");
  return out;
}

class PyExecutor {
public:
  PyExecutor(const std::string &modelDir, const std::string &policy,
             const std::string &entry, const std::vector<std::string> &knobs,
             std::optional<std::pair<int64_t, int64_t>> layers, const std::string &device,
             const std::string &cacheDir)
      : cache(cacheDir.empty() ? runtime::PolicyCache::defaultRoot() : cacheDir) {
    exec::ExecutorOptions options;
    options.modelDir = modelDir;
    options.policyPath = policy;
    options.entry = entry;
    options.knobSettings = knobs;
    options.device = device;
    if (layers) {
      options.firstLayer = layers->first;
      options.lastLayer = layers->second;
    }
    runtime::Status status;
    {
      nb::gil_scoped_release release; // may compile the policy
      executor = exec::Executor::create(options, cache, status);
    }
    if (!executor)
      fail(status);
  }

  /// Runs one batch. Returns (output, routings, metrics JSON): output is the stack's
  /// hidden states [T, H], or with `block_only` a dict layer -> MoE_l(x).
  nb::tuple run(nb::handle hidden, nb::handle requestIds, nb::handle positions,
                const std::string &phase, bool blockOnly, nb::handle replay) {
    const int64_t h = executor->config().hidden;
    nb::ndarray<> hiddenArray;
    if (!nb::try_cast(hidden, hiddenArray))
      fail("hidden: expected a float array [T, " + std::to_string(h) + "]");
    if (hiddenArray.ndim() != 2 || int64_t(hiddenArray.shape(1)) != h)
      fail("hidden: expected [T, " + std::to_string(h) +
           "] (the model's hidden size), got " + std::to_string(hiddenArray.ndim()) +
           " dimensions");
    std::vector<float> x = hostValues<float>(hidden, "hidden");
    exec::BatchInfo batch;
    batch.tokens = int64_t(hiddenArray.shape(0));
    auto perToken = [&](nb::handle array, const char *what, std::vector<int32_t> &out) {
      if (array.is_none())
        return;
      out = hostValues<int32_t>(array, what);
      if (int64_t(out.size()) != batch.tokens)
        fail(std::string(what) + ": expected " + std::to_string(batch.tokens) +
             " values (one per token), got " + std::to_string(out.size()));
    };
    perToken(requestIds, "request_ids", batch.requestIds);
    perToken(positions, "positions", batch.positions);
    exec::Phase given;
    if (!phase.empty() && !exec::parsePhase(phase, given))
      fail("phase '" + phase + "' is not prefill, decode or mixed");
    std::string error;
    if (!batch.derive(phase.empty() ? nullptr : &given, error))
      fail(error);

    std::map<int64_t, exec::Routing> fixed, routings;
    if (!replay.is_none())
      readReplay(nb::cast<nb::dict>(replay), batch.tokens, fixed);
    std::vector<exec::LayerMetrics> metrics;
    std::map<int64_t, std::vector<float>> blocks;
    bool ok;
    {
      nb::gil_scoped_release release;
      ok = blockOnly ? executor->runBlocks(x, batch.tokens, batch,
                                           replay.is_none() ? nullptr : &fixed, routings,
                                           blocks, metrics, error)
                     : executor->runStack(x, batch.tokens, batch,
                                          replay.is_none() ? nullptr : &fixed, routings,
                                          metrics, error);
    }
    if (!ok)
      fail(error);
    size_t t = size_t(batch.tokens);
    nb::dict routed;
    for (const auto &[layer, r] : routings)
      routed[nb::int_(layer)] = nb::make_tuple(toNumpy(r.ids, {t, size_t(r.k)}),
                                               toNumpy(r.weights, {t, size_t(r.k)}));
    nb::object output;
    if (blockOnly) {
      nb::dict byLayer;
      for (const auto &[layer, y] : blocks)
        byLayer[nb::int_(layer)] = toNumpy(y, {t, size_t(h)});
      output = byLayer;
    } else {
      output = nb::cast(toNumpy(x, {t, size_t(h)}));
    }
    return nb::make_tuple(output, routed, exec::metricsToJson(metrics));
  }

  nb::dict describe() const {
    const model::MoeConfig &c = executor->config();
    nb::dict d;
    d["architecture"] = c.architecture;
    d["family"] = std::string(c.familyName());
    d["hidden_size"] = c.hidden;
    d["experts"] = c.experts;
    d["top_k"] = c.topK;
    nb::list layers;
    for (const auto &layer : executor->layers())
      layers.append(layer->index());
    d["moe_layers"] = layers;
    d["policy"] = executor->policyPath();
    d["entry"] = executor->policySignature().entry;
    d["device"] = executor->deviceName();
    return d;
  }

private:
  void readReplay(nb::dict replay, int64_t tokens,
                  std::map<int64_t, exec::Routing> &fixed) {
    for (const auto &layer : executor->layers()) {
      int64_t l = layer->index();
      std::string what = "replay[" + std::to_string(l) + "]";
      if (!replay.contains(nb::int_(l)))
        fail(what + ": no routing recorded for MoE layer " + std::to_string(l));
      nb::tuple pair = nb::cast<nb::tuple>(replay[nb::int_(l)]);
      if (pair.size() != 2)
        fail(what + ": expected (topk_ids, topk_weights)");
      exec::Routing &r = fixed[l];
      r.ids = hostValues<int32_t>(pair[0], what + " topk_ids");
      r.weights = hostValues<float>(pair[1], what + " topk_weights");
      nb::ndarray<> ids;
      nb::try_cast(pair[0], ids);
      if (ids.ndim() != 2 || int64_t(ids.shape(0)) != tokens ||
          r.weights.size() != r.ids.size())
        fail(what + ": topk_ids and topk_weights must both be [" + std::to_string(tokens) +
             ", k]");
      r.tokens = tokens;
      r.k = int64_t(ids.shape(1));
    }
  }

  runtime::PolicyCache cache;
  std::unique_ptr<exec::Executor> executor;
};

} // namespace

void bindExecutor(nb::module_ &m) {
  nb::class_<PyExecutor>(m, "Executor")
      .def(nb::init<const std::string &, const std::string &, const std::string &,
                    const std::vector<std::string> &,
                    std::optional<std::pair<int64_t, int64_t>>, const std::string &,
                    const std::string &>(),
           nb::arg("model_dir"), nb::arg("policy") = "", nb::arg("entry") = "",
           nb::arg("knobs") = std::vector<std::string>{}, nb::arg("layers") = nb::none(),
           nb::arg("device") = "host", nb::arg("cache_dir") = "")
      .def("run", &PyExecutor::run, nb::arg("hidden"), nb::arg("request_ids") = nb::none(),
           nb::arg("positions") = nb::none(), nb::arg("phase") = "",
           nb::arg("block_only") = false, nb::arg("replay") = nb::none())
      .def("describe", &PyExecutor::describe);
}

} // namespace switchyard::python

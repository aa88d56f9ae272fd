//===- Executor.cpp - the MoE blocks of a checkpoint, end to end -----------===//
#include "switchyard/Executor/Executor.h"
#include "switchyard/Executor/CudaLayer.h"
#include "switchyard/Executor/EpMoeLayer.h"
#include "switchyard/Executor/HostKernels.h"

#include <cstdlib>
#include <unistd.h>

namespace switchyard::exec {

std::unique_ptr<Executor> Executor::create(const ExecutorOptions &options,
                                           runtime::PolicyCache &cache,
                                           runtime::Status &status) {
  std::string error;
  // What kind of failure a `return nullptr` below is: set where it is not an option.
  runtime::StatusCode code = runtime::StatusCode::kInvalidArgument;
  std::unique_ptr<Executor> ex = build(options, cache, error, code);
  status = ex ? runtime::Status::ok() : runtime::Status(code, error);
  return ex;
}

std::unique_ptr<Executor> Executor::build(const ExecutorOptions &options,
                                          runtime::PolicyCache &cache, std::string &error,
                                          runtime::StatusCode &code) {
  int cudaOrdinal = -1;
  if (options.device.rfind("cuda", 0) == 0) {
    std::string rest = options.device.substr(4);
    char *end = nullptr;
    cudaOrdinal = rest.empty()     ? 0
                  : rest[0] == ':' ? int(std::strtol(rest.c_str() + 1, &end, 10))
                                   : -1;
    if (cudaOrdinal < 0 || (!rest.empty() && (rest.size() < 2 || *end)))
      cudaOrdinal = -2;
  }
  if (options.device != "host" && cudaOrdinal < 0) {
    error = "--device " + options.device + ": expected host, cuda or cuda:N";
    return nullptr;
  }
  std::unique_ptr<Executor> ex(new Executor);
  ex->deviceText = options.device;
  if (cudaOrdinal >= 0 && options.comm && options.comm->size() > 1) {
    error = "--device " + options.device + " with --ep " +
            std::to_string(options.comm->size()) +
            ": expert parallelism runs on the host (MPI) in this version";
    return nullptr;
  }
  if (cudaOrdinal >= 0 && !(ex->device = openCudaDevice(cudaOrdinal, error))) {
    code = runtime::StatusCode::kDevice;
    return nullptr;
  }
  code = runtime::StatusCode::kBadFile;
  if (!model::readMoeConfig(options.modelDir, ex->cfg, error))
    return nullptr;
  ex->ckpt = model::SafetensorsCheckpoint::open(options.modelDir, error);
  if (!ex->ckpt)
    return nullptr;
  code = runtime::StatusCode::kInvalidArgument;
  ex->policyFile = options.policyPath.empty()
                       ? shippedPolicyDir() + "/" + ex->cfg.nativePolicy() + ".mlir"
                       : options.policyPath;
  runtime::CompileRequest request;
  request.policyPath = ex->policyFile;
  // Any policy on any model: the model's values a policy has no parameter for (a softmax
  // router on DeepSeek-V3 ignores n_group) are not errors. A placement (XShare-EP) is
  // the job's: one device, or the ranks and physical slots of expert parallelism.
  const int ranks = options.comm ? options.comm->size() : 1;
  if (options.libra && options.eplb.window > 0) {
    error = "--libra and --eplb are two balancers: choose one";
    return nullptr;
  }
  if (options.libra && ranks < 2) {
    error = "--libra balances expert-parallel ranks: use it with --ep N (N >= 2)";
    return nullptr;
  }
  EplbOptions eplbOptions = options.eplb;
  if (eplbOptions.window > 0 && eplbOptions.slots == 0)
    eplbOptions.slots =
        ex->cfg.experts + ((ex->cfg.experts / 8 + ranks - 1) / ranks) * ranks;
  const int64_t slots = eplbOptions.window > 0 ? eplbOptions.slots : ex->cfg.experts;
  request.flags = {"--model",
                   ex->cfg.path,
                   "--devices",
                   std::to_string(ranks),
                   "--slots",
                   std::to_string(ranks > 1 ? slots : ex->cfg.experts),
                   "--allow-unused-sizes"};
  if (!options.entry.empty())
    request.flags.insert(request.flags.end(), {"--entry", options.entry});
  if (ex->device) { // the GPU launcher too
    request.target = "all";
    request.flags.push_back("--launcher-library");
  }
  std::string artifacts;
  runtime::Status step = cache.artifacts(request, artifacts);
  if (!step.isOk()) {
    code = step.code();
    error = step.message();
    return nullptr;
  }
  std::shared_ptr<runtime::HostPolicy> policy =
      runtime::HostPolicy::load(artifacts, options.entry, step);
  if (!policy) {
    code = step.code();
    error = step.message();
    return nullptr;
  }
  std::vector<uint8_t> knobBytes; // checked here so that a bad setting is kInvalidKnob
  if (step = policy->packKnobs(options.knobSettings, knobBytes); !step.isOk()) {
    code = step.code();
    error = step.message();
    return nullptr;
  }
  ex->router = Router::create(policy, ex->cfg.experts, options.knobSettings, error);
  if (!ex->router)
    return nullptr;
  int64_t last = options.lastLayer < 0 ? ex->cfg.layers : options.lastLayer;
  if (options.firstLayer < 0 || options.firstLayer >= last || last > ex->cfg.layers) {
    error = "--layers " + std::to_string(options.firstLayer) + ":" + std::to_string(last) +
            " is not a non-empty range within the model's " +
            std::to_string(ex->cfg.layers) + " layers";
    return nullptr;
  }
  // Live balancing: one compiled rule set for every layer, one mover for the transfers.
  std::shared_ptr<EplbRule> eplb;
  std::shared_ptr<LibraRules> libra;
  if (eplbOptions.window > 0) {
    if (ranks < 2) {
      error = "--eplb balances expert-parallel ranks: use it with --ep N (N >= 2)";
      return nullptr;
    }
    if (!(eplb = EplbRule::create(ex->cfg, ranks, eplbOptions.slots, cache, error)))
      return nullptr;
  }
  if (options.libra &&
      !(libra = LibraRules::create(ex->cfg, ranks, options.libraSettings, cache, error)))
    return nullptr;
  if (eplb || libra)
    ex->mover = std::make_shared<ExpertMover>(*options.comm);
  for (int64_t l : ex->cfg.moeLayers) {
    if (l < options.firstLayer || l >= last)
      continue;
    std::unique_ptr<Layer> layer;
    if (ex->device) {
      layer = loadCudaLayer(ex->device, ex->cfg, *ex->ckpt, l, artifacts, options, error);
    } else if (auto host = MoeLayer::load(ex->cfg, *ex->ckpt, l, error)) {
      host->attach(ex->router.get());
      if (ranks > 1) {
        auto ep = std::make_unique<EpMoeLayer>(std::move(host), *options.comm, ex->mover);
        if (eplb)
          ep->balanceWith(eplb, eplbOptions);
        layer = std::move(ep);
      } else {
        layer = std::move(host);
      }
    }
    if (!layer)
      return nullptr;
    ex->moeLayers.push_back(std::move(layer));
  }
  // Libra: each layer prepares the next one's replicas.
  for (size_t i = 0; libra && i < ex->moeLayers.size(); ++i)
    static_cast<EpMoeLayer &>(*ex->moeLayers[i])
        .balanceWith(libra, i + 1 < ex->moeLayers.size()
                                ? &static_cast<EpMoeLayer &>(*ex->moeLayers[i + 1])
                                : nullptr);
  if (options.memoryOn) {
    if (ex->device || ranks > 1) {
      error = "--memory runs on the host executor of one rank in this version (not with "
              "--device cuda or --ep)";
      return nullptr;
    }
    std::vector<MoeLayer *> hosts;
    for (const std::unique_ptr<Layer> &layer : ex->moeLayers)
      hosts.push_back(static_cast<MoeLayer *>(layer.get()));
    ex->memory = memory::ExpertMemory::create(options.memory, ex->cfg, hosts, cache, error);
    if (!ex->memory)
      return nullptr;
  }
  if (ex->moeLayers.empty()) {
    error = "--layers " + std::to_string(options.firstLayer) + ":" + std::to_string(last) +
            " holds no MoE layer (the model's MoE layers start at " +
            std::to_string(ex->cfg.moeLayers.front()) + ")";
    return nullptr;
  }
  return ex;
}

static const Routing *replayed(const std::map<int64_t, Routing> *replay, int64_t layer,
                               std::string &error) {
  if (!replay)
    return nullptr;
  auto it = replay->find(layer);
  if (it == replay->end()) {
    error = "layer " + std::to_string(layer) + ": the replayed run has no routing for it";
    return nullptr;
  }
  return &it->second;
}

bool Executor::beginStep(std::string &error) { return !memory || memory->beginStep(error); }

void Executor::endStep() {
  if (memory)
    lastMemory = memory->endStep();
}

bool Executor::runStack(std::vector<float> &h, int64_t tokens, const BatchInfo &batch,
                        const std::map<int64_t, Routing> *replay,
                        std::map<int64_t, Routing> &routings,
                        std::vector<LayerMetrics> &metrics, std::string &error) {
  if (!beginStep(error))
    return false;
  const int64_t width = cfg.hidden;
  std::vector<float> y(static_cast<size_t>(tokens * width));
  normed.resize(static_cast<size_t>(tokens * width));
  metrics.clear();
  for (const std::unique_ptr<Layer> &layer : moeLayers) {
    const Routing *fixed = replayed(replay, layer->index(), error);
    if (replay && !fixed)
      return false;
    rmsNorm(h.data(), tokens, width, layer->postAttentionNorm().data(), cfg.rmsNormEps,
            normed.data());
    LayerMetrics m;
    if (!layer->forward(normed.data(), tokens, batch, fixed, routings[layer->index()],
                        y.data(), m, error))
      return false;
    for (size_t i = 0; i < y.size(); ++i)
      h[i] += y[i];
    metrics.push_back(std::move(m));
  }
  endStep();
  return true;
}

bool Executor::runBlocks(const std::vector<float> &x, int64_t tokens,
                         const BatchInfo &batch, const std::map<int64_t, Routing> *replay,
                         std::map<int64_t, Routing> &routings,
                         std::map<int64_t, std::vector<float>> &outputs,
                         std::vector<LayerMetrics> &metrics, std::string &error) {
  metrics.clear();
  if (!beginStep(error))
    return false;
  for (const std::unique_ptr<Layer> &layer : moeLayers) {
    const Routing *fixed = replayed(replay, layer->index(), error);
    if (replay && !fixed)
      return false;
    std::vector<float> &y = outputs[layer->index()];
    y.resize(static_cast<size_t>(tokens * cfg.hidden));
    LayerMetrics m;
    if (!layer->forward(x.data(), tokens, batch, fixed, routings[layer->index()], y.data(),
                        m, error))
      return false;
    metrics.push_back(std::move(m));
  }
  endStep();
  return true;
}

} // namespace switchyard::exec

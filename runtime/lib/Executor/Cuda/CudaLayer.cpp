//===- CudaLayer.cpp - one MoE block on a CUDA GPU -------------------------===//
//
// Built into libSwitchyardExecutorCuda.so (cudart, cuBLAS), which libSwitchyardExecutor
// loads on first use; CudaLayerPlugin.h is its one entry point.
//
//===----------------------------------------------------------------------===//
#include "CudaLayerPlugin.h"
#include "switchyard/Runtime/CudaPolicy.h"

#include "CudaContext.h"
#include "CudaKernels.h"

#include <cstring>

namespace switchyard::exec {

namespace {

using cuda::CudaContext;
using cuda::cudaText;
using cuda::DeviceBuffer;

struct DeviceFfn {
  DeviceBuffer gate, up, down;
  int64_t width = 0, bytes = 0; // bytes in the checkpoint (what a step reads)
};

class CudaLayer : public Layer {
public:
  std::shared_ptr<CudaContext> ctx;
  const model::MoeConfig *config = nullptr;
  int64_t layer = 0;
  std::vector<float> norm;
  std::unique_ptr<runtime::CudaPolicy> policy;
  DeviceBuffer knobs; // the knob struct the kernels read (empty: the defaults)
  DeviceBuffer router, bias, sharedGate;
  std::vector<DeviceFfn> experts;
  DeviceFfn shared;
  // Per-batch device buffers.
  DeviceBuffer x, y, logits, rowsIn, rowsOut, gateOut, upOut, slots, rowOfSlot, weights,
      workspace, requestIds, positions, draftMask, phase, replicas, log2phy;
  std::vector<DeviceBuffer> policyOutputs;

  int64_t index() const override { return layer; }
  const std::vector<float> &postAttentionNorm() const override { return norm; }
  bool forward(const float *hostX, int64_t tokens, const BatchInfo &batch,
               const Routing *replay, Routing &routing, float *hostY, LayerMetrics &metrics,
               std::string &error) override;

private:
  bool route(int64_t tokens, const BatchInfo &batch, Routing &routing, std::string &error);
  bool ffn(const DeviceFfn &w, const float *in, int64_t n, float *out, std::string &error);
  bool gemm(const float *in, int64_t n, const DeviceBuffer &w, int64_t rows, int64_t cols,
            float *out, std::string &error);
};

#define CHECK_CUDA(expr)                                                                   \
  do {                                                                                     \
    cudaError_t status_ = (expr);                                                          \
    if (status_ != cudaSuccess) {                                                          \
      error = "layer " + std::to_string(layer) + ": " #expr ": " + cudaText(status_);      \
      return false;                                                                        \
    }                                                                                      \
  } while (false)

bool upload(const model::TensorView &view, DeviceBuffer &to, std::string &error) {
  std::vector<float> wide(static_cast<size_t>(view.numel()));
  model::widenToFloat(view, 0, view.numel(), wide.data());
  cudaError_t status = to.reserve(wide.size() * sizeof(float));
  if (status == cudaSuccess)
    status = cudaMemcpy(to.ptr, wide.data(), wide.size() * sizeof(float),
                        cudaMemcpyHostToDevice);
  if (status != cudaSuccess) {
    error = "uploading '" + view.name + "': " + cudaText(status);
    return false;
  }
  return true;
}

bool uploadFfn(const model::SafetensorsCheckpoint &ckpt, const std::string &gate,
               const std::string &up, const std::string &down, int64_t hidden,
               int64_t width, DeviceFfn &w, std::string &error) {
  const model::TensorView *g = ckpt.require(gate, {width, hidden}, error);
  const model::TensorView *u = g ? ckpt.require(up, {width, hidden}, error) : nullptr;
  const model::TensorView *d = u ? ckpt.require(down, {hidden, width}, error) : nullptr;
  w.width = width;
  w.bytes = d ? int64_t(g->bytes + u->bytes + d->bytes) : 0;
  return d && upload(*g, w.gate, error) && upload(*u, w.up, error) &&
         upload(*d, w.down, error);
}

bool CudaLayer::gemm(const float *in, int64_t n, const DeviceBuffer &w, int64_t rows,
                     int64_t cols, float *out, std::string &error) {
  if (cuda::gemmT(*ctx, in, n, w.f32(), rows, cols, out, error))
    return true;
  error = "layer " + std::to_string(layer) + ": " + error;
  return false;
}

bool CudaLayer::ffn(const DeviceFfn &w, const float *in, int64_t n, float *out,
                    std::string &error) {
  if (cuda::swigluFfn(*ctx, w.gate.f32(), w.up.f32(), w.down.f32(), config->hidden, w.width,
                      in, n, out, gateOut, upOut, error))
    return true;
  error = "layer " + std::to_string(layer) + ": " + error;
  return false;
}

/// Binds the policy's inputs by name to device copies of the batch's data, allocates
/// its outputs, launches it and brings topk_ids / topk_weights back.
bool CudaLayer::route(int64_t tokens, const BatchInfo &batch, Routing &routing,
                      std::string &error) {
  const runtime::Signature &sig = policy->signature();
  const int64_t e = config->experts;
  size_t t = static_cast<size_t>(tokens);
  std::vector<void *> buffers(sig.params.size(), nullptr);
  policyOutputs.resize(sig.params.size());
  int64_t idsIndex = -1, weightsIndex = -1;
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const runtime::Param &p = sig.params[i];
    std::string name = p.inputName();
    if (p.isOutput) {
      std::optional<int64_t> count = p.elementsFor(tokens);
      CHECK_CUDA(policyOutputs[i].reserve(size_t(std::max<int64_t>(*count, 1)) *
                                          p.elementBytes()));
      buffers[i] = policyOutputs[i].ptr;
      idsIndex = p.name == "topk_ids" ? int64_t(i) : idsIndex;
      weightsIndex = p.name == "topk_weights" ? int64_t(i) : weightsIndex;
    } else if (name == "logits") {
      buffers[i] = logits.ptr;
    } else if (name == "bias") {
      buffers[i] = bias.ptr;
    } else if (name == "phase") { // an int32 in device memory, read by the kernels
      const int32_t value = static_cast<int32_t>(batch.phase);
      CHECK_CUDA(phase.reserve(sizeof value));
      CHECK_CUDA(cudaMemcpyAsync(phase.ptr, &value, sizeof value, cudaMemcpyHostToDevice,
                                 ctx->stream));
      buffers[i] = phase.ptr;
    } else if (name == "request_ids" || name == "positions") {
      DeviceBuffer &to = name == "request_ids" ? requestIds : positions;
      const std::vector<int32_t> &from =
          name == "request_ids" ? batch.requestIds : batch.positions;
      CHECK_CUDA(to.reserve(std::max<size_t>(t, 1) * 4));
      CHECK_CUDA(
          cudaMemcpyAsync(to.ptr, from.data(), t * 4, cudaMemcpyHostToDevice, ctx->stream));
      buffers[i] = to.ptr;
    } else if (name == "draft_mask") {
      CHECK_CUDA(draftMask.reserve(std::max<size_t>(t, 1)));
      CHECK_CUDA(cudaMemcpyAsync(draftMask.ptr, batch.draftMask.data(), t,
                                 cudaMemcpyHostToDevice, ctx->stream));
      buffers[i] = draftMask.ptr;
    } else if (p.kind ==
               runtime::ParamKind::PlacementReplicas) { // one device: one replica each
      std::vector<int32_t> ones(static_cast<size_t>(e), 1);
      CHECK_CUDA(replicas.reserve(ones.size() * 4));
      CHECK_CUDA(
          cudaMemcpy(replicas.ptr, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));
      buffers[i] = replicas.ptr;
    } else if (p.kind == runtime::ParamKind::PlacementLog2Phy) {
      int64_t r = p.shape.size() > 1 ? p.shape[1] : 1;
      std::vector<int32_t> table(static_cast<size_t>(e * r), -1);
      for (int64_t x = 0; x < e; ++x)
        table[x * r] = static_cast<int32_t>(x);
      CHECK_CUDA(log2phy.reserve(table.size() * 4));
      CHECK_CUDA(
          cudaMemcpy(log2phy.ptr, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
      buffers[i] = log2phy.ptr;
    } else {
      error = "layer " + std::to_string(layer) + ": @" + sig.entry + " takes '" + name +
              "', which the executor does not provide";
      return false;
    }
  }
  CHECK_CUDA(
      workspace.reserve(size_t(std::max<int64_t>(policy->workspaceBytes(tokens), 1))));
  if (!policy->launch(tokens, buffers, knobs.ptr, workspace.ptr, ctx->stream, error)) {
    error = "layer " + std::to_string(layer) + ": " + error;
    return false;
  }
  routing.tokens = tokens;
  routing.k = sig.params[idsIndex].shape[1];
  routing.ids.resize(t * routing.k);
  routing.weights.resize(t * routing.k);
  CHECK_CUDA(cudaMemcpyAsync(routing.ids.data(), buffers[idsIndex], routing.ids.size() * 4,
                             cudaMemcpyDeviceToHost, ctx->stream));
  CHECK_CUDA(cudaMemcpyAsync(routing.weights.data(), buffers[weightsIndex],
                             routing.weights.size() * 4, cudaMemcpyDeviceToHost,
                             ctx->stream));
  CHECK_CUDA(cudaStreamSynchronize(ctx->stream));
  return true;
}

bool CudaLayer::forward(const float *hostX, int64_t tokens, const BatchInfo &batch,
                        const Routing *replay, Routing &routing, float *hostY,
                        LayerMetrics &metrics, std::string &error) {
  const int64_t h = config->hidden, e = config->experts;
  metrics = LayerMetrics{};
  metrics.layer = layer;
  metrics.tokens = tokens;
  if (tokens == 0)
    return true;
  cudaEvent_t marks[6];
  for (cudaEvent_t &m : marks)
    CHECK_CUDA(cudaEventCreate(&m));
  struct Cleanup {
    cudaEvent_t *marks;
    ~Cleanup() {
      for (int i = 0; i < 6; ++i)
        cudaEventDestroy(marks[i]);
    }
  } cleanup{marks};
  CHECK_CUDA(x.reserve(size_t(tokens * h) * 4));
  CHECK_CUDA(y.reserve(size_t(tokens * h) * 4));
  CHECK_CUDA(cudaMemcpyAsync(x.ptr, hostX, size_t(tokens * h) * 4, cudaMemcpyHostToDevice,
                             ctx->stream));
  CHECK_CUDA(cudaEventRecord(marks[0], ctx->stream));
  if (replay) {
    routing = *replay;
    CHECK_CUDA(cudaEventRecord(marks[1], ctx->stream));
  } else {
    CHECK_CUDA(logits.reserve(size_t(tokens * e) * 4));
    if (!gemm(x.f32(), tokens, router, e, h, logits.f32(), error))
      return false;
    metrics.expertBytes += e * h * 4;
    metrics.flops += 2 * tokens * e * h;
    CHECK_CUDA(cudaEventRecord(marks[1], ctx->stream));
    if (!route(tokens, batch, routing, error))
      return false;
  }
  CHECK_CUDA(cudaEventRecord(marks[2], ctx->stream));
  if (!routing.groupByExpert(e, error)) {
    error = "layer " + std::to_string(layer) + ": " + error;
    return false;
  }
  const int64_t k = routing.k, rows = int64_t(routing.byExpert.slots.size());
  std::vector<int32_t> rowOf(size_t(tokens * k), -1);
  for (int64_t r = 0; r < rows; ++r)
    rowOf[routing.byExpert.slots[r]] = int32_t(r);
  CHECK_CUDA(slots.reserve(size_t(std::max<int64_t>(rows, 1)) * 4));
  CHECK_CUDA(rowOfSlot.reserve(rowOf.size() * 4));
  CHECK_CUDA(weights.reserve(routing.weights.size() * 4));
  CHECK_CUDA(rowsIn.reserve(size_t(std::max<int64_t>(rows, 1) * h) * 4));
  CHECK_CUDA(rowsOut.reserve(size_t(std::max<int64_t>(rows, 1) * h) * 4));
  CHECK_CUDA(cudaMemcpyAsync(slots.ptr, routing.byExpert.slots.data(), size_t(rows) * 4,
                             cudaMemcpyHostToDevice, ctx->stream));
  CHECK_CUDA(cudaMemcpyAsync(rowOfSlot.ptr, rowOf.data(), rowOf.size() * 4,
                             cudaMemcpyHostToDevice, ctx->stream));
  CHECK_CUDA(cudaMemcpyAsync(weights.ptr, routing.weights.data(),
                             routing.weights.size() * 4, cudaMemcpyHostToDevice,
                             ctx->stream));
  CHECK_CUDA(cuda::gatherRows(x.f32(), slots.i32(), rows, k, h, rowsIn.f32(), ctx->stream));
  CHECK_CUDA(cudaEventRecord(marks[3], ctx->stream));
  metrics.tokensPerExpert.assign(size_t(e), 0);
  for (int64_t x2 = 0; x2 < e; ++x2) {
    int64_t n = routing.byExpert.count(x2), begin = routing.byExpert.offsets[x2];
    metrics.tokensPerExpert[x2] = int32_t(n);
    if (n == 0)
      continue;
    ++metrics.activeExperts;
    metrics.expertBytes += experts[x2].bytes;
    metrics.flops += 2 * n * 3 * experts[x2].width * h;
    if (!ffn(experts[x2], rowsIn.f32() + begin * h, n, rowsOut.f32() + begin * h, error))
      return false;
  }
  if (shared.width > 0) {
    if (!ffn(shared, x.f32(), tokens, y.f32(), error))
      return false;
    metrics.expertBytes += shared.bytes;
    metrics.flops += 2 * tokens * 3 * shared.width * h;
    if (sharedGate.ptr)
      CHECK_CUDA(cuda::scaleBySigmoidGate(x.f32(), sharedGate.f32(), tokens, h, y.f32(),
                                          ctx->stream));
  } else {
    CHECK_CUDA(cudaMemsetAsync(y.ptr, 0, size_t(tokens * h) * 4, ctx->stream));
  }
  CHECK_CUDA(cudaEventRecord(marks[4], ctx->stream));
  CHECK_CUDA(cuda::combine(rowsOut.f32(), rowOfSlot.i32(), weights.f32(), tokens, k, h,
                           y.f32(), ctx->stream));
  CHECK_CUDA(cudaEventRecord(marks[5], ctx->stream));
  CHECK_CUDA(cudaMemcpyAsync(hostY, y.ptr, size_t(tokens * h) * 4, cudaMemcpyDeviceToHost,
                             ctx->stream));
  CHECK_CUDA(cudaStreamSynchronize(ctx->stream));
  float ms[5];
  for (int i = 0; i < 5; ++i)
    CHECK_CUDA(cudaEventElapsedTime(&ms[i], marks[i], marks[i + 1]));
  metrics.seconds.routerGemm = ms[0] / 1e3;
  metrics.seconds.policy = ms[1] / 1e3;
  metrics.seconds.permute = ms[2] / 1e3;
  metrics.seconds.ffn = ms[3] / 1e3;
  metrics.seconds.combine = ms[4] / 1e3;
  return true;
}

// Internal names: libSwitchyardExecutor's openCudaDevice / loadCudaLayer (the loader)
// would otherwise interpose on them.
std::shared_ptr<void> openDevice(int ordinal, std::string &error) {
  int count = 0; // left unwritten by cudart without a driver
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    error = "--device cuda: no usable GPU (cudaGetDeviceCount: " + cudaText(status) + ")";
    return nullptr;
  }
  if (ordinal >= count) {
    error = "--device cuda:" + std::to_string(ordinal) + ": this machine has " +
            std::to_string(count) + " GPU(s)";
    return nullptr;
  }
  auto ctx = std::make_shared<CudaContext>();
  ctx->ordinal = ordinal;
  if ((status = cudaSetDevice(ordinal)) != cudaSuccess ||
      (status = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) !=
          cudaSuccess) {
    error = "--device cuda:" + std::to_string(ordinal) + ": " + cudaText(status);
    return nullptr;
  }
  if (cublasCreate(&ctx->blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(ctx->blas, ctx->stream) != CUBLAS_STATUS_SUCCESS) {
    error = "--device cuda:" + std::to_string(ordinal) + ": cuBLAS failed to initialize";
    return nullptr;
  }
  // Float32 GEMMs stay float32 (no TF32): the layer must match the references to 1e-4.
  cublasSetMathMode(ctx->blas, CUBLAS_PEDANTIC_MATH);
  return ctx;
}

std::unique_ptr<Layer> loadLayer(const std::shared_ptr<void> &device,
                                 const model::MoeConfig &config,
                                 const model::SafetensorsCheckpoint &ckpt, int64_t l,
                                 const std::string &artifacts,
                                 const ExecutorOptions &options, std::string &error) {
  auto layer = std::make_unique<CudaLayer>();
  layer->ctx = std::static_pointer_cast<CudaContext>(device);
  layer->config = &config;
  layer->layer = l;
  const int64_t h = config.hidden, e = config.experts;
  layer->policy = runtime::CudaPolicy::load(artifacts, options.entry, error);
  if (!layer->policy)
    return nullptr;
  if (!layer->policy->signature().knobs.empty()) {
    std::vector<uint8_t> knobs;
    if (!runtime::packKnobs(layer->policy->signature().knobs, options.knobSettings, knobs,
                            error))
      return nullptr;
    cudaError_t status = layer->knobs.reserve(knobs.size());
    if (status == cudaSuccess)
      status =
          cudaMemcpy(layer->knobs.ptr, knobs.data(), knobs.size(), cudaMemcpyHostToDevice);
    if (status != cudaSuccess) {
      error =
          "layer " + std::to_string(l) + ": the knob struct: " + cudaGetErrorString(status);
      return nullptr;
    }
  }
  const model::TensorView *norm = ckpt.require(config.postAttentionNorm(l), {h}, error);
  const model::TensorView *router =
      norm ? ckpt.require(config.routerWeight(l), {e, h}, error) : nullptr;
  if (!router || !upload(*router, layer->router, error))
    return nullptr;
  layer->norm.resize(size_t(h));
  model::widenToFloat(*norm, 0, h, layer->norm.data());
  std::vector<float> zeros(size_t(e), 0.0f);
  if (config.sigmoidScoring) {
    const model::TensorView *bias = ckpt.require(config.correctionBias(l), {e}, error);
    if (!bias || !upload(*bias, layer->bias, error))
      return nullptr;
  } else if (layer->bias.reserve(zeros.size() * 4) != cudaSuccess ||
             cudaMemcpy(layer->bias.ptr, zeros.data(), zeros.size() * 4,
                        cudaMemcpyHostToDevice) != cudaSuccess) {
    error = "cannot allocate the correction bias on the GPU";
    return nullptr;
  }
  layer->experts.resize(size_t(e));
  for (int64_t x = 0; x < e; ++x)
    if (!uploadFfn(ckpt, config.expertWeight(l, x, "gate"), config.expertWeight(l, x, "up"),
                   config.expertWeight(l, x, "down"), h, config.expertIntermediate,
                   layer->experts[x], error))
      return nullptr;
  if (config.sharedIntermediate > 0 &&
      !uploadFfn(ckpt, config.sharedWeight(l, "gate"), config.sharedWeight(l, "up"),
                 config.sharedWeight(l, "down"), h, config.sharedIntermediate,
                 layer->shared, error))
    return nullptr;
  if (config.sharedExpertGate) {
    const model::TensorView *gate = ckpt.require(config.sharedGateWeight(l), {1, h}, error);
    if (!gate || !upload(*gate, layer->sharedGate, error))
      return nullptr;
  }
  return layer;
}

} // namespace

} // namespace switchyard::exec

namespace switchyard::exec::cuda { // CudaExperts.cpp
std::unique_ptr<memory::DeviceBackend> openBackend(const std::shared_ptr<void> &device,
                                                   std::string &error);
bool expertFfn(const std::shared_ptr<void> &device, const memory::DeviceExpert &expert,
               const float *x, int64_t n, float *y, std::string &error);
} // namespace switchyard::exec::cuda

extern "C" __attribute__((visibility("default"))) const switchyard::exec::CudaLayerPlugin *
switchyard_cuda_layer_plugin() {
  static const switchyard::exec::CudaLayerPlugin plugin{
      switchyard::exec::CudaLayerPlugin::kVersion, switchyard::exec::openDevice,
      switchyard::exec::loadLayer, switchyard::exec::cuda::openBackend,
      switchyard::exec::cuda::expertFfn};
  return &plugin;
}

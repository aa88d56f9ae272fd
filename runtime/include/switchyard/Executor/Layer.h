//===- Layer.h - one MoE block on some device -------------------*- C++ -*-===//
//
// What the executor's stack calls per MoE layer, whatever runs it: the host
// (MoeLayer: OpenBLAS) or a CUDA GPU (CudaLayer: cuBLAS and the policy's compiled
// kernels). Hidden states come and go as host arrays; routing, metrics and errors are
// the same on every device.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_LAYER_H
#define SWITCHYARD_EXECUTOR_LAYER_H

#include "switchyard/Executor/Metrics.h"
#include "switchyard/Executor/Routing.h"

namespace switchyard::exec {

class Layer {
public:
  virtual ~Layer() = default;
  /// The checkpoint's layer index.
  virtual int64_t index() const = 0;
  /// post_attention_layernorm's weight [H], widened.
  virtual const std::vector<float> &postAttentionNorm() const = 0;
  /// y[T, H] = the MoE block on x[T, H] (host arrays). With `replay` the routing is that
  /// one (its ids checked); otherwise the layer's router computes it into `routing`.
  virtual bool forward(const float *x, int64_t tokens, const BatchInfo &batch,
                       const Routing *replay, Routing &routing, float *y,
                       LayerMetrics &metrics, std::string &error) = 0;
};

} // namespace switchyard::exec

#endif

//===- linked_launcher.cpp - a policy's GPU launcher linked into an engine --===//
//
// The other way to ship a policy to a GPU engine: compile it at the engine's build time
// (CMakeLists.txt runs the installed moe-compile --target=all --launcher-library) and
// link the generated launcher library, calling `topk_softmax_launch` from its header
// like any CUDA library. Here: topk_softmax for 64 experts, top-8. The runtime sizes the
// buffers from the artifact's manifest and runs the host entry too, to compare.
//
//   linked_launcher [--tokens T]     exit 1 with the reason on a machine without a GPU
//
//===----------------------------------------------------------------------===//
#include "topk_softmax_launch.h"

#include "switchyard/Runtime/HostPolicy.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace switchyard;

int main(int argc, char **argv) {
  int64_t tokens = 16;
  if (argc == 3 && std::string(argv[1]) == "--tokens")
    tokens = std::strtoll(argv[2], nullptr, 10);
  char reason[256] = {0};
  if (topk_softmax_gpu_available(reason, sizeof reason) <= 0) {
    std::fprintf(stderr, "linked_launcher: no usable GPU: %s\n", reason);
    return 1;
  }
  std::string error;
  std::unique_ptr<runtime::HostPolicy> host =
      runtime::HostPolicy::load(TOPK_SOFTMAX_ARTIFACTS, "", error);
  if (!host) {
    std::fprintf(stderr, "linked_launcher: %s\n", error.c_str());
    return 1;
  }
  // The host entry on random logits: the reference, and the buffers' sizes.
  std::vector<float> logits(size_t(tokens * 64));
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  for (float &x : logits)
    x = normal(rng);
  runtime::CallBuffers call(host->signature());
  if (!call.bind("logits", npy::makeF32({tokens, 64}, logits.data()), "logits", error) ||
      !call.finish(error) || !host->run(call, {}, error)) {
    std::fprintf(stderr, "linked_launcher: %s\n", error.c_str());
    return 1;
  }
  const auto &params = host->signature().params;
  std::vector<void *> device(params.size(), nullptr);
  for (size_t i = 0; i < params.size(); ++i) {
    size_t bytes =
        size_t(params[i].elementsFor(tokens).value_or(0) * params[i].elementBytes());
    cudaMalloc(&device[i], bytes ? bytes : 1);
    if (!params[i].isOutput)
      cudaMemcpy(device[i], call.buffers()[i], bytes, cudaMemcpyHostToDevice);
  }
  void *workspace = nullptr;
  cudaMalloc(&workspace, size_t(topk_softmax_workspace_bytes(tokens)) + 1);
  int32_t status = topk_softmax_launch(
      tokens, static_cast<const float *>(device[0]), static_cast<int32_t *>(device[1]),
      static_cast<float *>(device[2]), static_cast<uint8_t *>(device[3]),
      static_cast<int32_t *>(device[4]), static_cast<int32_t *>(device[5]),
      static_cast<int32_t *>(device[6]), static_cast<int32_t *>(device[7]),
      static_cast<int32_t *>(device[8]), static_cast<int32_t *>(device[9]), workspace,
      nullptr);
  if (status != 0 || cudaDeviceSynchronize() != cudaSuccess) {
    std::fprintf(stderr, "linked_launcher: launch failed (%d)\n", status);
    return 1;
  }
  std::vector<int32_t> ids(size_t(tokens * 8));
  cudaMemcpy(ids.data(), device[1], ids.size() * 4, cudaMemcpyDeviceToHost);
  const int32_t *want = static_cast<const int32_t *>(call.buffers()[1]);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] != want[i]) {
      std::fprintf(stderr, "linked_launcher: GPU and host differ at %zu\n", i);
      return 1;
    }
  std::printf("linked_launcher: %lld tokens routed on the GPU = host\n", (long long)tokens);
  return 0;
}

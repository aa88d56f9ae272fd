//===- engine.cpp - routing a batch with the installed Switchyard runtime --===//
//
// What a C++ serving engine does with Switchyard: compile a policy for its model's shape
// once (the policy cache runs the installed moe-compile), load the entry, bind the
// batch's router logits by name and call it; on a GPU machine, launch the same policy
// on a CUDA stream through its generated launcher library.
//
//   engine [--policy P.mlir] [--experts E] [--top-k K] [--tokens T | --logits X.npy]
//          [--set k=v] [--device host|cuda] [--repeat N] [--out-ids IDS.npy]
//
// Prints the first tokens' experts and weights, and with --repeat the mean time of one
// call of the compiled entry (binding included), in microseconds.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Runtime/CudaPolicy.h"
#include "switchyard/Runtime/HostPolicy.h"
#include "switchyard/Runtime/PolicyCache.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#ifdef ENGINE_WITH_CUDA
#include <cuda_runtime.h>
#endif

using namespace switchyard;

static const char *const kUsage =
    "usage: engine [--policy P.mlir] [--experts E] [--top-k K]\n"
    "              [--tokens T | --logits X.npy] [--set k=v] [--device host|cuda]\n"
    "              [--repeat N] [--out-ids IDS.npy]\n";

static int fail(const std::string &message) {
  std::fprintf(stderr, "engine: %s\n", message.c_str());
  return 1;
}

int main(int argc, char **argv) {
  std::string policy = std::string(ENGINE_POLICY_DIR) + "/topk_softmax.mlir";
  std::string device = "host";
  int64_t experts = 64, topK = 8, tokens = 16, repeat = 0;
  std::vector<std::string> knobs;
  std::string logitsPath, outIds;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "engine: %s needs a value\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    auto number = [&]() -> int64_t {
      std::string v = value();
      char *end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 0) {
        std::fprintf(stderr, "engine: %s: '%s' is not a count\n", a.c_str(), v.c_str());
        std::exit(1);
      }
      return n;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--policy")
      policy = value();
    else if (a == "--experts")
      experts = number();
    else if (a == "--top-k")
      topK = number();
    else if (a == "--tokens")
      tokens = number();
    else if (a == "--repeat")
      repeat = number();
    else if (a == "--set")
      knobs.push_back(value());
    else if (a == "--device")
      device = value();
    else if (a == "--logits")
      logitsPath = value();
    else if (a == "--out-ids")
      outIds = value();
    else
      return fail("unknown option '" + a + "'\n" + kUsage);
  }
  if (device != "host" && device != "cuda")
    return fail("--device must be host or cuda, got '" + device + "'");
  setenv("SWITCHYARD_MOE_COMPILE", ENGINE_MOE_COMPILE, /*overwrite=*/0);

  // 1. Compile once per (policy text, shape, target): later runs hit the cache.
  runtime::PolicyCache cache;
  runtime::CompileRequest request;
  request.policyPath = policy;
  request.flags = {"--experts", std::to_string(experts), "--top-k", std::to_string(topK)};
  if (device == "cuda") {
    request.target = "all";
    request.flags.push_back("--launcher-library");
  }
  std::string dir, error;
  bool hit = false;
  if (!cache.artifacts(request, dir, error, &hit))
    return fail(error);
  std::printf("policy %s: %s (%s)\n", policy.c_str(), dir.c_str(),
              hit ? "cached" : "compiled");

  // 2. The batch's router logits: a file, or random.
  npy::Array array;
  if (!logitsPath.empty()) {
    if (!npy::load(logitsPath, "--logits (" + logitsPath + ")", array, error))
      return fail(error);
    tokens = array.shape.empty() ? 0 : array.shape[0];
  } else {
    std::vector<float> logits(size_t(tokens * experts));
    std::mt19937 rng(0);
    std::normal_distribution<float> normal;
    for (float &x : logits)
      x = normal(rng);
    array = npy::makeF32({tokens, experts}, logits.data());
  }

  if (device == "cuda") {
#ifdef ENGINE_WITH_CUDA
    std::unique_ptr<runtime::CudaPolicy> gpu = runtime::CudaPolicy::load(dir, "", error);
    if (!gpu)
      return fail(error);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      return fail("--device cuda: no CUDA device is available");
    // Every buffer on the device: the logits in, each result out.
    runtime::CallBuffers host(gpu->signature());
    if (!host.bind("logits", array, "logits", error) || !host.finish(error))
      return fail(error);
    std::vector<void *> buffers(host.buffers().size(), nullptr);
    const auto &params = gpu->signature().params;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].isScalar()) { // its value in device memory (the kernels read it)
        int64_t value = host.scalars()[i];
        cudaMalloc(&buffers[i], 8);
        cudaMemcpy(buffers[i], &value, params[i].elementBytes(), cudaMemcpyHostToDevice);
        continue;
      }
      size_t bytes =
          size_t(params[i].elementsFor(tokens).value_or(0) * params[i].elementBytes());
      cudaMalloc(&buffers[i], bytes ? bytes : 1);
      if (!params[i].isOutput)
        cudaMemcpy(buffers[i], host.buffers()[i], bytes, cudaMemcpyHostToDevice);
    }
    void *workspace = nullptr;
    cudaMalloc(&workspace, size_t(std::max<int64_t>(gpu->workspaceBytes(tokens), 1)));
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    if (!gpu->launch(tokens, buffers, /*deviceKnobs=*/nullptr, workspace, stream, error))
      return fail(error);
    cudaStreamSynchronize(stream);
    std::vector<int32_t> ids(size_t(tokens * topK));
    cudaMemcpy(ids.data(), buffers[1], ids.size() * 4, cudaMemcpyDeviceToHost);
    std::printf("token 0 (GPU): experts");
    for (int64_t j = 0; j < topK; ++j)
      std::printf(" %d", ids[size_t(j)]);
    std::printf("\n");
    return 0;
#else
    return fail("--device cuda: this engine was built without the CUDA toolkit");
#endif
  }

  // 3. Host: load the entry, bind by name, call.
  std::unique_ptr<runtime::HostPolicy> host = runtime::HostPolicy::load(dir, "", error);
  if (!host)
    return fail(error);
  std::vector<uint8_t> knobBytes;
  if (!host->packKnobs(knobs, knobBytes, error))
    return fail(error);
  auto route = [&](runtime::CallBuffers &call) {
    return call.bind("logits", array, "logits", error) && call.finish(error) &&
           host->run(call, knobBytes, error);
  };
  runtime::CallBuffers call(host->signature());
  if (!route(call))
    return fail(error);
  int64_t ids = call.findOutput("topk_ids"), weights = call.findOutput("topk_weights");
  if (ids < 0 || weights < 0)
    return fail("@" + host->signature().entry + " has no topk_ids / topk_weights results");
  npy::Array idArray = call.output(size_t(ids)), weightArray = call.output(size_t(weights));
  if (!outIds.empty() && !npy::save(outIds, idArray, error))
    return fail(error);
  for (int64_t t = 0; t < std::min<int64_t>(tokens, 2); ++t) {
    std::printf("token %lld:", (long long)t);
    for (int64_t j = 0; j < idArray.shape[1]; ++j)
      std::printf(" %d (%.4f)", idArray.i32()[t * idArray.shape[1] + j],
                  weightArray.f32()[t * idArray.shape[1] + j]);
    std::printf("\n");
  }
  if (repeat > 0) {
    auto start = std::chrono::steady_clock::now();
    for (int64_t r = 0; r < repeat; ++r) {
      runtime::CallBuffers again(host->signature());
      if (!route(again))
        return fail(error);
    }
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        double(repeat);
    std::printf("per call: %.2f us (T=%lld, E=%lld, k=%lld, bind + run)\n", us,
                (long long)tokens, (long long)experts, (long long)topK);
  }
  return 0;
}

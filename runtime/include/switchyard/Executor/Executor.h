//===- Executor.h - the MoE blocks of a checkpoint, end to end --*- C++ -*-===//
//
// Loads a Hugging Face checkpoint (config.json + safetensors) and a compiled routing
// policy bound to its shape (through the policy cache: compiled once per policy text,
// model and target), and runs batches through its MoE layers:
//   stack:  h <- h + MoE_l(RMSNorm_l(h)) for each MoE layer l (post_attention_layernorm)
//   blocks: y_l = MoE_l(x) for each layer on the same x (the HF MoE block's forward)
// Attention and dense MLP layers are the engine's business: they are not run.
// Every layer's routing can be recorded and replayed.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_EXECUTOR_H
#define SWITCHYARD_EXECUTOR_EXECUTOR_H

#include "switchyard/Comm/Communicator.h"
#include "switchyard/Executor/EpMoeLayer.h"
#include "switchyard/Executor/MoeLayer.h"
#include "switchyard/Memory/ExpertMemory.h"
#include "switchyard/Runtime/PolicyCache.h"
#include "switchyard/Runtime/Status.h"

#include <map>

namespace switchyard::exec {

struct ExecutorOptions {
  std::string modelDir;
  std::string policyPath; // empty: the model's native routing
  std::string entry;      // the router in the policy file (empty: the only one)
  std::vector<std::string> knobSettings;  // "name=value"
  int64_t firstLayer = 0, lastLayer = -1; // checkpoint layer range [first, last); -1: all
  std::string device = "host";            // host | cuda | cuda:N
  /// Expert parallelism: this rank's view of the job (nullptr or one rank: all experts
  /// here). The stack then runs on this rank's token slice with the global batch's
  /// metadata.
  comm::Communicator *comm = nullptr;
  /// Live EPLB with expert parallelism (window 0: off; slots 0: E + E/8 redundant,
  /// rounded up to a multiple of the ranks).
  EplbOptions eplb;
  /// Libra with expert parallelism: lookahead replicas and two-stage execution;
  /// "name=value" settings of policies/libra.mlir's knobs.
  bool libra = false;
  std::vector<std::string> libraSettings;
  /// Expert memory under a device budget (host emulation): off unless `memoryOn`.
  bool memoryOn = false;
  memory::MemoryOptions memory;
};

class Executor {
public:
  /// Failures: kBadFile (config.json, the checkpoint, a cached policy), kCompileFailed
  /// (the policy), kInvalidKnob (a knob setting), kDevice (no usable GPU), else
  /// kInvalidArgument (an option).
  static std::unique_ptr<Executor> create(const ExecutorOptions &options,
                                          runtime::PolicyCache &cache,
                                          runtime::Status &status);
  static std::unique_ptr<Executor> create(const ExecutorOptions &options,
                                          runtime::PolicyCache &cache, std::string &error) {
    runtime::Status status;
    std::unique_ptr<Executor> executor = create(options, cache, status);
    status.report(error);
    return executor;
  }

  const model::MoeConfig &config() const { return cfg; }
  const std::vector<std::unique_ptr<Layer>> &layers() const { return moeLayers; }
  /// The policy file used (the native one when none was given) and its entry.
  const std::string &policyPath() const { return policyFile; }
  const runtime::Signature &policySignature() const { return router->signature(); }
  const std::string &deviceName() const { return deviceText; }
  /// Whether the host layers' routings keep the router logits they were computed from
  /// (Routing::logits; moe-exec --capture). Off by default: no copy.
  void recordLogits(bool on) { router->recordLogits(on); }

  /// The stack on hidden states h[T, H] (in place). `replay` maps layer -> routing.
  bool runStack(std::vector<float> &h, int64_t tokens, const BatchInfo &batch,
                const std::map<int64_t, Routing> *replay,
                std::map<int64_t, Routing> &routings, std::vector<LayerMetrics> &metrics,
                std::string &error);
  /// Each layer's block on the same x[T, H]: outputs[l] = MoE_l(x).
  bool runBlocks(const std::vector<float> &x, int64_t tokens, const BatchInfo &batch,
                 const std::map<int64_t, Routing> *replay,
                 std::map<int64_t, Routing> &routings,
                 std::map<int64_t, std::vector<float>> &outputs,
                 std::vector<LayerMetrics> &metrics, std::string &error);

  /// What expert memory did in the last runStack / runBlocks (nullptr without it).
  const MemoryMetrics *memoryMetrics() const { return memory ? &lastMemory : nullptr; }

private:
  /// create()'s work; `code` says what kind of failure a null result is.
  static std::unique_ptr<Executor> build(const ExecutorOptions &options,
                                         runtime::PolicyCache &cache, std::string &error,
                                         runtime::StatusCode &code);
  bool beginStep(std::string &error);
  void endStep();

  model::MoeConfig cfg;
  std::unique_ptr<model::SafetensorsCheckpoint> ckpt;
  std::shared_ptr<ExpertMover> mover; // balancers' weight transfers (EP only)
  std::string policyFile, deviceText = "host";
  std::unique_ptr<Router> router;
  std::shared_ptr<void> device; // the CUDA context of --device cuda
  std::vector<std::unique_ptr<Layer>> moeLayers;
  std::vector<float> normed;
  std::unique_ptr<memory::ExpertMemory> memory; // declared after the layers it hooks
  MemoryMetrics lastMemory;
};

/// The directory holding the shipped policies: $SWITCHYARD_POLICY_DIR, else an installed
/// package's share/switchyard/policies beside this library, else (a build tree) the
/// source tree's policies/.
std::string shippedPolicyDir();

} // namespace switchyard::exec

#endif

//===- PolicyBinding.cpp - compiled policies, called from Python ----------===//
//
// switchyard._switchyard.compile(...) runs the policy cache (moe-compile once per
// policy text, flags and target); Policy loads an entry of the artifact directory for
// the host (dlopen) or CUDA (its launcher library) and calls it on caller memory:
// inputs are bound without copies where their dtype is the entry's, outputs are
// written straight into arrays the caller allocated (torch.empty, np.empty).
//
//===----------------------------------------------------------------------===//
#include "Bindings.h"

#include <nanobind/stl/map.h>

#include "switchyard/Runtime/CudaPolicy.h"
#include "switchyard/Runtime/HostPolicy.h"
#include "switchyard/Runtime/PolicyCache.h"
#include "switchyard/Runtime/StepRouter.h"

#include <optional>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace switchyard::python {

namespace {

runtime::PolicyCache &cacheFor(const std::string &root) {
  // One cache per root for the life of the process (its mutex serialises compiles).
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<runtime::PolicyCache>> caches;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<runtime::PolicyCache> &cache = caches[root];
  if (!cache)
    cache = std::make_unique<runtime::PolicyCache>(root);
  return *cache;
}

std::pair<std::string, bool> compilePolicy(const std::string &policyPath,
                                           const std::vector<std::string> &flags,
                                           const std::string &target,
                                           const std::string &cacheRoot) {
  runtime::CompileRequest request{policyPath, flags, target};
  runtime::PolicyCache &cache =
      cacheFor(cacheRoot.empty() ? runtime::PolicyCache::defaultRoot() : cacheRoot);
  std::string dir;
  bool hit = false;
  runtime::Status status;
  {
    nb::gil_scoped_release release; // a miss runs the compiler for a while
    status = cache.artifacts(request, dir, &hit);
  }
  if (!status.isOk())
    fail(status);
  return {dir, hit};
}

class Policy {
public:
  Policy(const std::string &dir, const std::string &entry, bool cuda) {
    runtime::Status status;
    if (cuda) {
      gpu = runtime::CudaPolicy::load(dir, entry, status);
      if (!gpu)
        fail(status);
      sig = gpu->signature();
    } else {
      host = runtime::HostPolicy::load(dir, entry, status);
      if (!host)
        fail(status);
      sig = host->signature();
    }
    directory = dir;
  }

  const runtime::Signature &signature() const { return sig; }

  /// Runs on the host: `inputs` maps names to arrays (or ints for scalars), `outputs`
  /// names to preallocated arrays (results left out are computed into scratch).
  int64_t run(nb::dict inputs, nb::dict outputs, const std::vector<std::string> &knobs) {
    if (!host)
      fail("@" + sig.entry + " was loaded for CUDA; call it with CUDA tensors");
    runtime::CallBuffers call(sig);
    bindAll(call, inputs, outputs, /*device=*/false);
    std::vector<uint8_t> knobBytes = packKnobs(knobs);
    runtime::Status status;
    {
      nb::gil_scoped_release release;
      status = host->run(call, knobBytes);
    }
    if (!status.isOk())
      fail(status);
    return call.tokens();
  }

  /// Launches on a CUDA stream (a cudaStream_t as an integer, 0: the legacy default)
  /// with device arrays, each scalar input's value in device memory (`scalars`: name ->
  /// device pointer), a device workspace of workspace_bytes(tokens) and the knob struct
  /// in device memory (knob_struct's bytes; 0: the defaults).
  int64_t launch(nb::dict inputs, nb::dict outputs,
                 const std::map<std::string, uintptr_t> &scalars, uintptr_t knobs,
                 uintptr_t workspace, uintptr_t stream) {
    if (!gpu)
      fail("@" + sig.entry + " was loaded for the host; compile it with target=\"cuda\"");
    runtime::CallBuffers call(sig);
    bindAll(call, inputs, outputs, /*device=*/true);
    std::vector<void *> buffers = call.buffers();
    for (size_t i = 0; i < sig.params.size(); ++i) {
      if (sig.params[i].kind != runtime::ParamKind::Scalar)
        continue;
      auto found = scalars.find(sig.params[i].name);
      if (found == scalars.end())
        fail("argument '" + sig.params[i].name +
             "': a scalar input of a GPU launch is given in device memory (scalars=)");
      buffers[i] = reinterpret_cast<void *>(found->second);
    }
    runtime::Status status =
        gpu->launch(call.tokens(), buffers, reinterpret_cast<const void *>(knobs),
                    reinterpret_cast<void *>(workspace), reinterpret_cast<void *>(stream));
    if (!status.isOk())
      fail(status);
    return call.tokens();
  }

  int64_t workspaceBytes(int64_t tokens) const {
    if (!gpu)
      fail("@" + sig.entry + " has no GPU launcher loaded");
    return gpu->workspaceBytes(tokens);
  }

  /// The knob struct for `overrides` ("name=value"), checked against each knob's rules.
  std::vector<uint8_t> packKnobs(const std::vector<std::string> &overrides) const {
    std::vector<uint8_t> bytes;
    if (sig.knobs.empty()) {
      if (!overrides.empty())
        fail(runtime::StatusCode::kInvalidKnob,
             "knob " + overrides.front() + ": @" + sig.entry + " has no run-time knobs");
      return bytes;
    }
    std::string error;
    if (!runtime::packKnobs(sig.knobs, overrides, bytes, error))
      fail(runtime::StatusCode::kInvalidKnob, error);
    return bytes;
  }

  /// The knob struct for `overrides` as bytes (engines pack once, pass per call).
  nb::bytes knobStruct(const std::vector<std::string> &overrides) const {
    std::vector<uint8_t> bytes = packKnobs(overrides);
    return nb::bytes(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  }

  std::string directory;
  const runtime::HostPolicy *hostPolicy() const { return host.get(); }
  /// Shared with the step routers bound to it (they outlive the Python object).
  const std::shared_ptr<const runtime::HostPolicy> &sharedHost() const { return host; }
  const std::shared_ptr<const runtime::CudaPolicy> &sharedGpu() const { return gpu; }

private:
  void bindAll(runtime::CallBuffers &call, nb::dict inputs, nb::dict outputs, bool device) {
    std::string error;
    for (auto [key, value] : inputs) {
      std::string name = nb::cast<std::string>(key);
      std::string what = "argument '" + name + "'";
      if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
        if (!call.bindScalar(name, nb::cast<int64_t>(value), error))
          fail(error);
        continue;
      }
      nb::ndarray<> array;
      if (!nb::try_cast(value, array))
        fail(what + ": expected an array (NumPy, or a tensor with __dlpack__), got " +
             nb::cast<std::string>(nb::str(value.type())));
      runtime::TensorView view = viewOf(array, what);
      if (view.onDevice != device)
        fail(what + (device ? ": host memory given to a CUDA launch"
                            : ": CUDA memory given to a host call"));
      if (!call.bindView(name, view, what, error))
        fail(error);
    }
    for (auto [key, value] : outputs) {
      std::string name = nb::cast<std::string>(key);
      nb::ndarray<> array;
      if (!nb::try_cast(value, array))
        fail("result '" + name + "': expected an array to write into");
      runtime::TensorView view = viewOf(array, "result '" + name + "'");
      if (view.onDevice != device)
        fail("result '" + name + "': memory on the wrong device");
      if (!call.bindOutput(name, view, error))
        fail(error);
    }
    // On a GPU every result needs device memory (on the host a result the caller did
    // not ask for is computed into the call's scratch).
    if (device)
      for (const runtime::Param &p : sig.params)
        if (p.isOutput && !outputs.contains(p.name.c_str()))
          fail("result '" + p.name +
               "': a CUDA launch needs device memory for every result");
    if (!call.finish(error))
      fail(error);
  }

  runtime::Signature sig;
  std::shared_ptr<const runtime::HostPolicy> host;
  std::shared_ptr<const runtime::CudaPolicy> gpu;
};

} // namespace

void bindPolicies(nb::module_ &m) {
  m.def("compile", &compilePolicy, nb::arg("policy_path"), nb::arg("flags"),
        nb::arg("target") = "host", nb::arg("cache_dir") = "",
        "Compiles a policy file through the policy cache (moe-compile once per policy "
        "text, flags and target); returns (artifact directory, cache hit).");
  m.def("default_cache_dir", &runtime::PolicyCache::defaultRoot);
  m.def("compiler_path", &runtime::PolicyCache::compilerPath);
  nb::class_<Policy>(m, "Policy")
      .def(nb::init<const std::string &, const std::string &, bool>(), nb::arg("directory"),
           nb::arg("entry") = "", nb::arg("cuda") = false)
      .def_ro("directory", &Policy::directory)
      .def_prop_ro("signature", &Policy::signature, nb::rv_policy::reference_internal)
      .def("run", &Policy::run, nb::arg("inputs"), nb::arg("outputs"), nb::arg("knobs"))
      .def("launch", &Policy::launch, nb::arg("inputs"), nb::arg("outputs"),
           nb::arg("scalars"), nb::arg("knobs"), nb::arg("workspace"), nb::arg("stream"))
      .def("workspace_bytes", &Policy::workspaceBytes, nb::arg("tokens"))
      .def("check_knobs", [](const Policy &p,
                             const std::vector<std::string> &knobs) { p.packKnobs(knobs); })
      .def("knob_struct", &Policy::knobStruct, nb::arg("knobs"))
      .def(
          "bind_step_router",
          [](const Policy &self, const std::vector<const Policy *> &narrow,
             const std::vector<npy::DType> &narrowDtypes,
             const std::vector<std::string> &layerInputs, int64_t experts,
             const std::vector<std::string> &knobs, const std::string &label,
             const std::vector<const Policy *> &cuda,
             const std::vector<npy::DType> &cudaDtypes, uintptr_t deviceKnobs,
             uintptr_t devicePhase, int64_t pinned) {
            if (!self.sharedHost())
              fail("bind_step_router: the policy was loaded for CUDA (a step router runs "
                   "on the host)");
            std::vector<runtime::StepRouter::Entry> entries{{self.sharedHost()}};
            for (size_t i = 0; i < narrow.size() && i < narrowDtypes.size(); ++i)
              entries.push_back({narrow[i]->sharedHost(), narrowDtypes[i]});
            std::vector<runtime::CudaStepRouter::Entry> gpuEntries;
            for (size_t i = 0; i < cuda.size() && i < cudaDtypes.size(); ++i) {
              if (!cuda[i]->sharedGpu())
                fail("bind_step_router: a CUDA entry was loaded for the host");
              gpuEntries.push_back({cuda[i]->sharedGpu(), cudaDtypes[i]});
            }
            return registerStepRouter(std::move(entries), layerInputs, experts, knobs,
                                      label, std::move(gpuEntries),
                                      reinterpret_cast<const void *>(deviceKnobs),
                                      reinterpret_cast<const void *>(devicePhase), pinned);
          },
          nb::arg("narrow"), nb::arg("narrow_dtypes"), nb::arg("layer_inputs"),
          nb::arg("experts"), nb::arg("knobs"), nb::arg("label"),
          nb::arg("cuda") = std::vector<const Policy *>(),
          nb::arg("cuda_dtypes") = std::vector<npy::DType>(), nb::arg("device_knobs") = 0,
          nb::arg("device_phase") = 0, nb::arg("pinned") = -1,
          "Binds the policy (float32 logits; `narrow`: the same policy compiled to read "
          "the logits dtypes `narrow_dtypes` in place) as a step router; `cuda`: its GPU "
          "launchers (the logits dtypes `cuda_dtypes`, float32 first) reading the knob "
          "struct at `device_knobs` (device memory; 0: the defaults) and the step's phase "
          "at "
          "`device_phase` (an int32 in device memory); `pinned`: the handle of the step "
          "router that routes pinned requests (the model's own routing; -1: none). "
          "Returns its handle (runtime::StepRouter).");
}

} // namespace switchyard::python

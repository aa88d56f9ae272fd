//===- CudaPolicy.cpp - a compiled policy's GPU launcher, loaded ----------===//
#include "switchyard/Runtime/CudaPolicy.h"
#include "switchyard/Runtime/Binding.h"

#include <dlfcn.h>

namespace switchyard::runtime {

/// Where the launcher did not load: the CUDA runtime it links, when that is what is
/// missing (dlerror names it; or, built with the toolkit, libcudart.so.MAJOR does not
/// load either), with the dynamic loader's words; empty otherwise.
static std::string missingCudaRuntime(const std::string &why) {
  if (why.find("libcudart") != std::string::npos)
    return "libcudart";
#ifdef SWITCHYARD_CUDA_MAJOR
  const std::string name = std::string("libcudart.so.") + SWITCHYARD_CUDA_MAJOR;
  if (void *cudart = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(cudart);
    return "";
  }
  const char *text = dlerror();
  return name + ", which does not load: " + (text ? text : "unknown dlopen error");
#else
  return "";
#endif
}

std::unique_ptr<CudaPolicy> CudaPolicy::load(const std::string &dir,
                                             const std::string &name, Status &status) {
  std::unique_ptr<CudaPolicy> policy(new CudaPolicy);
  std::string error;
  auto failed = [&](StatusCode code) {
    status = Status(code, error);
    return nullptr;
  };
  if (!readManifestEntry(dir, name, policy->entry, error))
    return failed(StatusCode::kBadFile);
  if (policy->entry.gpuLibrary.empty()) {
    error =
        "@" + policy->entry.signature.entry + " in '" + dir +
        "' has no GPU launcher library (compile it with --target=ptx --launcher-library)";
    return failed(StatusCode::kInvalidArgument);
  }
  // The launcher must be the one moe-compile wrote (before dlopen runs any of its code).
  const std::string library = dir + "/" + policy->entry.gpuLibrary;
  if (!checkFileDigest(library, policy->entry.files.at(policy->entry.gpuLibrary), error))
    return failed(StatusCode::kBadFile);
  policy->library = SharedLibrary::open(library, error);
  if (!policy->library) {
    const std::string missing = missingCudaRuntime(error);
    if (missing.empty())
      return failed(StatusCode::kBadFile);
    error += ". The GPU launcher needs the CUDA runtime (" + missing +
             ") and a CUDA driver: install them (the CUDA toolkit or NVIDIA's CUDA runtime "
             "package) or add the directory that holds them to LD_LIBRARY_PATH";
    return failed(StatusCode::kDevice);
  }
  policy->launcher = reinterpret_cast<void (*)(void **)>(
      policy->library->symbol(policy->entry.gpuSymbol, error));
  policy->workspace = reinterpret_cast<int64_t (*)(int64_t)>(
      policy->library->symbol(policy->entry.workspaceSymbol, error));
  if (!policy->launcher || !policy->workspace)
    return failed(StatusCode::kBadFile);
  status = Status::ok();
  return policy;
}

Status CudaPolicy::launch(int64_t tokens, const std::vector<void *> &buffers,
                          const void *deviceKnobs, void *workspacePtr, void *stream) const {
  // The launcher's parameters: those of the host entry (scalars and the knob struct as
  // device pointers), then workspace and stream.
  PackedArguments packed(entry.signature, tokens, buffers, {}, deviceKnobs,
                         {workspacePtr, stream}, /*scalarsInBuffers=*/true);
  launcher(packed.arguments().data());
  int32_t status = packed.status();
  // Negative: the launcher's own status (the token count); positive: a cudaError_t.
  if (status < 0)
    return entryStatus(entry.signature, -status,
                       "@" + entry.signature.entry + " GPU launch");
  if (status == 0)
    return Status::ok();
  return {StatusCode::kDevice, "@" + entry.signature.entry + " GPU launch returned " +
                                   std::to_string(status) + " (a cudaError_t)"};
}

} // namespace switchyard::runtime

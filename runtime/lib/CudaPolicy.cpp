//===- CudaPolicy.cpp - a compiled policy's GPU launcher, loaded ----------===//
#include "switchyard/Runtime/CudaPolicy.h"

#include <dlfcn.h>

namespace switchyard::runtime {

std::unique_ptr<CudaPolicy> CudaPolicy::load(const std::string &dir, const std::string &name,
                                             std::string &error) {
  Manifest manifest;
  if (!readManifest(dir, manifest, error))
    return nullptr;
  const ManifestEntry *found = manifest.find(name, error);
  if (!found)
    return nullptr;
  if (found->gpuLibrary.empty()) {
    error = "@" + found->signature.entry + " in '" + dir +
            "' has no GPU launcher library (compile it with --target=ptx --launcher-library)";
    return nullptr;
  }
  std::unique_ptr<CudaPolicy> policy(new CudaPolicy);
  policy->entry = *found;
  std::string path = dir + "/" + found->gpuLibrary;
  policy->library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!policy->library) {
    const char *why = dlerror();
    error = "cannot load '" + path + "': " + (why ? why : "unknown dlopen error");
    return nullptr;
  }
  policy->launcher = reinterpret_cast<void (*)(void **)>(
      dlsym(policy->library, found->gpuSymbol.c_str()));
  policy->workspace = reinterpret_cast<int64_t (*)(int64_t)>(
      dlsym(policy->library, found->workspaceSymbol.c_str()));
  if (!policy->launcher || !policy->workspace) {
    error = "'" + path + "' lacks '" + found->gpuSymbol + "' or '" + found->workspaceSymbol + "'";
    return nullptr;
  }
  return policy;
}

CudaPolicy::~CudaPolicy() {
  if (library)
    dlclose(library);
}

bool CudaPolicy::launch(int64_t tokens, const std::vector<void *> &buffers,
                        const std::vector<int64_t> &scalars, const std::vector<uint8_t> &knobs,
                        void *workspacePtr, void *stream, std::string &error) const {
  const Signature &sig = entry.signature;
  std::vector<void *> values(buffers);
  std::vector<int32_t> scalar32(sig.params.size());
  std::vector<int64_t> scalar64(sig.params.size());
  std::vector<void *> packed{&tokens};
  for (size_t i = 0; i < sig.params.size(); ++i) {
    if (sig.params[i].kind != "scalar") {
      packed.push_back(&values[i]);
    } else if (sig.params[i].dtype == "int64") {
      scalar64[i] = scalars[i];
      packed.push_back(&scalar64[i]);
    } else {
      scalar32[i] = static_cast<int32_t>(scalars[i]);
      packed.push_back(&scalar32[i]);
    }
  }
  const void *knobStruct = knobs.empty() ? nullptr : knobs.data();
  if (!sig.knobs.empty())
    packed.push_back(&knobStruct);
  int32_t status = -1;
  packed.push_back(&workspacePtr);
  packed.push_back(&stream);
  packed.push_back(&status);
  launcher(packed.data());
  if (status == 0)
    return true;
  error = "@" + sig.entry + " GPU launch returned " + std::to_string(status) +
          (status < 0 ? ": " + statusMessage(sig, -status) : " (a cudaError_t)");
  return false;
}

} // namespace switchyard::runtime

//===- HostPolicy.cpp - a compiled policy entry loaded for the host -------===//
#include "switchyard/Runtime/HostPolicy.h"

#include <dlfcn.h>

namespace switchyard::runtime {

std::unique_ptr<HostPolicy> HostPolicy::load(const std::string &dir, const std::string &name,
                                             std::string &error) {
  Manifest manifest;
  if (!readManifest(dir, manifest, error))
    return nullptr;
  const ManifestEntry *found = manifest.find(name, error);
  if (!found)
    return nullptr;
  if (found->hostLibrary.empty()) {
    error = "@" + found->signature.entry + " in '" + dir +
            "' has no host code (compile it with --target=host or --target=all)";
    return nullptr;
  }
  std::unique_ptr<HostPolicy> policy(new HostPolicy);
  policy->dir = dir;
  policy->entry = *found;
  std::string path = dir + "/" + found->hostLibrary;
  // RTLD_LOCAL: two policies with the same entry name never see each other's symbols.
  policy->library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!policy->library) {
    const char *why = dlerror();
    error = "cannot load '" + path + "': " + (why ? why : "unknown dlopen error");
    return nullptr;
  }
  policy->function =
      reinterpret_cast<PackedFn>(dlsym(policy->library, found->hostSymbol.c_str()));
  if (!policy->function) {
    error = "'" + path + "' has no symbol '" + found->hostSymbol +
            "' (written by an older moe-compile? recompile the policy)";
    return nullptr;
  }
  return policy;
}

HostPolicy::~HostPolicy() {
  if (library)
    dlclose(library);
}

bool HostPolicy::packKnobs(const std::vector<std::string> &overrides,
                           std::vector<uint8_t> &knobs, std::string &error) const {
  knobs.clear();
  if (entry.signature.knobs.empty()) {
    if (overrides.empty())
      return true;
    error = "--set " + overrides.front() + ": @" + entry.signature.entry +
            " has no run-time knobs";
    return false;
  }
  return runtime::packKnobs(entry.signature.knobs, overrides, knobs, error);
}

bool HostPolicy::run(CallBuffers &call, const std::vector<uint8_t> &knobs,
                     std::string &error) const {
  PackedArguments packed(entry.signature, call.tokens(), call.buffers(), call.scalars(),
                         knobs.empty() ? nullptr : knobs.data());
  function(packed.arguments().data());
  if (packed.status() != 0) {
    error = "@" + entry.signature.entry + " returned status " +
            std::to_string(packed.status()) + ": " +
            statusMessage(entry.signature, packed.status());
    return false;
  }
  return true;
}

} // namespace switchyard::runtime

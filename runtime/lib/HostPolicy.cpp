//===- HostPolicy.cpp - a compiled policy entry loaded for the host -------===//
#include "switchyard/Runtime/HostPolicy.h"

namespace switchyard::runtime {

std::unique_ptr<HostPolicy> HostPolicy::load(const std::string &dir,
                                             const std::string &name, std::string &error) {
  std::unique_ptr<HostPolicy> policy(new HostPolicy);
  policy->dir = dir;
  if (!readManifestEntry(dir, name, policy->entry, error))
    return nullptr;
  if (policy->entry.hostLibrary.empty()) {
    error = "@" + policy->entry.signature.entry + " in '" + dir +
            "' has no host code (compile it with --target=host or --target=all)";
    return nullptr;
  }
  policy->library = SharedLibrary::open(dir + "/" + policy->entry.hostLibrary, error);
  if (!policy->library)
    return nullptr;
  policy->function =
      reinterpret_cast<PackedFn>(policy->library->symbol(policy->entry.hostSymbol, error));
  return policy->function ? std::move(policy) : nullptr;
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
  return this->call(packed, error);
}

bool HostPolicy::call(PackedArguments &packed, std::string &error) const {
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

//===- HostPolicy.cpp - a compiled policy entry loaded for the host -------===//
#include "switchyard/Runtime/HostPolicy.h"

namespace switchyard::runtime {

std::unique_ptr<HostPolicy> HostPolicy::load(const std::string &dir,
                                             const std::string &name, Status &status) {
  std::unique_ptr<HostPolicy> policy(new HostPolicy);
  policy->dir = dir;
  std::string error;
  auto badFile = [&]() {
    status = Status(StatusCode::kBadFile, error);
    return nullptr;
  };
  if (!readManifestEntry(dir, name, policy->entry, error))
    return badFile();
  if (policy->entry.hostLibrary.empty()) {
    status =
        Status(StatusCode::kInvalidArgument,
               "@" + policy->entry.signature.entry + " in '" + dir +
                   "' has no host code (compile it with --target=host or --target=all)");
    return nullptr;
  }
  // The library must be the one moe-compile wrote (before dlopen runs any of its code).
  const std::string library = dir + "/" + policy->entry.hostLibrary;
  if (!checkFileDigest(library, policy->entry.files.at(policy->entry.hostLibrary), error))
    return badFile();
  policy->library = SharedLibrary::open(library, error);
  if (!policy->library)
    return badFile();
  policy->function =
      reinterpret_cast<PackedFn>(policy->library->symbol(policy->entry.hostSymbol, error));
  if (!policy->function)
    return badFile();
  status = Status::ok();
  return policy;
}

Status HostPolicy::packKnobs(const std::vector<std::string> &overrides,
                             std::vector<uint8_t> &knobs) const {
  knobs.clear();
  if (entry.signature.knobs.empty()) {
    if (overrides.empty())
      return Status::ok();
    return {StatusCode::kInvalidKnob, "--set " + overrides.front() + ": @" +
                                          entry.signature.entry + " has no run-time knobs"};
  }
  std::string error;
  if (!runtime::packKnobs(entry.signature.knobs, overrides, knobs, error))
    return {StatusCode::kInvalidKnob, error};
  return Status::ok();
}

Status HostPolicy::run(CallBuffers &call, const std::vector<uint8_t> &knobs) const {
  PackedArguments packed(entry.signature, call.tokens(), call.buffers(), call.scalars(),
                         knobs.empty() ? nullptr : knobs.data());
  return this->call(packed);
}

Status HostPolicy::call(PackedArguments &packed) const {
  function(packed.arguments().data());
  return entryStatus(entry.signature, packed.status(), "@" + entry.signature.entry);
}

} // namespace switchyard::runtime

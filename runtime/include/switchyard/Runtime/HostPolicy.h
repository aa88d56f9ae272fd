//===- HostPolicy.h - a compiled policy entry loaded for the host -*- C++ -*-===//
//
// Loads one entry of an artifact directory (manifest.json + libNAME.so) with dlopen
// and calls its packed symbol on buffers bound by name (CallBuffers), with the knob
// struct packed from `name=value` settings. Thread-safe: a call allocates only its
// own temporaries. No LLVM/MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_HOSTPOLICY_H
#define SWITCHYARD_RUNTIME_HOSTPOLICY_H

#include "switchyard/Runtime/Binding.h"
#include "switchyard/Runtime/Manifest.h"
#include "switchyard/Runtime/SharedLibrary.h"
#include "switchyard/Runtime/Status.h"

#include <memory>

namespace switchyard::runtime {

class HostPolicy {
public:
  /// Loads entry `entry` (empty: the only router) of the artifact directory `dir`.
  /// Failures: kBadFile (the manifest or library), kInvalidArgument (no host code).
  static std::unique_ptr<HostPolicy> load(const std::string &dir, const std::string &entry,
                                          Status &status);
  static std::unique_ptr<HostPolicy> load(const std::string &dir, const std::string &entry,
                                          std::string &error) {
    Status status;
    std::unique_ptr<HostPolicy> policy = load(dir, entry, status);
    status.report(error);
    return policy;
  }
  HostPolicy(const HostPolicy &) = delete;
  HostPolicy &operator=(const HostPolicy &) = delete;

  const Signature &signature() const { return entry.signature; }
  const ManifestEntry &manifestEntry() const { return entry; }
  const std::string &directory() const { return dir; }

  /// The knob struct for `overrides` ("name=value"; checked against each knob's rules),
  /// empty when the entry has no run-time knobs.
  /// (kInvalidKnob otherwise).
  Status packKnobs(const std::vector<std::string> &overrides,
                   std::vector<uint8_t> &knobs) const;
  bool packKnobs(const std::vector<std::string> &overrides, std::vector<uint8_t> &knobs,
                 std::string &error) const {
    return packKnobs(overrides, knobs).report(error);
  }

  /// Runs the entry on `call` (finished: every input bound, outputs allocated); `knobs`
  /// from packKnobs, or empty for the defaults. A non-zero status is an error naming
  /// what it means (a knob rule, the token count).
  Status run(CallBuffers &call, const std::vector<uint8_t> &knobs) const;
  bool run(CallBuffers &call, const std::vector<uint8_t> &knobs, std::string &error) const {
    return run(call, knobs).report(error);
  }
  /// Calls the entry on packed arguments (BoundCall's path); a non-zero status is an
  /// error as for run().
  Status call(PackedArguments &packed) const;

private:
  HostPolicy() = default;
  using PackedFn = void (*)(void **);
  std::string dir;
  ManifestEntry entry;
  std::unique_ptr<SharedLibrary> library;
  PackedFn function = nullptr;
};

} // namespace switchyard::runtime

#endif

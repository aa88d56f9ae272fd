//===- CudaPolicy.h - a compiled policy's GPU launcher, loaded -----*- C++ -*-===//
//
// Loads the launcher library of an artifact directory (libNAME_gpu.so, built by
// `moe-compile --target=ptx --launcher-library`; it embeds the PTX and loads it with
// cudart's cudaLibraryLoadData) and launches the policy on a CUDA stream with device
// buffers, in the packed convention of the host entry. The runtime itself does not
// link cudart: streams and buffers are opaque pointers here.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_CUDAPOLICY_H
#define SWITCHYARD_RUNTIME_CUDAPOLICY_H

#include "switchyard/Runtime/Manifest.h"
#include "switchyard/Runtime/SharedLibrary.h"
#include "switchyard/Runtime/Status.h"

#include <memory>

namespace switchyard::runtime {

class CudaPolicy {
public:
  /// Entry `entry` (empty: the only router) of the artifact directory `dir`.
  /// Failures: kBadFile (the manifest or launcher library), kInvalidArgument (no
  /// launcher compiled), kDevice (the CUDA runtime or driver is missing).
  static std::unique_ptr<CudaPolicy> load(const std::string &dir, const std::string &entry,
                                          Status &status);
  static std::unique_ptr<CudaPolicy> load(const std::string &dir, const std::string &entry,
                                          std::string &error) {
    Status status;
    std::unique_ptr<CudaPolicy> policy = load(dir, entry, status);
    status.report(error);
    return policy;
  }
  CudaPolicy(const CudaPolicy &) = delete;
  CudaPolicy &operator=(const CudaPolicy &) = delete;

  const Signature &signature() const { return entry.signature; }
  /// Device workspace a launch for `tokens` tokens needs.
  int64_t workspaceBytes(int64_t tokens) const { return workspace(tokens); }

  /// Launches on `stream` (a cudaStream_t): one device pointer per parameter (a scalar
  /// input's: to its value, which the kernels read when they run), and `deviceKnobs`, the
  /// knob struct (packKnobs' bytes, checked there) in DEVICE memory or nullptr for the
  /// defaults. The kernels read the struct when they run, so a captured CUDA graph
  /// takes the knobs written there before each replay. A non-zero status (a
  /// cudaError_t, or a rejected token count) is an error naming it (kDevice,
  /// kInvalidArgument).
  Status launch(int64_t tokens, const std::vector<void *> &buffers, const void *deviceKnobs,
                void *workspace, void *stream) const;
  bool launch(int64_t tokens, const std::vector<void *> &buffers, const void *deviceKnobs,
              void *workspace, void *stream, std::string &error) const {
    return launch(tokens, buffers, deviceKnobs, workspace, stream).report(error);
  }

private:
  CudaPolicy() = default;
  ManifestEntry entry;
  std::unique_ptr<SharedLibrary> library;
  void (*launcher)(void **) = nullptr;
  int64_t (*workspace)(int64_t) = nullptr;
};

} // namespace switchyard::runtime

#endif

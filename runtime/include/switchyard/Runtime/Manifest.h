//===- Manifest.h - what a compiled policy's artifact directory holds -*- C++ -*-===//
//
// moe-compile writes DIR/manifest.json beside the artifacts: for every entry its
// signature (named arguments and results, dtypes, shapes, knobs), the model sizes it
// was bound to, the host library and packed symbol, and for GPU targets the PTX /
// cubin and the launch size classes. The runtime loads a policy from the manifest
// alone. No LLVM/MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_MANIFEST_H
#define SWITCHYARD_RUNTIME_MANIFEST_H

#include "switchyard/Runtime/FileDigest.h"
#include "switchyard/Runtime/Signature.h"

#include <map>

#include <string>
#include <vector>

namespace switchyard::runtime {

/// One launch configuration of a GPU entry for a range of token counts.
struct SizeClass {
  std::string name;
  int64_t minTokens = 0;  // inclusive
  int64_t maxTokens = -1; // inclusive; -1: unbounded
  int64_t launches = 0;
};

struct ManifestEntry {
  Signature signature;
  int64_t experts = 0, topK = 0, sharedExperts = 0; // the sizes it was bound to
  std::string hostLibrary;                          // "libNAME.so"; "" without host code
  std::string hostSymbol;                           // "NAME_packed"
  std::string ptx, cubin, gpuArch, launchMetadata;  // file names; "" without GPU code
  std::string gpuLibrary;                           // "libNAME_gpu.so": the launcher
  std::string gpuSymbol;                            // "NAME_launch_packed"
  std::string workspaceSymbol;                      // "NAME_workspace_bytes"
  std::vector<SizeClass> sizeClasses;
  /// The GPU launch metadata as JSON text (kernels, blocks, size classes, the launch
  /// cost model's inputs); "" without GPU code. `launchMetadata` names a copy of it
  /// (NAME.json) for tools that read one router.
  std::string launch;
  /// Size and SHA-256 of each file above that is not "" (the manifest's "files").
  std::map<std::string, FileDigest> files;

  /// The file names this entry refers to (those that are not "").
  std::vector<std::string> fileNames() const;
};

struct Manifest {
  // 2: "files" records each artifact's size and SHA-256.
  static constexpr int kVersion = 2;
  std::string policy;               // the source file
  std::string target;               // host, ptx, cuda or all
  std::vector<std::string> command; // the moe-compile command line
  std::vector<ManifestEntry> entries;

  /// The entry named `name`, or with an empty name the only router; nullptr with
  /// `error` listing the entries otherwise.
  const ManifestEntry *find(const std::string &name, std::string &error) const;
};

std::string toJson(const Manifest &manifest);
/// Records the size and SHA-256 of every file the entries name, as they are in `dir`
/// (moe-compile, after writing them).
bool recordFileDigests(const std::string &dir, Manifest &manifest, std::string &error);
/// Checks every file the manifest names against its recorded digest.
bool checkFileDigests(const std::string &dir, const Manifest &manifest, std::string &error);
/// Reads DIR/manifest.json; false with a message naming the file and field otherwise.
bool readManifest(const std::string &dir, Manifest &manifest, std::string &error);
/// The entry `name` (empty: the only router) of DIR/manifest.json.
bool readManifestEntry(const std::string &dir, const std::string &name,
                       ManifestEntry &entry, std::string &error);

} // namespace switchyard::runtime

#endif

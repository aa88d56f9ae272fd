//===- PolicyCache.h - compile a policy once per shape and target -*- C++ -*-===//
//
// An engine asks for (policy text, shape flags, target) and gets an artifact
// directory: on a miss the cache runs moe-compile (a separate process: the runtime
// never links the compiler) into a temporary directory and publishes it with one
// rename, so concurrent processes never see a half-written entry; on a hit it returns
// the directory at once. The key hashes the policy text (not its path), the flags, the
// target and the compiler binary's identity (size, modification time), so editing the
// policy or rebuilding the compiler never serves stale code.
//
// Root: $SWITCHYARD_CACHE_DIR, else $XDG_CACHE_HOME/switchyard, else
// ~/.cache/switchyard. Compiler: $SWITCHYARD_MOE_COMPILE, else moe-compile beside
// the running executable, else on PATH.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_POLICYCACHE_H
#define SWITCHYARD_RUNTIME_POLICYCACHE_H

#include "switchyard/Runtime/Status.h"

#include <mutex>
#include <string>
#include <vector>

namespace switchyard::runtime {

struct CompileRequest {
  std::string policyPath;         // the .mlir file
  std::vector<std::string> flags; // --model config.json, --experts 8, --set k=v, ...
  std::string target = "host";    // moe-compile --target
};

class PolicyCache {
public:
  explicit PolicyCache(std::string root = defaultRoot());

  /// The artifact directory for `request`, compiling on a miss; `hit` says which.
  /// A compile error (kCompileFailed) carries the compiler's own diagnostics
  /// (file:line:col); an unreadable policy or model file is kBadFile.
  Status artifacts(const CompileRequest &request, std::string &dir, bool *hit = nullptr);
  bool artifacts(const CompileRequest &request, std::string &dir, std::string &error,
                 bool *hit = nullptr) {
    return artifacts(request, dir, hit).report(error);
  }

  /// The key of `request` (16 hex digits), or "" with `error` when the policy or the
  /// compiler cannot be read.
  std::string key(const CompileRequest &request, std::string &error) const;

  const std::string &root() const { return rootDir; }
  static std::string defaultRoot();
  /// The moe-compile this process runs; "" when none is found.
  static std::string compilerPath();

private:
  std::string rootDir;
  std::mutex mutex; // one compile at a time in this process
};

} // namespace switchyard::runtime

#endif

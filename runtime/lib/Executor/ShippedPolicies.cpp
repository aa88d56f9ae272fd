//===- ShippedPolicies.cpp - the policies/ directory and its rules --------===//
//
// Where the shipped policies are (the source tree, an installed package, or
// $SWITCHYARD_POLICY_DIR) and how the runtime compiles one of them for a model through
// the policy cache. Kept apart so that code needing only these (the expert memory
// modes, their sanitizer tests) does not pull in the whole executor.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Executor/BalanceRules.h"
#include "switchyard/Executor/Executor.h"

#include <cstdlib>
#include <dlfcn.h>
#include <sys/stat.h>

namespace switchyard::exec {

std::string shippedPolicyDir() {
  if (const char *dir = std::getenv("SWITCHYARD_POLICY_DIR"); dir && *dir)
    return dir;
  struct stat info;
  // An installed package (a wheel, `cmake --install`): share/switchyard/policies beside
  // this library's lib/. First, so that an installed copy never reads the source tree
  // it was built from.
  Dl_info self;
  if (dladdr(reinterpret_cast<void *>(&shippedPolicyDir), &self) && self.dli_fname) {
    std::string lib(self.dli_fname);
    std::string dir =
        lib.substr(0, lib.find_last_of('/')) + "/../share/switchyard/policies";
    if (stat(dir.c_str(), &info) == 0)
      return dir;
  }
  // The build tree: the source tree's policies/.
#ifdef SWITCHYARD_SOURCE_POLICY_DIR
  if (stat(SWITCHYARD_SOURCE_POLICY_DIR, &info) == 0)
    return SWITCHYARD_SOURCE_POLICY_DIR;
#endif
  return "policies";
}

std::shared_ptr<runtime::HostPolicy>
compileShipped(const model::MoeConfig &config, const std::string &file,
               const std::string &entry, std::vector<std::string> flags,
               runtime::PolicyCache &cache, std::string &error) {
  runtime::CompileRequest request;
  request.policyPath = shippedPolicyDir() + "/" + file;
  request.flags = {"--model", config.path, "--entry", entry, "--allow-unused-sizes"};
  request.flags.insert(request.flags.end(), flags.begin(), flags.end());
  std::string dir;
  if (!cache.artifacts(request, dir, error))
    return nullptr;
  return runtime::HostPolicy::load(dir, entry, error);
}

} // namespace switchyard::exec

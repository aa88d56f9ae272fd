//===- SharedLibrary.cpp - a compiled policy's library, dlopen'ed ---------===//
#include "switchyard/Runtime/SharedLibrary.h"

#include <dlfcn.h>

namespace switchyard::runtime {

std::unique_ptr<SharedLibrary> SharedLibrary::open(const std::string &path, std::string &error) {
  std::unique_ptr<SharedLibrary> lib(new SharedLibrary);
  lib->path = path;
  lib->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) {
    const char *why = dlerror();
    error = "cannot load '" + path + "': " + (why ? why : "unknown dlopen error");
    return nullptr;
  }
  return lib;
}

SharedLibrary::~SharedLibrary() {
  if (handle)
    dlclose(handle);
}

void *SharedLibrary::symbol(const std::string &name, std::string &error) const {
  void *address = dlsym(handle, name.c_str());
  if (!address)
    error = "'" + path + "' has no symbol '" + name +
            "' (written by an older moe-compile? recompile the policy)";
  return address;
}

} // namespace switchyard::runtime

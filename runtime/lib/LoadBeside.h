//===- LoadBeside.h - a plug-in library dlopen'ed beside its loader -*- C++ -*-===//
//
// The parts of the runtime that need a system library a serving machine may lack (the
// --device cuda layer, the NCCL and MPI communicators) live in libraries of their own,
// loaded on first use the way IREE loads its HAL drivers: a library that links them
// (cudart, cuBLAS, NCCL, libmpi) would not load at all where they are missing, and
// `import switchyard` with it. The plug-in sits beside the library that
// loads it (build tree and install alike: INSTALL_RPATH $ORIGIN), found through
// dladdr() of an address in the loader; RTLD_NOW so that a missing dependency is an
// error here, with dlerror()'s text, and never closed (the layers and communicators it
// makes run its code until the process ends). Internal to runtime/lib.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_LIB_LOADBESIDE_H
#define SWITCHYARD_RUNTIME_LIB_LOADBESIDE_H

#include <dlfcn.h>
#include <sys/stat.h>

#include <functional>
#include <string>

namespace switchyard::plugin {

/// dlopen()s `file` from the directory of the object that holds `anchor`, and returns
/// the address of `symbol` in it; nullptr with `path` (what was tried) and `why` (the
/// dynamic loader's words) otherwise. `missing` says the plug-in itself is not there.
inline void *loadBeside(const void *anchor, const char *file, const char *symbol,
                        std::string &path, std::string &why, bool &missing) {
  missing = false;
  path = file;
  Dl_info info{};
  if (dladdr(anchor, &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    size_t slash = self.rfind('/');
    if (slash != std::string::npos)
      path = self.substr(0, slash + 1) + file;
  }
  struct stat st {};
  if (path.find('/') != std::string::npos && stat(path.c_str(), &st) != 0) {
    missing = true;
    why = "no such file";
    return nullptr;
  }
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *text = dlerror();
    why = text ? text : "unknown dlopen error";
    return nullptr;
  }
  void *address = dlsym(handle, symbol);
  if (!address) {
    why = "it has no symbol '" + std::string(symbol) + "' (a library of another build?)";
    dlclose(handle);
    return nullptr;
  }
  return address;
}

/// A plug-in's table of entry points, loaded once: `table`, or why not in `error`.
template <typename Table> struct LoadedPlugin {
  const Table *table = nullptr;
  std::string error;
};

/// Loads the plug-in `file` beside `anchor` and takes its table from the extern "C"
/// function `symbol` (a `Table` with `int version` equal to Table::kVersion). Errors:
/// `missingText(path)` where the plug-in is not installed, `cannotLoadText(path, why)`
/// where it or a library it needs does not load, and a table of another build.
template <typename Table>
LoadedPlugin<Table>
loadPlugin(const void *anchor, const char *file, const char *symbol,
           const std::function<std::string(const std::string &)> &missingText,
           const std::function<std::string(const std::string &, const std::string &)>
               &cannotLoadText) {
  LoadedPlugin<Table> result;
  std::string path, why;
  bool missing = false;
  void *entry = loadBeside(anchor, file, symbol, path, why, missing);
  if (missing) {
    result.error = missingText(path);
  } else if (!entry) {
    result.error = cannotLoadText(path, why);
  } else {
    using Entry = const Table *(*)();
    const Table *table = reinterpret_cast<Entry>(entry)();
    if (!table || table->version != Table::kVersion)
      result.error =
          "'" + path + "' is a plug-in of another build of Switchyard " + "(reinstall it)";
    else
      result.table = table;
  }
  return result;
}

} // namespace switchyard::plugin

#endif

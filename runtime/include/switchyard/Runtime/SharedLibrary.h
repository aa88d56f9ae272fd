//===- SharedLibrary.h - a compiled policy's library, dlopen'ed --*- C++ -*-===//
//
// The host library (libNAME.so) and the GPU launcher library (libNAME_gpu.so) of an
// artifact directory are loaded the same way: RTLD_NOW | RTLD_LOCAL (two policies with
// the same entry name never see each other's symbols), symbols looked up by the names
// the manifest gives, closed when the last user goes.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_SHAREDLIBRARY_H
#define SWITCHYARD_RUNTIME_SHAREDLIBRARY_H

#include <memory>
#include <string>

namespace switchyard::runtime {

class SharedLibrary {
public:
  static std::unique_ptr<SharedLibrary> open(const std::string &path, std::string &error);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary &) = delete;
  SharedLibrary &operator=(const SharedLibrary &) = delete;

  /// The address of `name`; nullptr with `error` naming the library otherwise.
  void *symbol(const std::string &name, std::string &error) const;

private:
  SharedLibrary() = default;
  std::string path;
  void *handle = nullptr;
};

} // namespace switchyard::runtime

#endif

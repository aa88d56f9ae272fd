//===- SharedLibrary.cpp - a compiled policy's library, dlopen'ed ---------===//
#include "switchyard/Runtime/SharedLibrary.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace switchyard::runtime {

namespace {

/// The most bytes a policy library may have (they are a few hundred KiB).
constexpr off_t kMaxLibraryBytes = off_t(1) << 30;

std::string realPath(const std::string &path) {
  char buffer[PATH_MAX];
  return realpath(path.c_str(), buffer) ? std::string(buffer) : path;
}

/// Whether `path` is a whole 64-bit ELF shared object: every program header's bytes
/// and the section headers lie inside the file. dlopen maps a truncated file and the
/// process dies of SIGBUS on the first page past its end, so this is checked first.
bool wholeElf(const std::string &path, std::string &error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > kMaxLibraryBytes) {
    error = "'" + path + "' is not a regular file of at most 1 GiB";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char *>(&eh), sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_type != ET_DYN || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    error = "'" + path + "' is not a 64-bit ELF shared library";
    return false;
  }
  const uint64_t size = uint64_t(st.st_size);
  auto outside = [&](uint64_t offset, uint64_t bytes) {
    return offset > size || bytes > size - offset;
  };
  if (outside(eh.e_phoff, uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr)) ||
      (eh.e_shoff && outside(eh.e_shoff, uint64_t(eh.e_shnum) * eh.e_shentsize))) {
    error = "'" + path + "' is truncated (" + std::to_string(size) +
            " bytes; its headers reach further)";
    return false;
  }
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  in.seekg(std::streamoff(eh.e_phoff));
  if (!in.read(reinterpret_cast<char *>(ph.data()),
               std::streamsize(ph.size() * sizeof ph[0]))) {
    error = "'" + path + "' is truncated (its program headers cannot be read)";
    return false;
  }
  for (const Elf64_Phdr &p : ph)
    if (p.p_type == PT_LOAD && outside(p.p_offset, p.p_filesz)) {
      error = "'" + path + "' is truncated (" + std::to_string(size) +
              " bytes; a segment ends at " + std::to_string(p.p_offset + p.p_filesz) + ")";
      return false;
    }
  return true;
}

} // namespace

std::unique_ptr<SharedLibrary> SharedLibrary::open(const std::string &path,
                                                   std::string &error) {
  if (!wholeElf(path, error)) {
    error = "cannot load " + error + " (a damaged cache entry? remove it to recompile)";
    return nullptr;
  }
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
  if (!address) {
    error = "'" + path + "' has no symbol '" + name +
            "' (written by an older moe-compile? recompile the policy)";
    return nullptr;
  }
  // dlsym also finds the library's dependencies' symbols (libc's free): a manifest may
  // only name what the policy library itself defines.
  Dl_info info{};
  if (!dladdr(address, &info) || !info.dli_fname ||
      realPath(info.dli_fname) != realPath(path)) {
    error = "'" + path + "' does not define '" + name + "' (it resolves to " +
            (info.dli_fname ? std::string("'") + info.dli_fname + "'" : "another object") +
            "): the manifest names a symbol outside the policy library";
    return nullptr;
  }
  return address;
}

} // namespace switchyard::runtime

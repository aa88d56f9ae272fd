//===- SharedLibrary.cpp - a compiled policy's library, dlopen'ed ---------===//
#include "switchyard/Runtime/SharedLibrary.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

namespace switchyard::runtime {

namespace {

/// The most bytes a policy library may have (they are a few hundred KiB).
constexpr off_t kMaxLibraryBytes = off_t(1) << 30;

std::string realPath(const std::string &path) {
  char buffer[PATH_MAX];
  return realpath(path.c_str(), buffer) ? std::string(buffer) : path;
}

/// Whether [address, address + bytes) lies in one loadable segment: its file-backed
/// part when `fileBacked` (tables ld.so reads), else its memory image.
bool inLoadedSegment(const std::vector<Elf64_Phdr> &ph, uint64_t address, uint64_t bytes,
                     bool fileBacked) {
  for (const Elf64_Phdr &p : ph) {
    uint64_t extent = fileBacked ? p.p_filesz : p.p_memsz;
    if (p.p_type == PT_LOAD && address >= p.p_vaddr && address - p.p_vaddr <= extent &&
        bytes <= extent - (address - p.p_vaddr))
      return true;
  }
  return false;
}

/// Whether the dynamic section, which ld.so follows without checks while it maps the
/// library, is sound: one PT_DYNAMIC inside the file and a loadable segment, ending
/// in DT_NULL, each table it points at (strings, symbols, hashes, relocations,
/// initialisers) inside a loadable segment with its size, each name inside the string
/// table. A byte flip there made dlopen itself crash (SEGV in elf_get_dynamic_info).
bool soundDynamicSection(std::ifstream &in, const std::string &path, uint64_t size,
                         const std::vector<Elf64_Phdr> &ph, std::string &error) {
  auto bad = [&](const std::string &what) {
    error = "'" + path + "' has a damaged dynamic section (" + what + ")";
    return false;
  };
  const Elf64_Phdr *dynamic = nullptr;
  for (const Elf64_Phdr &p : ph) {
    if (p.p_type == PT_LOAD && p.p_filesz > p.p_memsz)
      return bad("a loadable segment has more file bytes than memory");
    if (p.p_type != PT_DYNAMIC)
      continue;
    if (dynamic)
      return bad("two PT_DYNAMIC segments");
    dynamic = &p;
  }
  if (!dynamic)
    return bad("no PT_DYNAMIC segment");
  if (dynamic->p_offset > size || dynamic->p_filesz > size - dynamic->p_offset ||
      dynamic->p_filesz < sizeof(Elf64_Dyn) ||
      !inLoadedSegment(ph, dynamic->p_vaddr, dynamic->p_filesz, true))
    return bad("PT_DYNAMIC lies outside the file or its loadable segments");
  std::vector<Elf64_Dyn> entries(dynamic->p_filesz / sizeof(Elf64_Dyn));
  in.seekg(std::streamoff(dynamic->p_offset));
  if (!in.read(reinterpret_cast<char *>(entries.data()),
               std::streamsize(entries.size() * sizeof(Elf64_Dyn))))
    return bad("cannot be read");
  std::map<int64_t, uint64_t> value; // the first of each tag, as ld.so keeps it
  bool terminated = false;
  std::vector<uint64_t> names;
  for (const Elf64_Dyn &d : entries) {
    if (d.d_tag == DT_NULL) {
      terminated = true;
      break;
    }
    value.emplace(d.d_tag, d.d_un.d_val);
    if (d.d_tag == DT_NEEDED || d.d_tag == DT_SONAME || d.d_tag == DT_RPATH ||
        d.d_tag == DT_RUNPATH)
      names.push_back(d.d_un.d_val);
  }
  if (!terminated)
    return bad("no DT_NULL entry");
  if (!value.count(DT_STRTAB) || !value.count(DT_STRSZ) || !value.count(DT_SYMTAB))
    return bad("no string or symbol table");
  // Tables with a size tag: the whole table is read from the file.
  static const std::pair<int64_t, int64_t> sized[] = {
      {DT_STRTAB, DT_STRSZ},
      {DT_RELA, DT_RELASZ},
      {DT_REL, DT_RELSZ},
      {DT_JMPREL, DT_PLTRELSZ},
      {DT_INIT_ARRAY, DT_INIT_ARRAYSZ},
      {DT_FINI_ARRAY, DT_FINI_ARRAYSZ},
      {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ}};
  for (const auto &[table, bytes] : sized) {
    auto address = value.find(table);
    if (address == value.end())
      continue;
    auto length = value.find(bytes);
    if (length == value.end() ||
        !inLoadedSegment(ph, address->second, length->second,
                         table != DT_INIT_ARRAY && table != DT_FINI_ARRAY &&
                             table != DT_PREINIT_ARRAY))
      return bad("table " + std::to_string(table) + " lies outside the loadable segments");
  }
  // Tables and code addressed without a size: the first entry at least.
  static const int64_t pointers[] = {DT_SYMTAB, DT_HASH, DT_GNU_HASH, DT_VERSYM, DT_VERNEED,
                                     DT_VERDEF, DT_INIT, DT_FINI,     DT_PLTGOT};
  for (int64_t tag : pointers) {
    auto address = value.find(tag);
    if (address != value.end() && !inLoadedSegment(ph, address->second, 8, false))
      return bad("entry " + std::to_string(tag) + " points outside the loadable segments");
  }
  for (uint64_t name : names)
    if (name >= value[DT_STRSZ])
      return bad("a library name lies outside the string table");
  if (value.count(DT_SYMENT) && value[DT_SYMENT] != sizeof(Elf64_Sym))
    return bad("symbol entries are not Elf64_Sym");
  if (value.count(DT_RELAENT) && value[DT_RELAENT] != sizeof(Elf64_Rela))
    return bad("relocation entries are not Elf64_Rela");
  return true;
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
  return soundDynamicSection(in, path, size, ph, error);
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

//===- SharedLibraryTest.cpp - a policy library the runtime cannot trust ----===//
//
// A cached policy library is a file anyone may have damaged: a truncated one is
// refused before dlopen maps it (else SIGBUS), a non-ELF one is named, and a manifest's
// symbol must be defined by the library itself, not by a dependency (libc's free);
// a damaged dynamic section, which ld.so follows unchecked, is refused before dlopen.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Runtime/SharedLibrary.h"
#include "switchyard/Runtime/Npy.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace shared_library_test {

using namespace switchyard::runtime;

namespace {

/// libSwitchyardRuntime.so, which this test links: a real shared library.
std::string runtimeLibrary() {
  Dl_info info{};
  dladdr(reinterpret_cast<void *>(&switchyard::npy::dtypeDescr), &info);
  return info.dli_fname ? info.dli_fname : "";
}

class SharedLibraryTest : public ::testing::Test {
protected:
  std::string scratch = "/tmp/switchyard-lib-test-" + std::to_string(getpid()) + ".so";
  void TearDown() override { std::remove(scratch.c_str()); }
};

TEST_F(SharedLibraryTest, OnlyTheLibrarysOwnSymbolsAreFound) {
  std::string error;
  std::unique_ptr<SharedLibrary> lib = SharedLibrary::open(runtimeLibrary(), error);
  ASSERT_TRUE(lib) << error;
  EXPECT_TRUE(lib->symbol("_ZN10switchyard3npy10dtypeDescrENS0_5DTypeE", error)) << error;
  EXPECT_EQ(lib->symbol("free", error), nullptr);
  EXPECT_NE(error.find("does not define 'free'"), std::string::npos) << error;
  EXPECT_EQ(lib->symbol("no_such_symbol", error), nullptr);
  EXPECT_NE(error.find("has no symbol 'no_such_symbol'"), std::string::npos) << error;
}

TEST_F(SharedLibraryTest, ATruncatedLibraryIsAnErrorNotASigbus) {
  std::ifstream in(runtimeLibrary(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 4096u);
  std::ofstream(scratch, std::ios::binary)
      .write(bytes.data(), std::streamsize(bytes.size() / 2));
  std::string error;
  EXPECT_FALSE(SharedLibrary::open(scratch, error));
  EXPECT_NE(error.find("is truncated"), std::string::npos) << error;
}

/// The runtime library's bytes with `damage` applied to its program headers or its
/// dynamic section, written to `path`.
template <typename Damage> void writeDamaged(const std::string &path, Damage damage) {
  std::ifstream in(runtimeLibrary(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto *eh = reinterpret_cast<Elf64_Ehdr *>(bytes.data());
  auto *ph = reinterpret_cast<Elf64_Phdr *>(bytes.data() + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i)
    if (ph[i].p_type == PT_DYNAMIC) {
      auto *dyn = reinterpret_cast<Elf64_Dyn *>(bytes.data() + ph[i].p_offset);
      damage(ph[i], dyn);
      break;
    }
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

TEST_F(SharedLibraryTest, ADamagedDynamicSectionIsRefusedBeforeDlopen) {
  writeDamaged(scratch, [](Elf64_Phdr &, Elf64_Dyn *dyn) {
    for (; dyn->d_tag != DT_NULL; ++dyn)
      if (dyn->d_tag == DT_STRTAB)
        dyn->d_un.d_ptr = 0x7fff0000000; // far outside every segment
  });
  std::string error;
  EXPECT_FALSE(SharedLibrary::open(scratch, error));
  EXPECT_NE(error.find("has a damaged dynamic section"), std::string::npos) << error;
  writeDamaged(scratch, [](Elf64_Phdr &, Elf64_Dyn *dyn) {
    for (; dyn->d_tag != DT_NULL; ++dyn)
      if (dyn->d_tag == DT_NEEDED)
        dyn->d_un.d_val = 1 << 30; // a library name past the string table
  });
  EXPECT_FALSE(SharedLibrary::open(scratch, error));
  EXPECT_NE(error.find("outside the string table"), std::string::npos) << error;
  writeDamaged(scratch, [](Elf64_Phdr &p, Elf64_Dyn *) { p.p_type = PT_NULL; });
  EXPECT_FALSE(SharedLibrary::open(scratch, error));
  EXPECT_NE(error.find("no PT_DYNAMIC segment"), std::string::npos) << error;
  // Undamaged, the same copy loads.
  writeDamaged(scratch, [](Elf64_Phdr &, Elf64_Dyn *) {});
  EXPECT_TRUE(SharedLibrary::open(scratch, error)) << error;
}

TEST_F(SharedLibraryTest, NotAnElfLibraryIsNamed) {
  std::ofstream(scratch, std::ios::binary) << "not a library";
  std::string error;
  EXPECT_FALSE(SharedLibrary::open(scratch, error));
  EXPECT_NE(error.find("is not a 64-bit ELF shared library"), std::string::npos) << error;
}

} // namespace

} // namespace shared_library_test

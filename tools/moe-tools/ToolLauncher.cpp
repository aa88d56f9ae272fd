//===- ToolLauncher.cpp - bin/moe-compile & co: run moe-tools as the tool -===//
//
// Each compiler tool is a small executable (this file, built once per tool with
// SWITCHYARD_TOOL_NAME) that replaces itself with moe-tools, the one binary holding
// LLVM and MLIR, beside it, keeping the tool's name as argv[0]. Plain C++, no LLVM.
//
//===----------------------------------------------------------------------===//
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#ifndef SWITCHYARD_TOOL_NAME
#error "SWITCHYARD_TOOL_NAME (the tool this launcher runs) is not defined"
#endif

int main(int argc, char **argv) {
  (void)argc;
  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) {
    std::fprintf(stderr, "%s: error: cannot find this executable (/proc/self/exe: %s)\n",
                 SWITCHYARD_TOOL_NAME, std::strerror(errno));
    return 1;
  }
  std::string binary(self, static_cast<size_t>(length));
  binary = binary.substr(0, binary.rfind('/') + 1) + "moe-tools";
  argv[0] = const_cast<char *>(SWITCHYARD_TOOL_NAME);
  execv(binary.c_str(), argv);
  std::fprintf(stderr,
               "%s: error: cannot run '%s': %s (the compiler tools are one binary, "
               "moe-tools, installed beside this one)\n",
               SWITCHYARD_TOOL_NAME, binary.c_str(), std::strerror(errno));
  return 1;
}

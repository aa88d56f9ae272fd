//===- PolicyCache.cpp - compile a policy once per shape and target -------===//
#include "switchyard/Runtime/PolicyCache.h"
#include "switchyard/Runtime/Manifest.h"
#include "switchyard/Runtime/UntrustedFile.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace switchyard::runtime {

namespace {
/// FNV-1a, 64 bits: stable across runs and builds (std::hash is not).
struct Fnv1a {
  uint64_t h = 1469598103934665603ull;
  void add(const std::string &s) {
    for (unsigned char c : s)
      h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; // field separator
  }
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
    return text;
  }
};

bool isExecutable(const std::string &path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

bool makeDirectories(const std::string &path) {
  std::string prefix;
  std::stringstream parts(path);
  std::string part;
  if (!path.empty() && path[0] == '/')
    prefix = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty())
      continue;
    prefix += part + "/";
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
  }
  return true;
}

void removeTree(const std::string &path) {
  pid_t pid;
  const char *argv[] = {"rm", "-rf", "--", path.c_str(), nullptr};
  if (posix_spawnp(&pid, "rm", nullptr, nullptr, const_cast<char **>(argv), environ) == 0) {
    int status;
    waitpid(pid, &status, 0);
  }
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
} // namespace

std::string PolicyCache::defaultRoot() {
  if (const char *dir = std::getenv("SWITCHYARD_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/switchyard";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/switchyard";
  return "/tmp/switchyard-cache";
}

std::string PolicyCache::compilerPath() {
  if (const char *path = std::getenv("SWITCHYARD_MOE_COMPILE"); path && *path)
    return isExecutable(path) ? path : "";
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, n);
    dir = dir.substr(0, dir.rfind('/'));
    for (const char *relative : {"/moe-compile", "/../bin/moe-compile"})
      if (isExecutable(dir + relative))
        return dir + relative;
  }
  const char *path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (isExecutable(dir + "/moe-compile"))
      return dir + "/moe-compile";
  return "";
}

PolicyCache::PolicyCache(std::string root) : rootDir(std::move(root)) {}

std::string PolicyCache::key(const CompileRequest &request, std::string &error) const {
  std::string text;
  if (!readBoundedFile(request.policyPath, "policy", limits::kPolicySource, text, error))
    return "";
  std::string compiler = compilerPath();
  struct stat st;
  if (compiler.empty() || stat(compiler.c_str(), &st) != 0) {
    error = "no moe-compile to compile '" + request.policyPath +
            "' (set SWITCHYARD_MOE_COMPILE or put it on PATH)";
    return "";
  }
  Fnv1a h;
  h.add("switchyard-policy-cache/2");
  h.add(text);
  // Flags that name files (--model config.json) hash the file's contents too.
  for (size_t i = 0; i < request.flags.size(); ++i) {
    h.add(request.flags[i]);
    if (request.flags[i] == "--model" && i + 1 < request.flags.size()) {
      std::string model;
      if (!readBoundedFile(request.flags[i + 1], "config.json", limits::kConfigJson, model,
                           error))
        return "";
      h.add(model);
    }
  }
  h.add(request.target);
  h.add(std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime));
  // moe-compile is a launcher of the one compiler binary beside it (tools/moe-tools):
  // a new compiler is a new key even when the launcher stays the same.
  std::string tools = compiler.substr(0, compiler.rfind('/') + 1) + "moe-tools";
  if (stat(tools.c_str(), &st) == 0)
    h.add(std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
          std::to_string(st.st_mtim.tv_nsec));
  return h.hex();
}

Status PolicyCache::artifacts(const CompileRequest &request, std::string &dir, bool *hit) {
  std::lock_guard<std::mutex> lock(mutex);
  std::string error;
  std::string k = key(request, error);
  if (k.empty())
    return {StatusCode::kBadFile, error};
  dir = rootDir + "/" + k;
  struct stat st;
  if (stat((dir + "/manifest.json").c_str(), &st) == 0) {
    // A hit is used only when every artifact is as moe-compile wrote it; a damaged entry
    // (truncated, bytes flipped, an old format) is compiled again.
    Manifest manifest;
    std::string damaged;
    if (readManifest(dir, manifest, damaged) && checkFileDigests(dir, manifest, damaged)) {
      if (hit)
        *hit = true;
      return Status::ok();
    }
    removeTree(dir);
  }
  if (hit)
    *hit = false;
  if (!makeDirectories(rootDir)) {
    return {StatusCode::kInternal,
            "cannot create the policy cache '" + rootDir + "': " + std::strerror(errno)};
  }
  std::string scratch = rootDir + "/tmp-" + k + "-XXXXXX";
  if (!mkdtemp(scratch.data())) {
    return {StatusCode::kInternal,
            "cannot create a directory in '" + rootDir + "': " + std::strerror(errno)};
  }
  std::vector<std::string> argv{compilerPath(), request.policyPath,
                                "--target=" + request.target, "-o", scratch};
  argv.insert(argv.end(), request.flags.begin(), request.flags.end());
  std::vector<char *> cargv;
  for (std::string &a : argv)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::string log = scratch + "/compile.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid;
  int spawned = posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (spawned != 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::string output = readFile(log);
    while (!output.empty() && output.back() == '\n')
      output.pop_back();
    error = "compiling '" + request.policyPath + "' failed" +
            (spawned != 0
                 ? std::string(": cannot run ") + cargv[0] + ": " + std::strerror(spawned)
                 : ":\n" + output);
    removeTree(scratch);
    return {StatusCode::kCompileFailed, error};
  }
  // Publish atomically; a concurrent process that published first wins.
  if (rename(scratch.c_str(), dir.c_str()) != 0) {
    removeTree(scratch);
    if (stat((dir + "/manifest.json").c_str(), &st) != 0) {
      return {StatusCode::kInternal,
              "cannot publish '" + dir + "': " + std::strerror(errno)};
    }
  }
  return Status::ok();
}

} // namespace switchyard::runtime

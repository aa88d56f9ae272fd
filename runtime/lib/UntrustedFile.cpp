//===- UntrustedFile.cpp - bounded reads of files the runtime is given ----===//
#include "switchyard/Runtime/UntrustedFile.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace switchyard::runtime {

std::string formatByteLimit(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30) && bytes % (uint64_t(1) << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (uint64_t(1) << 20) && bytes % (uint64_t(1) << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

namespace {
bool checkStat(const struct stat &st, const std::string &path, const std::string &kind,
               uint64_t maxBytes, uint64_t &size, std::string &error) {
  if (S_ISDIR(st.st_mode)) {
    error = path + ": is a directory, not a " + kind;
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error = path + ": not a regular file";
    return false;
  }
  if (uint64_t(st.st_size) > maxBytes) {
    error = path + ": " + std::to_string(st.st_size) + " bytes, more than a " + kind +
            " has (" + formatByteLimit(maxBytes) + ")";
    return false;
  }
  size = uint64_t(st.st_size);
  return true;
}
} // namespace

bool checkRegularFile(const std::string &path, const std::string &kind, uint64_t maxBytes,
                      uint64_t &size, std::string &error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    error = "cannot open " + kind + " '" + path + "': " + std::strerror(errno);
    return false;
  }
  return checkStat(st, path, kind, maxBytes, size, error);
}

bool readBoundedFile(const std::string &path, const std::string &kind, uint64_t maxBytes,
                     std::string &out, std::string &error) {
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer; the checks are
  // made on the descriptor, so the file cannot be swapped after them.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = "cannot open " + kind + " '" + path + "': " + std::strerror(errno);
    return false;
  }
  struct stat st;
  uint64_t size = 0;
  if (fstat(fd, &st) != 0 || !checkStat(st, path, kind, maxBytes, size, error)) {
    if (error.empty())
      error = "cannot open " + kind + " '" + path + "': " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  out.clear();
  out.reserve(size);
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error = "cannot read " + kind + " '" + path + "': " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0)
      break;
    if (out.size() + uint64_t(n) > maxBytes) { // it grew while being read
      error = path + ": grew past the " + formatByteLimit(maxBytes) + " a " + kind +
              " may have while it was read";
      ::close(fd);
      return false;
    }
    out.append(buffer, size_t(n));
  }
  ::close(fd);
  return true;
}

} // namespace switchyard::runtime

//===- Communicator.cpp - what every backend shares ------------------------===//
#include "switchyard/Comm/Communicator.h"

#include <cstdlib>
#include <cstring>

namespace switchyard::comm {

Communicator::~Communicator() = default;

double collectiveTimeout(const CommOptions &options) {
  if (const char *text = std::getenv("SWITCHYARD_COMM_TIMEOUT"); text && *text) {
    char *end = nullptr;
    double seconds = std::strtod(text, &end);
    if (end && !*end && seconds > 0)
      return seconds;
  }
  return options.timeoutSeconds;
}

bool agreeAllStarted(Communicator &comm, bool ok, const std::string &message,
                     std::string &error) {
  // One fixed-size record per rank: a flag and the start of its message.
  constexpr size_t kRecord = 512;
  std::vector<char> mine(kRecord, 0), all(kRecord * size_t(comm.size()), 0);
  mine[0] = ok ? 1 : 0;
  std::strncpy(mine.data() + 1, message.c_str(), kRecord - 2);
  if (!comm.allGather(mine.data(), kRecord, all.data(), error))
    return false;
  for (int r = 0; r < comm.size(); ++r) {
    const char *record = all.data() + size_t(r) * kRecord;
    if (!record[0]) {
      error = "rank " + std::to_string(r) + " failed to start: " + std::string(record + 1);
      return false;
    }
  }
  return true;
}

bool checkWorldSize(const Communicator &comm, int expected, std::string &error) {
  if (comm.size() == expected)
    return true;
  error = "--ep " + std::to_string(expected) + " asks for " + std::to_string(expected) +
          " ranks but the job has " + std::to_string(comm.size()) + " (mpirun -np " +
          std::to_string(expected) + ")";
  return false;
}

} // namespace switchyard::comm

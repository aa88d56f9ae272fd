//===- ExecCommand.h - moe-exec's command line and run loop -----*- C++ -*-===//
//
// What tools/moe-exec runs: its options (parse), the inputs they name (--input /
// --batches, --request-ids, --positions, --replay), the executor's runs (--repeat, the
// ranks of --ep) and the results written under --out, with the messages and exit
// statuses of the command. In the executor library so that the tool is a thin main
// (no LLVM/MLIR here either: policies compile through the runtime's policy cache).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_EXECCOMMAND_H
#define SWITCHYARD_EXECUTOR_EXECCOMMAND_H

#include "switchyard/Executor/Executor.h"

#include <optional>

namespace switchyard::exec {

/// moe-exec's usage text (printed by --help and after a usage error).
extern const char *const kExecUsage;

class ExecCommand {
public:
  /// Reads the command line. std::nullopt: run(); otherwise the exit status (0 after
  /// --help, 1 after a usage error, printed on stderr as "moe-exec: error: ...").
  std::optional<int> parse(int argc, char **argv);
  /// Loads the model, the policy and the inputs, runs every batch and writes the
  /// results; prints the tables. Returns the exit status (errors on stderr).
  int run();

private:
  int fail(const std::string &message) const;
  /// Whether this process prints and writes results (rank 0 of an EP job).
  bool leader() const { return !ranks || ranks->rank() == 0; }

  ExecutorOptions options;
  std::string input, out, requestIdsPath, positionsPath, phaseText, replayDir, batchesPath;
  bool blockOnly = false;
  int64_t repeat = 1, ep = 0;
  /// --capture DIR: the routing as a trace (TraceCapture); empty: off, no copies.
  std::string captureDir;
  int64_t captureMaxTokens = 65536;
  bool captureMaxGiven = false;
  /// This rank's view of an expert-parallel job (--ep), or nullptr.
  comm::Communicator *ranks = nullptr;
};

} // namespace switchyard::exec

#endif

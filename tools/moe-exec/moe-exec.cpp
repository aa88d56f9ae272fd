//===- moe-exec.cpp - run the MoE layers of a checkpoint with a compiled policy ===//
//
//   moe-exec MODEL_DIR (--input hidden.npy | --batches FILE.npz) --out DIR [options]
//   mpirun -np N moe-exec MODEL_DIR --input hidden.npy --ep N --out DIR [...]
//
// Runs the MoE layers of a Hugging Face checkpoint with a compiled routing policy and
// writes the hidden states (or each block's output), every layer's routing and the
// metrics under DIR; `moe-exec --help` lists the options. The command itself (options,
// inputs, the run loop, the results) is ExecCommand (runtime/lib/Executor/ExecCommand.cpp,
// the SwitchyardExecCommand library only this tool links): this main links no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Executor/ExecCommand.h"

int main(int argc, char **argv) {
  switchyard::exec::ExecCommand command;
  if (std::optional<int> status = command.parse(argc, argv))
    return *status;
  return command.run();
}

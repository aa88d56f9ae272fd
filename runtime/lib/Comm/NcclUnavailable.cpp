//===- NcclUnavailable.cpp - the NCCL backend of a build without NCCL -----===//
#include "switchyard/Comm/Communicator.h"

namespace switchyard::comm {

std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap, int, void *,
                                                     const CommOptions &,
                                                     std::string &error) {
  error = "nccl: this build of Switchyard has no NCCL (the CUDA toolkit with NCCL was not "
          "found at configure time); rank " +
          std::to_string(bootstrap.rank());
  return nullptr;
}

} // namespace switchyard::comm

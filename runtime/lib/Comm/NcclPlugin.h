//===- NcclPlugin.h - libSwitchyardCommNccl's entry point --------*- C++ -*-===//
//
// The NCCL communicator (NcclCommunicator.cpp: cudart and NCCL) is a library of its own,
// libSwitchyardCommNccl.so, that libSwitchyardComm.so loads on first use
// (NcclLoader.cpp), so that the MPI backend, the executor and the Python extension load
// where no CUDA library is installed. One extern "C" symbol gives its factory.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMM_NCCLPLUGIN_H
#define SWITCHYARD_COMM_NCCLPLUGIN_H

#include "switchyard/Comm/Communicator.h"

namespace switchyard::comm {

struct NcclPlugin {
  static constexpr int kVersion = 1;
  int version;
  decltype(&createNcclCommunicator) create;
};

} // namespace switchyard::comm

#define SWITCHYARD_NCCL_LIBRARY "libSwitchyardCommNccl.so"
#define SWITCHYARD_NCCL_SYMBOL "switchyard_nccl_plugin"

extern "C" const switchyard::comm::NcclPlugin *switchyard_nccl_plugin();

#endif

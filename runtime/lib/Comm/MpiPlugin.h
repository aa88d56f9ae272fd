//===- MpiPlugin.h - libSwitchyardCommMpi's entry point ----------*- C++ -*-===//
//
// The MPI communicator (MpiCommunicator.cpp: libmpi) is a library of its own,
// libSwitchyardCommMpi.so, that libSwitchyardComm.so loads on first use
// (MpiLoader.cpp), as the NCCL one: the executor and the Python extension load where
// no MPI is installed (a pip-only environment), and expert parallelism names what is
// missing. MPI must be the system's, the one its mpirun starts, so it is never bundled.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMM_MPIPLUGIN_H
#define SWITCHYARD_COMM_MPIPLUGIN_H

#include "switchyard/Comm/Communicator.h"

namespace switchyard::comm {

struct MpiPlugin {
  static constexpr int kVersion = 1;
  int version;
  decltype(&createMpiCommunicator) create;
};

/// The communicator of MpiCommunicator.cpp (what the plug-in's table gives).
std::unique_ptr<Communicator> createMpi(const CommOptions &options, std::string &error);

} // namespace switchyard::comm

#define SWITCHYARD_MPI_LIBRARY "libSwitchyardCommMpi.so"
#define SWITCHYARD_MPI_SYMBOL "switchyard_mpi_plugin"

extern "C" const switchyard::comm::MpiPlugin *switchyard_mpi_plugin();

#endif

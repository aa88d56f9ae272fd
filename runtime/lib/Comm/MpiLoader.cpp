//===- MpiLoader.cpp - the MPI backend, loaded on first use ---------------===//
//
// libSwitchyardComm.so links no MPI library: the MPI communicator is
// libSwitchyardCommMpi.so beside it, dlopen'ed the first time one is made (once per
// process, thread-safe; a failure is remembered with its reason). Where it or libmpi
// cannot be loaded, creating one is an error that says what to install.
//
//===----------------------------------------------------------------------===//
#include "../LoadBeside.h"
#include "MpiPlugin.h"

namespace switchyard::comm {

namespace {

const plugin::LoadedPlugin<MpiPlugin> &mpiPlugin() {
  static const plugin::LoadedPlugin<MpiPlugin> loaded = plugin::loadPlugin<MpiPlugin>(
      reinterpret_cast<const void *>(&createMpiCommunicator), SWITCHYARD_MPI_LIBRARY,
      SWITCHYARD_MPI_SYMBOL,
      [](const std::string &path) {
        return "this installation of Switchyard lacks its MPI backend '" + path +
               "' (reinstall Switchyard)";
      },
      [](const std::string &path, const std::string &why) {
        return "cannot load the MPI backend '" + path + "': " + why +
               ". Expert parallelism runs one process per device under mpirun and needs "
               "the MPI library that mpirun belongs to: install OpenMPI (Debian/Ubuntu: "
               "openmpi-bin libopenmpi3) or add the directory of its libmpi.so.40 to "
               "LD_LIBRARY_PATH";
      });
  return loaded;
}

} // namespace

std::unique_ptr<Communicator> createMpiCommunicator(const CommOptions &options,
                                                    std::string &error) {
  const plugin::LoadedPlugin<MpiPlugin> &loaded = mpiPlugin();
  if (!loaded.table) {
    error = "mpi: " + loaded.error;
    return nullptr;
  }
  return loaded.table->create(options, error);
}

} // namespace switchyard::comm

//===- NcclLoader.cpp - the NCCL backend, loaded on first use -------------===//
//
// libSwitchyardComm.so links no CUDA library: the NCCL communicator (cudart, NCCL) is
// libSwitchyardCommNccl.so beside it, dlopen'ed the first time one is made (once per
// process, thread-safe; a failure is remembered with its reason). Where it or a library
// it needs cannot be loaded, creating one is an error that names what is missing and
// how to get it.
//
//===----------------------------------------------------------------------===//
#include "../LoadBeside.h"
#include "NcclPlugin.h"

#ifndef SWITCHYARD_CUDA_MAJOR
#define SWITCHYARD_CUDA_MAJOR ""
#endif

namespace switchyard::comm {

namespace {

const plugin::LoadedPlugin<NcclPlugin> &ncclPlugin() {
  static const plugin::LoadedPlugin<NcclPlugin> loaded = plugin::loadPlugin<NcclPlugin>(
      reinterpret_cast<const void *>(&createNcclCommunicator), SWITCHYARD_NCCL_LIBRARY,
      SWITCHYARD_NCCL_SYMBOL,
      [](const std::string &path) {
        return "this installation of Switchyard lacks its NCCL backend '" + path +
               "' (reinstall Switchyard, built with the CUDA toolkit and NCCL)";
      },
      [](const std::string &path, const std::string &why) {
        const std::string major = SWITCHYARD_CUDA_MAJOR;
        return "cannot load the NCCL backend '" + path + "': " + why +
               ". It needs NCCL (libnccl.so.2) and the CUDA " +
               (major.empty() ? "" : major + " ") + "runtime (libcudart" +
               (major.empty() ? "" : ".so." + major) +
               "): install them (NCCL and the CUDA toolkit, or NVIDIA's packages of "
               "them) or add the directory that holds them to LD_LIBRARY_PATH";
      });
  return loaded;
}

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap, int device,
                                                     void *stream,
                                                     const CommOptions &options,
                                                     std::string &error) {
  const plugin::LoadedPlugin<NcclPlugin> &loaded = ncclPlugin();
  if (!loaded.table) {
    error = "nccl: " + loaded.error + " (rank " + std::to_string(bootstrap.rank()) + ")";
    return nullptr;
  }
  return loaded.table->create(bootstrap, device, stream, options, error);
}

} // namespace switchyard::comm

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

struct LoadedPlugin {
  const NcclPlugin *plugin = nullptr;
  std::string error;
};

const LoadedPlugin &ncclPlugin() {
  static const LoadedPlugin loaded = [] {
    LoadedPlugin result;
    std::string path, why;
    bool missing = false;
    void *entry = plugin::loadBeside(
        reinterpret_cast<const void *>(&createNcclCommunicator), SWITCHYARD_NCCL_LIBRARY,
        SWITCHYARD_NCCL_SYMBOL, path, why, missing);
    const std::string major = SWITCHYARD_CUDA_MAJOR;
    if (missing) {
      result.error = "this installation of Switchyard lacks its NCCL backend '" + path +
                     "' (reinstall Switchyard, built with the CUDA toolkit and NCCL)";
    } else if (!entry) {
      result.error = "cannot load the NCCL backend '" + path + "': " + why +
                     ". It needs NCCL (libnccl.so.2) and the CUDA " +
                     (major.empty() ? "" : major + " ") + "runtime (libcudart" +
                     (major.empty() ? "" : ".so." + major) +
                     "): install them (NCCL and the CUDA toolkit, or NVIDIA's packages of "
                     "them) or add the directory that holds them to LD_LIBRARY_PATH";
    } else {
      using Entry = const NcclPlugin *(*)();
      const NcclPlugin *table = reinterpret_cast<Entry>(entry)();
      if (!table || table->version != NcclPlugin::kVersion)
        result.error = "'" + path +
                       "' is the NCCL backend of another build of Switchyard "
                       "(reinstall it)";
      else
        result.plugin = table;
    }
    return result;
  }();
  return loaded;
}

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap, int device,
                                                     void *stream,
                                                     const CommOptions &options,
                                                     std::string &error) {
  const LoadedPlugin &loaded = ncclPlugin();
  if (!loaded.plugin) {
    error = "nccl: " + loaded.error + " (rank " + std::to_string(bootstrap.rank()) + ")";
    return nullptr;
  }
  return loaded.plugin->create(bootstrap, device, stream, options, error);
}

} // namespace switchyard::comm

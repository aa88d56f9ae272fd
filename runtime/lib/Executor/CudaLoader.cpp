//===- CudaLoader.cpp - --device cuda: the CUDA layer, loaded on first use ------===//
//
// libSwitchyardExecutor.so links no CUDA library: the GPU layer (cudart, cuBLAS) is
// libSwitchyardExecutorCuda.so beside it, dlopen'ed the first time a device is opened
// (once per process, thread-safe; a failure is remembered with its reason). Where it or
// the CUDA runtime it needs cannot be loaded, --device cuda is an error that names what
// is missing and how to get it; the host executor never notices.
//
//===----------------------------------------------------------------------===//
#include "../LoadBeside.h"
#include "Cuda/CudaLayerPlugin.h"

#ifndef SWITCHYARD_CUDA_MAJOR
#define SWITCHYARD_CUDA_MAJOR ""
#endif

namespace switchyard::exec {

namespace {

struct LoadedPlugin {
  const CudaLayerPlugin *plugin = nullptr;
  std::string error;
};

const LoadedPlugin &cudaLayerPlugin() {
  static const LoadedPlugin loaded = [] {
    LoadedPlugin result;
    std::string path, why;
    bool missing = false;
    void *entry = plugin::loadBeside(reinterpret_cast<const void *>(&openCudaDevice),
                                     SWITCHYARD_CUDA_LAYER_LIBRARY,
                                     SWITCHYARD_CUDA_LAYER_SYMBOL, path, why, missing);
    const std::string major = SWITCHYARD_CUDA_MAJOR;
    const std::string suffix = major.empty() ? "" : ".so." + major;
    if (missing) {
      result.error =
          "--device cuda: this installation of Switchyard lacks its CUDA layer '" + path +
          "' (reinstall Switchyard, built with the CUDA toolkit)";
    } else if (!entry) {
      result.error = "--device cuda: cannot load the CUDA layer '" + path + "': " + why +
                     ". It needs the CUDA " + (major.empty() ? "" : major + " ") +
                     "runtime and cuBLAS (libcudart" + suffix + ", libcublas" + suffix +
                     "): install them (the CUDA toolkit or NVIDIA's CUDA runtime and "
                     "cuBLAS packages) or "
                     "add the directory that holds them to LD_LIBRARY_PATH";
    } else {
      using Entry = const CudaLayerPlugin *(*)();
      const CudaLayerPlugin *table = reinterpret_cast<Entry>(entry)();
      if (!table || table->version != CudaLayerPlugin::kVersion)
        result.error = "--device cuda: '" + path +
                       "' is the CUDA layer of another build of Switchyard (reinstall it)";
      else
        result.plugin = table;
    }
    return result;
  }();
  return loaded;
}

} // namespace

std::unique_ptr<memory::DeviceBackend> openCudaBackend(const std::shared_ptr<void> &device,
                                                       std::string &error) {
  const LoadedPlugin &loaded = cudaLayerPlugin();
  if (!loaded.plugin) {
    error = loaded.error;
    return nullptr;
  }
  return loaded.plugin->openBackend(device, error);
}

bool cudaExpertFfn(const std::shared_ptr<void> &device, const memory::DeviceExpert &expert,
                   const float *x, int64_t n, float *y, std::string &error) {
  const LoadedPlugin &loaded = cudaLayerPlugin();
  if (!loaded.plugin) {
    error = loaded.error;
    return false;
  }
  return loaded.plugin->expertFfn(device, expert, x, n, y, error);
}

std::shared_ptr<void> openCudaDevice(int ordinal, std::string &error) {
  const LoadedPlugin &loaded = cudaLayerPlugin();
  if (!loaded.plugin) {
    error = loaded.error;
    return nullptr;
  }
  return loaded.plugin->openDevice(ordinal, error);
}

std::unique_ptr<Layer> loadCudaLayer(const std::shared_ptr<void> &device,
                                     const model::MoeConfig &config,
                                     const model::SafetensorsCheckpoint &ckpt,
                                     int64_t layer, const std::string &artifacts,
                                     const ExecutorOptions &options, std::string &error) {
  const LoadedPlugin &loaded = cudaLayerPlugin();
  if (!loaded.plugin) {
    error = loaded.error;
    return nullptr;
  }
  return loaded.plugin->loadLayer(device, config, ckpt, layer, artifacts, options, error);
}

} // namespace switchyard::exec

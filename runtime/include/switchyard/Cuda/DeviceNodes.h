//===- DeviceNodes.h - NVIDIA GPUs as /dev nodes, without the driver ------===//
//
// The NVIDIA GPUs this machine exposes (/dev/nvidia0, /dev/nvidia1, ...), counted
// without loading the CUDA driver: how tests decide which outcome to expect (a GPU
// run or its clear "no GPU" error), so that a test cannot pass on both.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CUDA_DEVICENODES_H
#define SWITCHYARD_CUDA_DEVICENODES_H

#include <dirent.h>
#include <string>

namespace switchyard::cuda {

inline int nvidiaDeviceNodes() {
  int count = 0;
  if (DIR *dev = opendir("/dev")) {
    while (dirent *entry = readdir(dev)) {
      std::string name = entry->d_name;
      if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
          name.find_first_not_of("0123456789", 6) == std::string::npos)
        ++count;
    }
    closedir(dev);
  }
  return count;
}

} // namespace switchyard::cuda

#endif // SWITCHYARD_CUDA_DEVICENODES_H

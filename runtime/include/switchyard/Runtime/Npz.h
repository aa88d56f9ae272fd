//===- Npz.h - NumPy .npz archives (np.savez) -------------------*- C++ -*-===//
//
// An .npz is a zip archive of .npy members ("name.npy"), stored or deflated
// (np.savez / np.savez_compressed). Read with libzip; each member is parsed by the
// .npy reader, so a bad member gets the same messages, prefixed with its name.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_NPZ_H
#define SWITCHYARD_RUNTIME_NPZ_H

#include "switchyard/Runtime/Npy.h"

#include <map>

namespace switchyard::npy {

/// Reads every member of the archive at `path` into `arrays` (keyed by the name without
/// ".npy"); false with a message starting with `what` otherwise.
bool loadNpz(const std::string &path, const std::string &what,
             std::map<std::string, Array> &arrays, std::string &error);

} // namespace switchyard::npy

#endif

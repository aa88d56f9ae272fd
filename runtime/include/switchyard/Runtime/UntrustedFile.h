//===- UntrustedFile.h - bounded reads of files the runtime is given -*- C++ -*-===//
//
// Every file the runtime reads comes from a user, a download or a cache that may be
// damaged: a config.json, a checkpoint index, a policy manifest, a .npy. Such a file
// is read only when it is a regular file (a FIFO would block, /dev/zero never ends)
// of at most the size its kind can have, and a refusal names the file and the limit.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_UNTRUSTEDFILE_H
#define SWITCHYARD_RUNTIME_UNTRUSTEDFILE_H

#include <cstdint>
#include <string>

namespace switchyard::runtime {

/// The most bytes each kind of file may have (the largest real ones are far smaller).
namespace limits {
constexpr uint64_t kConfigJson = uint64_t(16) << 20;         // the hub's: a few KiB
constexpr uint64_t kCheckpointIndex = uint64_t(64) << 20;    // ~100 bytes a tensor
constexpr uint64_t kSafetensorsHeader = uint64_t(100) << 20; // as the format's reader
constexpr uint64_t kManifestJson = uint64_t(16) << 20;
constexpr uint64_t kPolicySource = uint64_t(16) << 20; // a .mlir policy: a few KiB
constexpr uint64_t kPolicyLibrary = uint64_t(1) << 30;
constexpr uint64_t kNpy = uint64_t(64) << 30; // activations and routing of a batch
} // namespace limits

/// Checks that `path` is a regular file of at most `maxBytes` and sets `size`.
/// `kind` is what such a file is ("config.json", "checkpoint index", ".npy file"); errors
/// read "cannot open <kind> '<path>': <why>", "<path>: not a regular file",
/// "<path>: N bytes, more than a <kind> has (16 MiB)".
bool checkRegularFile(const std::string &path, const std::string &kind, uint64_t maxBytes,
                      uint64_t &size, std::string &error);

/// Reads the whole of a regular file of at most `maxBytes` into `out` (opened without
/// blocking, checked on the open descriptor, never more than `maxBytes` read).
bool readBoundedFile(const std::string &path, const std::string &kind, uint64_t maxBytes,
                     std::string &out, std::string &error);

/// "16 MiB", "100 MiB", "1 GiB", "512 bytes": a limit as messages show it.
std::string formatByteLimit(uint64_t bytes);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_UNTRUSTEDFILE_H

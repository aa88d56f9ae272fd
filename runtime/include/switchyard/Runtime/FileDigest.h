//===- FileDigest.h - a file's size and SHA-256, to check what was written -*- C++ -*-===//
//
// moe-compile records each artifact's size and SHA-256 in manifest.json; the runtime
// checks a library against them before dlopen runs any of its code, so that a cache
// entry damaged on disk (truncated, bytes flipped, replaced) is refused or recompiled
// instead of crashing the process. SHA-256 from OpenSSL's libcrypto.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_FILEDIGEST_H
#define SWITCHYARD_RUNTIME_FILEDIGEST_H

#include <cstdint>
#include <string>

namespace switchyard::runtime {

struct FileDigest {
  uint64_t bytes = 0;
  std::string sha256; // 64 lowercase hex digits
  bool operator==(const FileDigest &o) const {
    return bytes == o.bytes && sha256 == o.sha256;
  }
};

/// The digest of the regular file `path` (at most `maxBytes`); false with a message
/// naming the file otherwise.
bool digestFile(const std::string &path, uint64_t maxBytes, FileDigest &digest,
                std::string &error);

/// Checks that `path` still has the digest `expected` recorded for it; the message
/// says what differs and that the artifact directory should be recompiled.
bool checkFileDigest(const std::string &path, const FileDigest &expected,
                     std::string &error);

} // namespace switchyard::runtime

#endif

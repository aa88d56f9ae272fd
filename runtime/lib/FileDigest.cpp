//===- FileDigest.cpp - a file's size and SHA-256 -------------------------===//
#include "switchyard/Runtime/FileDigest.h"
#include "switchyard/Runtime/UntrustedFile.h"

#include <cstdio>
#include <memory>
#include <vector>

#include <openssl/evp.h>

namespace switchyard::runtime {

bool digestFile(const std::string &path, uint64_t maxBytes, FileDigest &digest,
                std::string &error) {
  uint64_t size = 0;
  if (!checkRegularFile(path, "compiled artifact", maxBytes, size, error))
    return false;
  std::unique_ptr<FILE, int (*)(FILE *)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX *)> ctx(EVP_MD_CTX_new(),
                                                          EVP_MD_CTX_free);
  if (!file || !ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    error = "cannot read '" + path + "'";
    return false;
  }
  std::vector<unsigned char> chunk(1 << 20);
  uint64_t total = 0;
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), file.get())) {
    total += n;
    if (total > maxBytes || EVP_DigestUpdate(ctx.get(), chunk.data(), n) != 1) {
      error = "'" + path + "' grew past " + formatByteLimit(maxBytes) + " while read";
      return false;
    }
  }
  unsigned char hash[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (std::ferror(file.get()) || EVP_DigestFinal_ex(ctx.get(), hash, &length) != 1) {
    error = "cannot read '" + path + "'";
    return false;
  }
  static const char *hex = "0123456789abcdef";
  digest.bytes = total;
  digest.sha256.clear();
  for (unsigned int i = 0; i < length; ++i) {
    digest.sha256 += hex[hash[i] >> 4];
    digest.sha256 += hex[hash[i] & 15];
  }
  return true;
}

bool checkFileDigest(const std::string &path, const FileDigest &expected,
                     std::string &error) {
  FileDigest actual;
  if (!digestFile(path, limits::kPolicyLibrary, actual, error))
    return false;
  if (actual == expected)
    return true;
  error = "'" + path + "' does not match its manifest (" + std::to_string(actual.bytes) +
          " bytes, sha256 " + actual.sha256.substr(0, 16) + "..., recorded " +
          std::to_string(expected.bytes) + " bytes, sha256 " +
          expected.sha256.substr(0, 16) +
          "...): the artifact directory is damaged; recompile the policy";
  return false;
}

} // namespace switchyard::runtime

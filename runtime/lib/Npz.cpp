//===- Npz.cpp - NumPy .npz archives (np.savez) ---------------------------===//
#include "switchyard/Runtime/Npz.h"

#include <zip.h>

#include <algorithm>
#include <memory>

namespace switchyard::npy {

/// The most bytes one member may expand to (a hostile archive may claim anything).
constexpr uint64_t kMaxMemberBytes = uint64_t(1) << 34;
constexpr int64_t kMaxMembers = 1 << 16;
/// Deflate expands at most 1032:1 (RFC 1951's longest match per shortest code); a
/// stored member is as long as its data.
constexpr uint64_t kMaxDeflateRatio = 1032;
/// Members are read in pieces of this size, so that memory follows the bytes that
/// arrive, not the size a member claims.
constexpr uint64_t kReadChunk = uint64_t(1) << 20;

bool loadNpz(const std::string &path, const std::string &what,
             std::map<std::string, Array> &arrays, std::string &error) {
  int code = 0;
  std::unique_ptr<zip_t, decltype(&zip_discard)> archive(
      zip_open(path.c_str(), ZIP_RDONLY, &code), zip_discard);
  if (!archive) {
    zip_error_t z;
    zip_error_init_with_code(&z, code);
    error = what + ": cannot read '" + path +
            "' as an .npz (zip) archive: " + zip_error_strerror(&z);
    zip_error_fini(&z);
    return false;
  }
  zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  if (count < 0 || count > kMaxMembers) {
    error = what + ": '" + path + "' has " + std::to_string(count) + " members";
    return false;
  }
  arrays.clear();
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    if (zip_stat_index(archive.get(), i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE)) {
      error = what + ": member " + std::to_string(i) + " of '" + path + "' is unreadable";
      return false;
    }
    std::string name = st.name;
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0) {
      error =
          what + ": member '" + name + "' is not a .npy array (np.savez writes name.npy)";
      return false;
    }
    if (st.size > kMaxMemberBytes) {
      error = what + ": member '" + name + "' claims " + std::to_string(st.size) + " bytes";
      return false;
    }
    if ((st.valid & ZIP_STAT_COMP_SIZE) &&
        st.size > st.comp_size * kMaxDeflateRatio + 1024) {
      error = what + ": member '" + name + "' claims " + std::to_string(st.size) +
              " bytes from " + std::to_string(st.comp_size) +
              " compressed bytes: more than any zip member expands to";
      return false;
    }
    std::unique_ptr<zip_file_t, decltype(&zip_fclose)> file(
        zip_fopen_index(archive.get(), i, 0), zip_fclose);
    if (!file) {
      error = what + ": member '" + name + "' cannot be opened (" +
              zip_strerror(archive.get()) + ")";
      return false;
    }
    std::string bytes;
    while (bytes.size() < st.size) {
      size_t at = bytes.size();
      size_t want = static_cast<size_t>(std::min<uint64_t>(kReadChunk, st.size - at));
      bytes.resize(at + want);
      zip_int64_t got = zip_fread(file.get(), bytes.data() + at, want);
      if (got <= 0) {
        zip_error_t *z = zip_file_get_error(file.get());
        error = what + ": member '" + name + "' is truncated or corrupt: it ends after " +
                std::to_string(at) + " of the " + std::to_string(st.size) +
                " bytes it claims" +
                (got < 0 ? std::string(" (") + zip_error_strerror(z) + ")" : "");
        return false;
      }
      bytes.resize(at + static_cast<size_t>(got));
    }
    std::string key = name.substr(0, name.size() - 4);
    if (!loadBytes(bytes, what + "['" + key + "']", arrays[key], error))
      return false;
  }
  return true;
}

} // namespace switchyard::npy

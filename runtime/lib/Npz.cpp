//===- Npz.cpp - NumPy .npz archives (np.savez) ---------------------------===//
#include "switchyard/Runtime/Npz.h"

#include <zip.h>

#include <memory>

namespace switchyard::npy {

/// The most bytes one member may expand to (a hostile archive may claim anything).
constexpr uint64_t kMaxMemberBytes = uint64_t(1) << 34;
constexpr int64_t kMaxMembers = 1 << 16;

bool loadNpz(const std::string &path, const std::string &what,
             std::map<std::string, Array> &arrays, std::string &error) {
  int code = 0;
  std::unique_ptr<zip_t, decltype(&zip_discard)> archive(zip_open(path.c_str(), ZIP_RDONLY, &code),
                                                          zip_discard);
  if (!archive) {
    zip_error_t z;
    zip_error_init_with_code(&z, code);
    error = what + ": cannot read '" + path + "' as an .npz (zip) archive: " +
            zip_error_strerror(&z);
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
      error = what + ": member '" + name + "' is not a .npy array (np.savez writes name.npy)";
      return false;
    }
    if (st.size > kMaxMemberBytes) {
      error = what + ": member '" + name + "' claims " + std::to_string(st.size) + " bytes";
      return false;
    }
    std::unique_ptr<zip_file_t, decltype(&zip_fclose)> file(zip_fopen_index(archive.get(), i, 0),
                                                            zip_fclose);
    std::string bytes(static_cast<size_t>(st.size), '\0');
    zip_int64_t got = file ? zip_fread(file.get(), bytes.data(), st.size) : -1;
    if (got != static_cast<zip_int64_t>(st.size)) {
      error = what + ": member '" + name + "' is truncated or corrupt (" +
              zip_strerror(archive.get()) + ")";
      return false;
    }
    std::string key = name.substr(0, name.size() - 4);
    if (!loadBytes(bytes, what + "['" + key + "']", arrays[key], error))
      return false;
  }
  return true;
}

} // namespace switchyard::npy

//===- Safetensors.cpp - Hugging Face safetensors files, memory-mapped ----===//
#include "switchyard/Model/Safetensors.h"
#include "switchyard/Runtime/JsonAccess.h"
#include "switchyard/Runtime/Npy.h"
#include "switchyard/Runtime/UntrustedFile.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace switchyard::model {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::Q8:
    return "Q8";
  case DType::Q4:
    return "Q4";
  case DType::Other:
    break;
  }
  return "other";
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::Q8:
    return 1;
  case DType::Q4: // two per byte: not byte-addressable
  case DType::Other:
    break;
  }
  return 0;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string TensorView::shapeText() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Bytes per element of every dtype the format defines (0: unknown).
static size_t formatDtypeSize(const std::string &dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string &path,
                                                       std::string &error) {
  // O_NONBLOCK: a FIFO in a checkpoint directory must not block the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = path + ": not a regular file";
    ::close(fd);
    return nullptr;
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile);
  file->filePath = path;
  size_t size = static_cast<size_t>(st.st_size);
  auto bad = [&](const std::string &what) {
    error = path + ": " + what;
    return nullptr;
  };
  if (size < 8) {
    ::close(fd);
    return bad("not a safetensors file (" + std::to_string(size) +
               " bytes; the 8-byte header length is missing)");
  }
  void *mapping = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED)
    return bad(std::string("cannot map the file: ") + std::strerror(errno));
  file->mapping = mapping;
  file->mappedBytes = size;
  const uint8_t *base = static_cast<const uint8_t *>(mapping);
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | base[i];
  if (headerBytes > size - 8)
    return bad("header length " + std::to_string(headerBytes) + " is past the end of the " +
               std::to_string(size) + "-byte file (truncated, or not a safetensors file)");
  if (headerBytes > runtime::limits::kSafetensorsHeader)
    return bad("header length " + std::to_string(headerBytes) + " is more than a " +
               "safetensors header has (" +
               runtime::formatByteLimit(runtime::limits::kSafetensorsHeader) + ")");
  nlohmann::json header;
  if (!runtime::parseJsonText(reinterpret_cast<const char *>(base + 8),
                              reinterpret_cast<const char *>(base + 8 + headerBytes),
                              path + ": the header", header, error))
    return nullptr;
  const uint8_t *data = base + 8 + headerBytes;
  uint64_t dataBytes = size - 8 - headerBytes;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      continue;
    std::string where = "tensor '" + it.key() + "'";
    const nlohmann::json &t = it.value();
    if (!t.is_object())
      return bad(where + ": not an object");
    runtime::JsonAccess fields(t, path + ": " + where, error);
    TensorView v;
    const nlohmann::json *shape = nullptr, *offsets = nullptr;
    if (!fields.string("dtype", v.dtypeText, runtime::Need::Required) ||
        !fields.array("shape", shape, runtime::Need::Required) ||
        !fields.array("data_offsets", offsets, runtime::Need::Required))
      return nullptr;
    if (offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      return bad(where + ": data_offsets must be two non-negative integers, got " +
                 runtime::jsonSnippet(*offsets));
    v.name = it.key();
    v.file = path;
    size_t elementBytes = formatDtypeSize(v.dtypeText);
    if (!elementBytes)
      return bad(where + ": unknown dtype '" + v.dtypeText + "'");
    v.dtype = v.dtypeText == "F32"    ? DType::F32
              : v.dtypeText == "F16"  ? DType::F16
              : v.dtypeText == "BF16" ? DType::BF16
                                      : DType::Other;
    // Elements, overflow-checked: a hostile shape must not wrap around.
    uint64_t numel = 1;
    for (const nlohmann::json &d : *shape) {
      if (!d.is_number_unsigned())
        return bad(where + ": shape entries must be non-negative integers");
      uint64_t extent = d.get<uint64_t>();
      if (extent != 0 && numel > (uint64_t(1) << 62) / extent)
        return bad(where + ": shape " + runtime::jsonSnippet(*shape) +
                   " has too many elements");
      numel *= extent;
      v.shape.push_back(static_cast<int64_t>(extent));
    }
    uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
    if (begin > end || end > dataBytes)
      return bad(where + ": data_offsets [" + std::to_string(begin) + ", " +
                 std::to_string(end) + ") are outside the " + std::to_string(dataBytes) +
                 " data bytes (truncated file?)");
    if (numel > (uint64_t(1) << 62) / elementBytes || end - begin != numel * elementBytes)
      return bad(where + ": " + std::to_string(end - begin) + " data bytes for shape " +
                 runtime::jsonSnippet(*shape) + " of " + v.dtypeText + " (expected " +
                 std::to_string(numel * elementBytes) + ")");
    v.data = data + begin;
    v.bytes = end - begin;
    ranges.emplace_back(begin, end);
    file->byName.emplace(v.name, std::move(v));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return bad("two tensors overlap at data byte " + std::to_string(ranges[i].first));
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping)
    munmap(mapping, mappedBytes);
}

std::unique_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::string &dir,
                                                                   std::string &error) {
  std::unique_ptr<SafetensorsCheckpoint> ckpt(new SafetensorsCheckpoint);
  ckpt->dir = dir;
  std::vector<std::string> shards;
  std::map<std::string, std::string> weightMap;
  std::string indexPath = dir + "/model.safetensors.index.json";
  struct stat indexStat;
  if (lstat(indexPath.c_str(), &indexStat) == 0) {
    nlohmann::json j;
    if (!runtime::parseJsonFile(indexPath, "checkpoint index",
                                runtime::limits::kCheckpointIndex, j, error))
      return nullptr;
    auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object()) {
      error = indexPath + ": not a JSON object with a \"weight_map\" object";
      return nullptr;
    }
    std::set<std::string> seen;
    for (auto it = map->begin(); it != map->end(); ++it) {
      if (!it->is_string() || it->get<std::string>().find('/') != std::string::npos) {
        error = indexPath + ": weight_map['" + it.key() + "'] must name a file in '" + dir +
                "'";
        return nullptr;
      }
      weightMap[it.key()] = it->get<std::string>();
      if (seen.insert(it->get<std::string>()).second)
        shards.push_back(it->get<std::string>());
    }
  } else {
    shards.push_back("model.safetensors");
    struct stat st;
    if (stat((dir + "/model.safetensors").c_str(), &st) != 0) {
      error =
          "'" + dir + "' has neither model.safetensors nor model.safetensors.index.json";
      return nullptr;
    }
  }
  std::map<std::string, const SafetensorsFile *> shardByName;
  for (const std::string &shard : shards) {
    std::unique_ptr<SafetensorsFile> f = SafetensorsFile::open(dir + "/" + shard, error);
    if (!f)
      return nullptr;
    shardByName[shard] = f.get();
    for (const auto &[name, view] : f->tensors()) {
      auto listed = weightMap.find(name);
      if (!weightMap.empty() && (listed == weightMap.end() || listed->second != shard))
        continue; // the index is authoritative about which shard holds a tensor
      if (!ckpt->index.emplace(name, &view).second) {
        error = dir + ": tensor '" + name + "' is in two shards";
        return nullptr;
      }
    }
    ckpt->files.push_back(std::move(f));
  }
  for (const auto &[name, shard] : weightMap)
    if (!ckpt->index.count(name)) {
      error =
          indexPath + ": tensor '" + name + "' is listed in " + shard + " but not there";
      return nullptr;
    }
  return ckpt;
}

const TensorView *SafetensorsCheckpoint::find(const std::string &name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

const TensorView *SafetensorsCheckpoint::require(const std::string &name,
                                                 const std::vector<int64_t> &shape,
                                                 std::string &error) const {
  const TensorView *v = find(name);
  if (!v) {
    // Which tensors exist follows from config.json: name it, it may be the wrong one.
    error = dir + ": the checkpoint has no tensor '" + name +
            "' (its config.json's layers and experts name it)";
    return nullptr;
  }
  if (v->shape != shape) {
    TensorView expected;
    expected.shape = shape;
    error = dir + ": tensor '" + name + "' has shape " + v->shapeText() + ", expected " +
            expected.shapeText() + " (from config.json)";
    return nullptr;
  }
  if (v->dtype == DType::Other) {
    error = dir + ": tensor '" + name + "' is " + v->dtypeText +
            "; the executor computes with F32, F16 or BF16 weights";
    return nullptr;
  }
  return v;
}

void widenToFloat(const TensorView &view, int64_t offset, int64_t count, float *out) {
  if (view.dtype == DType::Q8 || view.dtype == DType::Q4) {
    // One run per scale (a row for Q8, a group for Q4): no division in the inner loops.
    const bool q8 = view.dtype == DType::Q8;
    const int64_t cols = view.shape.back(), run = q8 ? cols : view.group,
                  end = offset + count;
    for (int64_t i = offset; i < end;) {
      const int64_t row = i / cols, col = i % cols;
      const int64_t stop = std::min(end, i + (run - col % run));
      const float scale =
          q8 ? view.scales[row] : view.scales[row * (cols / run) + col / run];
      float *o = out + (i - offset);
      if (q8) {
        const auto *q = reinterpret_cast<const int8_t *>(view.data);
        for (int64_t j = i; j < stop; ++j)
          *o++ = float(q[j]) * scale;
      } else {
        // Two 4-bit two's-complement values per byte, the even element in the low nibble.
        for (int64_t j = i; j < stop; ++j) {
          const uint8_t byte = view.data[j / 2];
          const int value = (j & 1) ? int8_t(byte) >> 4 : int8_t(byte << 4) >> 4;
          *o++ = float(value) * scale;
        }
      }
      i = stop;
    }
    return;
  }
  if (view.dtype == DType::F32) {
    std::memcpy(out, view.data + offset * 4, static_cast<size_t>(count) * 4);
    return;
  }
  const uint8_t *p = view.data + offset * 2;
  if (view.dtype == DType::BF16) {
    // bf16 is the upper half of an f32: exact, branch-free widening.
    for (int64_t i = 0; i < count; ++i) {
      uint32_t bits = uint32_t(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
      std::memcpy(out + i, &bits, 4);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    out[i] = npy::halfToFloat(uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
}

} // namespace switchyard::model

//===- Safetensors.h - Hugging Face safetensors files, memory-mapped -*- C++ -*-===//
//
// Reads the safetensors format (8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and [begin, end) byte range, then the data) by
// mapping the file: a tensor is a pointer into the mapping, nothing is copied. Every
// header field is checked before use (offsets inside the file, size = elements x
// dtype size, no overlaps, no duplicate names), so a malformed or truncated file is a
// one-line error naming the file and tensor, never an out-of-bounds read.
//
// A checkpoint directory is one `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` ("weight_map": tensor -> file).
//
// Format: https://github.com/huggingface/safetensors (README, "Format").
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MODEL_SAFETENSORS_H
#define SWITCHYARD_MODEL_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace switchyard::model {

/// The element types the executor computes with; a file may hold others (I64, F8, ...),
/// which are listed but rejected when a computation asks for them. Q8 and Q4 are the
/// executor's own quantised weight formats (switchyard/Memory/Quantize.h), never read
/// from a file: int8 per output channel, and int4 in groups along a row, each with
/// float32 scales beside the packed data.
enum class DType { F32, F16, BF16, Q8, Q4, Other };

const char *dtypeName(DType dtype);
size_t dtypeSize(DType dtype);

/// One tensor: a view into a mapped file.
struct TensorView {
  std::string name;
  std::string dtypeText; // as the header spells it: "F32", "BF16", "I64", ...
  DType dtype = DType::Other;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  uint64_t bytes = 0;
  std::string file;
  /// Q8: scales[rows]; Q4: scales[rows, cols / group] (nullptr otherwise).
  const float *scales = nullptr;
  int64_t group = 0;

  int64_t numel() const;
  std::string shapeText() const; // "[128, 2048]"
};

/// One mapped .safetensors file.
class SafetensorsFile {
public:
  static std::unique_ptr<SafetensorsFile> open(const std::string &path, std::string &error);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::map<std::string, TensorView> &tensors() const { return byName; }
  const std::string &path() const { return filePath; }

private:
  SafetensorsFile() = default;
  std::string filePath;
  void *mapping = nullptr;
  size_t mappedBytes = 0;
  std::map<std::string, TensorView> byName;
};

/// The tensors of a checkpoint directory (single file or index + shards).
class SafetensorsCheckpoint {
public:
  static std::unique_ptr<SafetensorsCheckpoint> open(const std::string &dir,
                                                     std::string &error);

  /// The tensor `name`, or nullptr.
  const TensorView *find(const std::string &name) const;
  /// The tensor `name` with exactly `shape` and a dtype the executor computes with
  /// (F32, F16, BF16); nullptr with an error naming the tensor and what is wrong.
  const TensorView *require(const std::string &name, const std::vector<int64_t> &shape,
                            std::string &error) const;
  const std::string &directory() const { return dir; }
  size_t size() const { return index.size(); }

private:
  std::string dir;
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const TensorView *> index;
};

/// Widens `count` elements of `view` starting at element `offset` to float32 (F32 is
/// copied; F16 / BF16 converted exactly).
void widenToFloat(const TensorView &view, int64_t offset, int64_t count, float *out);

} // namespace switchyard::model

#endif

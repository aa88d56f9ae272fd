//===- Quantize.h - expert weight versions in their kernel-ready form -*- C++ -*-===//
//
// DynaExq keeps every expert in two versions (§3.2): high precision (the checkpoint's
// f32 / bf16 / f16) and low precision, packed offline in host memory so that a
// promotion or a load is one copy with no repacking (§3.4). A version is one contiguous
// IMAGE - gate, up and down (and their scales) at 64-byte aligned offsets - that can be
// copied anywhere and bound in place: the FFN reads it through TensorViews (Q8 / Q4
// widened per row block into the GEMM, as bf16 is).
//
// Formats (symmetric, round to nearest even):
//   int8: per output channel (row), scale = max|row| / 127, values in [-127, 127];
//   int4: groups of `group` consecutive elements of a row, scale = max|group| / 7,
//         values in [-8, 7], two per byte (the even element in the low nibble).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MEMORY_QUANTIZE_H
#define SWITCHYARD_MEMORY_QUANTIZE_H

#include "switchyard/Executor/MoeLayer.h"

namespace switchyard::memory {

enum class Precision { High, Int8, Int4 };
const char *precisionName(Precision p);
/// "hi" / "bf16" / "f32" / "int8" / "int4" -> a precision; false otherwise.
bool parsePrecision(const std::string &text, Precision &out);

/// Where each matrix of one expert version lives in its image.
struct VersionLayout {
  Precision precision = Precision::High;
  int64_t group = 0; // int4
  struct Part {
    model::DType dtype = model::DType::Other;
    std::vector<int64_t> shape;
    size_t offset = 0, bytes = 0;             // packed data
    size_t scalesOffset = 0, scalesBytes = 0; // float32 scales (quantised only)
  } parts[3];                                 // gate, up, down
  size_t bytes = 0;                           // the whole image
};

/// The layout of `expert`'s version at `precision` (int4 groups of `group`, which must
/// divide every row; 0 picks the largest power of two <= 128 that does).
bool layoutVersion(const exec::FfnWeights &expert, Precision precision, int64_t group,
                   VersionLayout &layout, std::string &error);
/// Writes the version's image (quantising, or copying the high-precision bytes).
void packVersion(const exec::FfnWeights &expert, const VersionLayout &layout,
                 uint8_t *image);
/// Views of an image (which must outlive them): views[0..2] = gate, up, down.
void bindVersion(const uint8_t *image, const VersionLayout &layout,
                 model::TensorView views[3]);

/// A version image in memory of its own, with its views.
struct VersionImage {
  VersionLayout layout;
  std::vector<uint8_t> bytes;
  model::TensorView views[3];
  exec::FfnWeights weights() const { return {&views[0], &views[1], &views[2]}; }
};
bool makeVersion(const exec::FfnWeights &expert, Precision precision, int64_t group,
                 VersionImage &out, std::string &error);

} // namespace switchyard::memory

#endif

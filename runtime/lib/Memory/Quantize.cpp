//===- Quantize.cpp - expert weight versions in their kernel-ready form ---===//
#include "switchyard/Memory/Quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace switchyard::memory {

const char *precisionName(Precision p) {
  switch (p) {
  case Precision::High:
    return "hi";
  case Precision::Int8:
    return "int8";
  case Precision::Int4:
    return "int4";
  }
  return "?";
}

bool parsePrecision(const std::string &text, Precision &out) {
  if (text == "hi" || text == "bf16" || text == "f32" || text == "f16")
    out = Precision::High;
  else if (text == "int8")
    out = Precision::Int8;
  else if (text == "int4")
    out = Precision::Int4;
  else
    return false;
  return true;
}

namespace {
size_t alignUp(size_t n) { return (n + 63) / 64 * 64; }

/// Symmetric quantisation of `count` values to [-limit, limit] with one scale.
float quantizeRun(const float *x, int64_t count, int limit, int8_t *q) {
  float most = 0;
  for (int64_t i = 0; i < count; ++i)
    most = std::max(most, std::fabs(x[i]));
  const float scale = most / float(limit);
  for (int64_t i = 0; i < count; ++i) {
    float v = scale > 0 ? std::nearbyint(x[i] / scale) : 0.0f;
    q[i] = static_cast<int8_t>(std::clamp(v, float(-limit), float(limit)));
  }
  return scale;
}
} // namespace

bool layoutVersion(const exec::FfnWeights &expert, Precision precision, int64_t group,
                   VersionLayout &layout, std::string &error) {
  layout = {};
  layout.precision = precision;
  const model::TensorView *views[3] = {expert.gate, expert.up, expert.down};
  if (precision == Precision::Int4 && group == 0) { // the largest power of two <= 128
    group = 128;
    for (const model::TensorView *v : views)
      while (group > 2 && v->shape.back() % group != 0)
        group /= 2;
  }
  layout.group = precision == Precision::Int4 ? group : 0;
  size_t at = 0;
  for (int j = 0; j < 3; ++j) {
    const model::TensorView &v = *views[j];
    VersionLayout::Part &part = layout.parts[j];
    part.shape = v.shape;
    const int64_t rows = v.shape[0], cols = v.shape.back();
    if (precision == Precision::High) {
      part.dtype = v.dtype;
      part.bytes = v.bytes;
    } else if (v.dtype == model::DType::Q8 || v.dtype == model::DType::Q4) {
      error = v.name + " is already quantised";
      return false;
    } else if (precision == Precision::Int8) {
      part.dtype = model::DType::Q8;
      part.bytes = size_t(rows * cols);
      part.scalesBytes = size_t(rows) * sizeof(float);
    } else {
      if (group < 2 || group % 2 != 0 || cols % group != 0) {
        error = "int4 groups of " + std::to_string(group) + " do not divide the " +
                std::to_string(cols) + "-wide rows of " + v.name +
                " (an even group that does)";
        return false;
      }
      part.dtype = model::DType::Q4;
      part.bytes = size_t(rows * cols / 2);
      part.scalesBytes = size_t(rows * (cols / group)) * sizeof(float);
    }
    part.offset = at;
    at = alignUp(at + part.bytes);
    if (part.scalesBytes) {
      part.scalesOffset = at;
      at = alignUp(at + part.scalesBytes);
    }
  }
  layout.bytes = at;
  return true;
}

void packVersion(const exec::FfnWeights &expert, const VersionLayout &layout,
                 uint8_t *image) {
  const model::TensorView *views[3] = {expert.gate, expert.up, expert.down};
  for (int j = 0; j < 3; ++j) {
    const model::TensorView &v = *views[j];
    const VersionLayout::Part &part = layout.parts[j];
    if (layout.precision == Precision::High) {
      std::memcpy(image + part.offset, v.data, part.bytes);
      continue;
    }
    const int64_t rows = v.shape[0], cols = v.shape.back();
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<int8_t> q(static_cast<size_t>(cols));
    auto *scales = reinterpret_cast<float *>(image + part.scalesOffset);
    for (int64_t r = 0; r < rows; ++r) {
      model::widenToFloat(v, r * cols, cols, row.data());
      if (layout.precision == Precision::Int8) {
        scales[r] = quantizeRun(row.data(), cols, 127, q.data());
        std::memcpy(image + part.offset + r * cols, q.data(), size_t(cols));
        continue;
      }
      const int64_t groups = cols / layout.group;
      for (int64_t g = 0; g < groups; ++g)
        scales[r * groups + g] = quantizeRun(row.data() + g * layout.group, layout.group, 7,
                                             q.data() + g * layout.group);
      uint8_t *packed = image + part.offset + r * cols / 2;
      for (int64_t c = 0; c < cols; c += 2)
        packed[c / 2] = uint8_t((q[size_t(c)] & 0xF) | ((q[size_t(c + 1)] & 0xF) << 4));
    }
  }
}

void bindVersion(const uint8_t *image, const VersionLayout &layout,
                 model::TensorView views[3]) {
  static const char *names[3] = {"gate", "up", "down"};
  for (int j = 0; j < 3; ++j) {
    const VersionLayout::Part &part = layout.parts[j];
    model::TensorView &v = views[j];
    v = {};
    v.name = std::string(names[j]) + " (" + precisionName(layout.precision) + " version)";
    v.dtype = part.dtype;
    v.dtypeText = model::dtypeName(part.dtype);
    v.shape = part.shape;
    v.data = image + part.offset;
    v.bytes = part.bytes;
    v.scales = part.scalesBytes ? reinterpret_cast<const float *>(image + part.scalesOffset)
                                : nullptr;
    v.group = layout.group;
  }
}

bool makeVersion(const exec::FfnWeights &expert, Precision precision, int64_t group,
                 VersionImage &out, std::string &error) {
  if (!layoutVersion(expert, precision, group, out.layout, error))
    return false;
  out.bytes.assign(out.layout.bytes, 0);
  packVersion(expert, out.layout, out.bytes.data());
  bindVersion(out.bytes.data(), out.layout, out.views);
  return true;
}

} // namespace switchyard::memory

//===- Npy.h - reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// A small, dependency-free (standard C++ only) reader and writer for the NumPy
// `.npy` format, used to bind host arguments to compiled routers and to dump
// their results. It understands exactly the plain, C-ordered, little-endian
// arrays of the element types the runtime binds (bool, int8, uint8, int32, int64,
// float16, bfloat16, float32, float64) and rejects everything else with a
// one-line message that says what is wrong and how to fix it on the NumPy side.
//
// Nothing here throws: every fallible function returns false and sets `error`.
// Element data is kept as raw little-endian bytes; the conversions at the end
// turn an Array into the element type an argument expects.
//
// Format reference: numpy/lib/format.py (NEP 1).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_NPY_H
#define SWITCHYARD_RUNTIME_NPY_H

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard::npy {

/// Element types an .npy file may hold. BF16 is ml_dtypes' bfloat16, stored
/// with the descr 'bfloat16' (see load() for what is accepted).
enum class DType { F16, BF16, F32, F64, I8, U8, I32, I64, Bool };

/// NumPy's name for the element type: "float32", "int32", "bool", ...
const char *dtypeName(DType dtype);
/// The element type NumPy calls `name` ("float32", "bfloat16", ...), or none.
std::optional<DType> dtypeFromName(std::string_view name);
/// Size in bytes of one element.
size_t dtypeSize(DType dtype);
/// The descr string save() writes into the header: "<f4", "|b1", "bfloat16", ...
const char *dtypeDescr(DType dtype);

/// Formats a shape the way NumPy prints it: "()", "(5,)", "(2, 3)".
std::string formatShape(const std::vector<int64_t> &shape);

/// A dense array: C-order, little-endian element data.
struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< () for a scalar.
  std::vector<uint8_t> bytes; ///< numel() * dtypeSize(dtype) bytes.

  /// Number of elements: the product of `shape`, 1 for a scalar.
  int64_t numel() const;

  // Typed views of `bytes`. Each asserts that `dtype` matches; float16 and
  // bfloat16 elements are exposed as their raw 16-bit patterns.
  const float *f32() const { return view<float>(DType::F32); }
  const double *f64() const { return view<double>(DType::F64); }
  const int8_t *i8() const { return view<int8_t>(DType::I8); }
  const uint8_t *u8() const { return view<uint8_t>(DType::U8); }
  const int32_t *i32() const { return view<int32_t>(DType::I32); }
  const int64_t *i64() const { return view<int64_t>(DType::I64); }
  const uint8_t *boolean() const { return view<uint8_t>(DType::Bool); }
  const uint16_t *f16Bits() const { return view<uint16_t>(DType::F16); }
  const uint16_t *bf16Bits() const { return view<uint16_t>(DType::BF16); }
  float *f32() { return view<float>(DType::F32); }
  int32_t *i32() { return view<int32_t>(DType::I32); }
  uint8_t *boolean() { return view<uint8_t>(DType::Bool); }

private:
  // std::vector's storage comes from operator new, which is aligned for every
  // element type above.
  template <typename T> const T *view(DType expected) const {
    assert(dtype == expected && "npy::Array viewed as the wrong element type");
    return reinterpret_cast<const T *>(bytes.data());
  }
  template <typename T> T *view(DType expected) {
    assert(dtype == expected && "npy::Array viewed as the wrong element type");
    return reinterpret_cast<T *>(bytes.data());
  }
};

/// Reads the .npy file at `path` into `out`. Accepts what NumPy writes in format
/// versions 1.0, 2.0 and 3.0 for the dtypes above ('|b1', '|i1', '|u1', '<i4',
/// '<i8', '<f2', '<f4', '<f8', and 'bfloat16' / '<bfloat16' for ml_dtypes'
/// bfloat16 written with an explicit header). On failure returns false and sets
/// `error` to a one-line message that starts with `what` (e.g. "argument
/// 'logits' (x.npy)") and explains the problem: cannot open, not a .npy file,
/// unsupported version, malformed header, Fortran order, big-endian data,
/// unsupported dtype, truncated data or trailing bytes. Never reads out of bounds
/// or allocates more than the file holds, whatever the input.
bool load(const std::string &path, const std::string &what, Array &out, std::string &error);

/// load() from the bytes of a .npy file in memory (a member of an .npz archive), or from
/// a stream holding `size` bytes.
bool loadBytes(const std::string &bytes, const std::string &what, Array &out,
               std::string &error);
bool loadStream(std::istream &in, uint64_t size, const std::string &what, Array &out,
                std::string &error);

/// Writes `a` to `path` exactly as np.save would (format 1.0, header padded to
/// 64 bytes, C order, little-endian). Fails, setting `error`, when the file cannot
/// be written or `a.bytes` does not match its shape and dtype.
bool save(const std::string &path, const Array &a, std::string &error);
/// Writes uint16 data of `shape` ('<u2', as np.save would): for writers of formats that
/// store compact ids (routing traces with more than 256 experts). Not a type load()
/// reads.
bool saveUInt16(const std::string &path, const std::vector<int64_t> &shape,
                const uint16_t *data, std::string &error);

/// Exact conversions of IEEE half / bfloat16 bit patterns to float (subnormals,
/// signed zeros, infinities and NaN payloads included).
float halfToFloat(uint16_t bits);
float bfloat16ToFloat(uint16_t bits);

// Conversions used to bind arguments. Each checks the element type (and values
// where the conversion could lose information) and, on failure, returns false
// with a message that starts with `what`.

/// float32, float16 or bfloat16 -> float32. float64 is rejected (lossy).
bool toFloat32(const Array &in, const std::string &what, std::vector<float> &out,
               std::string &error);
/// int32, int8, uint8 or int64 (each value range-checked) -> int32.
bool toInt32(const Array &in, const std::string &what, std::vector<int32_t> &out,
             std::string &error);
/// bool, or an integer array holding only 0 and 1 -> one byte per element, 0 or 1.
bool toBool(const Array &in, const std::string &what, std::vector<uint8_t> &out,
            std::string &error);

/// Build an array by copying numel(shape) elements from `data`.
Array makeF32(std::vector<int64_t> shape, const float *data);
Array makeI32(std::vector<int64_t> shape, const int32_t *data);
Array makeBool(std::vector<int64_t> shape, const uint8_t *data);

} // namespace switchyard::npy

#endif // SWITCHYARD_RUNTIME_NPY_H

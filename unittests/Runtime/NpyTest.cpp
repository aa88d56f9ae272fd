//===- NpyTest.cpp - unit tests for the .npy reader/writer ----------------===//
//
// Tests switchyard::npy (runtime/include/switchyard/Runtime/Npy.h) against files
// written by NumPy itself, embedded below as byte strings, and against hand-made
// malformed files. The tests do not run Python: the fixtures were produced once
// with np.save / numpy.lib.format.write_array into an io.BytesIO (numpy 1.24.2;
// numpy 2.4.6 writes identical bytes, and the bfloat16 fixtures come from
// ml_dtypes 0.6.0 on numpy 2.4.6). The expression that made each one is quoted
// above it.
//
//===----------------------------------------------------------------------===//

#include "switchyard/Runtime/Npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace npy_test {

using namespace switchyard::npy;

namespace {

//===----------------------------------------------------------------------===//
// Fixtures written by NumPy
//===----------------------------------------------------------------------===//

// clang-format off
// x = np.array([1, -2.5, inf, 3.140625], dtype=ml_dtypes.bfloat16); np.save(x)
const char kMlDtypesBf16Saved[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<V2', 'fortran_order': False, 'shape': (4,), }"
    "                                                            \n"
    "\x80\x3f\x20\xc0\x80\x7f\x49\x40";

// the same x with an explicit header, the usual workaround:
//   format.write_array_header_1_0(f, {'descr': str(x.dtype), ...}); f.write(x.tobytes())
const char kMlDtypesBf16Header[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': 'bfloat16', 'fortran_order': False, 'shape': (4,), }"
    "                                                       \n"
    "\x80\x3f\x20\xc0\x80\x7f\x49\x40";

// np.save(np.arange(6, dtype='<f4').reshape(2, 3) * 0.5 - 1)
const char kNumpyF32_2x3[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    "                                                          \n"
    "\x00\x00\x80\xbf\x00\x00\x00\xbf\x00\x00\x00\x00\x00\x00\x00\x3f"
    "\x00\x00\x80\x3f\x00\x00\xc0\x3f";

// np.save(np.array([0, -1, 2**31 - 1, -2**31], dtype='<i8'))
const char kNumpyI64[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }"
    "                                                            \n"
    "\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
    "\xff\xff\xff\x7f\x00\x00\x00\x00\x00\x00\x00\x80\xff\xff\xff\xff";

// np.save(np.array([[1, 2], [2**32, 3]], dtype='<i8'))
const char kNumpyI64OutOfRange[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }"
    "                                                          \n"
    "\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00";

// np.save(np.array([True, False, True, True, False]))
const char kNumpyBool[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }"
    "                                                            \n"
    "\x01\x00\x01\x01\x00";

// np.save(np.array([1, -2, inf, -inf, nan, 2**-24, -0.0, 65504, 2**-14,
//                   2**-14 - 2**-24], dtype='<f2'))
const char kNumpyF16[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<f2', 'fortran_order': False, 'shape': (10,), }"
    "                                                           \n"
    "\x00\x3c\x00\xc0\x00\x7c\x00\xfc\x00\x7e\x01\x00\x00\x80\xff\x7b"
    "\x00\x04\xff\x03";

// format.write_array(f, np.array([1.5, -3.25, 0], dtype='<f4'), version=(2, 0))
const char kNumpyF32V2[] =
    "\x93\x4e\x55\x4d\x50\x59\x02\x00\x74\x00\x00\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
    "                                                          \n"
    "\x00\x00\xc0\x3f\x00\x00\x50\xc0\x00\x00\x00\x00";

// format.write_array(f, np.array([[7], [-8]], dtype='<i4'), version=(3, 0))
const char kNumpyI32V3[] =
    "\x93\x4e\x55\x4d\x50\x59\x03\x00\x74\x00\x00\x00"
    "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1), }"
    "                                                        \n"
    "\x07\x00\x00\x00\xf8\xff\xff\xff";

// np.save(np.float32(3.5))  # shape ()
const char kNumpyScalarF32[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"
    "                                                              \n"
    "\x00\x00\x60\x40";

// np.save(np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)))
const char kNumpyFortran[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }"
    "                                                           \n"
    "\x00\x00\x00\x00\x00\x00\x40\x40\x00\x00\x80\x3f\x00\x00\x80\x40"
    "\x00\x00\x00\x40\x00\x00\xa0\x40";

// np.save(np.arange(3, dtype='>i4'))
const char kNumpyBigEndian[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n"
    "\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02";

// np.save(np.zeros(2, dtype=np.complex64))
const char kNumpyComplex[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }"
    "                                                            \n"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";

// np.save(np.array([0.25, -1, 3], dtype='<f8'))
const char kNumpyF64[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n"
    "\x00\x00\x00\x00\x00\x00\xd0\x3f\x00\x00\x00\x00\x00\x00\xf0\xbf"
    "\x00\x00\x00\x00\x00\x00\x08\x40";

// np.save(np.array([0, 1, 2, 1], dtype='<i4'))
const char kNumpyI32WithTwo[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }"
    "                                                            \n"
    "\x00\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00";

// np.save(np.array([0, 1, 255], dtype='u1'))
const char kNumpyU8[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n"
    "\x00\x01\xff";

// np.save(np.array([-128, 0, 127], dtype='i1'))
const char kNumpyI8[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n"
    "\x80\x00\x7f";

// np.save(np.zeros((0, 3), dtype='<f4'))
const char kNumpyEmpty[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }"
    "                                                          \n";
// clang-format on

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The bytes of a fixture (string literals end with an extra NUL).
template <size_t N> std::string bytesOf(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

/// A format-1.0 file around a hand-written header dict, padded like np.save pads
/// (or a 2.0/3.0 file when `major` says so).
std::string npyFile(const std::string &dict, const std::string &payload = "",
                    int major = 1) {
  size_t lenBytes = major == 1 ? 2 : 4;
  size_t unpadded = 8 + lenBytes + dict.size() + 1;
  std::string header = dict + std::string(64 - unpadded % 64, ' ') + "\n";
  std::string file = "\x93NUMPY";
  file += static_cast<char>(major);
  file += '\0';
  for (size_t i = 0; i < lenBytes; ++i)
    file += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return file + header + payload;
}

/// A dict in NumPy's layout with the given descr and shape text.
std::string dictFor(const std::string &descr, const std::string &shape,
                    const std::string &fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape +
         ", }";
}

const std::string kWhat = "argument 'logits' (x.npy)";

/// Checks that `error` is a one-line message for kWhat that mentions `phrase`.
::testing::AssertionResult isErrorAbout(const std::string &error,
                                        const std::string &phrase) {
  if (error.rfind(kWhat + ": ", 0) != 0)
    return ::testing::AssertionFailure()
           << "message does not start with \"" << kWhat << ": \": " << error;
  if (error.find(phrase) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message does not mention \"" << phrase << "\": " << error;
  for (char c : error)
    if (static_cast<unsigned char>(c) < 0x20)
      return ::testing::AssertionFailure()
             << "message is not a single printable line: " << error;
  return ::testing::AssertionSuccess();
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Gives every test its own files in the GoogleTest temp directory and removes
/// them afterwards.
class NpyTest : public ::testing::Test {
protected:
  void TearDown() override {
    for (const std::string &path : paths)
      std::remove(path.c_str());
  }

  /// A fresh path for this test (not created).
  std::string newPath() {
    static const std::string token = std::to_string(std::random_device()());
    const ::testing::TestInfo *test =
        ::testing::UnitTest::GetInstance()->current_test_info();
    std::string path = ::testing::TempDir() + "switchyard-npy-" + token + "-" +
                       test->test_suite_name() + "-" + test->name() + "-" +
                       std::to_string(paths.size()) + ".npy";
    paths.push_back(path);
    return path;
  }

  /// Writes `contents` to a fresh file and returns its path.
  std::string write(const std::string &contents) {
    std::string path = newPath();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

  /// Loads `contents`, expecting success.
  Array loadOk(const std::string &contents) {
    Array a;
    std::string error;
    EXPECT_TRUE(load(write(contents), kWhat, a, error)) << error;
    return a;
  }

  /// Loads `contents`, expecting failure; returns the message.
  std::string loadError(const std::string &contents) {
    Array a;
    std::string error;
    EXPECT_FALSE(load(write(contents), kWhat, a, error));
    return error;
  }

  /// Saves `a` and loads it back.
  Array roundTrip(const Array &a) {
    std::string path = newPath(), error;
    EXPECT_TRUE(save(path, a, error)) << error;
    Array b;
    EXPECT_TRUE(load(path, kWhat, b, error)) << error;
    return b;
  }

  std::vector<std::string> paths;
};

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

//===----------------------------------------------------------------------===//
// Loading what NumPy writes
//===----------------------------------------------------------------------===//

TEST_F(NpyTest, LoadsNumpyFloat32Matrix) {
  Array a = loadOk(bytesOf(kNumpyF32_2x3));
  EXPECT_EQ(a.dtype, DType::F32);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.numel(), 6);
  std::vector<float> values;
  std::string error;
  ASSERT_TRUE(toFloat32(a, kWhat, values, error)) << error;
  EXPECT_EQ(values, (std::vector<float>{-1, -0.5, 0, 0.5, 1, 1.5}));
  EXPECT_EQ(a.f32()[5], 1.5f);
}

TEST_F(NpyTest, LoadsNumpyInt64) {
  Array a = loadOk(bytesOf(kNumpyI64));
  EXPECT_EQ(a.dtype, DType::I64);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(a.i64()[1], -1);
  std::vector<int32_t> values;
  std::string error;
  ASSERT_TRUE(toInt32(a, kWhat, values, error)) << error;
  EXPECT_EQ(values, (std::vector<int32_t>{0, -1, std::numeric_limits<int32_t>::max(),
                                          std::numeric_limits<int32_t>::min()}));
}

TEST_F(NpyTest, LoadsNumpyBool) {
  Array a = loadOk(bytesOf(kNumpyBool));
  EXPECT_EQ(a.dtype, DType::Bool);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{5}));
  std::vector<uint8_t> values;
  std::string error;
  ASSERT_TRUE(toBool(a, kWhat, values, error)) << error;
  EXPECT_EQ(values, (std::vector<uint8_t>{1, 0, 1, 1, 0}));
}

TEST_F(NpyTest, LoadsNumpyFloat16SpecialValuesExactly) {
  Array a = loadOk(bytesOf(kNumpyF16));
  EXPECT_EQ(a.dtype, DType::F16);
  std::vector<float> v;
  std::string error;
  ASSERT_TRUE(toFloat32(a, kWhat, v, error)) << error;
  ASSERT_EQ(v.size(), 10u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[3], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(v[5], std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_TRUE(sameBits(v[6], -0.0f));     // negative zero keeps its sign
  EXPECT_EQ(v[7], 65504.0f);              // largest finite half
  EXPECT_EQ(v[8], std::ldexp(1.0f, -14)); // smallest normal
  EXPECT_EQ(v[9], std::ldexp(1.0f, -14) - std::ldexp(1.0f, -24)); // largest subnormal
}

TEST_F(NpyTest, LoadsVersion2Header) {
  Array a = loadOk(bytesOf(kNumpyF32V2));
  EXPECT_EQ(a.dtype, DType::F32);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(a.f32()[0], 1.5f);
  EXPECT_EQ(a.f32()[1], -3.25f);
}

TEST_F(NpyTest, LoadsVersion3Header) {
  Array a = loadOk(bytesOf(kNumpyI32V3));
  EXPECT_EQ(a.dtype, DType::I32);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(a.i32()[1], -8);
}

TEST_F(NpyTest, LoadsNumpyScalar) {
  Array a = loadOk(bytesOf(kNumpyScalarF32));
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.numel(), 1);
  ASSERT_EQ(a.bytes.size(), 4u);
  EXPECT_EQ(a.f32()[0], 3.5f);
}

TEST_F(NpyTest, LoadsNumpyEmptyArray) {
  Array a = loadOk(bytesOf(kNumpyEmpty));
  ASSERT_EQ(a.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(a.numel(), 0);
  EXPECT_TRUE(a.bytes.empty());
  std::vector<float> values{1.0f};
  std::string error;
  ASSERT_TRUE(toFloat32(a, kWhat, values, error)) << error;
  EXPECT_TRUE(values.empty());
}

TEST_F(NpyTest, LoadsNumpyInt8AndUInt8AsInt32) {
  std::vector<int32_t> values;
  std::string error;
  ASSERT_TRUE(toInt32(loadOk(bytesOf(kNumpyI8)), kWhat, values, error)) << error;
  EXPECT_EQ(values, (std::vector<int32_t>{-128, 0, 127}));
  ASSERT_TRUE(toInt32(loadOk(bytesOf(kNumpyU8)), kWhat, values, error)) << error;
  EXPECT_EQ(values, (std::vector<int32_t>{0, 1, 255}));
}

TEST_F(NpyTest, LoadsBfloat16WithExplicitDescr) {
  Array a = loadOk(bytesOf(kMlDtypesBf16Header));
  EXPECT_EQ(a.dtype, DType::BF16);
  std::vector<float> v;
  std::string error;
  ASSERT_TRUE(toFloat32(a, kWhat, v, error)) << error;
  EXPECT_EQ(v, (std::vector<float>{1.0f, -2.5f, std::numeric_limits<float>::infinity(),
                                   3.140625f}));
  // The '<bfloat16' spelling is accepted too.
  std::string payload(reinterpret_cast<const char *>(a.bytes.data()), a.bytes.size());
  EXPECT_EQ(loadOk(npyFile(dictFor("<bfloat16", "(4,)"), payload)).dtype, DType::BF16);
}

TEST_F(NpyTest, AcceptsHeaderVariantsNumpyCanRead) {
  std::string four(4, '\0');
  // Keys in any order, double quotes, no trailing comma, Python 2 'L' suffixes.
  Array a = loadOk(npyFile("{\"shape\": (1L,), \"fortran_order\": False, "
                           "\"descr\": \"<i4\"}",
                           four));
  EXPECT_EQ(a.dtype, DType::I32);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{1}));
  // '=' (native, little-endian here) and '|' byte orders; '>' on a 1-byte type.
  EXPECT_EQ(loadOk(npyFile(dictFor("=f4", "(1,)"), four)).dtype, DType::F32);
  EXPECT_EQ(loadOk(npyFile(dictFor("|f4", "(1,)"), four)).dtype, DType::F32);
  EXPECT_EQ(loadOk(npyFile(dictFor(">u1", "(4,)"), four)).dtype, DType::U8);
  // Trailing comma inside the shape tuple, and a version 2.0 file.
  EXPECT_EQ(loadOk(npyFile(dictFor("<f2", "(2, 1,)"), four, 2)).shape,
            (std::vector<int64_t>{2, 1}));
  // Fortran order is harmless when at most one dimension exceeds 1.
  EXPECT_EQ(loadOk(npyFile(dictFor("<f4", "(1, 1)", "True"), four)).numel(), 1);
  // A header without the padding NumPy adds.
  std::string dict = dictFor("|b1", "(4,)");
  std::string unpadded = std::string("\x93NUMPY\x01\x00", 8) +
                         static_cast<char>(dict.size()) + '\0' + dict + four;
  EXPECT_EQ(loadOk(unpadded).dtype, DType::Bool);
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

TEST_F(NpyTest, SaveWritesExactlyWhatNumpyWrites) {
  auto saved = [&](const Array &a) {
    std::string path = newPath(), error;
    EXPECT_TRUE(save(path, a, error)) << error;
    return readFile(path);
  };
  const float f32[] = {-1, -0.5, 0, 0.5, 1, 1.5};
  EXPECT_EQ(saved(makeF32({2, 3}, f32)), bytesOf(kNumpyF32_2x3));
  const uint8_t flags[] = {1, 0, 1, 1, 0};
  EXPECT_EQ(saved(makeBool({5}, flags)), bytesOf(kNumpyBool));
  const float scalar = 3.5f;
  EXPECT_EQ(saved(makeF32({}, &scalar)), bytesOf(kNumpyScalarF32));
  EXPECT_EQ(saved(makeF32({0, 3}, nullptr)), bytesOf(kNumpyEmpty));
  Array i64 = loadOk(bytesOf(kNumpyI64));
  EXPECT_EQ(saved(i64), bytesOf(kNumpyI64));
  Array bf16 = loadOk(bytesOf(kMlDtypesBf16Header));
  EXPECT_EQ(saved(bf16), bytesOf(kMlDtypesBf16Header));
}

TEST_F(NpyTest, RoundTripsFloat32) {
  const float data[] = {0.1f, -2.0f, 3e38f, -0.0f, 1e-45f, 7.0f};
  Array b = roundTrip(makeF32({3, 2}, data));
  EXPECT_EQ(b.dtype, DType::F32);
  ASSERT_EQ(b.shape, (std::vector<int64_t>{3, 2}));
  for (int i = 0; i < 6; ++i)
    EXPECT_TRUE(sameBits(b.f32()[i], data[i])) << i;
}

TEST_F(NpyTest, RoundTripsInt32) {
  const int32_t data[] = {std::numeric_limits<int32_t>::min(), -1, 0,  1,
                          std::numeric_limits<int32_t>::max(), 42, 43, 44};
  Array b = roundTrip(makeI32({2, 2, 2}, data));
  EXPECT_EQ(b.dtype, DType::I32);
  ASSERT_EQ(b.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(std::vector<int32_t>(b.i32(), b.i32() + 8),
            std::vector<int32_t>(std::begin(data), std::end(data)));
}

TEST_F(NpyTest, RoundTripsBool) {
  const uint8_t data[] = {0, 1, 1, 0, 1, 0, 0};
  Array b = roundTrip(makeBool({7}, data));
  EXPECT_EQ(b.dtype, DType::Bool);
  ASSERT_EQ(b.shape, (std::vector<int64_t>{7}));
  EXPECT_EQ(b.bytes, std::vector<uint8_t>(std::begin(data), std::end(data)));
}

TEST_F(NpyTest, RoundTripsScalar) {
  const int32_t value = -12345;
  Array b = roundTrip(makeI32({}, &value));
  EXPECT_TRUE(b.shape.empty());
  EXPECT_EQ(b.numel(), 1);
  ASSERT_EQ(b.bytes.size(), 4u);
  EXPECT_EQ(b.i32()[0], value);
}

TEST_F(NpyTest, SaveRejectsInconsistentArray) {
  Array a = makeF32({2}, std::vector<float>{1, 2}.data());
  a.shape = {3};
  std::string path = newPath(), error;
  EXPECT_FALSE(save(path, a, error));
  EXPECT_EQ(error.rfind("cannot write '" + path + "'", 0), 0u) << error;
  EXPECT_NE(error.find("does not match shape (3,)"), std::string::npos) << error;
}

TEST_F(NpyTest, SaveReportsUnwritablePath) {
  Array a = makeBool({}, std::vector<uint8_t>{1}.data());
  std::string error;
  EXPECT_FALSE(save(::testing::TempDir() + "no-such-dir/x.npy", a, error));
  EXPECT_NE(error.find("cannot write"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
}

//===----------------------------------------------------------------------===//
// Load errors
//===----------------------------------------------------------------------===//

TEST_F(NpyTest, ErrorNonexistentFile) {
  Array a;
  std::string error;
  EXPECT_FALSE(load(::testing::TempDir() + "does-not-exist.npy", kWhat, a, error));
  EXPECT_TRUE(isErrorAbout(error, "cannot open file: No such file or directory"));
}

TEST_F(NpyTest, ErrorDirectory) {
  Array a;
  std::string error;
  EXPECT_FALSE(load(::testing::TempDir(), kWhat, a, error));
  EXPECT_TRUE(isErrorAbout(error, "cannot open file: it is a directory"));
}

TEST_F(NpyTest, ErrorBadMagic) {
  EXPECT_TRUE(isErrorAbout(loadError("PK\x03\x04 this is a zip file"),
                           "not a .npy file (bad magic"));
  EXPECT_TRUE(isErrorAbout(loadError(""), "not a .npy file (bad magic"));
  EXPECT_TRUE(isErrorAbout(loadError("\x93NUM"), "not a .npy file (bad magic"));
}

TEST_F(NpyTest, ErrorUnsupportedVersion) {
  std::string file = bytesOf(kNumpyF32_2x3);
  file[6] = 4;
  EXPECT_TRUE(isErrorAbout(loadError(file),
                           "unsupported .npy format version 4.0 (supported: 1.0, "
                           "2.0, 3.0)"));
  file[6] = 1;
  file[7] = 1;
  EXPECT_TRUE(isErrorAbout(loadError(file), "unsupported .npy format version 1.1"));
}

TEST_F(NpyTest, ErrorTruncatedHeader) {
  std::string file = bytesOf(kNumpyF32_2x3);
  EXPECT_TRUE(isErrorAbout(loadError(file.substr(0, 7)), "truncated header"));
  EXPECT_TRUE(isErrorAbout(loadError(file.substr(0, 9)), "truncated header"));
  EXPECT_TRUE(isErrorAbout(loadError(file.substr(0, 60)),
                           "truncated header: the header length is 118 bytes but "
                           "only 50 follow"));
}

TEST_F(NpyTest, ErrorHeaderTooLong) {
  std::string file("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12);
  EXPECT_TRUE(
      isErrorAbout(loadError(file + "{}"), "header length 2147483647 exceeds the limit"));
}

TEST_F(NpyTest, ErrorGarbageHeader) {
  EXPECT_TRUE(isErrorAbout(loadError(npyFile("hello, world")),
                           "malformed header: expected '{' at the start of the "
                           "header at column 1 of \"hello, world\""));
  // Binary junk is shown escaped, keeping the message on one line.
  EXPECT_TRUE(isErrorAbout(loadError(npyFile(std::string("{\x01\n\xff", 4))),
                           "\"{\\x01\\x0a\\xff\""));
}

TEST_F(NpyTest, ErrorMalformedHeaders) {
  const std::pair<const char *, const char *> cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",
       "expected a string key or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3), }",
       "expected ':' after the key at column 10"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }",
       "expected ',' or '}' after the value of 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }}",
       "unexpected text after the closing '}'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }",
       "expected True or False as the value of 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }",
       "expected a tuple such as (2, 3) as the value of 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (5), }",
       "shape (5) is not a tuple; a one-dimensional shape is written (5,)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
       "expected ',' or ')' in the shape tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }",
       "expected an integer dimension in the shape tuple"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (), }",
       "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}",
       "unexpected key 'extra'"},
      {"{'descr': '<\\f4', 'fortran_order': False, 'shape': (), }",
       "escape sequences in strings are not supported"},
      {"{'descr': 3, 'fortran_order': False, 'shape': (), }",
       "expected a dtype string as the value of 'descr'"},
  };
  for (const auto &[dict, phrase] : cases) {
    std::string error = loadError(npyFile(dict, std::string(4, '\0')));
    EXPECT_TRUE(isErrorAbout(error, "malformed header: ")) << dict;
    EXPECT_TRUE(isErrorAbout(error, phrase)) << dict;
  }
}

TEST_F(NpyTest, ErrorMissingKey) {
  EXPECT_TRUE(isErrorAbout(loadError(npyFile("{'descr': '<f4', 'fortran_order': False}")),
                           "header is missing key 'shape'"));
  EXPECT_TRUE(isErrorAbout(loadError(npyFile("{'fortran_order': False, 'shape': ()}")),
                           "header is missing key 'descr'"));
}

TEST_F(NpyTest, ErrorFortranOrder) {
  EXPECT_TRUE(isErrorAbout(loadError(bytesOf(kNumpyFortran)),
                           "Fortran-order arrays are not supported; save with "
                           "np.ascontiguousarray"));
}

TEST_F(NpyTest, ErrorBigEndian) {
  EXPECT_TRUE(isErrorAbout(loadError(bytesOf(kNumpyBigEndian)),
                           "big-endian data ('>i4') is not supported; convert "
                           "with arr.astype('<i4')"));
}

TEST_F(NpyTest, ErrorUnsupportedDtype) {
  std::string error = loadError(bytesOf(kNumpyComplex));
  EXPECT_TRUE(isErrorAbout(error, "unsupported dtype '<c8'"));
  EXPECT_TRUE(isErrorAbout(error, "supported: '|b1' (bool), '|i1' (int8), '|u1' "
                                  "(uint8), '<i4' (int32), '<i8' (int64), '<f2' "
                                  "(float16), '<f4' (float32), '<f8' (float64), "
                                  "'bfloat16'"));
  EXPECT_TRUE(isErrorAbout(loadError(npyFile(dictFor("<u4", "()"), "1234")),
                           "unsupported dtype '<u4'"));
  // Big-endian but also unsupported: the type is what matters.
  EXPECT_TRUE(isErrorAbout(loadError(npyFile(dictFor(">c8", "()"), "12345678")),
                           "unsupported dtype '>c8'"));
}

TEST_F(NpyTest, ErrorStructuredDtype) {
  EXPECT_TRUE(
      isErrorAbout(loadError(npyFile("{'descr': [('a', '<f4')], 'fortran_order': False, "
                                     "'shape': (), }",
                                     "1234")),
                   "unsupported dtype: structured (record) arrays are not supported"));
}

TEST_F(NpyTest, ErrorBfloat16SavedByNpSave) {
  // np.save of an ml_dtypes.bfloat16 array writes the opaque '<V2'.
  std::string error = loadError(bytesOf(kMlDtypesBf16Saved));
  EXPECT_TRUE(isErrorAbout(error, "unsupported dtype '<V2'"));
  EXPECT_TRUE(isErrorAbout(error, "write the header with descr 'bfloat16'"));
}

TEST_F(NpyTest, ErrorTruncatedData) {
  std::string file = bytesOf(kNumpyF32_2x3);
  EXPECT_TRUE(isErrorAbout(loadError(file.substr(0, file.size() - 3)),
                           "truncated data: expected 24 bytes of float32 data of "
                           "shape (2, 3), got 21"));
  EXPECT_TRUE(
      isErrorAbout(loadError(file.substr(0, 128)), "truncated data: expected 24 bytes"));
}

TEST_F(NpyTest, ErrorTrailingBytes) {
  EXPECT_TRUE(isErrorAbout(loadError(bytesOf(kNumpyF32_2x3) + "xy"),
                           "trailing bytes: expected 24 bytes of float32 data of "
                           "shape (2, 3), but the file has 26 (2 extra)"));
}

TEST_F(NpyTest, ErrorNegativeDimension) {
  EXPECT_TRUE(isErrorAbout(loadError(npyFile(dictFor("<f4", "(-1, 3)"))),
                           "negative dimension -1 in shape (-1, 3)"));
}

TEST_F(NpyTest, ErrorOversizedShape) {
  // Each dimension fits, but the element count overflows int64...
  EXPECT_TRUE(
      isErrorAbout(loadError(npyFile(dictFor("<f4", "(3037000500, 3037000500)"))),
                   "shape (3037000500, 3037000500) of float32 is too large: its byte size "
                   "overflows int64"));
  // ...or the count fits but the byte count does not.
  EXPECT_TRUE(isErrorAbout(loadError(npyFile(dictFor("<f8", "(4611686018427387904,)"))),
                           "its byte size overflows int64"));
  // A dimension that does not fit in int64 at all.
  EXPECT_TRUE(isErrorAbout(loadError(npyFile(dictFor("<f4", "(9223372036854775808,)"))),
                           "dimension in shape \"(9223372036854775808,)\" does not "
                           "fit in int64"));
  // A plausible shape larger than the file is reported as truncated data, without
  // allocating it.
  EXPECT_TRUE(isErrorAbout(loadError(npyFile(dictFor("<f4", "(1000000000, 1000)"))),
                           "truncated data: expected 4000000000000 bytes"));
}

TEST_F(NpyTest, ErrorTooManyDimensions) {
  std::string shape = "(";
  for (int i = 0; i < 65; ++i)
    shape += "1, ";
  EXPECT_TRUE(isErrorAbout(loadError(npyFile(dictFor("<f4", shape + ")"))),
                           "shape has more than 64 dimensions"));
}

// Every prefix and many single-byte corruptions of real files must be reported
// (or, for harmless corruptions, loaded), never crash or over-read.
TEST_F(NpyTest, SurvivesTruncationAndCorruption) {
  std::string path = newPath();
  // One format 2.0 and one format 1.0 file (each variant is a file write, which is
  // the slow part).
  const std::string files[] = {bytesOf(kNumpyF32V2), bytesOf(kNumpyScalarF32)};
  std::mt19937 rng(1234);
  for (const std::string &file : files) {
    std::vector<std::string> variants;
    for (size_t n = 0; n < file.size(); ++n)
      variants.push_back(file.substr(0, n));
    // Corrupt the preamble and header only: any data bytes are valid.
    for (int i = 0; i < 100; ++i) {
      std::string corrupt = file;
      corrupt[rng() % 128] = static_cast<char>(rng() & 0xff);
      variants.push_back(corrupt);
    }
    for (const std::string &variant : variants) {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << variant;
      Array a;
      std::string error;
      if (!load(path, kWhat, a, error))
        EXPECT_TRUE(isErrorAbout(error, ""));
      else
        EXPECT_EQ(static_cast<int64_t>(a.bytes.size()),
                  a.numel() * static_cast<int64_t>(dtypeSize(a.dtype)));
    }
  }
}

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

TEST_F(NpyTest, ErrorInt64OutOfInt32Range) {
  std::vector<int32_t> values;
  std::string error;
  EXPECT_FALSE(toInt32(loadOk(bytesOf(kNumpyI64OutOfRange)), kWhat, values, error));
  EXPECT_TRUE(isErrorAbout(error, "int64 value 4294967296 at element [1, 0] is out "
                                  "of int32 range"));
  // 2**31 as a 0-d array.
  Array scalar =
      loadOk(npyFile(dictFor("<i8", "()"), std::string("\0\0\0\x80\0\0\0\0", 8)));
  EXPECT_FALSE(toInt32(scalar, kWhat, values, error));
  EXPECT_TRUE(isErrorAbout(error, "int64 value 2147483648 at the scalar element is out "
                                  "of int32 range"));
}

TEST_F(NpyTest, ErrorFloat64ToFloat32) {
  std::vector<float> values;
  std::string error;
  EXPECT_FALSE(toFloat32(loadOk(bytesOf(kNumpyF64)), kWhat, values, error));
  EXPECT_TRUE(isErrorAbout(error, "float64"));
  EXPECT_TRUE(isErrorAbout(error, "convert to float32"));
}

TEST_F(NpyTest, ErrorBoolFromIntsWithATwo) {
  std::vector<uint8_t> values;
  std::string error;
  EXPECT_FALSE(toBool(loadOk(bytesOf(kNumpyI32WithTwo)), kWhat, values, error));
  EXPECT_TRUE(isErrorAbout(error, "int32 data used as bool must hold only 0 and 1, "
                                  "but element [2] is 2"));
}

TEST_F(NpyTest, BoolFromZeroOneInts) {
  std::vector<uint8_t> values;
  std::string error;
  const int32_t ints[] = {1, 0, 0, 1};
  ASSERT_TRUE(toBool(makeI32({2, 2}, ints), kWhat, values, error)) << error;
  EXPECT_EQ(values, (std::vector<uint8_t>{1, 0, 0, 1}));
  ASSERT_TRUE(toBool(loadOk(npyFile(dictFor("|u1", "(2,)"), std::string("\1\0", 2))), kWhat,
                     values, error))
      << error;
  EXPECT_EQ(values, (std::vector<uint8_t>{1, 0}));
}

TEST_F(NpyTest, ErrorWrongElementKind) {
  std::string error;
  std::vector<float> f;
  EXPECT_FALSE(toFloat32(loadOk(bytesOf(kNumpyI64)), kWhat, f, error));
  EXPECT_TRUE(isErrorAbout(error, "expected float32, float16 or bfloat16 data, got int64"));
  std::vector<int32_t> i;
  EXPECT_FALSE(toInt32(loadOk(bytesOf(kNumpyF32_2x3)), kWhat, i, error));
  EXPECT_TRUE(
      isErrorAbout(error, "expected int32, int64, int8 or uint8 data, got float32"));
  EXPECT_FALSE(toInt32(loadOk(bytesOf(kNumpyBool)), kWhat, i, error));
  EXPECT_TRUE(isErrorAbout(error, "got bool"));
  std::vector<uint8_t> b;
  EXPECT_FALSE(toBool(loadOk(bytesOf(kNumpyEmpty)), kWhat, b, error));
  EXPECT_TRUE(isErrorAbout(error, "expected bool data (or integers that are all 0 "
                                  "or 1), got float32"));
}

TEST_F(NpyTest, ConversionRejectsInconsistentArray) {
  Array a = makeF32({2}, std::vector<float>{1, 2}.data());
  a.bytes.pop_back();
  std::vector<float> f;
  std::string error;
  EXPECT_FALSE(toFloat32(a, kWhat, f, error));
  EXPECT_TRUE(isErrorAbout(error, "array holds 7 bytes, which does not match shape (2,)"));
}

TEST(NpyHalf, MatchesReferenceOnEveryBitPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = halfToFloat(h);
    uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (exponent == 0x1f && mantissa != 0) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << bits;
      continue;
    }
    float expected = exponent == 0x1f ? sign * std::numeric_limits<float>::infinity()
                     : exponent == 0
                         ? sign * std::ldexp(static_cast<float>(mantissa), -24)
                         : sign * std::ldexp(static_cast<float>(mantissa + 1024),
                                             static_cast<int>(exponent) - 25);
    ASSERT_TRUE(sameBits(f, expected)) << bits << ": " << f << " vs " << expected;
#ifdef __FLT16_MAX__
    ASSERT_TRUE(sameBits(f, static_cast<float>([&] {
                           _Float16 x;
                           std::memcpy(&x, &h, sizeof x);
                           return x;
                         }())))
        << bits;
#endif
  }
}

TEST(NpyHalf, Bfloat16IsTheHighHalfOfFloat32) {
  EXPECT_EQ(bfloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(bfloat16ToFloat(0xc020), -2.5f);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(0x7fc0)));
  EXPECT_EQ(bfloat16ToFloat(0x0001), std::ldexp(1.0f, -133)); // subnormal
}

TEST(NpyDType, NamesSizesAndShapes) {
  EXPECT_STREQ(dtypeName(DType::F32), "float32");
  EXPECT_STREQ(dtypeName(DType::I32), "int32");
  EXPECT_STREQ(dtypeName(DType::Bool), "bool");
  EXPECT_STREQ(dtypeName(DType::BF16), "bfloat16");
  EXPECT_STREQ(dtypeName(DType::F16), "float16");
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_STREQ(dtypeDescr(DType::Bool), "|b1");
  EXPECT_STREQ(dtypeDescr(DType::F16), "<f2");
  EXPECT_EQ(formatShape({}), "()");
  EXPECT_EQ(formatShape({5}), "(5,)");
  EXPECT_EQ(formatShape({2, 3}), "(2, 3)");
}

} // namespace

} // namespace npy_test

//===- Npy.cpp - reading and writing NumPy .npy files ---------------------===//
//
// Implements the .npy reader/writer declared in switchyard/Runtime/Npy.h. The
// format (numpy/lib/format.py) is:
//
//   "\x93NUMPY" major minor  header-length (uint16 LE for 1.0, uint32 LE for
//   2.0 and 3.0)  header  element-data
//
// where the header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a final '\n' so that the data starts 64-byte aligned.
// The header is parsed with a small recursive-descent parser that accepts the
// subset of Python literal syntax NumPy writes; every read is bounds-checked and
// nothing is allocated before the file is known to hold it.
//
//===----------------------------------------------------------------------===//

#include "switchyard/Runtime/Npy.h"
#include "switchyard/Runtime/UntrustedFile.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "switchyard::npy keeps element data little-endian and assumes a little-endian host"
#endif

namespace switchyard::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
/// Largest header accepted by load(); NumPy's own reader stops at 10000 bytes.
constexpr uint64_t kMaxHeaderLen = 1 << 20;
/// NumPy's NPY_MAXDIMS (64 since NumPy 2.0).
constexpr size_t kMaxRank = 64;
/// np.save pads the header so the first axis can grow to this many digits in place
/// (numpy/lib/format.py, GROWTH_AXIS_MAX_DIGITS); save() does the same.
constexpr size_t kGrowthAxisMaxDigits = 21;
constexpr size_t kArrayAlign = 64;

struct DTypeInfo {
  DType dtype;
  const char *name;  // NumPy's dtype name
  const char *descr; // what save() writes
  const char *code;  // descr without the byte-order character
  size_t size;
};

// The types load() accepts, in the order the "supported" list names them.
constexpr DTypeInfo kDTypes[] = {
    {DType::Bool, "bool", "|b1", "b1", 1},
    {DType::I8, "int8", "|i1", "i1", 1},
    {DType::U8, "uint8", "|u1", "u1", 1},
    {DType::I32, "int32", "<i4", "i4", 4},
    {DType::I64, "int64", "<i8", "i8", 8},
    {DType::F16, "float16", "<f2", "f2", 2},
    {DType::F32, "float32", "<f4", "f4", 4},
    {DType::F64, "float64", "<f8", "f8", 8},
    {DType::BF16, "bfloat16", "bfloat16", "bfloat16", 2},
};

const DTypeInfo &info(DType dtype) {
  for (const DTypeInfo &i : kDTypes)
    if (i.dtype == dtype)
      return i;
  assert(false && "unknown npy::DType");
  return kDTypes[0];
}

/// "supported: '|b1' (bool), ..., 'bfloat16'", for unsupported-dtype messages.
std::string supportedList() {
  std::string s = "supported: ";
  for (const DTypeInfo &i : kDTypes) {
    if (i.dtype != kDTypes[0].dtype)
      s += ", ";
    s += std::string("'") + i.descr + "'";
    if (i.dtype != DType::BF16)
      s += std::string(" (") + i.name + ")";
  }
  return s;
}

/// Renders untrusted header text on one line: non-printable bytes become \xNN and
/// long text is cut short.
std::string sanitize(const std::string &text, size_t maxLen = 120) {
  static const char hex[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < text.size(); ++i) {
    if (s.size() >= maxLen) {
      s += "...";
      break;
    }
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      s += static_cast<char>(c);
    } else {
      s += "\\x";
      s += hex[c >> 4];
      s += hex[c & 15];
    }
  }
  return s;
}

/// Multiplies non-negative dimensions; false on int64 overflow.
bool checkedNumel(const std::vector<int64_t> &shape, int64_t &numel) {
  numel = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d != 0 && numel > std::numeric_limits<int64_t>::max() / d)
      return false;
    numel *= d;
  }
  return true;
}

/// Number of data bytes for `shape` of `dtype`, or -1 if it is negative/overflows.
int64_t byteCount(const std::vector<int64_t> &shape, DType dtype) {
  int64_t numel;
  if (!checkedNumel(shape, numel))
    return -1;
  int64_t size = static_cast<int64_t>(dtypeSize(dtype));
  if (numel > std::numeric_limits<int64_t>::max() / size)
    return -1;
  return numel * size;
}

/// "element [1, 0]" (or "the scalar element") for the flat C-order index `flat`.
std::string describeElement(const std::vector<int64_t> &shape, int64_t flat) {
  if (shape.empty())
    return "the scalar element";
  std::vector<int64_t> index(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    index[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  std::string s = "element [";
  for (size_t i = 0; i < index.size(); ++i)
    s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

template <typename T> T loadElement(const Array &a, int64_t i) {
  T value;
  std::memcpy(&value, a.bytes.data() + i * sizeof(T), sizeof(T));
  return value;
}

/// Element `i` of an int8/uint8/int32/int64 array, widened to int64.
int64_t integerElement(const Array &a, int64_t i) {
  switch (a.dtype) {
  case DType::I8:
    return loadElement<int8_t>(a, i);
  case DType::U8:
    return loadElement<uint8_t>(a, i);
  case DType::I32:
    return loadElement<int32_t>(a, i);
  default:
    assert(a.dtype == DType::I64 && "not an integer array");
    return loadElement<int64_t>(a, i);
  }
}

/// Checks that an Array built by hand is self-consistent: non-negative dims and
/// exactly as many bytes as its shape and dtype need. Returns "" when it is.
std::string inconsistency(const Array &a) {
  int64_t expected = byteCount(a.shape, a.dtype);
  if (expected >= 0 && static_cast<uint64_t>(expected) == a.bytes.size())
    return "";
  return "array holds " + std::to_string(a.bytes.size()) +
         " bytes, which does not match shape " + formatShape(a.shape) + " of " +
         dtypeName(a.dtype);
}

bool checkConsistent(const Array &a, const std::string &what, std::string &error) {
  std::string problem = inconsistency(a);
  if (problem.empty())
    return true;
  error = what + ": " + problem;
  return false;
}

//===----------------------------------------------------------------------===//
// Header parsing
//===----------------------------------------------------------------------===//

/// The parsed header dict.
struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// Parses the Python dict literal NumPy writes. Accepts any key order, either
/// quote character, surrounding whitespace, trailing commas and Python 2 `L`
/// suffixes on dimensions; rejects anything else with a precise message.
class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : text(text) {}

  /// On failure returns false and sets `message` (the part after "what: ").
  bool parse(Header &header, std::string &message) {
    if (parseDict(header))
      return true;
    if (structural)
      message = "malformed header: " + problem + " at column " + std::to_string(pos + 1) +
                " of \"" + sanitize(trimmed()) + "\"";
    else
      message = problem;
    return false;
  }

private:
  const std::string &text;
  size_t pos = 0;
  std::string problem;    // what went wrong, set by fail()
  bool structural = true; // false when `problem` is not a syntax error

  bool fail(const std::string &what) {
    problem = what;
    return false;
  }
  /// For problems that are not syntax errors: the message is used as is.
  bool failSemantic(const std::string &message) {
    structural = false;
    return fail(message);
  }

  bool parseDict(Header &header) {
    bool seenDescr = false, seenFortran = false, seenShape = false;
    if (!expect('{', "'{' at the start of the header"))
      return false;
    skipSpace();
    while (!at('}')) {
      std::string key;
      size_t keyPos = pos;
      if (!parseString(key, "a string key or '}'"))
        return false;
      bool *seen = key == "descr"           ? &seenDescr
                   : key == "fortran_order" ? &seenFortran
                   : key == "shape"         ? &seenShape
                                            : nullptr;
      if (!seen || *seen) {
        pos = keyPos;
        return fail(seen ? "duplicate key '" + key + "'"
                         : "unexpected key '" + sanitize(key) +
                               "' (expected 'descr', 'fortran_order' and "
                               "'shape')");
      }
      *seen = true;
      if (!expect(':', "':' after the key"))
        return false;
      skipSpace();
      bool ok = key == "descr"           ? parseDescr(header.descr)
                : key == "fortran_order" ? parseBool(header.fortranOrder)
                                         : parseShape(header.shape);
      if (!ok)
        return false;
      skipSpace();
      if (at(',')) {
        ++pos;
        skipSpace();
      } else if (!at('}')) {
        return fail("expected ',' or '}' after the value of '" + key + "'");
      }
    }
    ++pos; // '}'
    skipSpace();
    if (pos != text.size())
      return fail("unexpected text after the closing '}'");
    for (auto [seen, key] : {std::pair{seenDescr, "descr"},
                             {seenFortran, "fortran_order"},
                             {seenShape, "shape"}})
      if (!seen)
        return failSemantic(std::string("header is missing key '") + key + "': \"" +
                            sanitize(trimmed()) + "\"");
    return true;
  }

  /// The header without the trailing padding and newline.
  std::string trimmed() const {
    size_t end = text.find_last_not_of(" \t\r\n");
    return end == std::string::npos ? std::string() : text.substr(0, end + 1);
  }

  bool at(char c) const { return pos < text.size() && text[pos] == c; }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool expect(char c, const char *what) {
    skipSpace();
    if (!at(c))
      return fail(std::string("expected ") + what);
    ++pos;
    return true;
  }

  /// A '...' or "..." literal without escapes (NumPy never writes any).
  bool parseString(std::string &out, const char *what) {
    skipSpace();
    if (!at('\'') && !at('"'))
      return fail(std::string("expected ") + what);
    char quote = text[pos++];
    size_t start = pos;
    while (pos < text.size() && text[pos] != quote) {
      if (text[pos] == '\\')
        return fail("escape sequences in strings are not supported");
      if (text[pos] == '\n')
        return fail("unterminated string");
      ++pos;
    }
    if (pos == text.size())
      return fail("unterminated string");
    out = text.substr(start, pos - start);
    ++pos;
    return true;
  }

  bool parseDescr(std::string &out) {
    if (at('['))
      return failSemantic("unsupported dtype: structured (record) arrays are "
                          "not supported (" +
                          supportedList() + ")");
    return parseString(out, "a dtype string as the value of 'descr'");
  }

  bool parseBool(bool &out) {
    for (auto [word, value] : {std::pair{"True", true}, {"False", false}}) {
      size_t n = std::strlen(word);
      if (text.compare(pos, n, word) == 0) {
        pos += n;
        out = value;
        return true;
      }
    }
    return fail("expected True or False as the value of 'fortran_order'");
  }

  /// A tuple of integers: (), (5,), (2, 3) or (2, 3,).
  bool parseShape(std::vector<int64_t> &out) {
    if (!at('('))
      return fail("expected a tuple such as (2, 3) as the value of 'shape'");
    ++pos;
    skipSpace();
    out.clear();
    bool sawComma = false;
    while (!at(')')) {
      if (out.size() == kMaxRank)
        return failSemantic("shape has more than " + std::to_string(kMaxRank) +
                            " dimensions");
      int64_t dim;
      if (!parseInt(dim))
        return false;
      out.push_back(dim);
      skipSpace();
      sawComma = at(',');
      if (sawComma) {
        ++pos;
        skipSpace();
      } else if (!at(')')) {
        return fail("expected ',' or ')' in the shape tuple");
      }
    }
    if (out.size() == 1 && !sawComma)
      return fail("shape (" + std::to_string(out[0]) +
                  ") is not a tuple; a one-dimensional shape is written (" +
                  std::to_string(out[0]) + ",)");
    ++pos; // ')'
    return true;
  }

  /// A decimal integer with optional '-' sign and Python 2 'L' suffix.
  bool parseInt(int64_t &out) {
    bool negative = at('-');
    if (negative)
      ++pos;
    if (pos >= text.size() || text[pos] < '0' || text[pos] > '9')
      return fail("expected an integer dimension in the shape tuple");
    uint64_t magnitude = 0;
    const uint64_t limit =
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      unsigned digit = static_cast<unsigned>(text[pos] - '0');
      if (magnitude > (limit - digit) / 10)
        return failSemantic("dimension in shape \"" + sanitize(shapeText()) +
                            "\" does not fit in int64");
      magnitude = magnitude * 10 + digit;
      ++pos;
    }
    if (at('L') || at('l'))
      ++pos;
    out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return true;
  }

  /// The text of the shape tuple containing `pos`, for messages.
  std::string shapeText() const {
    size_t start = text.rfind('(', pos);
    size_t end = text.find(')', pos);
    if (start == std::string::npos)
      start = pos;
    return text.substr(start,
                       end == std::string::npos ? std::string::npos : end + 1 - start);
  }
};

/// Maps a header descr to a DType, or explains why it cannot.
bool resolveDescr(const std::string &descr, DType &dtype, std::string &message) {
  if (descr == "bfloat16" || descr == "<bfloat16") {
    dtype = DType::BF16;
    return true;
  }
  char order = descr.empty() ? '\0' : descr[0];
  bool hasOrder = std::strchr("<>|=!", order) != nullptr && order != '\0';
  std::string code = hasOrder ? descr.substr(1) : descr;
  for (const DTypeInfo &i : kDTypes) {
    if (i.dtype == DType::BF16 || code != i.code)
      continue;
    // Byte order only matters for multi-byte elements ('>i1' is just int8).
    if ((order == '>' || order == '!') && i.size > 1) {
      message = "big-endian data ('" + descr +
                "') is not supported; convert with arr.astype('<" + code + "')";
      return false;
    }
    dtype = i.dtype;
    return true;
  }
  message = "unsupported dtype '" + sanitize(descr) + "'";
  if (code == "V2")
    message += " (an opaque 2-byte type: np.save writes ml_dtypes.bfloat16 "
               "this way and loses the element type; save as float32, or write "
               "the header with descr 'bfloat16')";
  message += " (" + supportedList() + ")";
  return false;
}

/// Reads exactly `n` bytes; false if the stream ends first.
bool readExactly(std::istream &in, char *data, uint64_t n) {
  in.read(data, static_cast<std::streamsize>(n));
  return static_cast<uint64_t>(in.gcount()) == n;
}

} // namespace

//===----------------------------------------------------------------------===//
// DType and Array
//===----------------------------------------------------------------------===//

const char *dtypeName(DType dtype) { return info(dtype).name; }
std::optional<DType> dtypeFromName(std::string_view name) {
  for (const DTypeInfo &i : kDTypes)
    if (name == i.name)
      return i.dtype;
  return std::nullopt;
}
size_t dtypeSize(DType dtype) { return info(dtype).size; }
const char *dtypeDescr(DType dtype) { return info(dtype).descr; }

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

//===----------------------------------------------------------------------===//
// load / save
//===----------------------------------------------------------------------===//

bool load(const std::string &path, const std::string &what, Array &out,
          std::string &error) {
  auto fail = [&](const std::string &message) {
    error = what + ": " + message;
    return false;
  };

  // Check the path before opening it: std::ifstream happily "opens" a directory.
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found)
    return fail("cannot open file: " +
                std::make_error_code(std::errc::no_such_file_or_directory).message());
  if (ec)
    return fail("cannot open file: " + ec.message());
  if (fs::is_directory(status))
    return fail("cannot open file: it is a directory");
  if (!fs::is_regular_file(status))
    return fail("cannot open file: not a regular file");
  uint64_t fileSize = fs::file_size(path, ec);
  if (ec)
    return fail("cannot open file: " + ec.message());
  if (fileSize > runtime::limits::kNpy)
    return fail(std::to_string(fileSize) + " bytes, more than a .npy file may have (" +
                runtime::formatByteLimit(runtime::limits::kNpy) + ")");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open())
    return fail(std::string("cannot open file: ") +
                (errno ? std::strerror(errno) : "unknown error"));
  return loadStream(in, fileSize, what, out, error);
}

bool loadBytes(const std::string &bytes, const std::string &what, Array &out,
               std::string &error) {
  std::istringstream in(bytes);
  return loadStream(in, bytes.size(), what, out, error);
}

bool loadStream(std::istream &in, uint64_t fileSize, const std::string &what, Array &out,
                std::string &error) {
  auto fail = [&](const std::string &message) {
    error = what + ": " + message;
    return false;
  };

  // Preamble: magic, version, header length.
  unsigned char preamble[12] = {};
  uint64_t got = fileSize < 10 ? fileSize : 10;
  if (!readExactly(in, reinterpret_cast<char *>(preamble), got))
    return fail("cannot read file");
  if (got < kMagicLen || std::memcmp(preamble, kMagic, kMagicLen) != 0)
    return fail("not a .npy file (bad magic: it does not start with "
                "\"\\x93NUMPY\")");
  if (got < 8)
    return fail("truncated header: the file ends inside the format version");
  unsigned major = preamble[6], minor = preamble[7];
  if (major < 1 || major > 3 || minor != 0)
    return fail("unsupported .npy format version " + std::to_string(major) + "." +
                std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  const uint64_t preambleLen = major == 1 ? 10 : 12;
  if (fileSize < preambleLen)
    return fail("truncated header: the file ends inside the header length");
  if (major != 1 && !readExactly(in, reinterpret_cast<char *>(preamble) + 10, 2))
    return fail("cannot read file");
  uint64_t headerLen = 0;
  for (uint64_t i = preambleLen; i-- > 8;)
    headerLen = headerLen << 8 | preamble[i];
  if (headerLen > kMaxHeaderLen)
    return fail("header length " + std::to_string(headerLen) + " exceeds the limit of " +
                std::to_string(kMaxHeaderLen) + " bytes");
  if (headerLen > fileSize - preambleLen)
    return fail("truncated header: the header length is " + std::to_string(headerLen) +
                " bytes but only " + std::to_string(fileSize - preambleLen) + " follow");

  // Header dict.
  std::string text(headerLen, '\0');
  if (!readExactly(in, text.data(), headerLen))
    return fail("cannot read file");
  Header header;
  std::string message;
  if (!HeaderParser(text).parse(header, message))
    return fail(message);
  DType dtype;
  if (!resolveDescr(header.descr, dtype, message))
    return fail(message);
  for (int64_t d : header.shape)
    if (d < 0)
      return fail("negative dimension " + std::to_string(d) + " in shape " +
                  formatShape(header.shape));
  int64_t dataLen = byteCount(header.shape, dtype);
  if (dataLen < 0)
    return fail("shape " + formatShape(header.shape) + " of " + dtypeName(dtype) +
                " is too large: its byte size overflows int64");
  if (header.fortranOrder) {
    // Fortran and C order coincide when at most one dimension exceeds 1.
    int64_t numel = dataLen / static_cast<int64_t>(dtypeSize(dtype));
    size_t nontrivial = 0;
    for (int64_t d : header.shape)
      nontrivial += d > 1;
    if (numel != 0 && nontrivial > 1)
      return fail("Fortran-order arrays are not supported; save with "
                  "np.ascontiguousarray");
  }

  // Element data: exactly dataLen bytes must follow the header.
  const uint64_t available = fileSize - preambleLen - headerLen;
  const uint64_t expected = static_cast<uint64_t>(dataLen);
  std::string layout =
      std::string(dtypeName(dtype)) + " data of shape " + formatShape(header.shape);
  if (available < expected)
    return fail("truncated data: expected " + std::to_string(expected) + " bytes of " +
                layout + ", got " + std::to_string(available));
  if (available > expected)
    return fail("trailing bytes: expected " + std::to_string(expected) + " bytes of " +
                layout + ", but the file has " + std::to_string(available) + " (" +
                std::to_string(available - expected) + " extra)");
  std::vector<uint8_t> bytes(expected);
  if (!readExactly(in, reinterpret_cast<char *>(bytes.data()), expected))
    return fail("truncated data: the file shrank while it was being read");

  out.dtype = dtype;
  out.shape = std::move(header.shape);
  out.bytes = std::move(bytes);
  return true;
}

namespace {
/// Writes `size` bytes of element data of `shape` with the header np.save writes for
/// `descr`; the caller has checked the shape's rank and the data's size.
bool writeNpy(const std::string &path, const char *descr, const std::vector<int64_t> &shape,
              const void *data, size_t size, std::string &error) {
  auto fail = [&](const std::string &message) {
    error = "cannot write '" + path + "': " + message;
    return false;
  };
  // The header exactly as np.save writes it (see _write_array_header).
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': " + formatShape(shape) + ", }";
  if (!shape.empty())
    dict.append(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');
  // With at most kMaxRank dimensions of at most 19 digits the header always fits
  // the 16-bit length of format 1.0.
  uint64_t unpadded = kMagicLen + 2 + 2 + dict.size() + 1;
  size_t padLen = kArrayAlign - unpadded % kArrayAlign;
  uint64_t headerLen = dict.size() + padLen + 1;
  assert(headerLen <= 0xffff);
  std::string preamble(kMagic, kMagicLen);
  preamble += '\x01'; // version 1.0
  preamble += '\x00';
  preamble += static_cast<char>(headerLen & 0xff);
  preamble += static_cast<char>(headerLen >> 8);

  errno = 0;
  std::ofstream outFile(path, std::ios::binary | std::ios::trunc);
  if (!outFile.is_open())
    return fail(errno ? std::strerror(errno) : "cannot open for writing");
  outFile << preamble << dict << std::string(padLen, ' ') << '\n';
  outFile.write(static_cast<const char *>(data), static_cast<std::streamsize>(size));
  outFile.flush();
  if (!outFile)
    return fail(errno ? std::strerror(errno) : "write failed");
  return true;
}
} // namespace

bool save(const std::string &path, const Array &a, std::string &error) {
  if (a.shape.size() > kMaxRank) {
    error = "cannot write '" + path + "': arrays of more than " + std::to_string(kMaxRank) +
            " dimensions are not supported";
    return false;
  }
  std::string problem = inconsistency(a);
  if (!problem.empty()) {
    error = "cannot write '" + path + "': " + problem;
    return false;
  }
  return writeNpy(path, dtypeDescr(a.dtype), a.shape, a.bytes.data(), a.bytes.size(),
                  error);
}

bool saveUInt16(const std::string &path, const std::vector<int64_t> &shape,
                const uint16_t *data, std::string &error) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / 2 / d)) {
      error = "cannot write '" + path + "': bad shape " + formatShape(shape);
      return false;
    }
    n *= d;
  }
  if (shape.size() > kMaxRank) {
    error = "cannot write '" + path + "': arrays of more than " + std::to_string(kMaxRank) +
            " dimensions are not supported";
    return false;
  }
  return writeNpy(path, "<u2", shape, data, static_cast<size_t>(n) * sizeof(uint16_t),
                  error);
}

//===----------------------------------------------------------------------===//
// Element conversions
//===----------------------------------------------------------------------===//

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    // Infinity or NaN; the NaN payload is kept, as numpy's npy_half_to_float does.
    bits = sign | 0x7f800000u | mantissa << 13;
  } else if (exponent != 0) {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  } else if (mantissa == 0) {
    bits = sign; // signed zero
  } else {
    // Subnormal: mantissa * 2^-24. Normalise around the leading one bit at p.
    int p = 9;
    while (!(mantissa & (1u << p)))
      --p;
    mantissa &= ~(1u << p);
    bits = sign | static_cast<uint32_t>(p - 24 + 127) << 23 | mantissa << (23 - p);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bfloat16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

bool toFloat32(const Array &in, const std::string &what, std::vector<float> &out,
               std::string &error) {
  if (!checkConsistent(in, what, error))
    return false;
  const int64_t n = in.numel();
  switch (in.dtype) {
  case DType::F32:
    out.resize(n);
    if (n)
      std::memcpy(out.data(), in.bytes.data(), in.bytes.size());
    return true;
  case DType::F16:
  case DType::BF16:
    out.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits = loadElement<uint16_t>(in, i);
      out[i] = in.dtype == DType::F16 ? halfToFloat(bits) : bfloat16ToFloat(bits);
    }
    return true;
  case DType::F64:
    error = what + ": float64 data is not narrowed implicitly (the conversion is "
                   "lossy); convert to float32 before saving, e.g. "
                   "x.astype(np.float32)";
    return false;
  default:
    error =
        what + ": expected float32, float16 or bfloat16 data, got " + dtypeName(in.dtype);
    return false;
  }
}

bool toInt32(const Array &in, const std::string &what, std::vector<int32_t> &out,
             std::string &error) {
  if (!checkConsistent(in, what, error))
    return false;
  const int64_t n = in.numel();
  switch (in.dtype) {
  case DType::I32:
    out.resize(n);
    if (n)
      std::memcpy(out.data(), in.bytes.data(), in.bytes.size());
    return true;
  case DType::I8:
  case DType::U8:
    out.resize(n);
    for (int64_t i = 0; i < n; ++i)
      out[i] =
          in.dtype == DType::I8 ? loadElement<int8_t>(in, i) : loadElement<uint8_t>(in, i);
    return true;
  case DType::I64: {
    std::vector<int32_t> result(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = loadElement<int64_t>(in, i);
      if (v < std::numeric_limits<int32_t>::min() ||
          v > std::numeric_limits<int32_t>::max()) {
        error = what + ": int64 value " + std::to_string(v) + " at " +
                describeElement(in.shape, i) +
                " is out of int32 range [-2147483648, 2147483647]";
        return false;
      }
      result[i] = static_cast<int32_t>(v);
    }
    out = std::move(result);
    return true;
  }
  default:
    error =
        what + ": expected int32, int64, int8 or uint8 data, got " + dtypeName(in.dtype);
    return false;
  }
}

bool toBool(const Array &in, const std::string &what, std::vector<uint8_t> &out,
            std::string &error) {
  if (!checkConsistent(in, what, error))
    return false;
  const int64_t n = in.numel();
  std::vector<uint8_t> result(n);
  if (in.dtype == DType::Bool) {
    for (int64_t i = 0; i < n; ++i)
      result[i] = in.bytes[i] != 0;
    out = std::move(result);
    return true;
  }
  // Integer data is accepted when every value is 0 or 1.
  if (in.dtype != DType::I8 && in.dtype != DType::U8 && in.dtype != DType::I32 &&
      in.dtype != DType::I64) {
    error = what + ": expected bool data (or integers that are all 0 or 1), got " +
            dtypeName(in.dtype);
    return false;
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = integerElement(in, i);
    if (v != 0 && v != 1) {
      error = what + ": " + dtypeName(in.dtype) +
              " data used as bool must hold only 0 and 1, but " +
              describeElement(in.shape, i) + " is " + std::to_string(v);
      return false;
    }
    result[i] = static_cast<uint8_t>(v);
  }
  out = std::move(result);
  return true;
}

namespace {
Array makeArray(DType dtype, std::vector<int64_t> shape, const void *data) {
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  int64_t size = byteCount(a.shape, dtype);
  assert(size >= 0 && "negative or overflowing shape");
  if (size < 0)
    size = 0; // keep release builds from allocating a wrapped-around size
  a.bytes.resize(static_cast<size_t>(size));
  if (size > 0)
    std::memcpy(a.bytes.data(), data, static_cast<size_t>(size));
  return a;
}
} // namespace

Array makeF32(std::vector<int64_t> shape, const float *data) {
  return makeArray(DType::F32, std::move(shape), data);
}
Array makeI32(std::vector<int64_t> shape, const int32_t *data) {
  return makeArray(DType::I32, std::move(shape), data);
}
Array makeBool(std::vector<int64_t> shape, const uint8_t *data) {
  return makeArray(DType::Bool, std::move(shape), data);
}

} // namespace switchyard::npy

//===- Binding.cpp - host buffers of one call, bound by name --------------===//
#include "switchyard/Runtime/Binding.h"

#include <cmath>
#include <cstring>

namespace switchyard::runtime {

CallBuffers::CallBuffers(Signature signature) : sig(std::move(signature)) {
  storage.resize(sig.params.size());
  bound.assign(sig.params.size(), false);
  external.assign(sig.params.size(), nullptr);
  externalOutputs.resize(sig.params.size());
  scalarValues.assign(sig.params.size(), 0);
}

bool CallBuffers::isInput(const std::string &name, std::string &error) const {
  if (sig.findInput(name) >= 0)
    return true;
  std::string names;
  for (const std::string &n : sig.inputNames())
    names += (names.empty() ? "" : ", ") + n;
  error = "unknown argument '" + name + "' for @" + sig.entry +
          " (its arguments: " + names + ")";
  return false;
}

bool CallBuffers::isScalar(const std::string &name) const {
  int64_t i = sig.findInput(name);
  return i >= 0 && sig.params[i].kind == ParamKind::Scalar;
}

static const char *nonFiniteName(float v) {
  return std::isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf";
}

/// Checks integer values against an input's value rule.
static bool checkValues(const Param &p, const int32_t *v, size_t n, const std::string &what,
                        std::string &error) {
  const bool phase = p.values == ValueSet::Phase,
             expertIds = p.values == ValueSet::ExpertIds;
  if (!phase && !expertIds)
    return true;
  for (size_t i = 0; i < n; ++i) {
    if (phase && (v[i] < 0 || v[i] > 2)) {
      error = what + ": phase " + std::to_string(v[i]) +
              " is not one of 0 (prefill), 1 (decode), 2 (mixed)";
      return false;
    }
    if (expertIds && (v[i] < -1 || v[i] >= p.idBound)) {
      error = what + ": expert id " + std::to_string(v[i]) + " at flat index " +
              std::to_string(i) + " is outside [-1, " + std::to_string(p.idBound) +
              ") (-1: no expert)";
      return false;
    }
  }
  return true;
}

bool CallBuffers::noteTokens(int64_t tokens, const std::string &what, std::string &error) {
  if (tokens > kMaxTokens) {
    error = what + ": " + std::to_string(tokens) + " tokens (rows) is more than the " +
            std::to_string(kMaxTokens) + " a call supports";
    return false;
  }
  if (numTokens < 0) {
    numTokens = tokens;
    tokensFrom = what;
    return true;
  }
  if (numTokens == tokens)
    return true;
  error = what + ": has " + std::to_string(tokens) + " tokens but " + tokensFrom + " has " +
          std::to_string(numTokens);
  return false;
}

bool CallBuffers::bindScalar(const std::string &name, int64_t value, std::string &error) {
  if (!isInput(name, error))
    return false;
  int64_t i = sig.findInput(name);
  if (sig.params[i].kind != ParamKind::Scalar) {
    error = "argument '" + name + "' is not a scalar";
    return false;
  }
  const Param &p = sig.params[i];
  if (p.dtype == DType::I32 && (value < INT32_MIN || value > INT32_MAX)) {
    error = "argument '" + name + "': " + std::to_string(value) + " does not fit in int32";
    return false;
  }
  if (p.values != ValueSet::Any) {
    if (value < INT32_MIN || value > INT32_MAX) {
      error = "argument '" + name + "': " + std::to_string(value) + " is out of range";
      return false;
    }
    int32_t narrow = static_cast<int32_t>(value);
    if (!checkValues(p, &narrow, 1, "argument '" + name + "'", error))
      return false;
  }
  scalarValues[i] = value;
  bound[i] = true;
  return true;
}

/// A bfloat16 / float16 parameter takes memory of exactly that dtype: float32 would
/// have to be narrowed (rounded), which the binding refuses.
static bool checkHalfDtype(const Param &p, npy::DType dtype, const std::string &what,
                           std::string &error) {
  if (dtype == p.dtype)
    return true;
  error = what + ": the entry reads " + npy::dtypeName(p.dtype) +
          " in place (compiled with --input-dtype " + p.name + "=" +
          (p.dtype == DType::BF16 ? "bf16" : "f16") + "), got " + npy::dtypeName(dtype) +
          "; pass " + npy::dtypeName(p.dtype) +
          " data or compile without --input-dtype (narrowing would round)";
  return false;
}

/// A rule's statistics must be numbers (as for float32 inputs).
static bool checkHalfFinite(const Param &p, const void *data, size_t n,
                            const std::string &what, std::string &error) {
  const uint16_t *bits = static_cast<const uint16_t *>(data);
  uint16_t exponent = p.dtype == DType::BF16 ? 0x7f80 : 0x7c00;
  for (size_t k = 0; k < n; ++k)
    if ((bits[k] & exponent) == exponent) {
      error = what + ": holds a NaN or an infinity at flat index " + std::to_string(k) +
              "; a rule's inputs must be finite";
      return false;
    }
  return true;
}

/// Checks a loaded array's shape against the ABI shape (dim 0 may be the tokens).
static bool shapeMatches(const npy::Array &a, const Param &p) {
  if (a.shape.size() != p.shape.size())
    return false;
  for (size_t i = 0; i < p.shape.size(); ++i)
    if (p.shape[i] >= 0 && a.shape[i] != p.shape[i])
      return false;
  return true;
}

static std::string expected(const Param &p) {
  return std::string(p.isSet() ? "bool" : npy::dtypeName(p.dtype)) + " " + p.shapeText();
}

bool CallBuffers::bind(const std::string &name, const npy::Array &array,
                       const std::string &what, std::string &error) {
  if (!isInput(name, error))
    return false;
  size_t i = static_cast<size_t>(sig.findInput(name));
  if (bound[i]) {
    error = "argument '" + name + "' is given twice";
    return false;
  }
  const Param &p = sig.params[i];
  if (p.kind == ParamKind::Scalar) {
    std::vector<int32_t> ints;
    if (!npy::toInt32(array, what, ints, error))
      return false;
    if (ints.size() != 1) {
      error = what + ": expected one integer, got shape " + npy::formatShape(array.shape);
      return false;
    }
    if (!checkValues(p, ints.data(), 1, what, error))
      return false;
    return bindScalar(name, ints[0], error);
  }
  if (p.kind == ParamKind::PlacementReplicas)
    return bindPlacement(i, array, what, error);
  return bindBuffer(i, array, what, error);
}

bool CallBuffers::bindBuffer(size_t index, const npy::Array &a, const std::string &what,
                             std::string &error) {
  const Param &p = sig.params[index];
  if (!shapeMatches(a, p)) {
    error = what + ": expected " + expected(p) + ", got shape " + npy::formatShape(a.shape);
    return false;
  }
  if (!p.shape.empty() && p.shape[0] < 0 && !noteTokens(a.shape[0], what, error))
    return false;
  std::vector<uint8_t> &bytes = storage[index];
  if (p.kind == ParamKind::Set) {
    std::vector<uint8_t> flags;
    if (!npy::toBool(a, what, flags, error))
      return false;
    bytes = std::move(flags);
  } else if (p.dtype == DType::F32) {
    std::vector<float> v;
    if (!npy::toFloat32(a, what, v, error))
      return false;
    // A rule's statistics (loads, hotness) must be numbers: a NaN or an infinity
    // would silently decide a plan. (Routers take NaN logits: they rank last.)
    if (sig.isRule())
      for (size_t k = 0; k < v.size(); ++k)
        if (!std::isfinite(v[k])) {
          error = what + ": holds " + nonFiniteName(v[k]) + " at flat index " +
                  std::to_string(k) + "; a rule's inputs must be finite";
          return false;
        }
    bytes.resize(v.size() * 4);
    if (!v.empty())
      std::memcpy(bytes.data(), v.data(), bytes.size());
  } else if (p.dtype == DType::I32) {
    std::vector<int32_t> v;
    if (!npy::toInt32(a, what, v, error) ||
        !checkValues(p, v.data(), v.size(), what, error))
      return false;
    bytes.resize(v.size() * 4);
    if (!v.empty())
      std::memcpy(bytes.data(), v.data(), bytes.size());
  } else if (p.dtype == DType::BF16 || p.dtype == DType::F16) {
    // The entry reads these 16-bit values in place: the array must hold them already
    // (narrowing float32 would round: the caller decides that, not the binding).
    if (!checkHalfDtype(p, a.dtype, what, error) ||
        (sig.isRule() &&
         !checkHalfFinite(p, a.bytes.data(), a.bytes.size() / 2, what, error)))
      return false;
    bytes = a.bytes;
  } else {
    error = what + ": inputs of type " + npy::dtypeName(p.dtype) + " are not supported";
    return false;
  }
  bound[index] = true;
  return true;
}

/// The dtype an entry parameter takes without conversion.
static bool isNativeDtype(const Param &p, npy::DType dtype) {
  if (p.kind == ParamKind::Set)
    return dtype == npy::DType::Bool || dtype == npy::DType::U8;
  if (p.dtype == DType::F32)
    return dtype == npy::DType::F32;
  if (p.dtype == DType::I32)
    return dtype == npy::DType::I32;
  if (p.dtype == DType::BF16)
    return dtype == npy::DType::BF16;
  if (p.dtype == DType::F16)
    return dtype == npy::DType::F16;
  return false;
}

bool CallBuffers::bindView(const std::string &name, const TensorView &view,
                           const std::string &what, std::string &error) {
  if (!isInput(name, error))
    return false;
  size_t i = static_cast<size_t>(sig.findInput(name));
  const Param &p = sig.params[i];
  bool zeroCopy = (p.kind == ParamKind::Tensor || p.kind == ParamKind::Set) &&
                  isNativeDtype(p, view.dtype);
  if ((p.dtype == DType::BF16 || p.dtype == DType::F16) && !zeroCopy)
    return checkHalfDtype(p, view.dtype, what, error);
  if (view.onDevice && !zeroCopy) {
    error = what + ": device memory must already be " + expected(p) + ", got " +
            npy::dtypeName(view.dtype) + " (convert it on the device first)";
    return false;
  }
  if (!zeroCopy) { // a copy with conversion, exactly as from a .npy file
    npy::Array array;
    array.dtype = view.dtype;
    array.shape = view.shape;
    int64_t n = array.numel();
    array.bytes.resize(static_cast<size_t>(n) * npy::dtypeSize(view.dtype));
    if (!array.bytes.empty())
      std::memcpy(array.bytes.data(), view.data, array.bytes.size());
    return bind(name, array, what, error);
  }
  if (bound[i]) {
    error = "argument '" + name + "' is given twice";
    return false;
  }
  npy::Array shapeOnly; // shapeMatches reads the shape only
  shapeOnly.shape = view.shape;
  if (!shapeMatches(shapeOnly, p)) {
    error =
        what + ": expected " + expected(p) + ", got shape " + npy::formatShape(view.shape);
    return false;
  }
  if (!p.shape.empty() && p.shape[0] < 0 && !noteTokens(view.shape[0], what, error))
    return false;
  size_t n = static_cast<size_t>(shapeOnly.numel());
  if (!view.onDevice && n) {
    if (p.kind == ParamKind::Set) {
      const uint8_t *flags = static_cast<const uint8_t *>(view.data);
      for (size_t k = 0; k < n; ++k)
        if (flags[k] > 1) {
          error = what + ": set flags must be 0 or 1, got " + std::to_string(flags[k]) +
                  " at flat index " + std::to_string(k);
          return false;
        }
    } else if (p.dtype == DType::I32) {
      if (!checkValues(p, static_cast<const int32_t *>(view.data), n, what, error))
        return false;
    } else if (p.dtype == DType::BF16 || p.dtype == DType::F16) {
      if (sig.isRule() && !checkHalfFinite(p, view.data, n, what, error))
        return false;
    } else if (sig.isRule()) {
      const float *v = static_cast<const float *>(view.data);
      for (size_t k = 0; k < n; ++k)
        if (!std::isfinite(v[k])) {
          error = what + ": holds " + nonFiniteName(v[k]) + " at flat index " +
                  std::to_string(k) + "; a rule's inputs must be finite";
          return false;
        }
    }
  }
  external[i] = view.data;
  bound[i] = true;
  return true;
}

int64_t CallBuffers::findOutput(const std::string &name) const {
  for (size_t i = 0; i < sig.params.size(); ++i)
    if (sig.params[i].isOutput && sig.params[i].name == name)
      return static_cast<int64_t>(i);
  return -1;
}

bool CallBuffers::bindOutput(const std::string &name, const TensorView &view,
                             std::string &error) {
  int64_t i = findOutput(name);
  if (i < 0) {
    std::string names;
    for (const Param &p : sig.params)
      if (p.isOutput)
        names += (names.empty() ? "" : ", ") + p.name;
    error =
        "unknown result '" + name + "' of @" + sig.entry + " (its results: " + names + ")";
    return false;
  }
  const Param &p = sig.params[static_cast<size_t>(i)];
  if (!isNativeDtype(p, view.dtype)) {
    error = "result '" + name + "': expected " + expected(p) + " memory, got " +
            npy::dtypeName(view.dtype);
    return false;
  }
  externalOutputs[static_cast<size_t>(i)] = view;
  external[static_cast<size_t>(i)] = view.data;
  return true;
}

bool CallBuffers::bindPlacement(size_t index, const npy::Array &a, const std::string &what,
                                std::string &error) {
  const Param &table = sig.params[index + 1];
  std::vector<int32_t> ints;
  if (!npy::toInt32(a, what, ints, error))
    return false;
  int64_t experts = table.shape[0], maxReplicas = table.shape[1];
  int64_t cols = a.shape.size() == 2 ? a.shape[1] : 1;
  if ((a.shape.size() != 1 && a.shape.size() != 2) || a.shape[0] != experts ||
      cols > maxReplicas || cols < 1) {
    error = what + ": expected an int32 log2phy table [" + std::to_string(experts) +
            ", <=" + std::to_string(maxReplicas) + "] (or [" + std::to_string(experts) +
            "]), got shape " + npy::formatShape(a.shape);
    return false;
  }
  int64_t slots = experts + maxReplicas - 1;
  std::vector<int32_t> count(experts, 0), phys(experts * maxReplicas, -1);
  std::vector<int64_t> owner(slots, -1);
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t r = 0; r < cols; ++r) {
      int32_t slot = ints[e * cols + r];
      if (slot < 0)
        break;
      if (slot >= slots) {
        error = what + ": expert " + std::to_string(e) + " replica " + std::to_string(r) +
                " is slot " + std::to_string(slot) + ", outside [0, " +
                std::to_string(slots) + ")";
        return false;
      }
      if (owner[slot] >= 0) {
        error = what + ": slot " + std::to_string(slot) + " holds both expert " +
                std::to_string(owner[slot]) + " and expert " + std::to_string(e);
        return false;
      }
      owner[slot] = e;
      phys[e * maxReplicas + r] = slot;
      ++count[e];
    }
    for (int64_t r = count[e]; r < cols; ++r)
      if (ints[e * cols + r] >= 0) {
        error = what + ": expert " + std::to_string(e) +
                " has a replica after a -1; replicas must come first";
        return false;
      }
    if (count[e] == 0) {
      error = what + ": expert " + std::to_string(e) + " has no replica";
      return false;
    }
  }
  auto put = [&](size_t i, const std::vector<int32_t> &v) {
    storage[i].resize(v.size() * 4);
    std::memcpy(storage[i].data(), v.data(), v.size() * 4);
    bound[i] = true;
  };
  put(index, count);
  put(index + 1, phys);
  return true;
}

bool CallBuffers::finish(std::string &error) {
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const Param &p = sig.params[i];
    if (p.isOutput || bound[i])
      continue;
    std::string name = p.inputName();
    error = "missing required argument '" + name + "' (" + npy::dtypeName(p.dtype) +
            (p.kind == ParamKind::Scalar ? "" : " " + p.shapeText()) + "): pass --arg " +
            name + "=path.npy";
    return false;
  }
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const Param &p = sig.params[i];
    if (!p.isOutput)
      continue;
    std::optional<int64_t> n = p.elementsFor(tokens());
    if (!n || *n > kMaxOutputBytes / p.elementBytes()) {
      error = "result '" + p.name + "' for " + std::to_string(tokens()) +
              " tokens would need more than " + std::to_string(kMaxOutputBytes) + " bytes";
      return false;
    }
    if (external[i]) { // caller memory: it must have the shape for this token count
      if (externalOutputs[i].shape != *p.shapeFor(tokens())) {
        error = "result '" + p.name + "': memory of shape " +
                npy::formatShape(externalOutputs[i].shape) + " given, " +
                std::to_string(tokens()) + " tokens need " +
                npy::formatShape(*p.shapeFor(tokens()));
        return false;
      }
      continue;
    }
    storage[i].assign(static_cast<size_t>(*n * p.elementBytes()), 0);
  }
  pointers.resize(sig.params.size());
  for (size_t i = 0; i < sig.params.size(); ++i)
    pointers[i] = external[i]          ? external[i]
                  : storage[i].empty() ? nullptr
                                       : storage[i].data();
  return true;
}

npy::Array CallBuffers::output(size_t index) const {
  const Param &p = sig.params[index];
  std::vector<int64_t> shape = *p.shapeFor(tokens());
  const uint8_t *data = external[index] ? static_cast<const uint8_t *>(external[index])
                                        : storage[index].data();
  if (p.kind == ParamKind::Set)
    return npy::makeBool(shape, data);
  if (p.dtype == DType::F32)
    return npy::makeF32(shape, reinterpret_cast<const float *>(data));
  return npy::makeI32(shape, reinterpret_cast<const int32_t *>(data));
}

PackedArguments::PackedArguments(const Signature &signature, int64_t tokens,
                                 const std::vector<void *> &buffers,
                                 const std::vector<int64_t> &scalars, const void *knobs,
                                 std::vector<void *> trailing, bool scalarsInBuffers)
    : numTokens(tokens), bufferValues(buffers), scalar32(signature.params.size()),
      scalar64(signature.params.size()), knobStruct(knobs), extra(std::move(trailing)) {
  packed.push_back(&numTokens);
  for (size_t i = 0; i < signature.params.size(); ++i) {
    const Param &p = signature.params[i];
    if (p.kind != ParamKind::Scalar || scalarsInBuffers) {
      packed.push_back(&bufferValues[i]);
    } else if (p.dtype == DType::I64) {
      scalar64[i] = scalars[i];
      packed.push_back(&scalar64[i]);
    } else {
      scalar32[i] = static_cast<int32_t>(scalars[i]);
      packed.push_back(&scalar32[i]);
    }
  }
  // An entry with run-time knobs takes `const struct NAME_knobs *` last (NULL: defaults).
  if (!signature.knobs.empty())
    packed.push_back(&knobStruct);
  for (void *&value : extra)
    packed.push_back(&value);
  packed.push_back(&result);
}

} // namespace switchyard::runtime

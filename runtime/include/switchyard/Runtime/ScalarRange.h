//===- ScalarRange.h - what values a scalar parameter may take --*- C++ -*-===//
//
// One rule for a policy parameter (a knob such as a budget or a threshold), shared by
// everything that checks it: the dialect's verifiers on known values
// (ScalarRulesOpInterface), the code moe-compile generates (the C entry returns a
// status when a run-time knob breaks it), and the runtime's messages. Header-only, no
// LLVM/MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_SCALARRANGE_H
#define SWITCHYARD_RUNTIME_SCALARRANGE_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace switchyard::runtime {

struct ScalarRange {
  bool isFloat = false;
  // Integers: in [lo, hi] (no hi: unbounded above).
  int64_t lo = INT64_MIN;
  std::optional<int64_t> hi;
  // Floats, checked in this order: finite, not NaN, non-zero, then [min, max] (each
  // bound optional, open or closed).
  bool finite = false, notNaN = false, nonzero = false;
  std::optional<double> min, max;
  bool minOpen = false, maxOpen = false;
  std::string why; // appended to a failed non-zero check
  // A requirement that relates this value to others ("budget >= fixed + ..."):
  // not a range of the value alone (the range above stays unconstrained). The verifier
  // checks it on known values; the compiled code checks it at run time, where every
  // value is known, and returns this value's status when it fails.
  std::string relation;

  /// The requirement `v` breaks ("must be in [0, inf]"), or none.
  std::optional<std::string> violation(int64_t v) const {
    if (!relation.empty())
      return std::nullopt;
    if (isFloat)
      return violation(static_cast<double>(v));
    if (v < lo || (hi && v > *hi))
      return "must be " + intRangeText();
    return std::nullopt;
  }

  std::optional<std::string> violation(double v) const {
    if (!isFloat || !relation.empty())
      return std::nullopt;
    if (finite && !std::isfinite(v))
      return std::string("must be finite");
    if (notNaN && std::isnan(v))
      return std::string("must not be NaN");
    if (nonzero && v == 0.0)
      return "must be non-zero" + (why.empty() ? "" : " " + why);
    bool below = min && (minOpen ? !(v > *min) : !(v >= *min));
    bool above = max && (maxOpen ? !(v < *max) : !(v <= *max));
    if (below || above)
      return "must be " + floatRangeText();
    return std::nullopt;
  }

  /// Every requirement: "must be in [0, inf]", "must be finite and > 0".
  std::string requirement() const {
    if (!relation.empty())
      return "must satisfy " + relation;
    if (!isFloat)
      return "must be " + intRangeText();
    std::string text;
    auto add = [&](const std::string &part) {
      text += (text.empty() ? "" : " and ") + part;
    };
    if (finite)
      add("finite");
    if (notNaN)
      add("not NaN");
    if (nonzero)
      add("non-zero");
    if (min || max)
      add(floatRangeText());
    return "must be " + (text.empty() ? std::string("a number") : text);
  }

  static std::string number(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
  }

private:
  std::string intRangeText() const {
    return "in [" + std::to_string(lo) + ", " + (hi ? std::to_string(*hi) : "inf") + "]";
  }
  /// "in [0, 1)", "> 0", ">= 0", "<= 1".
  std::string floatRangeText() const {
    if (min && max)
      return std::string("in ") + (minOpen ? "(" : "[") + number(*min) + ", " +
             number(*max) + (maxOpen ? ")" : "]");
    if (min)
      return (minOpen ? "> " : ">= ") + number(*min);
    return (maxOpen ? "< " : "<= ") + number(*max);
  }
};

} // namespace switchyard::runtime

#endif

//===- MoeScalarRules.cpp - the rules scalar operands obey ----------------===//
//
// ScalarRulesOpInterface: each op lists the rules of its scalar operands once, next to
// its verifier (MoeTokenOps.cpp, MoeSetOps.cpp, MoeRuleOps.cpp); the verifier checks
// them on known values here, and the lowering hands a tunable knob's rules to the
// generated code, which checks the run-time value (moe-emit-c-entry).
//
//===----------------------------------------------------------------------===//
#include "MoeVerifyUtils.h"

using namespace mlir;
using namespace switchyard::moe;

ScalarRule ScalarRule::intRange(Value v, StringRef name, int64_t lo,
                                std::optional<int64_t> hi) {
  ScalarRule r;
  r.value = v;
  r.name = name.str();
  r.lo = lo;
  r.hi = hi;
  return r;
}

ScalarRule ScalarRule::floatRange(Value v, StringRef name, std::optional<double> min,
                                  bool minOpen, std::optional<double> max, bool maxOpen) {
  ScalarRule r;
  r.value = v;
  r.name = name.str();
  r.isFloat = true;
  r.min = min;
  r.max = max;
  r.minOpen = minOpen;
  r.maxOpen = maxOpen;
  return r;
}

ScalarRule ScalarRule::relational(Value v, StringRef name, StringRef relation) {
  ScalarRule r;
  r.value = v;
  r.name = name.str();
  r.relation = relation.str();
  return r;
}

LogicalResult switchyard::moe::detail::verifyScalarRules(Operation *op) {
  auto withRules = dyn_cast<ScalarRulesOpInterface>(op);
  if (!withRules)
    return success();
  SmallVector<ScalarRule> rules;
  withRules.getScalarRules(rules);
  for (const ScalarRule &rule : rules) {
    if (!rule.value)
      continue;
    if (std::optional<int64_t> v = getKnownInt(rule.value)) {
      if (std::optional<std::string> bad = rule.violation(*v))
        return op->emitOpError() << rule.name << " " << *bad << ", got " << *v;
    } else if (std::optional<double> v = getKnownFloat(rule.value)) {
      if (std::optional<std::string> bad = rule.violation(*v))
        return op->emitOpError() << rule.name << " " << *bad << ", got " << *v;
    }
  }
  return success();
}

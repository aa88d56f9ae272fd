//===- Signature.cpp - the C ABI of a compiled policy entry ---------------===//
#include "switchyard/Runtime/Signature.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace switchyard::runtime {

namespace {
template <typename Enum> struct Spelled {
  Enum value;
  const char *text;
};
constexpr Spelled<ParamKind> kParamKinds[] = {
    {ParamKind::Tensor, "tensor"},
    {ParamKind::Set, "set"},
    {ParamKind::Scalar, "scalar"},
    {ParamKind::PlacementReplicas, "placement_replicas"},
    {ParamKind::PlacementLog2Phy, "placement_log2phy"},
};
constexpr Spelled<ValueSet> kValueSets[] = {
    {ValueSet::Any, ""},
    {ValueSet::Phase, "phase"},
    {ValueSet::ExpertIds, "expert_ids"},
};
constexpr Spelled<EntryKind> kEntryKinds[] = {
    {EntryKind::Router, "router"},
    {EntryKind::Residency, "residency"},
    {EntryKind::Balance, "balance"},
    {EntryKind::Prefetch, "prefetch"},
};

template <typename Enum, size_t N>
const char *spell(const Spelled<Enum> (&table)[N], Enum value) {
  for (const Spelled<Enum> &entry : table)
    if (entry.value == value)
      return entry.text;
  return "?";
}

template <typename Enum, size_t N>
std::optional<Enum> parse(const Spelled<Enum> (&table)[N], std::string_view text) {
  for (const Spelled<Enum> &entry : table)
    if (text == entry.text)
      return entry.value;
  return std::nullopt;
}
} // namespace

const char *spelling(ParamKind kind) { return spell(kParamKinds, kind); }
const char *spelling(ValueSet values) { return spell(kValueSets, values); }
const char *spelling(EntryKind kind) { return spell(kEntryKinds, kind); }
std::optional<ParamKind> parseParamKind(std::string_view text) {
  return parse(kParamKinds, text);
}
std::optional<ValueSet> parseValueSet(std::string_view text) {
  return parse(kValueSets, text);
}
std::optional<EntryKind> parseEntryKind(std::string_view text) {
  return parse(kEntryKinds, text);
}

int64_t Param::elementBytes() const { return static_cast<int64_t>(npy::dtypeSize(dtype)); }

static constexpr int64_t kLimit = INT64_MAX / 16; // leaves room for byte counts

std::optional<std::vector<int64_t>> Param::shapeFor(int64_t tokens) const {
  if (tokens < 0 || sizeRule[2] < 1)
    return std::nullopt;
  std::vector<int64_t> out = shape;
  for (int64_t &d : out) {
    if (d >= 0)
      continue;
    int64_t scaled;
    if (__builtin_mul_overflow(sizeRule[0], tokens, &scaled) ||
        __builtin_add_overflow(scaled, sizeRule[1] + sizeRule[2] - 1, &scaled))
      return std::nullopt;
    d = scaled / sizeRule[2];
    if (d > INT32_MAX) // compiled code indexes tokens and padded rows with i32
      return std::nullopt;
  }
  int64_t elements = 1;
  for (int64_t d : out)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements) || elements > kLimit)
      return std::nullopt;
  return out;
}

std::optional<int64_t> Param::elementsFor(int64_t tokens) const {
  std::optional<std::vector<int64_t>> s = shapeFor(tokens);
  if (!s)
    return std::nullopt;
  int64_t n = 1;
  for (int64_t d : *s)
    n *= d; // checked by shapeFor
  return n;
}

std::string Param::shapeText() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
}

std::string Param::inputName() const { return name.substr(0, name.find('.')); }

int64_t Signature::findInput(const std::string &name) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (!params[i].isOutput && params[i].inputName() == name)
      return static_cast<int64_t>(i);
  return -1;
}

std::vector<std::string> Signature::inputNames() const {
  std::vector<std::string> names;
  for (const Param &p : params)
    if (!p.isOutput && (names.empty() || names.back() != p.inputName()))
      names.push_back(p.inputName());
  return names;
}

/// The first rule of `knob` that `value` breaks, worded with the value as `got`.
template <typename T>
static std::optional<std::string> firstViolation(const Knob &knob, T value,
                                                 const std::string &got) {
  for (const KnobRule &rule : knob.rules)
    if (std::optional<std::string> bad = rule.range.violation(value))
      return "knob '" + knob.name + "': " + rule.text.substr(0, rule.text.find(' ')) + " " +
             *bad + ", got " + got + " (" + rule.op + ")";
  return std::nullopt;
}

std::optional<std::string> Knob::check(double value) const {
  if (!isFloat())
    return check(static_cast<int64_t>(value));
  return firstViolation(*this, value, ScalarRange::number(value));
}

std::optional<std::string> Knob::check(int64_t value) const {
  return firstViolation(*this, value, std::to_string(value));
}

KnobLayout::KnobLayout(const std::vector<Knob> &knobs) {
  size_t align = 1;
  for (const Knob &k : knobs) {
    size_t bytes = k.isFloat() ? 4 : 8;
    size = (size + bytes - 1) / bytes * bytes;
    offsets.push_back(size);
    size += bytes;
    align = std::max(align, bytes);
  }
  size = (size + align - 1) / align * align;
}

bool packKnobs(const std::vector<Knob> &knobs, const std::vector<std::string> &overrides,
               std::vector<uint8_t> &bytes, std::string &error) {
  KnobLayout layout(knobs);
  bytes.assign(layout.size, 0);
  auto put = [&](size_t j, double value, int64_t integer) {
    if (knobs[j].isFloat()) {
      float f = static_cast<float>(value);
      std::memcpy(bytes.data() + layout.offsets[j], &f, sizeof f);
    } else {
      std::memcpy(bytes.data() + layout.offsets[j], &integer, sizeof integer);
    }
  };
  for (size_t j = 0; j < knobs.size(); ++j)
    put(j, knobs[j].floatDefault, knobs[j].intDefault);
  for (const std::string &entry : overrides) {
    size_t eq = entry.find('=');
    std::string name = entry.substr(0, eq),
                text = eq == std::string::npos ? "" : entry.substr(eq + 1);
    auto it = std::find_if(knobs.begin(), knobs.end(),
                           [&](const Knob &k) { return k.name == name; });
    if (it == knobs.end()) {
      error = "unknown knob '" + name + "'";
      return false;
    }
    size_t j = it - knobs.begin();
    char *end = nullptr;
    errno = 0;
    double value = 0;
    int64_t integer = 0;
    if (it->isFloat())
      value = std::strtod(text.c_str(), &end);
    else
      value = static_cast<double>(integer = std::strtoll(text.c_str(), &end, 10));
    if (text.empty() || *end != '\0' || errno == ERANGE) {
      error = "knob '" + name + "': '" + text + "' is not " +
              (it->isFloat() ? "a float32" : "an int64");
      return false;
    }
    std::optional<std::string> bad = it->isFloat() ? it->check(value) : it->check(integer);
    if (bad) {
      error = *bad;
      return false;
    }
    put(j, value, integer);
  }
  return true;
}

std::string statusMessage(const Signature &signature, int32_t status) {
  if (status == 0)
    return "ok";
  if (status == 1)
    return "num_tokens must be in [0, " + std::to_string(kMaxTokens) + "]";
  size_t j = static_cast<size_t>(status) - 2;
  if (status >= 2 && j < signature.knobs.size()) {
    std::string text = "knob '" + signature.knobs[j].name + "' breaks a rule:";
    for (const KnobRule &rule : signature.knobs[j].rules)
      text += " " + rule.text + " (" + rule.op + ");";
    text.pop_back();
    return text;
  }
  return "unknown status " + std::to_string(status);
}

static nlohmann::json ruleToJson(const KnobRule &r) {
  nlohmann::json j = {{"text", r.text},
                      {"op", r.op},
                      {"float", r.range.isFloat},
                      {"lo", r.range.lo},
                      {"finite", r.range.finite},
                      {"not_nan", r.range.notNaN},
                      {"nonzero", r.range.nonzero},
                      {"min_open", r.range.minOpen},
                      {"max_open", r.range.maxOpen}};
  if (r.range.hi)
    j["hi"] = *r.range.hi;
  if (r.range.min)
    j["min"] = *r.range.min;
  if (r.range.max)
    j["max"] = *r.range.max;
  if (!r.range.relation.empty())
    j["relation"] = r.range.relation;
  return j;
}

std::string toJson(const Signature &signature) {
  nlohmann::json params = nlohmann::json::array();
  for (const Param &p : signature.params)
    params.push_back({{"name", p.name},
                      {"role", p.isOutput ? "out" : "in"},
                      {"kind", spelling(p.kind)},
                      {"dtype", npy::dtypeName(p.dtype)},
                      {"shape", p.shape},
                      {"size_rule", p.sizeRule},
                      {"values", spelling(p.values)},
                      {"id_bound", p.idBound}});
  nlohmann::json knobs = nlohmann::json::array();
  for (const Knob &k : signature.knobs) {
    nlohmann::json rules = nlohmann::json::array();
    for (const KnobRule &r : k.rules)
      rules.push_back(ruleToJson(r));
    knobs.push_back({{"name", k.name},
                     {"dtype", npy::dtypeName(k.dtype)},
                     {"default", k.isFloat() ? nlohmann::json(k.floatDefault)
                                             : nlohmann::json(k.intDefault)},
                     {"rules", rules}});
  }
  nlohmann::json j = {{"entry", signature.entry},
                      {"kind", spelling(signature.kind)},
                      {"params", params},
                      {"knobs", knobs}};
  if (signature.knobGroups)
    j["knob_groups"] = signature.knobGroups;
  return j.dump(2);
}

bool fromJson(const std::string &text, Signature &signature, std::string &error) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    error = "signature: not a JSON object";
    return false;
  }
  auto str = [&](const nlohmann::json &o, const char *key, std::string &out,
                 const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_string()) {
      error = where + ": '" + key + "' must be a string";
      return false;
    }
    out = it->get<std::string>();
    return true;
  };
  // A string field spelling one of an enum's values.
  auto spelled = [&](const nlohmann::json &o, const char *key, auto parseText, auto &out,
                     const std::string &where, const char *expected) {
    std::string text;
    if (!str(o, key, text, where))
      return false;
    auto value = parseText(text);
    if (!value) {
      error = where + ": '" + key + "' must be " + expected + ", got \"" +
              text.substr(0, 40) + "\"";
      return false;
    }
    out = *value;
    return true;
  };
  // The element types an entry's parameters have (Param::dtype).
  auto parseDType = [](const std::string &text) -> std::optional<DType> {
    std::optional<DType> dtype = npy::dtypeFromName(text);
    if (dtype && (*dtype == DType::Bool || *dtype == DType::U8 || *dtype == DType::F64))
      return std::nullopt;
    return dtype;
  };
  Signature s;
  if (!str(j, "entry", s.entry, "signature") ||
      !spelled(j, "kind", parseEntryKind, s.kind, "signature",
               "router, residency, balance or prefetch"))
    return false;
  auto params = j.find("params");
  if (params == j.end() || !params->is_array()) {
    error = "signature: 'params' must be an array";
    return false;
  }
  for (size_t i = 0; i < params->size(); ++i) {
    const nlohmann::json &o = (*params)[i];
    std::string where = "signature: params[" + std::to_string(i) + "]";
    Param p;
    std::string role;
    if (!o.is_object() || !str(o, "name", p.name, where) || !str(o, "role", role, where) ||
        !spelled(o, "kind", parseParamKind, p.kind, where,
                 "tensor, set, scalar, placement_replicas or placement_log2phy") ||
        !spelled(o, "dtype", parseDType, p.dtype, where,
                 "float32, int32, int64, int8, bfloat16 or float16"))
      return false;
    if (role != "in" && role != "out") {
      error = where + ": 'role' must be \"in\" or \"out\"";
      return false;
    }
    p.isOutput = role == "out";
    auto shape = o.find("shape");
    auto rule = o.find("size_rule");
    if (shape == o.end() || !shape->is_array() || rule == o.end() || !rule->is_array() ||
        rule->size() != 3) {
      error = where + ": 'shape' must be an array and 'size_rule' an array of 3";
      return false;
    }
    for (const nlohmann::json &d : *shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < -1) {
        error = where + ": 'shape' entries must be integers >= -1";
        return false;
      }
      p.shape.push_back(d.get<int64_t>());
    }
    for (size_t k = 0; k < 3; ++k) {
      if (!(*rule)[k].is_number_integer()) {
        error = where + ": 'size_rule' entries must be integers";
        return false;
      }
      p.sizeRule[k] = (*rule)[k].get<int64_t>();
    }
    if (o.contains("values") && !spelled(o, "values", parseValueSet, p.values, where,
                                         "\"\", \"phase\" or \"expert_ids\""))
      return false;
    if (auto bound = o.find("id_bound"); bound != o.end()) {
      if (!bound->is_number_integer() || bound->get<int64_t>() < 0) {
        error = where + ": 'id_bound' must be an integer >= 0";
        return false;
      }
      p.idBound = bound->get<int64_t>();
    }
    if (p.sizeRule[0] < 0 || p.sizeRule[1] < 0 || p.sizeRule[2] < 1) {
      error = where + ": 'size_rule' must be [a >= 0, b >= 0, d >= 1]";
      return false;
    }
    s.params.push_back(std::move(p));
  }
  if (auto groups = j.find("knob_groups"); groups != j.end()) {
    if (!groups->is_number_integer() || groups->get<int64_t>() < 1 ||
        groups->get<int64_t>() > 64) {
      error = "signature: 'knob_groups' must be an integer in [1, 64]";
      return false;
    }
    s.knobGroups = groups->get<int64_t>();
  }
  if (auto knobs = j.find("knobs"); knobs != j.end()) {
    if (!knobs->is_array()) {
      error = "signature: 'knobs' must be an array";
      return false;
    }
    for (size_t i = 0; i < knobs->size(); ++i) {
      const nlohmann::json &o = (*knobs)[i];
      std::string where = "signature: knobs[" + std::to_string(i) + "]";
      Knob k;
      if (!o.is_object() || !str(o, "name", k.name, where) ||
          !spelled(o, "dtype", parseDType, k.dtype, where, "int64 or float32"))
        return false;
      auto def = o.find("default");
      if ((k.dtype != DType::I64 && k.dtype != DType::F32) || def == o.end() ||
          !def->is_number() || (!k.isFloat() && !def->is_number_integer())) {
        error = where + ": needs dtype int64 or float32 and a numeric default of that type";
        return false;
      }
      if (k.isFloat())
        k.floatDefault = def->get<double>();
      else
        k.intDefault = def->get<int64_t>();
      auto rules = o.find("rules");
      if (rules == o.end() || !rules->is_array()) {
        error = where + ": 'rules' must be an array";
        return false;
      }
      for (const nlohmann::json &r : *rules) {
        KnobRule rule;
        if (!r.is_object() || !str(r, "text", rule.text, where) ||
            !str(r, "op", rule.op, where))
          return false;
        bool typed = true;
        auto flag = [&](const char *key) {
          auto it = r.find(key);
          typed &= it == r.end() || it->is_boolean();
          return it != r.end() && it->is_boolean() && it->get<bool>();
        };
        auto integer = [&](const char *key) -> std::optional<int64_t> {
          auto it = r.find(key);
          typed &= it == r.end() || it->is_number_integer();
          if (it == r.end() || !it->is_number_integer())
            return std::nullopt;
          return it->get<int64_t>();
        };
        auto number = [&](const char *key) -> std::optional<double> {
          auto it = r.find(key);
          typed &= it == r.end() || it->is_number();
          if (it == r.end() || !it->is_number())
            return std::nullopt;
          return it->get<double>();
        };
        rule.range.isFloat = flag("float");
        rule.range.lo = integer("lo").value_or(INT64_MIN);
        rule.range.hi = integer("hi");
        rule.range.finite = flag("finite");
        rule.range.notNaN = flag("not_nan");
        rule.range.nonzero = flag("nonzero");
        rule.range.min = number("min");
        rule.range.max = number("max");
        rule.range.minOpen = flag("min_open");
        rule.range.maxOpen = flag("max_open");
        if (auto it = r.find("relation"); it != r.end()) {
          typed &= it->is_string();
          if (it->is_string())
            rule.range.relation = it->get<std::string>();
        }
        if (!typed) {
          error = where + ": a rule's fields have the wrong types";
          return false;
        }
        k.rules.push_back(std::move(rule));
      }
      s.knobs.push_back(std::move(k));
    }
  }
  signature = std::move(s);
  return true;
}

} // namespace switchyard::runtime

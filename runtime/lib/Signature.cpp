//===- Signature.cpp - the C ABI of a compiled policy entry ---------------===//
#include "switchyard/Runtime/Signature.h"

#include <nlohmann/json.hpp>

namespace switchyard::runtime {

int64_t Param::elementBytes() const {
  if (dtype == "float32" || dtype == "int32")
    return 4;
  if (dtype == "int64")
    return 8;
  return 1;
}

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

std::string toJson(const Signature &signature) {
  nlohmann::json params = nlohmann::json::array();
  for (const Param &p : signature.params)
    params.push_back({{"name", p.name},
                      {"role", p.isOutput ? "out" : "in"},
                      {"kind", p.kind},
                      {"dtype", p.dtype},
                      {"shape", p.shape},
                      {"size_rule", p.sizeRule},
                      {"values", p.values},
                      {"id_bound", p.idBound}});
  nlohmann::json j = {{"entry", signature.entry}, {"kind", signature.kind},
                      {"params", params}};
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
  Signature s;
  if (!str(j, "entry", s.entry, "signature") || !str(j, "kind", s.kind, "signature"))
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
        !str(o, "kind", p.kind, where) || !str(o, "dtype", p.dtype, where))
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
    if (auto values = o.find("values"); values != o.end()) {
      if (!values->is_string() || (*values != "" && *values != "phase" &&
                                   *values != "expert_ids")) {
        error = where + ": 'values' must be \"\", \"phase\" or \"expert_ids\"";
        return false;
      }
      p.values = values->get<std::string>();
    }
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
  signature = std::move(s);
  return true;
}

} // namespace switchyard::runtime

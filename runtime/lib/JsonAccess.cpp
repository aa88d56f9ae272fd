//===- JsonAccess.cpp - type-checked reads of untrusted JSON --------------===//
#include "switchyard/Runtime/JsonAccess.h"
#include "switchyard/Runtime/UntrustedFile.h"

#include <cmath>

namespace switchyard::runtime {

bool parseJsonText(const char *begin, const char *end, const std::string &where,
                   nlohmann::json &out, std::string &error, bool requireObject) {
  out = nlohmann::json::parse(begin, end, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) {
    error = where + (requireObject ? ": not a JSON object (it does not parse as JSON)"
                                   : ": it does not parse as JSON");
    return false;
  }
  if (requireObject && !out.is_object()) {
    error = where + ": not a JSON object (got " + jsonSnippet(out) + ")";
    return false;
  }
  return true;
}

bool parseJsonFile(const std::string &path, const std::string &kind, uint64_t maxBytes,
                   nlohmann::json &out, std::string &error, bool requireObject) {
  std::string text;
  if (!readBoundedFile(path, kind, maxBytes, text, error))
    return false;
  return parseJsonText(text.data(), text.data() + text.size(), path, out, error,
                       requireObject);
}

namespace {
/// Appends `value` to `out`, containers only 3 levels deep and the whole at most
/// ~60 characters: dump() recurses once per level, and a hostile file nests 100000.
void appendSnippet(const nlohmann::json &value, int depth, std::string &out) {
  constexpr size_t kMaxChars = 60;
  if (out.size() > kMaxChars)
    return;
  if (!value.is_structured()) {
    out += value.dump(-1, ' ', /*ensure_ascii=*/true,
                      nlohmann::json::error_handler_t::replace);
    return;
  }
  const bool array = value.is_array();
  out += array ? '[' : '{';
  if (depth >= 3 && !value.empty()) {
    out += "...";
  } else {
    bool first = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (out.size() > kMaxChars) {
        out += ",...";
        break;
      }
      if (!first)
        out += ',';
      first = false;
      if (!array)
        out += nlohmann::json(it.key()).dump(-1, ' ', true,
                                             nlohmann::json::error_handler_t::replace) +
               ':';
      appendSnippet(it.value(), depth + 1, out);
    }
  }
  out += array ? ']' : '}';
}
} // namespace

std::string jsonSnippet(const nlohmann::json &value) {
  std::string text;
  appendSnippet(value, 0, text);
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

JsonAccess::JsonAccess(const nlohmann::json &object, std::string where, std::string &error)
    : json(object), place(std::move(where)), error(error) {}

const nlohmann::json *JsonAccess::find(const std::string &key) const {
  if (!json.is_object())
    return nullptr;
  auto it = json.find(key);
  return it == json.end() || it->is_null() ? nullptr : &*it;
}

bool JsonAccess::has(const std::string &key) const { return find(key) != nullptr; }

bool JsonAccess::fail(const std::string &key, const std::string &what) const {
  error = place + ": " + key + " " + what;
  return false;
}

bool JsonAccess::absent(const std::string &key, Need need) const {
  return need == Need::Required ? fail(key, "is missing") : true;
}

bool JsonAccess::string(const std::string &key, std::string &out, Need need) const {
  const nlohmann::json *v = find(key);
  if (!v)
    return absent(key, need);
  if (!v->is_string())
    return fail(key, "must be a string, got " + jsonSnippet(*v));
  out = v->get<std::string>();
  return true;
}

bool JsonAccess::integer(const std::string &key, int64_t &out, Need need, int64_t min,
                         int64_t max) const {
  const nlohmann::json *v = find(key);
  if (!v)
    return absent(key, need);
  // An unsigned value above INT64_MAX is out of range, not negative.
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(max))
    return fail(key, "= " + jsonSnippet(*v) + " is outside [" + std::to_string(min) + ", " +
                         std::to_string(max) + "]");
  if (!v->is_number_integer())
    return fail(key, "must be an integer, got " + jsonSnippet(*v));
  int64_t value = v->get<int64_t>();
  if (value < min || value > max)
    return fail(key, "= " + std::to_string(value) + " is outside [" + std::to_string(min) +
                         ", " + std::to_string(max) + "]");
  out = value;
  return true;
}

bool JsonAccess::number(const std::string &key, double &out, Need need, double min,
                        double max) const {
  const nlohmann::json *v = find(key);
  if (!v)
    return absent(key, need);
  if (!v->is_number())
    return fail(key, "must be a number, got " + jsonSnippet(*v));
  double value = v->get<double>();
  if (!std::isfinite(value) || value < min || value > max)
    return fail(key, "= " + jsonSnippet(*v) + " is outside [" + jsonSnippet(min) + ", " +
                         jsonSnippet(max) + "]");
  out = value;
  return true;
}

bool JsonAccess::boolean(const std::string &key, bool &out, Need need) const {
  const nlohmann::json *v = find(key);
  if (!v)
    return absent(key, need);
  if (!v->is_boolean())
    return fail(key, "must be true or false, got " + jsonSnippet(*v));
  out = v->get<bool>();
  return true;
}

bool JsonAccess::array(const std::string &key, const nlohmann::json *&out,
                       Need need) const {
  out = find(key);
  if (!out)
    return absent(key, need);
  if (!out->is_array()) {
    std::string got = jsonSnippet(*out);
    out = nullptr;
    return fail(key, "must be an array, got " + got);
  }
  return true;
}

bool JsonAccess::object(const std::string &key, const nlohmann::json *&out,
                        Need need) const {
  out = find(key);
  if (!out)
    return absent(key, need);
  if (!out->is_object()) {
    std::string got = jsonSnippet(*out);
    out = nullptr;
    return fail(key, "must be an object, got " + got);
  }
  return true;
}

JsonAccess JsonAccess::nested(const std::string &key, const nlohmann::json &value) const {
  return JsonAccess(value, place + ": " + key, error);
}

} // namespace switchyard::runtime

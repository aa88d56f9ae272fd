//===- JsonAccess.h - type-checked reads of untrusted JSON --------*- C++ -*-===//
//
// The runtime's JSON files (config.json, model.safetensors.index.json, a safetensors
// header, a policy manifest) are untrusted: a key of the wrong type must be an error
// naming the file and the key, never an uncaught nlohmann::type_error. Parse with
// parseJsonFile (bounded read, see UntrustedFile.h), then read fields through a
// JsonAccess:
//
//   nlohmann::json j;
//   if (!parseJsonFile(path, "config.json", limits::kConfigJson, j, error))
//     return false;
//   JsonAccess r(j, path, error);
//   int64_t hidden;
//   std::string type = "mixtral";
//   if (!r.integer("hidden_size", hidden, Need::Required) ||
//       !r.string("model_type", type, Need::Optional))
//     return false; // error: "<path>: hidden_size must be an integer, got "64""
//
// An optional field that is absent or null leaves `out` unchanged (the default).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_JSONACCESS_H
#define SWITCHYARD_RUNTIME_JSONACCESS_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace switchyard::runtime {

enum class Need { Required, Optional };

/// Reads `path` (a regular file of at most `maxBytes`) and parses it as JSON; with
/// `requireObject` the top level must be an object. Errors name `kind` and the path.
bool parseJsonFile(const std::string &path, const std::string &kind, uint64_t maxBytes,
                   nlohmann::json &out, std::string &error, bool requireObject = true);

/// Parses `text` (already read, e.g. from a mapped file); `where` names it in errors.
bool parseJsonText(const char *begin, const char *end, const std::string &where,
                   nlohmann::json &out, std::string &error, bool requireObject = true);

/// Type-checked access to the keys of one JSON object; every failure sets `error` to
/// "<where>: <key> <what is wrong>" and returns false.
class JsonAccess {
public:
  /// `object` must outlive this; if it is not an object every key reads as absent.
  JsonAccess(const nlohmann::json &object, std::string where, std::string &error);

  const std::string &where() const { return place; }
  /// Present and not null.
  bool has(const std::string &key) const;
  bool fail(const std::string &key, const std::string &what) const;

  bool string(const std::string &key, std::string &out, Need need) const;
  /// An integer in [min, max] (a float such as 8.0 is not an integer).
  bool integer(const std::string &key, int64_t &out, Need need,
               int64_t min = std::numeric_limits<int64_t>::min(),
               int64_t max = std::numeric_limits<int64_t>::max()) const;
  /// A finite number in [min, max].
  bool number(const std::string &key, double &out, Need need,
              double min = -std::numeric_limits<double>::max(),
              double max = std::numeric_limits<double>::max()) const;
  bool boolean(const std::string &key, bool &out, Need need) const;
  /// The array or object under `key` (nullptr when optional and absent).
  bool array(const std::string &key, const nlohmann::json *&out, Need need) const;
  bool object(const std::string &key, const nlohmann::json *&out, Need need) const;
  /// A JsonAccess of the object under `key`, named "<where>: <key>".
  JsonAccess nested(const std::string &key, const nlohmann::json &value) const;

private:
  const nlohmann::json &json;
  std::string place;
  std::string &error;
  const nlohmann::json *find(const std::string &key) const;
  bool absent(const std::string &key, Need need) const;
};

/// A short rendering of an offending value for messages (at most ~60 characters).
std::string jsonSnippet(const nlohmann::json &value);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_JSONACCESS_H

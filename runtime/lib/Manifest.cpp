//===- Manifest.cpp - what a compiled policy's artifact directory holds -----===//
#include "switchyard/Runtime/Manifest.h"
#include "switchyard/Runtime/UntrustedFile.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace switchyard::runtime {

const ManifestEntry *Manifest::find(const std::string &name, std::string &error) const {
  std::vector<const ManifestEntry *> routers;
  std::string names;
  for (const ManifestEntry &e : entries) {
    if (e.signature.entry == name)
      return &e;
    if (!e.signature.isRule())
      routers.push_back(&e);
    names += (names.empty() ? "@" : ", @") + e.signature.entry;
  }
  if (name.empty() && routers.size() == 1)
    return routers.front();
  if (name.empty() && routers.empty() && entries.size() == 1) {
    error = "@" + entries[0].signature.entry + " is a " +
            spelling(entries[0].signature.kind) + " rule, not a router";
    return nullptr;
  }
  error = name.empty() ? "the policy has " + std::to_string(routers.size()) +
                             " routers; name one (its entries: " + names + ")"
                       : "no entry @" + name +
                             " in the compiled policy (its entries: " + names + ")";
  return nullptr;
}

std::vector<std::string> ManifestEntry::fileNames() const {
  std::vector<std::string> names;
  for (const std::string *file : {&hostLibrary, &ptx, &cubin, &launchMetadata, &gpuLibrary})
    if (!file->empty())
      names.push_back(*file);
  return names;
}

bool recordFileDigests(const std::string &dir, Manifest &manifest, std::string &error) {
  for (ManifestEntry &e : manifest.entries) {
    e.files.clear();
    for (const std::string &name : e.fileNames())
      if (!digestFile(dir + "/" + name, limits::kPolicyLibrary, e.files[name], error))
        return false;
  }
  return true;
}

bool checkFileDigests(const std::string &dir, const Manifest &manifest,
                      std::string &error) {
  for (const ManifestEntry &e : manifest.entries)
    for (const auto &[name, digest] : e.files)
      if (!checkFileDigest(dir + "/" + name, digest, error))
        return false;
  return true;
}

std::string toJson(const Manifest &manifest) {
  nlohmann::json entries = nlohmann::json::array();
  nlohmann::json files = nlohmann::json::object();
  for (const ManifestEntry &e : manifest.entries) {
    nlohmann::json sizeClasses = nlohmann::json::array();
    for (const SizeClass &c : e.sizeClasses)
      sizeClasses.push_back({{"name", c.name},
                             {"min_tokens", c.minTokens},
                             {"max_tokens", c.maxTokens},
                             {"launches", c.launches}});
    entries.push_back(
        {{"entry", e.signature.entry},
         {"signature", nlohmann::json::parse(toJson(e.signature))},
         {"shape",
          {{"experts", e.experts}, {"top_k", e.topK}, {"shared_experts", e.sharedExperts}}},
         {"host_library", e.hostLibrary},
         {"host_symbol", e.hostSymbol},
         {"ptx", e.ptx},
         {"cubin", e.cubin},
         {"gpu_arch", e.gpuArch},
         {"launch_metadata", e.launchMetadata},
         {"gpu_library", e.gpuLibrary},
         {"gpu_symbol", e.gpuSymbol},
         {"workspace_symbol", e.workspaceSymbol},
         {"size_classes", sizeClasses}});
    if (!e.launch.empty())
      entries.back()["launch"] =
          nlohmann::json::parse(e.launch, nullptr, /*allow_exceptions=*/false);
    for (const auto &[name, digest] : e.files)
      files[name] = {{"bytes", digest.bytes}, {"sha256", digest.sha256}};
  }
  nlohmann::json j = {{"format", "switchyard-artifacts"},
                      {"version", Manifest::kVersion},
                      {"policy", manifest.policy},
                      {"target", manifest.target},
                      {"command", manifest.command},
                      {"entries", entries},
                      {"files", files}};
  return j.dump(2) + "\n";
}

namespace {
/// Typed field access with messages naming the file and the field.
struct Reader {
  std::string file;
  std::string &error;

  bool fail(const std::string &where, const std::string &what) {
    error = file + ": " + where + " " + what;
    return false;
  }
  bool string(const nlohmann::json &o, const char *key, std::string &out,
              const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_string())
      return fail(where + "." + key, "must be a string");
    out = it->get<std::string>();
    return true;
  }
  bool integer(const nlohmann::json &o, const char *key, int64_t &out,
               const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer())
      return fail(where + "." + key, "must be an integer");
    out = it->get<int64_t>();
    return true;
  }
};
} // namespace

bool readManifest(const std::string &dir, Manifest &manifest, std::string &error) {
  std::string file = dir + "/manifest.json";
  std::string text;
  if (!readBoundedFile(file, "manifest.json", limits::kManifestJson, text, error)) {
    error += " (is '" + dir + "' a directory written by moe-compile?)";
    return false;
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  Reader r{file, error};
  if (j.is_discarded() || !j.is_object())
    return r.fail("the file", "is not a JSON object");
  std::string format;
  int64_t version = 0;
  if (!r.string(j, "format", format, "manifest") ||
      !r.integer(j, "version", version, "manifest"))
    return false;
  if (format != "switchyard-artifacts" || version != Manifest::kVersion)
    return r.fail("manifest",
                  "is format '" + format + "' version " + std::to_string(version) +
                      "; this runtime reads switchyard-artifacts version " +
                      std::to_string(Manifest::kVersion) + " (recompile the policy)");
  Manifest m;
  if (!r.string(j, "policy", m.policy, "manifest") ||
      !r.string(j, "target", m.target, "manifest"))
    return false;
  if (auto it = j.find("command"); it != j.end() && it->is_array())
    for (const nlohmann::json &a : *it)
      if (a.is_string())
        m.command.push_back(a.get<std::string>());
  auto entries = j.find("entries");
  if (entries == j.end() || !entries->is_array())
    return r.fail("manifest.entries", "must be an array");
  for (size_t i = 0; i < entries->size(); ++i) {
    const nlohmann::json &o = (*entries)[i];
    std::string where = "entries[" + std::to_string(i) + "]";
    if (!o.is_object())
      return r.fail(where, "must be an object");
    ManifestEntry e;
    auto sig = o.find("signature");
    if (sig == o.end() || !sig->is_object())
      return r.fail(where + ".signature", "must be an object");
    std::string sigError;
    if (!fromJson(sig->dump(), e.signature, sigError))
      return r.fail(where, sigError);
    auto shape = o.find("shape");
    if (shape == o.end() || !shape->is_object())
      return r.fail(where + ".shape", "must be an object");
    if (!r.integer(*shape, "experts", e.experts, where + ".shape") ||
        !r.integer(*shape, "top_k", e.topK, where + ".shape") ||
        !r.integer(*shape, "shared_experts", e.sharedExperts, where + ".shape") ||
        !r.string(o, "host_library", e.hostLibrary, where) ||
        !r.string(o, "host_symbol", e.hostSymbol, where) ||
        !r.string(o, "ptx", e.ptx, where) || !r.string(o, "cubin", e.cubin, where) ||
        !r.string(o, "gpu_arch", e.gpuArch, where) ||
        !r.string(o, "launch_metadata", e.launchMetadata, where) ||
        !r.string(o, "gpu_library", e.gpuLibrary, where) ||
        !r.string(o, "gpu_symbol", e.gpuSymbol, where) ||
        !r.string(o, "workspace_symbol", e.workspaceSymbol, where))
      return false;
    auto files = j.find("files");
    if (files == j.end() || !files->is_object())
      return r.fail("manifest.files", "must be an object");
    for (const std::string &name : e.fileNames()) {
      if (name.find('/') != std::string::npos)
        return r.fail(where, "names file '" + name + "' outside the artifact directory");
      auto digest = files->find(name);
      std::string at = "files[\"" + name + "\"]";
      FileDigest &d = e.files[name];
      int64_t bytes = -1;
      if (digest == files->end() || !digest->is_object())
        return r.fail(at, "must be an object (the size and SHA-256 of '" + name + "')");
      if (!r.integer(*digest, "bytes", bytes, at) ||
          !r.string(*digest, "sha256", d.sha256, at))
        return false;
      if (bytes < 0 || d.sha256.size() != 64 ||
          d.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
        return r.fail(at, "must hold bytes >= 0 and 64 lowercase hex digits of sha256");
      d.bytes = static_cast<uint64_t>(bytes);
    }
    if (auto launch = o.find("launch"); launch != o.end()) {
      if (!launch->is_object())
        return r.fail(where + ".launch", "must be an object (the GPU launch metadata)");
      e.launch = launch->dump();
    }
    auto classes = o.find("size_classes");
    if (classes == o.end() || !classes->is_array())
      return r.fail(where + ".size_classes", "must be an array");
    for (size_t c = 0; c < classes->size(); ++c) {
      SizeClass s;
      std::string at = where + ".size_classes[" + std::to_string(c) + "]";
      if (!(*classes)[c].is_object() || !r.string((*classes)[c], "name", s.name, at) ||
          !r.integer((*classes)[c], "min_tokens", s.minTokens, at) ||
          !r.integer((*classes)[c], "max_tokens", s.maxTokens, at) ||
          !r.integer((*classes)[c], "launches", s.launches, at))
        return error.empty() ? r.fail(at, "must be an object") : false;
      e.sizeClasses.push_back(s);
    }
    m.entries.push_back(std::move(e));
  }
  manifest = std::move(m);
  return true;
}

bool readManifestEntry(const std::string &dir, const std::string &name,
                       ManifestEntry &entry, std::string &error) {
  Manifest manifest;
  if (!readManifest(dir, manifest, error))
    return false;
  const ManifestEntry *found = manifest.find(name, error);
  if (!found)
    return false;
  entry = *found;
  return true;
}

} // namespace switchyard::runtime

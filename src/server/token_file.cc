// SPDX-License-Identifier: Apache-2.0
#include "server/token_file.h"

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include "common/small_file.h"
#include "server/access_policy.h"

namespace kvport::server {

namespace {

Status EntryError(const std::string& origin, size_t index, const YAML::Node& node,
                  std::string_view what) {
  return Status::InvalidArgument(
      fmt::format("{}:{}: token {}: {}", origin, node.Mark().line + 1, index + 1, what));
}

// The list of strings `field` of `entry` (none: empty); `what` describes it in errors.
Result<std::vector<std::string>> ReadList(const std::string& origin, size_t index,
                                          const YAML::Node& entry, const char* field,
                                          std::string_view what) {
  std::vector<std::string> strings;
  const YAML::Node list = entry[field];
  if (!list) return strings;
  if (!list.IsSequence()) {
    return EntryError(origin, index, list, fmt::format("`{}` must be a list of {}", field, what));
  }
  for (const YAML::Node& p : list) {
    if (!p.IsScalar())
      return EntryError(origin, index, p,
                        fmt::format("`{}` holds something other than a string", field));
    strings.push_back(p.as<std::string>());
  }
  return strings;
}

Result<std::vector<std::string>> ReadPatterns(const std::string& origin, size_t index,
                                              const YAML::Node& entry, const char* field) {
  return ReadList(origin, index, entry, field, "namespace patterns, e.g. [\"tenant-a/*\"]");
}

Result<std::vector<std::string>> ReadCertNames(const std::string& origin, size_t index,
                                               const YAML::Node& entry, const char* field) {
  return ReadList(origin, index, entry, field,
                  "certificate names, e.g. [\"prefill-0.kvport.example\"]");
}

}  // namespace

Result<std::vector<AccessToken>> ParseTokens(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}:{}:{}: malformed YAML: {}", origin,
                                               e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  std::vector<AccessToken> tokens;
  if (root.IsNull()) return tokens;  // an empty file: no token accepted (yet)
  if (!root.IsMap() || !root["tokens"]) {
    return Status::InvalidArgument(
        fmt::format("{}: expected a map with a `tokens:` list (docs/security.md)", origin));
  }
  for (const auto& key : root) {
    if (key.first.as<std::string>() != "tokens") {
      return Status::InvalidArgument(fmt::format("{}:{}: unknown key '{}' (only `tokens`)", origin,
                                                 key.first.Mark().line + 1,
                                                 key.first.as<std::string>()));
    }
  }
  const YAML::Node list = root["tokens"];
  if (list.IsNull()) return tokens;
  if (!list.IsSequence())
    return Status::InvalidArgument(fmt::format("{}: `tokens` must be a list", origin));
  try {
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node entry = list[i];
      if (!entry.IsMap()) return EntryError(origin, i, entry, "expected a map");
      for (const auto& field : entry) {
        const std::string name = field.first.as<std::string>();
        if (name != "name" && name != "secret" && name != "cert_names" && name != "read" &&
            name != "write" && name != "admin" && name != "namespace") {
          return EntryError(origin, i, field.first,
                            fmt::format("unknown field '{}' (name, secret, cert_names, read, "
                                        "write, admin, namespace)",
                                        name));
        }
      }
      AccessToken token;
      if (!entry["name"] || !entry["name"].IsScalar())
        return EntryError(origin, i, entry, "`name` is missing");
      token.name = entry["name"].as<std::string>();
      KVPORT_ASSIGN_OR_RETURN(token.cert_names, ReadCertNames(origin, i, entry, "cert_names"));
      // A token held by certificate only needs no secret (ValidateTokens says which need one).
      if (entry["secret"]) {
        if (!entry["secret"].IsScalar())
          return EntryError(origin, i, entry["secret"], "`secret` must be a string");
        token.secret = entry["secret"].as<std::string>();
      } else if (token.cert_names.empty()) {
        return EntryError(origin, i, entry,
                          fmt::format("'{}' has no `secret` (nor `cert_names`)", token.name));
      }
      KVPORT_ASSIGN_OR_RETURN(token.read, ReadPatterns(origin, i, entry, "read"));
      KVPORT_ASSIGN_OR_RETURN(token.write, ReadPatterns(origin, i, entry, "write"));
      if (entry["namespace"]) {
        if (!entry["namespace"].IsScalar())
          return EntryError(origin, i, entry["namespace"], "`namespace` must be a string");
        token.default_namespace = entry["namespace"].as<std::string>();
      }
      if (entry["admin"]) {
        bool admin = false;
        if (!YAML::convert<bool>::decode(entry["admin"], admin))
          return EntryError(origin, i, entry["admin"], "`admin` must be true or false");
        token.admin = admin;
      }
      tokens.push_back(std::move(token));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}:{}: {}", origin, e.mark.line + 1, e.msg));
  }
  Status valid = ValidateTokens(tokens);
  if (!valid.ok()) return valid.WithContext(origin);
  return tokens;
}

Result<std::vector<AccessToken>> LoadTokenFile(const std::string& path) {
  uint32_t mode = 0;
  KVPORT_ASSIGN_OR_RETURN(std::string text,
                          ReadSmallRegularFile(path, kMaxTokenFileBytes, "token file", &mode));
  KVPORT_RETURN_IF_ERROR(CheckSecretFileMode(path, mode, 0007, "token file"));
  return ParseTokens(text, path);
}

}  // namespace kvport::server

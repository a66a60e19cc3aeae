// SPDX-License-Identifier: Apache-2.0
// LoadConfig: reads the YAML file and the environment, resolves each key's precedence
// (environment > file > extra_config > default), applies the key table and collects errors and
// warnings. yaml-cpp stays inside this file.
#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "common/small_file.h"
#include "config/chunk_hash_check.h"
#include "config/config_keys.h"
#include "config/engine_keys.h"
#include "config/value_parse.h"
#include "kvport/config.h"
#include "kvport/host_info.h"
#include "kvport/log.h"
#include "kvport/size.h"

namespace kvport {

using config_internal::ConfigKeys;
using config_internal::KeySpec;
using config_internal::LoadContext;
using config_internal::ValueKind;

namespace {

constexpr char kConfigFileVariable[] = "LMCACHE_CONFIG_FILE";

// A value as found in one source, before it is typed.
struct RawValue {
  std::string text;
  ConfigSource source = ConfigSource::kDefault;
  std::string origin;    // for config check: "file:PATH", "env:VAR"
  std::string where;     // for errors: "PATH:LINE", "environment variable VAR"
  bool is_null = false;  // written with no value: the default stays
};

RawValue MakeRaw(std::string text, ConfigSource source, std::string origin, std::string where) {
  RawValue v;
  v.text = std::move(text);
  v.source = source;
  v.origin = std::move(origin);
  v.where = std::move(where);
  return v;
}

class Environment {
 public:
  explicit Environment(const std::optional<std::map<std::string, std::string>>& injected)
      : injected_(injected) {}

  std::optional<std::string> Get(std::string_view name) const {
    if (injected_) {
      auto it = injected_->find(std::string(name));
      if (it == injected_->end()) return std::nullopt;
      return it->second;
    }
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  }

 private:
  const std::optional<std::map<std::string, std::string>>& injected_;
};

std::string_view NodeTypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Scalar:
      return "a single value";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "an undefined node";
}

int LineOf(const YAML::Node& node) {
  return node.Mark().line + 1;
}

// A nested value as one line of YAML flow text, for extra_config's string map.
std::string FlowText(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

Result<YAML::Node> ReadYaml(const std::string& path) {
  KVPORT_ASSIGN_OR_RETURN(std::string text,
                          ReadSmallRegularFile(path, kMaxConfigFileBytes, "config file"));
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}:{}:{}: malformed YAML: {}", path,
                                               e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

const KeySpec* FindKey(std::string_view key) {
  for (const KeySpec& spec : ConfigKeys()) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

std::string UnknownKeyWarning(const std::string& where, const std::string& key) {
  const KeySpec* closest = nullptr;
  size_t best = 3;  // suggest only near misses: at most two edits
  for (const KeySpec& spec : ConfigKeys()) {
    const size_t d = config_internal::EditDistance(key, spec.key);
    if (d < best) {
      best = d;
      closest = &spec;
    }
  }
  std::string msg = fmt::format("{}: unknown key '{}' is ignored", where, key);
  if (closest != nullptr) msg += fmt::format(" (did you mean '{}'?)", closest->key);
  return msg;
}

// Everything the file says, split by where it goes.
struct FileValues {
  std::map<std::string, RawValue> keys;   // known top-level keys with a value
  std::map<std::string, RawValue> extra;  // extra_config entries
  bool has_extra = false;
  bool has_lmcache_key = false;        // a key only LMCache reads: the file configures LMCache
  std::optional<RawValue> chunk_hash;  // pre_caching_hash_algorithm (LMCache's), if set
};

// Reads a map of extra_config entries (from the file or LMCACHE_EXTRA_CONFIG).
void ReadExtraConfig(const YAML::Node& map, const RawValue& base, bool in_file,
                     std::map<std::string, RawValue>* out, std::vector<std::string>* errors) {
  for (const auto& item : map) {
    const std::string where =
        in_file ? fmt::format("{}:{}", base.where, LineOf(item.first)) : base.where;
    if (!item.first.IsScalar()) {
      errors->push_back(fmt::format("{}: extra_config: a key must be a name, got {}", where,
                                    NodeTypeName(item.first)));
      continue;
    }
    RawValue v = base;
    v.where = where;
    v.origin = base.origin + " (extra_config)";
    if (item.second.IsScalar()) {
      v.text = item.second.Scalar();
    } else if (item.second.IsNull()) {
      v.is_null = true;
    } else {
      v.text = FlowText(item.second);
    }
    (*out)[item.first.Scalar()] = std::move(v);
  }
}

// Keys of LMCache's core that kvport reads too, and that SGLang's and AIBrix's EIC files do not
// have: a file with one of them configures LMCache (as does one with a key only LMCache reads).
bool IsLMCacheCoreKey(std::string_view key) {
  return key == "chunk_size" || key == "local_cpu" || key == "max_local_cpu_size" ||
         key == "remote_serde" || key == "save_unfull_chunk";
}

Status ReadFile(const std::string& path, FileValues* values, std::vector<std::string>* errors,
                std::vector<std::string>* warnings, std::vector<std::string>* engine_keys) {
  KVPORT_ASSIGN_OR_RETURN(YAML::Node root, ReadYaml(path));
  if (root.IsNull()) {
    warnings->push_back(fmt::format("{}: the file is empty; defaults apply", path));
    return Status::Ok();
  }
  if (!root.IsMap()) {
    return Status::InvalidArgument(
        fmt::format("{}:{}: expected a map of 'key: value' lines at the top level, got {}", path,
                    LineOf(root), NodeTypeName(root)));
  }
  std::map<std::string, int> seen_at;
  for (const auto& item : root) {
    const std::string where = fmt::format("{}:{}", path, LineOf(item.first));
    if (!item.first.IsScalar()) {
      errors->push_back(
          fmt::format("{}: a key must be a name, got {}", where, NodeTypeName(item.first)));
      continue;
    }
    const std::string key = item.first.Scalar();
    if (auto [it, inserted] = seen_at.emplace(key, LineOf(item.first)); !inserted) {
      errors->push_back(
          fmt::format("{}: {} is given twice (first on line {})", where, key, it->second));
      continue;
    }
    const KeySpec* spec = FindKey(key);
    if (IsLMCacheCoreKey(key)) values->has_lmcache_key = true;
    if (spec == nullptr) {
      if (const char* engines = config_internal::EnginesReading(key); engines != nullptr) {
        engine_keys->push_back(
            fmt::format("{}: {} is read by {}, not by kvport", where, key, engines));
        if (std::string_view(engines) == "LMCache") values->has_lmcache_key = true;
        if (key == "pre_caching_hash_algorithm" && item.second.IsScalar())
          values->chunk_hash =
              MakeRaw(item.second.Scalar(), ConfigSource::kFile, "file:" + path, where);
      } else {
        warnings->push_back(UnknownKeyWarning(where, key));
      }
      continue;
    }
    const YAML::Node& value = item.second;
    if (value.IsNull()) continue;  // "key:" with nothing after it leaves the default
    const RawValue base{
        .text = "", .source = ConfigSource::kFile, .origin = "file:" + path, .where = where};
    if (spec->kind == ValueKind::kMap) {
      if (!value.IsMap()) {
        errors->push_back(fmt::format("{}: {}: expects a map of name: value, got {}", where, key,
                                      NodeTypeName(value)));
        continue;
      }
      values->has_extra = true;
      RawValue extra_base = base;
      extra_base.where = path;
      ReadExtraConfig(value, extra_base, /*in_file=*/true, &values->extra, errors);
      continue;
    }
    if (!value.IsScalar()) {
      errors->push_back(
          fmt::format("{}: {}: expects a single value, got {}", where, key, NodeTypeName(value)));
      continue;
    }
    RawValue raw = base;
    raw.text = value.Scalar();
    values->keys[key] = std::move(raw);
  }
  return Status::Ok();
}

// LMCACHE_EXTRA_CONFIG holds a YAML (or JSON) map, e.g. {"eic_kv_ns": "llama"}.
Status ReadExtraConfigVariable(const std::string& text, std::map<std::string, RawValue>* out,
                               std::vector<std::string>* errors) {
  const std::string var = "LMCACHE_EXTRA_CONFIG";
  const std::string where = "environment variable " + var;
  YAML::Node map;
  try {
    map = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format(
        "{}: extra_config: malformed YAML/JSON at column {}: {}", where, e.mark.column + 1, e.msg));
  }
  if (map.IsNull()) return Status::Ok();
  if (!map.IsMap()) {
    return Status::InvalidArgument(
        fmt::format("{}: extra_config: expects a map such as {{\"eic_kv_ns\": \"llama\"}}, got {}",
                    where, NodeTypeName(map)));
  }
  const RawValue base{
      .text = "", .source = ConfigSource::kEnvironment, .origin = "env:" + var, .where = where};
  ReadExtraConfig(map, base, /*in_file=*/false, out, errors);
  return Status::Ok();
}

ConfigEntry MakeEntry(const KeySpec& spec, const Config& config, const RawValue* from) {
  ConfigEntry e;
  e.key = std::string(spec.key);
  e.value = spec.show(config);
  if (spec.human) e.human = spec.human(config);
  e.is_string = spec.kind == ValueKind::kString;
  e.env_var = std::string(spec.env_var);
  if (from != nullptr) {
    e.source = from->source;
    e.origin = from->origin;
  } else {
    e.origin = "default";
  }
  return e;
}

}  // namespace

Result<std::map<std::string, bool>> ParseNamespaceTiers(std::string_view text) {
  std::map<std::string, bool> tiers;
  if (config_internal::Trim(text).empty()) return tiers;
  for (;;) {
    const size_t end = text.find(',');
    const std::string_view part = text.substr(0, end);
    const size_t equals = part.find('=');
    if (equals == std::string_view::npos) {
      return Status::InvalidArgument(
          fmt::format("'{}' is not NAMESPACE=TIER (e.g. \"sglang=memory, *=memory+disk\")",
                      config_internal::Trim(part)));
    }
    const std::string_view name = config_internal::Trim(part.substr(0, equals));
    const std::string_view tier = config_internal::Trim(part.substr(equals + 1));
    if (tier != "memory" && tier != "memory+disk") {
      return Status::InvalidArgument(
          fmt::format("namespace '{}': tier '{}' is neither memory nor memory+disk", name, tier));
    }
    if (!tiers.emplace(std::string(name), tier == "memory+disk").second) {
      return Status::InvalidArgument(fmt::format("namespace '{}' is given twice", name));
    }
    if (end == std::string_view::npos) return tiers;
    text.remove_prefix(end + 1);
  }
}

Result<std::set<std::string, std::less<>>> ParseRespFoldPairs(std::string_view text) {
  std::set<std::string, std::less<>> namespaces;
  if (config_internal::Trim(text).empty()) return namespaces;
  for (;;) {
    const size_t end = text.find(',');
    const std::string_view name = config_internal::Trim(text.substr(0, end));
    if (!namespaces.emplace(name).second) {
      return Status::InvalidArgument(fmt::format("namespace '{}' is given twice", name));
    }
    if (end == std::string_view::npos) return namespaces;
    text.remove_prefix(end + 1);
  }
}

std::vector<std::string_view> SplitUcxLanes(std::string_view ucx_devices) {
  std::vector<std::string_view> lanes;
  for (;;) {
    const size_t end = ucx_devices.find(';');
    lanes.push_back(config_internal::Trim(ucx_devices.substr(0, end)));
    if (end == std::string_view::npos) return lanes;
    ucx_devices.remove_prefix(end + 1);
  }
}

const ConfigEntry* Config::FindEntry(const std::string& key) const {
  for (const ConfigEntry& e : entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

Result<Config> LoadConfig(const ConfigSources& sources) {
  const Environment env(sources.env);
  Config config;
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  std::vector<std::string> engine_keys;

  std::string path = sources.file.value_or("");
  if (path.empty()) path = env.Get(kConfigFileVariable).value_or("");
  FileValues file;
  if (!path.empty()) {
    KVPORT_RETURN_IF_ERROR(ReadFile(path, &file, &errors, &warnings, &engine_keys));
    config.file = path;
  }

  // extra_config: LMCACHE_EXTRA_CONFIG replaces the file's map as a whole (environment wins).
  std::map<std::string, RawValue> extra = file.extra;
  std::optional<RawValue> extra_origin;
  if (file.has_extra) {
    extra_origin = MakeRaw("", ConfigSource::kFile, "file:" + path, "");
  }
  if (auto text = env.Get("LMCACHE_EXTRA_CONFIG")) {
    extra.clear();
    KVPORT_RETURN_IF_ERROR(ReadExtraConfigVariable(*text, &extra, &errors));
    extra_origin = MakeRaw("", ConfigSource::kEnvironment, "env:LMCACHE_EXTRA_CONFIG", "");
  }
  for (const auto& [name, raw] : extra)
    config.extra_config[name] = raw.text;

  // Each key's winning raw value: environment > top level of the file > extra_config.
  std::map<std::string_view, RawValue> chosen;
  for (const KeySpec& spec : ConfigKeys()) {
    if (spec.kind == ValueKind::kMap) continue;
    const auto in_file = file.keys.find(std::string(spec.key));
    auto in_extra = spec.also_in_extra_config ? extra.find(std::string(spec.key)) : extra.end();
    if (in_extra != extra.end() && in_extra->second.is_null) in_extra = extra.end();
    if (in_file != file.keys.end() && in_extra != extra.end() &&
        in_file->second.text != in_extra->second.text) {
      warnings.push_back(fmt::format(
          "{} is set at the top level ({}: '{}') and in extra_config ({}: '{}'); the top-level "
          "value is used",
          spec.key, in_file->second.where, in_file->second.text, in_extra->second.where,
          in_extra->second.text));
    }
    if (auto value = env.Get(spec.env_var)) {
      chosen[spec.key] =
          MakeRaw(*value, ConfigSource::kEnvironment, "env:" + std::string(spec.env_var),
                  "environment variable " + std::string(spec.env_var));
    } else if (in_file != file.keys.end()) {
      chosen[spec.key] = in_file->second;
    } else if (in_extra != extra.end()) {
      chosen[spec.key] = in_extra->second;
    }
  }

  // Apply: keys whose checks read other keys go last.
  LoadContext context;
  context.host_memory_bytes = sources.host_memory_bytes.value_or(HostPhysicalMemoryBytes());
  context.warnings = &warnings;
  for (bool second_pass : {false, true}) {
    for (const KeySpec& spec : ConfigKeys()) {
      if (spec.kind == ValueKind::kMap || spec.reads_other_keys != second_pass) continue;
      auto it = chosen.find(spec.key);
      if (it == chosen.end()) {
        if (spec.check_default) spec.check_default(config, context);
        continue;
      }
      const RawValue& raw = it->second;
      const bool from_extra = raw.origin.ends_with("(extra_config)");
      Status s = spec.set(config, raw.text, context);
      if (!s.ok()) {
        errors.push_back(fmt::format("{}: {}{}: {}", raw.where, from_extra ? "extra_config." : "",
                                     spec.key, s.message()));
      }
    }
  }
  if (context.host_memory_bytes == 0) {
    warnings.push_back(
        "this host's physical memory could not be read; capacities were not checked against it");
  }
  if (errors.empty()) {
    for (std::string& e : config_internal::CheckCrossKeyRules(config))
      errors.push_back(e);
  }
  if (errors.empty() && file.has_lmcache_key) {
    std::optional<config_internal::ChunkHashSetting> chunk_hash;
    if (auto value = env.Get("LMCACHE_PRE_CACHING_HASH_ALGORITHM")) {
      chunk_hash = {*value, "environment variable LMCACHE_PRE_CACHING_HASH_ALGORITHM"};
    } else if (file.chunk_hash) {
      chunk_hash = {file.chunk_hash->text, file.chunk_hash->where};
    }
    if (auto w = config_internal::PerProcessChunkHashWarning(config.remote_url, chunk_hash))
      warnings.push_back(std::move(*w));
  }
  if (!errors.empty()) {
    std::string message = errors[0];
    for (size_t i = 1; i < errors.size(); ++i)
      message += "; " + errors[i];
    return Status::InvalidArgument(std::move(message));
  }

  for (const KeySpec& spec : ConfigKeys()) {
    if (spec.kind == ValueKind::kMap) {
      if (config.extra_config.empty()) {
        ConfigEntry e;
        e.key = std::string(spec.key);
        e.value = "{}";
        e.env_var = std::string(spec.env_var);
        e.source = extra_origin ? extra_origin->source : ConfigSource::kDefault;
        e.origin = extra_origin ? extra_origin->origin : "default";
        config.entries.push_back(std::move(e));
      }
      for (const auto& [name, raw] : extra) {
        ConfigEntry e;
        e.key = "extra_config." + name;
        e.value = raw.text;
        e.is_string = true;
        e.source = raw.source;
        e.origin = raw.origin.substr(0, raw.origin.size() - std::string(" (extra_config)").size());
        config.entries.push_back(std::move(e));
      }
      continue;
    }
    auto it = chosen.find(spec.key);
    config.entries.push_back(MakeEntry(spec, config, it == chosen.end() ? nullptr : &it->second));
  }
  if (sources.log_warnings) {
    for (const std::string& w : warnings)
      log::Warn("config: {}", w);
  }
  config.warnings = std::move(warnings);
  config.engine_keys = std::move(engine_keys);
  return config;
}

}  // namespace kvport

// SPDX-License-Identifier: Apache-2.0
#include "cluster/member.h"

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "net/host_port.h"

namespace kvport::cluster {
namespace {

using nlohmann::json;

Status Refuse(std::string_view field, std::string_view why) {
  return Status::Corruption("member record: '" + std::string(field) + "' " + std::string(why));
}

// An unsigned 64-bit value written as a decimal string (epochs are random 64-bit numbers, which
// a JSON number would round in most other tools) or, leniently, as a non-negative JSON integer.
Result<uint64_t> ReadUint64(const json& object, std::string_view field, bool required) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    if (required) return Refuse(field, "is missing");
    return uint64_t{0};
  }
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) return value;
  }
  return Refuse(field, "is not an unsigned 64-bit decimal");
}

Result<std::string> ReadString(const json& object, std::string_view field, bool required) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    if (required) return Refuse(field, "is missing");
    return std::string();
  }
  if (!it->is_string()) return Refuse(field, "is not a string");
  return it->get<std::string>();
}

Status CheckAddress(const std::string& address) {
  // The default host is empty so that ":7000" (no host: clients could not connect) is refused.
  auto parsed = net::ParseHostPort(address, "");
  if (!parsed.ok()) return Refuse("address", "is not HOST:PORT: " + parsed.status().message());
  if (parsed->host.empty()) return Refuse("address", "'" + address + "' has no host");
  if (parsed->port == 0) return Refuse("address", "'" + address + "' has port 0");
  return Status::Ok();
}

Result<Member> DecodeObject(const json& object) {
  if (!object.is_object()) return Status::Corruption("member record is not a JSON object");
  Member member;
  KVPORT_ASSIGN_OR_RETURN(member.id, ReadString(object, "id", true));
  if (member.id.empty()) return Refuse("id", "is empty");
  KVPORT_ASSIGN_OR_RETURN(member.address, ReadString(object, "address", true));
  KVPORT_RETURN_IF_ERROR(CheckAddress(member.address));
  KVPORT_ASSIGN_OR_RETURN(member.epoch, ReadUint64(object, "epoch", true));
  KVPORT_ASSIGN_OR_RETURN(member.capacity_bytes, ReadUint64(object, "capacity_bytes", false));
  KVPORT_ASSIGN_OR_RETURN(uint64_t protocol, ReadUint64(object, "protocol_version", false));
  if (protocol > std::numeric_limits<uint32_t>::max()) {
    return Refuse("protocol_version", "is out of range");
  }
  member.protocol_version = static_cast<uint32_t>(protocol);
  if (auto it = object.find("transports"); it != object.end() && !it->is_null()) {
    if (!it->is_array()) return Refuse("transports", "is not an array");
    for (const json& transport : *it) {
      if (!transport.is_string()) return Refuse("transports", "holds a non-string");
      member.transports.push_back(transport.get<std::string>());
    }
  }
  if (auto it = object.find("started_unix_ms"); it != object.end() && !it->is_null()) {
    if (!it->is_number_integer()) return Refuse("started_unix_ms", "is not an integer");
    member.started_unix_ms = it->get<int64_t>();
  }
  return member;
}

}  // namespace

std::string EncodeMember(const Member& member) {
  json object = {
      {"id", member.id},
      {"address", member.address},
      {"epoch", std::to_string(member.epoch)},
      {"capacity_bytes", member.capacity_bytes},
      {"protocol_version", member.protocol_version},
      {"transports", member.transports},
      {"started_unix_ms", member.started_unix_ms},
  };
  // `replace`: an id or transport that is not valid UTF-8 must not throw (dump's default).
  return object.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Member> DecodeMember(std::string_view text) {
  // The non-throwing parse (allow_exceptions = false) gives a discarded value on bad JSON; every
  // access after it checks types first, so nothing below throws.
  json object = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return Status::Corruption("member record is not valid JSON");
  try {
    return DecodeObject(object);
  } catch (const std::exception& e) {
    // Not expected (every access is type-checked), but one bad record must never escape as an
    // exception into the watch thread.
    return Status::Corruption(std::string("member record: ") + e.what());
  }
}

}  // namespace kvport::cluster

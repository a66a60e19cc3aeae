// SPDX-License-Identifier: Apache-2.0
#include "server/resp_chunk_pair.h"

namespace kvport::server {

namespace {

constexpr std::string_view kMetaSuffix = "metadata";
constexpr std::string_view kDataSuffix = "kv_bytes";

// Whether `data_key` is live and its object holds metadata.
bool HoldsMeta(CacheService& service, const Grant& grant, std::string_view ns,
               std::string_view data_key) {
  uint64_t meta_length = 0;
  return service.Exists(grant, ns, data_key, false, nullptr, &meta_length).ok() && meta_length > 0;
}

}  // namespace

std::string PairDataKeyOf(std::string_view key) {
  if (!key.ends_with(kMetaSuffix)) return {};
  std::string data_key(key.substr(0, key.size() - kMetaSuffix.size()));
  data_key += kDataSuffix;
  return data_key;
}

std::optional<std::string> FoldedHomeOf(CacheService& service, const Grant& grant,
                                        std::string_view ns, std::string_view key) {
  std::string data_key = PairDataKeyOf(key);
  if (data_key.empty() || service.Exists(grant, ns, key, false, nullptr).ok() ||
      !HoldsMeta(service, grant, ns, data_key)) {
    return std::nullopt;
  }
  return data_key;
}

Status FoldPairMeta(CacheService& service, const Grant& grant, std::string_view ns,
                    std::string_view key, std::string_view value,
                    const CacheService::Waiter& waiter) {
  const std::string data_key = PairDataKeyOf(key);
  if (data_key.empty() || value.empty() || value.size() > kMaxFoldedMetaBytes) {
    return Status::NotFound("not a pair's metadata");
  }
  Status attached = service.AttachMeta(grant, ns, data_key, value, waiter);
  if (attached.code() == StatusCode::kAborted) {
    // It has metadata: the same bytes (LMCache writing a chunk again) are this SET done.
    Result<store::ReadHandle> pin = service.Pin(grant, ns, data_key, false);
    attached = pin.ok() && pin->meta() == value ? Status::Ok() : Status::NotFound("refolded");
  }
  if (attached.code() == StatusCode::kPermissionDenied) return attached;
  if (!attached.ok()) return Status::NotFound("not folded: " + attached.message());
  // A plain key of the name would shadow the folded one.
  Status deleted = service.Delete(grant, ns, key, false, waiter);
  if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) return deleted;
  return Status::Ok();
}

std::string FoldedMetaKeyOf(CacheService& service, const Grant& grant, std::string_view ns,
                            std::string_view data_key) {
  if (!data_key.ends_with(kDataSuffix) || !HoldsMeta(service, grant, ns, data_key)) return {};
  std::string meta_key(data_key.substr(0, data_key.size() - kDataSuffix.size()));
  meta_key += kMetaSuffix;
  if (service.Exists(grant, ns, meta_key, false, nullptr).ok()) return {};
  return meta_key;
}

Status DeleteRespKey(CacheService& service, const Grant& grant, std::string_view ns,
                     std::string_view key, const CacheService::Waiter& waiter) {
  const std::string data_key = PairDataKeyOf(key);
  const bool folded = !data_key.empty() && HoldsMeta(service, grant, ns, data_key);
  Status deleted = service.Delete(grant, ns, key, false, waiter);
  if (!folded || (!deleted.ok() && deleted.code() != StatusCode::kNotFound)) return deleted;
  Status pair = service.Delete(grant, ns, data_key, false, waiter);
  return deleted.ok() ? Status::Ok() : pair;
}

}  // namespace kvport::server

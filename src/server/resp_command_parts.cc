// SPDX-License-Identifier: Apache-2.0
// The helpers every RESP command family shares: the reply output, Redis's error replies and
// argument parsing, and the object a key lives in when LMCache's pairs fold.
#include "server/resp_command_parts.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <utility>

#include "server/resp_chunk_pair.h"

namespace kvport::server {

void RespOutput::Value(store::ReadHandle pin) {
  const uint64_t size = pin.size();
  protocol::RespWriter(&text_, 2).BulkHeader(size);
  if (size < kCopyBelowBytes) {
    // The replies of a pipeline gather here: room for a few values of this size at once, not
    // regrown by doubling from a few bytes with every readiness event (the text leaves with
    // Commit), nor 64 KiB for a 60-byte value.
    if (text_.capacity() - text_.size() < size + 2) {
      text_.reserve(std::max({text_.size() + size + 2, 2 * text_.capacity(), 4 * (size + 64)}));
    }
    text_.append(reinterpret_cast<const char*>(pin.data()), size);
  } else {
    queue_->Append(std::exchange(text_, std::string()));
    auto held = std::make_shared<store::ReadHandle>(std::move(pin));
    const uint8_t* data = held->data();
    queue_->AppendBorrowed(data, size, std::move(held));
  }
  text_.append("\r\n");
}

void RespOutput::Commit() {
  if (!text_.empty()) queue_->Append(std::exchange(text_, std::string()));
}

void ReplyStatus(protocol::RespWriter& w, const Status& status) {
  switch (status.code()) {
    case StatusCode::kPermissionDenied:
      w.Error("NOPERM " + status.message());
      return;
    case StatusCode::kNoSpace:
      w.Error("OOM " + status.message());
      return;
    default:
      w.Error(fmt::format("ERR {} ({})", status.message(), StatusCodeName(status.code())));
      return;
  }
}

bool ArgIs(std::string_view arg, std::string_view upper_name) {
  if (arg.size() != upper_name.size()) return false;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(arg[i])) != upper_name[i]) return false;
  }
  return true;
}

namespace resp {

std::string Upper(std::string_view text) {
  std::string upper(text);
  for (char& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper;
}

std::optional<int64_t> ParseInteger(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  bool negative = text[0] == '-';
  size_t i = negative ? 1 : 0;
  if (i == text.size()) return std::nullopt;
  uint64_t v = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

void NotInteger(RespWriter& w) {
  w.Error("ERR value is not an integer or out of range");
}

void SyntaxError(RespWriter& w) {
  w.Error("ERR syntax error");
}

void WrongArity(RespWriter& w, std::string_view name) {
  w.Error(fmt::format("ERR wrong number of arguments for '{}' command", Upper(name)));
}

std::string_view HomeOf(Context& c, std::string_view key, std::optional<std::string>* folded) {
  if (!c.folds()) {
    folded->reset();
    return key;
  }
  *folded = FoldedHomeOf(c.service, c.grant(), c.ns(), key);
  return folded->has_value() ? std::string_view(**folded) : key;
}

Status DeleteKey(Context& c, std::string_view key) {
  if (c.folds()) return DeleteRespKey(c.service, c.grant(), c.ns(), key, c.client.durability);
  return c.service.Delete(c.grant(), c.ns(), key, /*any_namespace=*/false, c.client.durability);
}

}  // namespace resp

}  // namespace kvport::server

// SPDX-License-Identifier: Apache-2.0
#include "protocol/resp.h"

#include <fmt/core.h>

#include <algorithm>

namespace kvport::protocol {

namespace {

enum class Line { kFound, kMissing, kTooLong };

// Where the CRLF ends the line starting at `start` (*end: the CR). The line may be at most
// `max` bytes: a peer that never sends the CRLF cannot make the caller buffer more.
Line FindCrlf(std::string_view input, size_t start, uint64_t max, size_t* end) {
  const size_t limit = static_cast<size_t>(std::min<uint64_t>(input.size(), start + max + 2));
  for (size_t i = start; i + 1 < limit; ++i) {
    if (input[i] == '\r' && input[i + 1] == '\n') {
      *end = i;
      return Line::kFound;
    }
  }
  return input.size() - start >= max + 2 ? Line::kTooLong : Line::kMissing;
}

// A decimal of at most 18 digits (so it cannot overflow), with an optional '-'.
bool ParseDecimal(std::string_view text, int64_t* value) {
  bool negative = false;
  if (!text.empty() && text[0] == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *value = negative ? -v : v;
  return true;
}

std::string Printable(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string(1, c);
  return fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
}

RespParse ParseInline(std::string_view input, const RespLimits& limits,
                      std::vector<std::string_view>* args, size_t* consumed, size_t* needed,
                      std::string* error) {
  const size_t scan =
      static_cast<size_t>(std::min<uint64_t>(input.size(), limits.max_inline_bytes + 1));
  const size_t newline = input.substr(0, scan).find('\n');
  if (newline == std::string_view::npos) {
    if (input.size() > limits.max_inline_bytes) {
      *error = fmt::format("Protocol error: too big inline request (the limit is {} bytes)",
                           limits.max_inline_bytes);
      return RespParse::kError;
    }
    *needed = input.size() + 1;
    return RespParse::kIncomplete;
  }
  std::string_view line = input.substr(0, newline);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    if (i == line.size()) break;
    const size_t begin = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t')
      ++i;
    if (args->size() >= limits.max_args) {
      *error = fmt::format("Protocol error: more than {} arguments", limits.max_args);
      return RespParse::kError;
    }
    args->push_back(line.substr(begin, i - begin));
  }
  *consumed = newline + 1;
  return RespParse::kComplete;
}

}  // namespace

namespace {

// The decimal on the line that starts at input[start] (just after its '*' or '$'): *value, and
// in *next where the line after it starts. kIncomplete (*needed) until the line's CRLF has
// arrived; kError, "Protocol error: invalid <what> length", for a line too long or not a
// decimal.
RespParse ParseLengthLine(std::string_view input, size_t start, std::string_view what,
                          int64_t* value, size_t* next, size_t* needed, std::string* error) {
  size_t end = 0;
  switch (FindCrlf(input, start, 20, &end)) {
    case Line::kMissing:
      *needed = input.size() + 1;
      return RespParse::kIncomplete;
    case Line::kTooLong:
      break;
    case Line::kFound:
      if (ParseDecimal(input.substr(start, end - start), value)) {
        *next = end + 2;
        return RespParse::kComplete;
      }
      break;
  }
  *error = fmt::format("Protocol error: invalid {} length", what);
  return RespParse::kError;
}

}  // namespace

namespace {

// `count` bulk strings from input[pos], appended to `args`; *end: where the last one ends.
// `before`: bytes of the command ahead of input[0], counted against max_command_bytes.
// `progress`: each whole argument is also recorded there, with where the next one starts.
RespParse ParseBulks(std::string_view input, size_t pos, uint64_t count, uint64_t before,
                     const RespLimits& limits, std::vector<std::string_view>* args, size_t* end,
                     size_t* needed, std::string* error, RespPartialBulk* partial,
                     RespProgress* progress = nullptr) {
  for (uint64_t i = 0; i < count; ++i) {
    if (progress != nullptr) progress->pos = pos;
    if (pos >= input.size()) {
      *needed = pos + 1;
      return RespParse::kIncomplete;
    }
    if (input[pos] != '$') {
      *error = "Protocol error: expected '$', got '" + Printable(input[pos]) + "'";
      return RespParse::kError;
    }
    int64_t length = 0;
    size_t data_pos = 0;
    const RespParse sized =
        ParseLengthLine(input, pos + 1, "bulk", &length, &data_pos, needed, error);
    if (sized != RespParse::kComplete) return sized;
    if (length < 0) {
      *error = "Protocol error: invalid bulk length";
      return RespParse::kError;
    }
    if (static_cast<uint64_t>(length) > limits.max_bulk_bytes) {
      *error = fmt::format(
          "Protocol error: a bulk string of {} bytes is over the node's max_value_bytes ({})",
          length, limits.max_bulk_bytes);
      return RespParse::kError;
    }
    const uint64_t after = data_pos + static_cast<uint64_t>(length) + 2;
    if (before + after > limits.max_command_bytes) {
      *error = fmt::format("Protocol error: a command of more than {} bytes (max_command_bytes)",
                           limits.max_command_bytes);
      return RespParse::kError;
    }
    if (after > input.size()) {
      *needed = static_cast<size_t>(after);
      if (partial != nullptr) {
        *partial = RespPartialBulk{args->size(), data_pos, static_cast<uint64_t>(length)};
      }
      return RespParse::kIncomplete;
    }
    if (input[after - 2] != '\r' || input[after - 1] != '\n') {
      *error = "Protocol error: a bulk string not followed by CRLF";
      return RespParse::kError;
    }
    args->push_back(input.substr(data_pos, static_cast<size_t>(length)));
    if (progress != nullptr) progress->args.emplace_back(data_pos, static_cast<size_t>(length));
    pos = static_cast<size_t>(after);
  }
  *end = pos;
  return RespParse::kComplete;
}

}  // namespace

RespParse ParseRespCommand(std::string_view input, const RespLimits& limits,
                           std::vector<std::string_view>* args, size_t* consumed, size_t* needed,
                           std::string* error, RespPartialBulk* partial, RespProgress* progress) {
  args->clear();
  if (progress != nullptr && progress->arg_count > 0) {
    // The arguments already parsed are where they were; the rest is parsed from where the last
    // call stopped.
    for (const auto& [offset, length] : progress->args)
      args->push_back(input.substr(offset, length));
    const uint64_t left = progress->arg_count - progress->args.size();
    const RespParse parsed = ParseBulks(input, progress->pos, left, 0, limits, args, consumed,
                                        needed, error, partial, progress);
    if (parsed == RespParse::kIncomplete && partial != nullptr) {
      partial->arg_count = progress->arg_count;
    }
    return parsed;
  }
  if (input.empty()) {
    *needed = 1;
    return RespParse::kIncomplete;
  }
  if (input[0] != '*') return ParseInline(input, limits, args, consumed, needed, error);

  int64_t count = 0;
  size_t pos = 0;
  const RespParse counted = ParseLengthLine(input, 1, "multibulk", &count, &pos, needed, error);
  if (counted != RespParse::kComplete) return counted;
  if (count <= 0) {  // "*0", "*-1": an empty command, skipped (as Redis does)
    *consumed = pos;
    return RespParse::kComplete;
  }
  if (static_cast<uint64_t>(count) > limits.max_args) {
    *error = fmt::format(
        "Protocol error: invalid multibulk length ({} arguments; the node takes at most {})", count,
        limits.max_args);
    return RespParse::kError;
  }
  if (progress != nullptr) {
    progress->Clear();
    progress->arg_count = static_cast<uint64_t>(count);
  }
  const RespParse parsed = ParseBulks(input, pos, static_cast<uint64_t>(count), 0, limits, args,
                                      consumed, needed, error, partial, progress);
  if (parsed == RespParse::kIncomplete && partial != nullptr) {
    partial->arg_count = static_cast<uint64_t>(count);
  }
  return parsed;
}

RespParse ParseRespBulks(std::string_view input, uint64_t count, uint64_t before,
                         const RespLimits& limits, std::vector<std::string_view>* args,
                         size_t* consumed, size_t* needed, std::string* error) {
  return ParseBulks(input, 0, count, before, limits, args, consumed, needed, error, nullptr);
}

void RespWriter::Header(char type, uint64_t n) {
  out_->push_back(type);
  out_->append(std::to_string(n));
  out_->append("\r\n");
}

void RespWriter::Simple(std::string_view text) {
  out_->push_back('+');
  for (char c : text)
    out_->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out_->append("\r\n");
}

void RespWriter::Error(std::string_view text) {
  out_->push_back('-');
  for (char c : text)
    out_->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out_->append("\r\n");
}

void RespWriter::Integer(int64_t value) {
  out_->push_back(':');
  out_->append(std::to_string(value));
  out_->append("\r\n");
}

void RespWriter::BulkHeader(uint64_t length) {
  Header('$', length);
}

void RespWriter::Bulk(std::string_view bytes) {
  Header('$', bytes.size());
  out_->append(bytes);
  out_->append("\r\n");
}

void RespWriter::Null() {
  out_->append(version_ >= 3 ? "_\r\n" : "$-1\r\n");
}

void RespWriter::NullArray() {
  out_->append(version_ >= 3 ? "_\r\n" : "*-1\r\n");
}

void RespWriter::Array(uint64_t count) {
  Header('*', count);
}

void RespWriter::Map(uint64_t pairs) {
  if (version_ >= 3) {
    Header('%', pairs);
  } else {
    Header('*', pairs * 2);
  }
}

void RespWriter::Set(uint64_t count) {
  Header(version_ >= 3 ? '~' : '*', count);
}

void RespWriter::Boolean(bool value) {
  if (version_ >= 3) {
    out_->append(value ? "#t\r\n" : "#f\r\n");
  } else {
    Integer(value ? 1 : 0);
  }
}

void RespWriter::Verbatim(std::string_view format, std::string_view text) {
  if (version_ < 3 || format.size() != 3) {
    Bulk(text);
    return;
  }
  Header('=', text.size() + 4);
  out_->append(format);
  out_->push_back(':');
  out_->append(text);
  out_->append("\r\n");
}

}  // namespace kvport::protocol

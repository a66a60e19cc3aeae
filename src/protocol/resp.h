// SPDX-License-Identifier: Apache-2.0
// RESP, the Redis protocol (docs/resp.md): a pure codec, no I/O.
//
// ParseCommand reads one client command from the front of a byte buffer: an array of bulk
// strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") or an inline command ("GET k\r\n"). It never
// trusts an announced length: every count and length is checked against RespLimits before it
// is used, and nothing is allocated from one (a bulk length of 2^40 is an error at once; the
// caller's buffer grows with the bytes that actually arrived). A client sends arrays of bulk
// strings only, so nesting is one level: any other type inside the array is an error.
//
// RespWriter appends replies in RESP2 or RESP3 (HELLO 3): where RESP3 has a type of its own
// (null, map, double, boolean) a RESP2 client gets Redis's RESP2 spelling of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvport::protocol {

struct RespLimits {
  // Elements of one command array (an MSET of max_batch_keys pairs and its name fit).
  uint64_t max_args = 8201;
  // One bulk string: the node's max_value_bytes.
  uint64_t max_bulk_bytes = uint64_t{1} << 30;
  // A whole command, from its first byte to its last.
  uint64_t max_command_bytes = uint64_t{1} << 31;
  // An inline command's line, and a header line ("*N", "$N").
  uint64_t max_inline_bytes = 64 * 1024;
};

enum class RespParse {
  kComplete,    // *consumed bytes hold one command; args point into the input
  kIncomplete,  // more bytes are needed (*needed: the least total size, when known)
  kError,       // a protocol error (*error says which); the stream cannot be resynchronised
};

// Where an array command stopped when it came back kIncomplete inside a bulk string's bytes
// (its "$N" line whole, its length within the limits): from there the node's RESP handler reads a
// large value straight into its reservation (server/resp_value_capture.h).
struct RespPartialBulk {
  size_t index = 0;        // the incomplete argument (`args` holds those before it)
  size_t data_pos = 0;     // its first byte in the input
  uint64_t length = 0;     // its length
  uint64_t arg_count = 0;  // the command's arguments in all
};

// How far an array command that came back kIncomplete was parsed, so that the next call goes on
// from there instead of from its first byte: a command trickling in costs its size, not its
// size times its arguments. Positions count from the command's first byte, so the bytes before
// them may move (the caller's buffer compacts or grows) but must not change.
struct RespProgress {
  uint64_t arg_count = 0;                       // 0: nothing of the command parsed yet
  size_t pos = 0;                               // where the next argument's "$N" line starts
  std::vector<std::pair<size_t, size_t>> args;  // the arguments parsed: (offset, length)
  void Clear() {
    arg_count = 0;
    pos = 0;
    args.clear();
  }
};

// Parses one command at the front of `input`. kComplete: `args` holds its arguments (views into
// `input`; empty for a blank inline line, which the caller skips) and *consumed its size.
// kIncomplete: *needed is the input size at which parsing can progress (at least size + 1);
// when it stopped inside a bulk string's bytes and `partial` is given, *partial says where (and
// `args` holds the arguments before it), else `partial` is left as it was. With `progress`,
// parsing starts where the last call on the same command stopped and records where it stops;
// the caller clears it once the command is complete or dropped.
RespParse ParseRespCommand(std::string_view input, const RespLimits& limits,
                           std::vector<std::string_view>* args, size_t* consumed, size_t* needed,
                           std::string* error, RespPartialBulk* partial = nullptr,
                           RespProgress* progress = nullptr);

// Parses the last `count` arguments of an array command, whose earlier ones were read apart
// (the RESP handler's captured value): `count` bulk strings at the front of `input`, appended to
// `args`. `before` is the command's size ahead of `input`, counted against max_command_bytes.
// Results as ParseRespCommand's.
RespParse ParseRespBulks(std::string_view input, uint64_t count, uint64_t before,
                         const RespLimits& limits, std::vector<std::string_view>* args,
                         size_t* consumed, size_t* needed, std::string* error);

class RespWriter {
 public:
  // `version` 2 or 3; appends to `out`.
  RespWriter(std::string* out, int version) : out_(out), version_(version) {}
  int version() const { return version_; }
  std::string* out() { return out_; }

  void Simple(std::string_view text);  // +text (CR and LF become spaces)
  // -text: `text` begins with the error's kind ("ERR ...", "NOPERM ...").
  void Error(std::string_view text);
  void Integer(int64_t value);
  void Bulk(std::string_view bytes);
  void BulkHeader(uint64_t length);  // "$N\r\n": the caller appends N bytes and "\r\n"
  void Null();                       // RESP2 "$-1", RESP3 "_"
  void NullArray();                  // RESP2 "*-1", RESP3 "_"
  void Array(uint64_t count);
  void Map(uint64_t pairs);  // RESP3 "%N"; RESP2 an array of 2N
  void Set(uint64_t count);  // RESP3 "~N"; RESP2 an array
  void Boolean(bool value);  // RESP3 "#t"/"#f"; RESP2 the integer 1/0
  void Verbatim(std::string_view format, std::string_view text);  // RESP3 "=": RESP2 bulk

 private:
  void Header(char type, uint64_t n);
  std::string* out_;
  int version_;
};

}  // namespace kvport::protocol

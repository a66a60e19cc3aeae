// SPDX-License-Identifier: Apache-2.0
// RespValueCapture: a large SET value read from the socket straight into its reservation.
//
// A RESP command carries its value inline, so a session would read a 1 MiB SET into its input
// buffer (growing it to 2 MiB) and then copy the value into the arena. Once a command is parsed
// up to its value's "$N" line (protocol::RespPartialBulk), a SET, SETEX or PSETEX whose value is
// at least kMinBytes reserves the value in the store instead, a step at a time as its bytes
// arrive, as a binary MSET's values are (server/handle_mset.cc: the same caps on what a stalled
// writer holds reserved, and the session's request deadline), and the session reads the value's
// bytes there. The arguments after the value (SET's options) go to the input buffer as usual;
// the command then runs with the value as a view of the reservation, and its write commits the
// reservation instead of copying (Holds, Commit). A command that does not write (NX on a
// present key, a syntax error) drops the capture, which aborts the reservation: nothing of it
// was ever visible.
//
// The value's checksum (xxh3-64, docs/protocol.md "Version 10: checksums") is computed as its
// bytes land, each read's bytes hashed right after the read while they are in cache, and is
// committed with the value: a kvport client reading the key checks the bytes the Redis client
// sent, as it checks a kvport client's.
//
// A first step the store refuses leaves the command to the input buffer (it then fails as it
// would have). A step refused later makes the capture read the rest of the value's bytes into
// a scratch buffer and drop them; the command is then answered with the store's refusal.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"
#include "protocol/resp.h"
#include "server/cache_service.h"
#include "server/resp_commands.h"

struct XXH3_state_s;  // xxhash.h's streaming state, kept out of this header

namespace kvport::server {

class RespValueCapture {
 public:
  // Smaller values are read into the input buffer and copied: one copy of a few KiB costs less
  // than a reservation's bookkeeping, and a pipeline of them is parsed from one read.
  static constexpr uint64_t kMinBytes = 64 << 10;

  // A capture of the incomplete argument `partial` of the command whose earlier arguments are
  // `head`; nullptr when the command is not a SET (value at 2), SETEX or PSETEX (value at 3 of
  // 4), the value is under kMinBytes, or the store refused its first step.
  static std::unique_ptr<RespValueCapture> Begin(CacheService& service, const RespClient& client,
                                                 std::span<const std::string_view> head,
                                                 const protocol::RespPartialBulk& partial);

  // Where the value's next bytes go, at most room.size() of them: its reservation (grown a step
  // when full), or, once the store refused a step, a scratch buffer whose bytes are dropped.
  // Empty once the value is complete. The reservation may move: ask before every read.
  std::span<char> Room();
  // `bytes` were written at Room() (and, while they are the value's, are hashed now).
  void Filled(uint64_t bytes);
  bool complete() const { return filled_ == length_; }
  uint64_t missing() const { return length_ - filled_; }  // the value's bytes not here yet
  // How many arguments follow the value, and the command's bytes up to the value's end (its
  // CRLF not included): ParseRespBulks's `count` and, plus 2, its `before`.
  uint64_t arguments_after() const { return arg_count_ - head_.size() - 1; }
  uint64_t bytes_through_value() const { return head_bytes_ + length_; }
  // OK until the store refused a step of the value; then the refusal.
  Status status() const;

  // The command's arguments: the head, the value (a view of its reservation), then `tail`.
  void Arguments(std::span<const std::string_view> tail, std::vector<std::string_view>* args) const;
  // True when `value` is the view Arguments gave of the captured value.
  bool Holds(std::string_view value) const;
  // Makes the value visible with `ttl_seconds` (store::kNoExpiry: none) and its checksum, as
  // CacheService::Commit.
  Status Commit(uint32_t ttl_seconds);

 private:
  RespValueCapture(CacheService& service, const RespClient& client);

  struct HashStateDeleter {
    void operator()(XXH3_state_s* state) const;
  };

  WriteBatch batch_;                                      // one item, reserved stepwise
  std::unique_ptr<XXH3_state_s, HashStateDeleter> hash_;  // of the value's bytes filled so far
  std::vector<std::string> head_;
  uint64_t arg_count_ = 0;
  uint64_t head_bytes_ = 0;  // the command's bytes before the value's first byte
  uint64_t length_ = 0;
  uint64_t filled_ = 0;
  uint64_t step_ = 0;
  std::unique_ptr<char[]> scratch_;  // once refused: where the dropped bytes are read
};

}  // namespace kvport::server

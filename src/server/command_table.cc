// SPDX-License-Identifier: Apache-2.0
#include "server/command_table.h"

namespace kvport::server {

namespace {

using protocol::Opcode;

// clang-format off
constexpr Command kCommands[] = {
  {Opcode::kHello,  false, HandleHello,
   "Negotiate the protocol version (highest common one) and announce this node's limits. "
   "Must come first; a version range with no overlap is answered by ERROR NotSupported."},
  {Opcode::kPing,   true,  HandlePing,
   "Liveness: an empty response."},
  {Opcode::kStats,  true,  HandleStats,
   "Store counters (capacity, used, objects, hits, misses, evictions, expirations), server "
   "counters (connections, op_* per opcode) and per-namespace usage."},
  {Opcode::kMset,   true,  HandleMset,
   "Reserve arena space for each item once its first payload byte has arrived (a payload that "
   "never comes evicts nothing), read the payloads straight into the reservations, and commit "
   "them in item order once the whole payload is in. A refused item's payload is read and "
   "discarded. A connection lost, or a request past its deadline, before that aborts every "
   "reservation: no effect."},
  {Opcode::kMget,   true,  HandleMget,
   "Pin each hit and send its meta and value straight from the arena; a pin is released as "
   "soon as its bytes are written. Meta-only requests return metas and lengths. A value longer "
   "than the caller's buffer is TooLarge with its true length and no bytes. Any-namespace "
   "(version 2): the first match, default namespace first, then the others by name."},
  {Opcode::kMexist, true,  HandleMexist,
   "Per key: present (with its value length) or NotFound. A probe, not a use. Any-namespace: "
   "the first match's length."},
  {Opcode::kMdel,   true,  HandleMdel,
   "Per key: deleted or NotFound. Readers holding a pin finish with what they pinned. "
   "Any-namespace: deleted in every namespace that holds it (OK if in at least one)."},
  {Opcode::kList,   true,  HandleList,
   "One page of a namespace's keys, ascending. Cursors are remembered server-wide (a bounded "
   "table); an unknown or forgotten cursor is an error: restart from 0."},
  {Opcode::kNodeInfo, true, HandleNodeInfo,
   "Version 3. Who the node is (a random node id, the host's boot id) and the transports it "
   "offers: shared memory on its Unix socket (the path), so a client on the same host can "
   "switch to it."},
  {Opcode::kShmAttach, true, HandleShmAttach,
   "Version 3, Unix socket. Pass the arena's memfd to the peer (SCM_RIGHTS) if its uid "
   "(SO_PEERCRED) is the node's or root; otherwise say why not. Enables the ARENA_* requests."},
  {Opcode::kArenaReserve, true, HandleArenaReserve,
   "MSET without a payload: reserve every item and answer each one's arena offset; the "
   "client copies the values in through its mapping. Invisible until ARENA_COMMIT."},
  {Opcode::kArenaCommit, true, HandleArenaCommit,
   "Commit (or abort, per item) a reservation, in item order, as MSET does when its payload "
   "is in. Reservations never committed end with the session (aborted)."},
  {Opcode::kArenaGet, true, HandleArenaGet,
   "MGET answered with arena offsets: each hit is pinned under one lease for the answer, "
   "which lasts until ARENA_RELEASE or the end of the session. Eviction never frees leased "
   "bytes."},
  {Opcode::kArenaRelease, true, HandleArenaRelease,
   "End leases (the client does not wait for the answer)."},
  {Opcode::kUcxAttach, true, HandleUcxAttach,
   "Version 9, a node started with UCX. Hand the session the node's UCX listener port and a "
   "session key, if its token grants every namespace (and, on an open node, its peer runs as "
   "the node's uid); otherwise say why not. Enables the ARENA_* requests: the client moves the "
   "bytes as UCX messages, which the node copies only inside what the session holds."},
};
// clang-format on

}  // namespace

const Command* FindCommand(protocol::Opcode opcode) {
  for (const Command& c : kCommands) {
    if (c.opcode == opcode) return &c;
  }
  return nullptr;
}

}  // namespace kvport::server

// SPDX-License-Identifier: Apache-2.0
// ClusterClient: kvport::Client over many nodes. Placement, fan-out and merging; the data path
// stays node-to-client, with nothing in between.
//
// Each key's nodes are its rendezvous order over the live members (cluster/placement.h). A
// batched call is split by node and every node's part is started at once from the calling
// thread (each NodeClient sends its frames and returns); the call then waits for the parts and
// merges the per-key outcomes back in the caller's order. docs/cluster.md states the rules; in
// short:
//   - writes go to the key's first `replicas` live nodes; a node that fails (unreachable, lost
//     connection) is replaced by the key's next node, and a key is written when at least
//     `write_quorum` nodes stored it;
//   - reads (MGet, MGetMeta, MGetInPlace, MExist) ask the key's first live node and, with
//     replicas, the next ones while the key is missing there; a node that fails makes its keys
//     misses (KEY_NOT_EXIST with the reason in BatchResult::error), never the call an error;
//   - deletes go to every one of the key's first `replicas` live nodes;
//   - a node that fails is left out of placement for a backoff (100 ms doubling to 5 s) and
//     tried again after it; a node gone from the membership is dropped; a node seen with a new
//     epoch is a new node (fresh connections; it is empty).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "client/backend.h"
#include "client/device_staging.h"
#include "client/node_client.h"
#include "cluster/membership.h"
#include "cluster/placement.h"
#include "common/monotonic_clock.h"
#include "common/thread_annotations.h"
#include "kvport/client.h"
#include "kvport/transport.h"

namespace kvport::client {

class ClusterClient final : public Backend {
 public:
  struct Options {
    int replicas = 1;      // 1..16; more than the live nodes means all of them
    int write_quorum = 1;  // 1..replicas
  };
  // `devices` and `checksums` must outlive the client.
  ClusterClient(std::string instance_id, std::unique_ptr<cluster::Membership> membership,
                const InitOptions& init_options, TransportChoice choice,
                NodeCredentials credentials, DeviceStaging* devices, ValueChecksums* checksums,
                Options options);
  ~ClusterClient() override;

  // Connects to every member now, at once. Unavailable when there are members and none
  // answers; OK with an empty membership (nodes may register later).
  Status Connect();

  PendingCallPtr<BatchResult> StartMSet(std::span<const std::string> keys, const IOBuffers& values,
                                        const SetOptions& options,
                                        std::span<const std::string> metas) override;
  PendingCallPtr<GetResult> StartMGet(std::span<const std::string> keys, const GetOptions& options,
                                      const IOBuffers* buffers, InPlaceLoans* loans) override;
  PendingCallPtr<BatchResult> StartMExist(std::span<const std::string> keys,
                                          const ExistOptions& options) override;
  PendingCallPtr<BatchResult> StartMDel(std::span<const std::string> keys,
                                        const DelOptions& options) override;
  // OK when every member answers; Unavailable naming those that did not.
  Status Ping() override;
  // Every member's counters summed (latency quantiles and other non-additive counters: their
  // largest), namespaces merged by name. Members that do not answer are left out, logged.
  Result<NodeStats> Stats() override;
  std::vector<NodeReport> StatsPerNode() override;
  // Lists member by member (ascending id). A key stored on several replicas is listed once per
  // copy. Cursors are the client's own (the last 64 handed out are remembered).
  Result<KeyPage> List(std::string_view ns, uint64_t cursor, uint32_t max_keys) override;

  std::string_view transport() const override { return transport_; }
  const std::string& transport_reason() const override { return transport_reason_; }
  // The first node's at Connect (one token serves every node).
  const std::optional<std::string>& default_namespace() const override {
    return default_namespace_;
  }
  void CloseAll() override;

 private:
  // One member and its connections, opened on first use.
  struct Slot {
    cluster::Member member;
    Mutex mu;
    std::shared_ptr<NodeClient> node GUARDED_BY(mu);
    Status open_error GUARDED_BY(mu);
    MonotonicClock::time_point retry_open_at GUARDED_BY(mu);
    bool opening GUARDED_BY(mu) = false;  // a call is connecting, without holding mu
    // Left out of placement until then (steady-clock nanoseconds; 0: healthy).
    std::atomic<int64_t> down_until_ns{0};
    std::atomic<int64_t> backoff_ms{0};
  };
  // The members as of one membership generation, sorted by id, and their placement.
  struct View {
    uint64_t generation = 0;
    std::vector<std::shared_ptr<Slot>> slots;
    cluster::Placement placement{std::span<const cluster::Member>()};
  };
  // A call's routing: per key, its candidate slots (indexes into view->slots), live first in
  // rendezvous order, then the down ones. Only the first `depth` of each key's are worked out
  // when the call starts (its replicas and one more: what a call without failures uses); a
  // rank past them, needed only when nodes fail during the call, ranks that key in full.
  struct Routing {
    std::shared_ptr<const View> view;
    size_t live = 0;                   // slots not down; when 0, every slot counts as live
    size_t stride = 0;                 // candidates per key (== view->slots.size())
    size_t depth = 0;                  // candidates worked out per key at the start
    std::vector<uint8_t> is_live;      // per slot, as of the start
    std::vector<uint64_t> key_hashes;  // Placement::KeyHash of each key
    std::vector<uint32_t> candidates;  // key i's first depth are [i * depth, (i + 1) * depth)
    uint32_t candidate(size_t key, size_t rank) const {
      return rank < depth ? candidates[key * depth + rank] : RankInFull(key, rank);
    }
    // candidate() past depth.
    uint32_t RankInFull(size_t key, size_t rank) const;
    // Every key with each of its first `replicas` candidates: (key, slot) pairs.
    void FirstReplicas(size_t replicas, std::vector<uint32_t>* keys,
                       std::vector<uint32_t>* slots) const;
  };
  // The keys of one call that go to one slot.
  struct Group {
    uint32_t slot = 0;
    std::vector<uint32_t> keys;  // indexes into the call's keys, ascending
  };

  // Steady-clock nanoseconds, as Slot::down_until_ns counts them.
  static int64_t NowNs();
  // "id (address)", or the address alone when it is the id.
  static std::string NodeName(const cluster::Member& member);
  // Whether a node's answer for a key means the node itself failed (not the key).
  static bool NodeFailed(KeyCode code);
  static bool NodeFailed(const Status& call);

  std::shared_ptr<const View> CurrentView();
  Routing Route(std::span<const std::string> keys);
  // The slot's NodeClient, opening it now if needed: Unavailable while a failed open backs
  // off, or while another call is connecting (calls never wait for one another's connect).
  Result<std::shared_ptr<NodeClient>> Open(Slot& slot);
  void MarkDown(Slot& slot, const Status& why);
  void MarkUp(Slot& slot);
  // After a node call: down when the call failed for the node's sake (or lost keys' answers),
  // up again when it answered.
  void Observe(Slot& slot, const Status& call, bool lost_keys);
  // Groups keys by the slot each is sent to this round.
  static std::vector<Group> GroupBy(std::span<const uint32_t> keys,
                                    std::span<const uint32_t> slot_of_key);
  // Runs `part(group_index)` for every group at once, on threads of their own: for the control
  // calls (Connect, Ping, Stats), never the batched ones.
  void RunGroups(size_t groups, const std::function<void(size_t)>& part);

  // One node's share of a round of a batched call (defined in the .cc), and the calls.
  template <typename R>
  struct Part;
  class WriteCall;
  template <typename R>
  class ReadCall;
  class DelCall;
  // Starts `start(node, part)` for each group's node, from this thread; a node that cannot be
  // opened fails its part.
  template <typename R, typename Start>
  std::vector<std::unique_ptr<Part<R>>> StartParts(const Routing& routing,
                                                   std::vector<Group> groups, Start start);
  template <typename R>
  static bool PartsReady(const std::vector<std::unique_ptr<Part<R>>>& parts);
  template <typename R, typename Start>
  PendingCallPtr<R> StartRead(std::span<const std::string> keys, const char* op,
                              std::chrono::milliseconds timeout, InPlaceLoans* loans, Start start);

  const std::string instance_id_;
  const std::unique_ptr<cluster::Membership> membership_;
  const InitOptions init_options_;
  const TransportChoice choice_;
  const NodeCredentials credentials_;
  DeviceStaging* const devices_;
  ValueChecksums* const checksums_;
  const Options options_;
  std::string transport_;         // the data path of the nodes reached at Connect
  std::string transport_reason_;  // "cluster ...: N nodes, ..."
  std::optional<std::string> default_namespace_;

  // The view calls route by: read without a lock (an atomic shared_ptr), replaced under
  // view_mu_ when the membership's generation moves on.
  std::atomic<std::shared_ptr<const View>> view_;
  Mutex view_mu_;  // one rebuild at a time

  struct ListPosition {
    std::string member_id;
    uint64_t node_cursor = 0;
  };
  Mutex list_mu_;
  std::unordered_map<uint64_t, ListPosition> list_cursors_ GUARDED_BY(list_mu_);
  std::deque<uint64_t> list_cursor_order_ GUARDED_BY(list_mu_);  // oldest first
  uint64_t list_cursor_seed_ GUARDED_BY(list_mu_);
};

}  // namespace kvport::client

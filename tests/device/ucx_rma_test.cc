// SPDX-License-Identifier: Apache-2.0
// One-sided transfers over the host's UCX (device/ucx_rma.h), two workers in this process: a
// "node" that registers a region and keeps progressing (as the node's event loop will), and a
// "client" that reads and writes it. Run over UCX's tcp transport and over its shared-memory
// ones, UCX_TLS set by the test; skipped when this target had no libucp at build time.
#include "device/ucx_rma.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace kvport {
namespace {

using ::testing::HasSubstr;
using testing::ScopedEnv;
using namespace std::chrono_literals;

constexpr const char* kHostUcp = KVPORT_TEST_UCP_LIBRARY;

std::vector<char> Pattern(char seed, size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>(seed + i * 7 + (i >> 12));
  return v;
}

// A worker progressed on a thread of its own until destroyed, as the node's event loop will:
// spinning, or sleeping in poll(2) on its event fd between events (Arm).
class ProgressingWorker {
 public:
  ProgressingWorker(std::unique_ptr<ucx::Worker> worker, bool sleep)
      : worker_(std::move(worker)), thread_([this, sleep] {
          while (!stop_.load()) {
            if (worker_->Progress() != 0) continue;
            if (!sleep) {
              std::this_thread::yield();
            } else if (worker_->Arm()) {
              // No timeout: only the worker's fd (or the destructor's) wakes it, so a client
              // call the fd did not announce would run into its deadline.
              pollfd fds[2] = {{worker_->event_fd(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
              ::poll(fds, 2, -1);
              ++sleeps_;
            }
          }
        }) {}
  ~ProgressingWorker() {
    stop_.store(true);
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof(one));
    thread_.join();
    ::close(stop_fd_);
  }
  int sleeps() const { return sleeps_.load(); }
  ucx::Worker& worker() { return *worker_; }

 private:
  std::unique_ptr<ucx::Worker> worker_;
  const int stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  std::atomic<bool> stop_{false};
  std::atomic<int> sleeps_{0};
  std::thread thread_;
};

// Workers over the host's UCX with UCX_TLS as the test says: UCX's tcp alone ("tcp"), or its
// shared-memory transports (posix, sysv, cma) with tcp beside them (UCX 1.13's shared-memory
// transports do not detect a peer's failure, which Connect requires).
class UcxWorkers {
 protected:
  void Open(const char* tls) {
    if (UcxBuildApiVersion().empty()) GTEST_SKIP() << "this build has no UCX";
    if (std::string(kHostUcp).empty()) GTEST_SKIP() << "no libucp for this target at build time";
    tls_ = std::make_unique<ScopedEnv>("UCX_TLS", tls);
    runtime_ = OpenUcxRuntime(kHostUcp);
    ASSERT_TRUE(runtime_->usable()) << runtime_->reason();
  }

  std::unique_ptr<ucx::Worker> OpenWorker() {
    Result<std::unique_ptr<ucx::Worker>> worker = ucx::Worker::Open(*runtime_);
    EXPECT_TRUE(worker.ok()) << worker.status().ToString();
    return worker.ok() ? std::move(worker).value() : nullptr;
  }

  std::unique_ptr<ScopedEnv> tls_;
  std::unique_ptr<UcxRuntime> runtime_;
};

constexpr const char* kTcp = "tcp";
constexpr const char* kSharedMemory = "posix,sysv,cma,self,tcp";

std::string TransportName(std::string_view tls) {
  return tls == kTcp ? "Tcp" : "SharedMemory";
}

// Each transport, with the node's worker spinning or asleep on its event fd.
struct RmaSetup {
  const char* tls;
  bool node_sleeps;
};

class UcxRmaTest : public ::testing::TestWithParam<RmaSetup>, protected UcxWorkers {
 protected:
  void SetUp() override { Open(GetParam().tls); }
};

class UcxEndpointTest : public ::testing::TestWithParam<const char*>, protected UcxWorkers {
 protected:
  void SetUp() override { Open(GetParam()); }
};

TEST_P(UcxRmaTest, AClientReadsAndWritesTheNodesRegionOneSided) {
  constexpr size_t kRegion = 4 << 20;
  std::vector<char> arena = Pattern('a', kRegion);
  const std::vector<char> original = arena;
  auto node_worker = OpenWorker();
  ASSERT_NE(node_worker, nullptr);
  Result<std::unique_ptr<ucx::LocalRegion>> region =
      node_worker->Register(arena.data(), arena.size());
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  const std::string node_address = node_worker->address();
  const std::string key = (*region)->packed_key();
  ProgressingWorker node(std::move(node_worker), GetParam().node_sleeps);

  auto client = OpenWorker();
  ASSERT_NE(client, nullptr);
  {
    Result<std::unique_ptr<ucx::Peer>> peer = client->Connect(node_address);
    ASSERT_TRUE(peer.ok()) << peer.status().ToString();
    Result<std::unique_ptr<ucx::RemoteRegion>> remote =
        (*peer)->Attach(key, (*region)->base(), (*region)->bytes());
    ASSERT_TRUE(remote.ok()) << remote.status().ToString();
    const auto deadline = MonotonicClock::now() + std::chrono::seconds(30);

    // A get of 1 MiB from the middle, and one of the region's last byte.
    std::vector<char> got(1 << 20);
    ASSERT_TRUE((*peer)->Get(got.data(), got.size(), **remote, 12345, deadline).ok());
    EXPECT_EQ(0, std::memcmp(got.data(), original.data() + 12345, got.size()));
    char last = 0;
    ASSERT_TRUE((*peer)->Get(&last, 1, **remote, kRegion - 1, deadline).ok());
    EXPECT_EQ(last, original[kRegion - 1]);

    // A put lands in the node's memory by the time it returns; its neighbours are untouched.
    const std::vector<char> value = Pattern('z', 300000);
    ASSERT_TRUE((*peer)->Put(value.data(), value.size(), **remote, 2 << 20, deadline).ok());
    EXPECT_EQ(0, std::memcmp(arena.data() + (2 << 20), value.data(), value.size()));
    EXPECT_EQ(arena[(2 << 20) - 1], original[(2 << 20) - 1]);
    EXPECT_EQ(arena[(2 << 20) + value.size()], original[(2 << 20) + value.size()]);

    // Outside the region: refused before anything moves, whatever the offset.
    for (uint64_t offset : {uint64_t{kRegion}, uint64_t{kRegion - 10}, ~uint64_t{0} - 5}) {
      Status out = (*peer)->Get(got.data(), 64, **remote, offset, deadline);
      EXPECT_EQ(out.code(), StatusCode::kInvalidArgument) << offset;
      EXPECT_THAT(out.message(), HasSubstr("outside the peer's region"));
      Status in = (*peer)->Put(value.data(), 64, **remote, offset, deadline);
      EXPECT_EQ(in.code(), StatusCode::kInvalidArgument) << offset;
    }
    EXPECT_EQ(0, std::memcmp(arena.data(), original.data(), 2 << 20));

    // Many at once: posted together, each with its own outcome; one outside the region fails
    // alone, an empty one is done at once.
    std::vector<std::vector<char>> values;
    std::vector<ucx::Peer::Transfer> puts;
    for (int i = 0; i < 8; ++i) {
      values.push_back(Pattern(static_cast<char>('A' + i), 100000 + i));
      puts.push_back({values.back().data(), values.back().size(),
                      (3 << 20) + static_cast<uint64_t>(i) * 120000, Status::Ok()});
    }
    puts.push_back({values[0].data(), 64, kRegion - 10, Status::Ok()});
    puts.push_back({nullptr, 0, 0, Status::Ok()});
    (*peer)->PutAll(puts, **remote, deadline);
    for (size_t i = 0; i < 8; ++i) {
      ASSERT_TRUE(puts[i].status.ok()) << i << ": " << puts[i].status.ToString();
      EXPECT_EQ(0, std::memcmp(arena.data() + puts[i].offset, values[i].data(), values[i].size()));
    }
    EXPECT_EQ(puts[8].status.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(puts[9].status.ok());
    std::vector<std::vector<char>> back;
    std::vector<ucx::Peer::Transfer> gets;
    for (size_t i = 0; i < 8; ++i) {
      back.emplace_back(values[i].size());
      gets.push_back({back.back().data(), back.back().size(), puts[i].offset, Status::Ok()});
    }
    gets.push_back({got.data(), 64, ~uint64_t{0} - 5, Status::Ok()});
    (*peer)->GetAll(gets, **remote, deadline);
    for (size_t i = 0; i < 8; ++i) {
      ASSERT_TRUE(gets[i].status.ok()) << i << ": " << gets[i].status.ToString();
      EXPECT_EQ(back[i], values[i]);
    }
    EXPECT_EQ(gets[8].status.code(), StatusCode::kInvalidArgument);
  }
  // A node sleeping on its event fd slept between the calls, and was woken for each.
  if (GetParam().node_sleeps) {
    EXPECT_GT(node.sleeps(), 0);
  }
}

// A node that never progresses its worker (hung, or stopped): an operation the transport has
// to emulate with the target's help cannot complete, so at its deadline the endpoint is closed
// by force, the call returns Timeout, and the endpoint refuses every later call.
TEST_P(UcxEndpointTest, AnOperationPastItsDeadlineClosesTheEndpoint) {
  std::vector<char> arena(1 << 20, 'n');
  auto node = OpenWorker();
  ASSERT_NE(node, nullptr);
  Result<std::unique_ptr<ucx::LocalRegion>> region = node->Register(arena.data(), arena.size());
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  auto client = OpenWorker();
  ASSERT_NE(client, nullptr);
  Result<std::unique_ptr<ucx::Peer>> peer = client->Connect(node->address());
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  Result<std::unique_ptr<ucx::RemoteRegion>> remote =
      (*peer)->Attach((*region)->packed_key(), (*region)->base(), (*region)->bytes());
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();

  std::vector<char> got(arena.size(), 'c');
  Status late = (*peer)->Get(got.data(), got.size(), **remote, 0,
                             MonotonicClock::now() + std::chrono::milliseconds(200));
  if (late.ok()) {
    // This transport moved the bytes without the target's worker (real one-sided access).
    EXPECT_EQ(got, arena);
    GTEST_SKIP() << GetParam() << ": the get needed no progress on the node";
  }
  EXPECT_EQ(late.code(), StatusCode::kTimeout) << late.ToString();
  Status after = (*peer)->Get(got.data(), 64, **remote, 0, MonotonicClock::now() + 1s);
  EXPECT_EQ(after.code(), StatusCode::kUnavailable) << after.ToString();
  EXPECT_THAT(after.message(), HasSubstr("closed after an operation timed out"));
  // Progressing the node now delivers nothing into the caller's buffer any more.
  for (int i = 0; i < 100; ++i)
    node->Progress();
  EXPECT_EQ(std::count(got.begin(), got.end(), 'n'), 0);
}

TEST_P(UcxEndpointTest, BadArgumentsAreRefused) {
  auto worker = OpenWorker();
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->Register(nullptr, 64).status().code(), StatusCode::kInvalidArgument);
  char byte = 0;
  EXPECT_EQ(worker->Register(&byte, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(worker->Connect("").status().code(), StatusCode::kInvalidArgument);
  std::vector<char> memory(4096);
  Result<std::unique_ptr<ucx::LocalRegion>> region = worker->Register(memory.data(), memory.size());
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  Result<std::unique_ptr<ucx::Peer>> self = worker->Connect(worker->address());
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  const std::string& key = (*region)->packed_key();
  EXPECT_EQ((*self)->Attach("", (*region)->base(), 64).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*self)->Attach(key, (*region)->base(), 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*self)->Attach(key, ~uint64_t{0} - 10, 64).status().code(),
            StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxRmaTest,
                         ::testing::Values(RmaSetup{kTcp, false}, RmaSetup{kTcp, true},
                                           RmaSetup{kSharedMemory, false},
                                           RmaSetup{kSharedMemory, true}),
                         [](const ::testing::TestParamInfo<RmaSetup>& setup) {
                           return TransportName(setup.param.tls) +
                                  (setup.param.node_sleeps ? "NodeSleeps" : "NodeSpins");
                         });
INSTANTIATE_TEST_SUITE_P(Transports, UcxEndpointTest, ::testing::Values(kTcp, kSharedMemory),
                         [](const ::testing::TestParamInfo<const char*>& tls) {
                           return TransportName(tls.param);
                         });

// Without a transport that detects a peer's failure no call could be bounded: refused.
TEST(UcxRma, AnEndpointWithoutPeerFailureDetectionIsRefused) {
  if (UcxBuildApiVersion().empty()) GTEST_SKIP() << "this build has no UCX";
  if (std::string(kHostUcp).empty()) GTEST_SKIP() << "no libucp for this target at build time";
  ScopedEnv tls("UCX_TLS", "posix,sysv,cma,self");
  auto runtime = OpenUcxRuntime(kHostUcp);
  ASSERT_TRUE(runtime->usable()) << runtime->reason();
  Result<std::unique_ptr<ucx::Worker>> node = ucx::Worker::Open(*runtime);
  Result<std::unique_ptr<ucx::Worker>> client = ucx::Worker::Open(*runtime);
  ASSERT_TRUE(node.ok() && client.ok());
  Result<std::unique_ptr<ucx::Peer>> peer = (*client)->Connect((*node)->address());
  EXPECT_EQ(peer.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(peer.status().message(), HasSubstr("detects a peer's failure"));
}

TEST(UcxRma, AWorkerNeedsAUsableUcx) {
  auto absent = OpenUcxRuntime("/nonexistent/libucp.so.0");
  Result<std::unique_ptr<ucx::Worker>> worker = ucx::Worker::Open(*absent);
  EXPECT_EQ(worker.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(worker.status().message(), HasSubstr("a UCX worker needs a usable UCX; "));
}

}  // namespace
}  // namespace kvport

// SPDX-License-Identifier: Apache-2.0
#include "net/output_queue.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loopback_pair.h"
#include "net/event_loop.h"

namespace kvport::net {
namespace {

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>(seed + i * 31 % 251);
  return s;
}

// Reads exactly n bytes from a blocking socket.
std::string ReadAll(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out.data() + got, n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

TEST(OutputQueueTest, TinySocketBufferForcesPartialWritesThatResumeInOrder) {
  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  LoopbackPair pair = MakeLoopbackPair(**listener);
  // Only the sender's buffer is shrunk: a tiny receive window as well makes loopback TCP crawl
  // (delayed ACKs), and the sender side alone already forces many partial writes.
  ASSERT_TRUE(SetSendBufferSize(pair.server.fd(), 4096).ok());

  // Owned header bytes, then large borrowed ranges, like an MGET response: more than the
  // socket's send and receive buffers together, so the first write must stop short.
  std::vector<std::string> values = {Pattern(400 * 1024, 'a'), Pattern(1, 'b'),
                                     Pattern(600 * 1024, 'c')};
  std::vector<std::weak_ptr<const void>> pins;
  OutputQueue queue;
  std::string expected = "HEADER";
  queue.Append("HEADER");
  for (const std::string& v : values) {
    auto pin = std::make_shared<int>(0);
    pins.push_back(pin);
    queue.AppendBorrowed(v.data(), v.size(), pin);
    expected += v;
  }
  queue.Append("");  // ignored
  EXPECT_EQ(queue.bytes(), expected.size());

  // First write, nobody reading: the socket fills and the queue keeps the rest and its pins.
  auto first = queue.WriteTo(pair.server);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->would_block);
  EXPECT_GT(queue.bytes(), 0u);
  EXPECT_EQ(queue.bytes(), expected.size() - first->bytes);
  EXPECT_FALSE(pins.back().expired());

  std::string received;
  std::thread reader([&] { received = ReadAll(pair.client.fd(), expected.size()); });
  size_t partial_writes = 1;
  while (!queue.empty()) {
    pollfd p{pair.server.fd(), POLLOUT, 0};
    ASSERT_GE(::poll(&p, 1, -1), 0);
    auto r = queue.WriteTo(pair.server);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ++partial_writes;
    // A pin is released once its range is sent, and not before.
    size_t sent = expected.size() - queue.bytes();
    size_t end = 6;
    for (size_t i = 0; i < values.size(); ++i) {
      end += values[i].size();
      EXPECT_EQ(pins[i].expired(), sent >= end) << "value " << i << " sent " << sent;
    }
  }
  reader.join();
  EXPECT_GT(partial_writes, 2u);
  EXPECT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected);
}

TEST(OutputQueueTest, WriteToAClosedPeerIsAnErrorAndClearReleasesPins) {
  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  LoopbackPair pair = MakeLoopbackPair(**listener);
  pair.client.Close();
  std::string big = Pattern(4 << 20, 'z');
  auto pin = std::make_shared<int>(1);
  std::weak_ptr<int> watch = pin;
  OutputQueue queue;
  queue.AppendBorrowed(big.data(), big.size(), std::move(pin));
  // The first write may succeed into the buffer; a later one sees the reset. Bounded loop.
  bool failed = false;
  for (int i = 0; i < 1000 && !failed; ++i) {
    auto r = queue.WriteTo(pair.server);
    failed = !r.ok();
    if (!failed && queue.empty()) break;
    if (!failed) {
      pollfd p{pair.server.fd(), POLLOUT, 0};
      ::poll(&p, 1, 1000);
    }
  }
  EXPECT_TRUE(failed);
  EXPECT_FALSE(watch.expired());
  queue.Clear();
  EXPECT_TRUE(watch.expired());
  EXPECT_TRUE(queue.empty());
}

// Backpressure limits what a queue costs, not only the bytes it still has to send: many small
// segments cost their bookkeeping, owned bytes their allocation, borrowed ranges their pinned
// bytes; a segment's cost goes when it has been written.
TEST(OutputQueueTest, MemoryCountsBookkeepingAllocationAndPinnedBytes) {
  OutputQueue queue;
  EXPECT_EQ(queue.memory_bytes(), 0u);
  std::string head;
  head.reserve(1000);
  head = "HEAD";
  const size_t head_capacity = head.capacity();
  queue.Append(std::move(head));
  EXPECT_EQ(queue.bytes(), 4u);
  EXPECT_EQ(queue.memory_bytes(), OutputQueue::kSegmentOverhead + head_capacity);
  std::string value(10000, 'v');
  auto pin = std::make_shared<int>(1);
  for (int i = 0; i < 100; ++i)
    queue.AppendBorrowed(value.data(), 1, pin);
  EXPECT_EQ(queue.bytes(), 104u);
  EXPECT_EQ(queue.memory_bytes(),
            OutputQueue::kSegmentOverhead + head_capacity +
                100 * (OutputQueue::kSegmentOverhead + OutputQueue::kKeepAliveOverhead + 1));

  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  LoopbackPair pair = MakeLoopbackPair(**listener);
  auto r = queue.WriteTo(pair.server);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.memory_bytes(), 0u);
  queue.AppendBorrowed(value.data(), value.size(), pin);
  EXPECT_EQ(queue.memory_bytes(),
            OutputQueue::kSegmentOverhead + OutputQueue::kKeepAliveOverhead + value.size());
  // Heap and pinned bytes apart: the node-wide cap counts only the heap.
  EXPECT_EQ(queue.heap_bytes(), OutputQueue::kSegmentOverhead + OutputQueue::kKeepAliveOverhead);
  EXPECT_EQ(queue.borrowed_bytes(), value.size());
  queue.Clear();
  EXPECT_EQ(queue.memory_bytes(), 0u);
  EXPECT_EQ(queue.heap_bytes(), 0u);
  EXPECT_EQ(queue.borrowed_bytes(), 0u);
}

// A write budget stops WriteTo once that many bytes are written, though the socket would take
// more (what lets an I/O loop serve its other connections between two slices of a large
// answer); the rest goes out on the next call.
TEST(OutputQueueTest, AWriteBudgetStopsTheWriteWhileTheSocketHasRoom) {
  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  LoopbackPair pair = MakeLoopbackPair(**listener);
  // The socket takes what its buffers hold, not only the listener's low-water mark of unsent
  // bytes past the peer's window.
  ASSERT_TRUE(SetSendBufferSize(pair.server.fd(), 1 << 20).ok());
  ASSERT_TRUE(SetNotSentLowWater(pair.server.fd(), 1 << 20).ok());
  // 200 segments of 1 KiB: more than one writev takes (64 segments), far less than the socket
  // buffers hold.
  const std::string value = Pattern(200 * 1024, 'q');
  auto pin = std::make_shared<int>(0);
  OutputQueue queue;
  for (size_t i = 0; i < 200; ++i)
    queue.AppendBorrowed(value.data() + i * 1024, 1024, pin);
  auto r = queue.WriteTo(pair.server, /*budget=*/1);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->bytes, 1u);
  EXPECT_FALSE(r->would_block);
  EXPECT_FALSE(queue.empty());
  EXPECT_EQ(queue.bytes(), value.size() - r->bytes);
  r = queue.WriteTo(pair.server);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(ReadAll(pair.client.fd(), value.size()), value);
}

// The loop side of backpressure: a writer waits for EPOLLOUT instead of spinning. The peer
// starts reading only after the first wakeup left bytes queued (the socket was full), so the
// rest can only go out on later wakeups, however the threads are scheduled.
class QueueWriter : public EventHandler {
 public:
  QueueWriter(EventLoop* loop, Stream* stream, OutputQueue* queue, std::function<void()> first_full)
      : loop_(loop), stream_(stream), queue_(queue), first_full_(std::move(first_full)) {}
  void OnEvents(uint32_t events) override {
    EXPECT_TRUE(events & EPOLLOUT);
    ++wakeups;
    auto r = queue_->WriteTo(*stream_);
    ASSERT_TRUE(r.ok());
    if (queue_->empty()) {
      loop_->Unwatch(stream_->fd());
      loop_->Stop();
    } else if (first_full_) {
      std::exchange(first_full_, nullptr)();
    }
  }
  int wakeups = 0;

 private:
  EventLoop* loop_;
  Stream* stream_;
  OutputQueue* queue_;
  std::function<void()> first_full_;
};

TEST(OutputQueueTest, EventLoopDrivesAWriteThatNeedsManyWakeups) {
  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  LoopbackPair pair = MakeLoopbackPair(**listener);
  ASSERT_TRUE(SetSendBufferSize(pair.server.fd(), 4096).ok());
  // More than the kernel takes before anyone reads (the send buffer plus the peer's default
  // receive window, ~128 KiB), so the first write must leave bytes queued.
  std::string value = Pattern(2 * 1024 * 1024, 'q');
  OutputQueue queue;
  queue.AppendBorrowed(value.data(), value.size(), nullptr);
  auto loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok());
  std::string received;
  std::thread reader;
  QueueWriter writer(loop->get(), &pair.server, &queue, [&] {
    reader = std::thread([&] { received = ReadAll(pair.client.fd(), value.size()); });
  });
  ASSERT_TRUE((*loop)->Watch(pair.server.fd(), EPOLLOUT, &writer).ok());
  (*loop)->Run();
  ASSERT_TRUE(reader.joinable()) << "the first write already sent all " << value.size()
                                 << " bytes: the socket buffers are larger than the test assumes";
  reader.join();
  EXPECT_GT(writer.wakeups, 1);
  EXPECT_TRUE(received == value);
}

}  // namespace
}  // namespace kvport::net

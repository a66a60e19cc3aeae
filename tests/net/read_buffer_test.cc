// SPDX-License-Identifier: Apache-2.0
#include "net/read_buffer.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>

namespace kvport::net {
namespace {

struct Pipe {
  Stream reader;  // non-blocking
  Socket writer;  // blocking
};

Pipe MakePipe() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Pipe p{Stream(Socket(fds[0])), Socket(fds[1])};
  EXPECT_TRUE(SetNonBlocking(p.reader.fd()).ok());
  return p;
}

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    ASSERT_GT(n, 0);
    done += static_cast<size_t>(n);
  }
}

// Bytes the kernel still holds for the reader.
size_t InSocket(int fd) {
  Result<IoProgress> r = Readable(fd);
  EXPECT_TRUE(r.ok());
  return r.ok() ? r->bytes : 0;
}

// Read-ahead (net/stream.h): one readv takes what the socket holds; the reads after it are
// served from what was kept, and the bytes come out in order, whatever the reads ask for.
TEST(StreamReadAheadTest, OneReadTakesTheSocketsBytesAndLaterReadsAreServedFromThem) {
  Pipe p = MakePipe();
  p.reader.EnableReadAhead(64);
  WriteAll(p.writer.fd(), "HEAD" + std::string("descriptor") + std::string(20, 'v'));
  char head[4];
  iovec iov{head, sizeof(head)};
  Result<IoProgress> r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 4u);
  EXPECT_EQ(std::string(head, 4), "HEAD");
  EXPECT_EQ(InSocket(p.reader.fd()), 0u);  // everything came in that one readv
  EXPECT_EQ(p.reader.buffered(), 30u);
  EXPECT_EQ(p.reader.Readable()->bytes, 30u);

  // A scatter read across two buffers, then the rest.
  char a[6], b[6];
  iovec two[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
  r = p.reader.ReadV(two, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 12u);
  EXPECT_EQ(std::string(a, 6) + std::string(b, 6), "descriptorvv");
  char rest[64];
  iov = {rest, sizeof(rest)};
  r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 18u);  // what was kept, and no more: the socket is not asked as well
  EXPECT_EQ(std::string(rest, 18), std::string(18, 'v'));
  EXPECT_EQ(p.reader.buffered(), 0u);
}

// A stream holds its read-ahead buffer only while bytes are kept in it: an idle connection (all
// it read taken) holds none, so thousands of them cost no read-ahead memory.
TEST(StreamReadAheadTest, TheBufferIsHeldOnlyWhileItKeepsBytes) {
  Pipe p = MakePipe();
  p.reader.EnableReadAhead(64);
  EXPECT_EQ(p.reader.read_ahead_held(), 0u);  // nothing read yet
  WriteAll(p.writer.fd(), "HEAD" + std::string(20, 'v'));
  char head[4];
  iovec iov{head, sizeof(head)};
  ASSERT_TRUE(p.reader.ReadV(&iov, 1).ok());
  EXPECT_EQ(p.reader.buffered(), 20u);
  EXPECT_EQ(p.reader.read_ahead_held(), 64u);  // the 20 bytes kept
  char rest[20];
  iov = {rest, sizeof(rest)};
  Result<IoProgress> r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 20u);
  EXPECT_EQ(std::string(rest, 20), std::string(20, 'v'));
  EXPECT_EQ(p.reader.read_ahead_held(), 0u);  // emptied: given back

  // A read that brings only what the caller asked for keeps nothing either.
  WriteAll(p.writer.fd(), "HEAD");
  p.reader.SocketReadable();
  iov = {head, sizeof(head)};
  r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 4u);
  EXPECT_EQ(p.reader.read_ahead_held(), 0u);
}

// A readv that filled the caller's buffer but not the read-ahead emptied the socket: until epoll
// says it is readable again (SocketReadable), reads answer would_block without asking it (once
// what was read ahead is taken); then they take what came meanwhile.
TEST(StreamReadAheadTest, AfterTheSocketRanDryItIsAskedAgainOnlyOnceReportedReadable) {
  Pipe p = MakePipe();
  p.reader.EnableReadAhead(64);
  WriteAll(p.writer.fd(), "abc");
  char buf[8];
  iovec two{buf, 2};
  Result<IoProgress> r = p.reader.ReadV(&two, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 2u);
  WriteAll(p.writer.fd(), "defg");
  iovec iov{buf, sizeof(buf)};
  r = p.reader.ReadV(&iov, 1);  // what was read ahead
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 1u);
  EXPECT_EQ(buf[0], 'c');
  r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 0u);
  EXPECT_TRUE(r->would_block);
  EXPECT_TRUE(p.reader.Readable()->would_block);
  EXPECT_EQ(InSocket(p.reader.fd()), 4u);  // still in the kernel
  p.reader.SocketReadable();
  r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 4u);
  EXPECT_EQ(std::string(buf, 4), "defg");
  // The peer closes: once reported, the end is read as the end.
  p.writer.Close();
  p.reader.SocketReadable();
  r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->eof);
}

// A readv short of the caller's own buffers (a large value still streaming in) leaves the next
// read to ask the socket at once, as a plain stream's would.
TEST(StreamReadAheadTest, AReadShortOfTheCallersBuffersLeavesTheSocketToBeAskedAgain) {
  Pipe p = MakePipe();
  p.reader.EnableReadAhead(64);
  WriteAll(p.writer.fd(), "abc");
  char buf[8];
  iovec iov{buf, sizeof(buf)};
  ASSERT_EQ(p.reader.ReadV(&iov, 1)->bytes, 3u);
  WriteAll(p.writer.fd(), "defg");
  Result<IoProgress> r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 4u);
  EXPECT_EQ(std::string(buf, 4), "defg");
}

// A read that filled the caller's buffers and all of the read-ahead did not empty the socket:
// the next read asks it again at once.
TEST(StreamReadAheadTest, AFullReadLeavesTheSocketToBeAskedAgain) {
  Pipe p = MakePipe();
  p.reader.EnableReadAhead(8);
  WriteAll(p.writer.fd(), std::string(4, 'h') + std::string(8, 'k') + std::string(5, 'n'));
  char buf[4];
  iovec iov{buf, sizeof(buf)};
  ASSERT_EQ(p.reader.ReadV(&iov, 1)->bytes, 4u);
  EXPECT_EQ(p.reader.buffered(), 8u);
  // What a read would find: answered from what is kept when that covers what is wanted, else
  // with the socket's too (a large value's reservation grows by all that has arrived).
  EXPECT_EQ(p.reader.Readable(4)->bytes, 8u);
  EXPECT_EQ(p.reader.Readable(100)->bytes, 13u);
  char big[32];
  iov = {big, sizeof(big)};
  ASSERT_EQ(p.reader.ReadV(&iov, 1)->bytes, 8u);
  Result<IoProgress> r = p.reader.ReadV(&iov, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 5u);
  EXPECT_EQ(std::string(big, 5), std::string(5, 'n'));
}

TEST(ReadBufferTest, FillToNeverReadsPastTheTarget) {
  Pipe p = MakePipe();
  WriteAll(p.writer.fd(), "HEADERpayload");
  ReadBuffer buf;
  auto r = buf.FillTo(p.reader, 6);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 6u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buf.data()), buf.size()), "HEADER");
  // The payload is still in the socket for a ScatterReader.
  char rest[16];
  iovec iov{rest, sizeof(rest)};
  auto rr = ReadV(p.reader.fd(), &iov, 1);
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(std::string(rest, rr->bytes), "payload");
}

// A peer's claim is not an allocation: asking for 16 MiB while 100 bytes arrived holds about
// 4 KiB, and the buffer grows only as the bytes come (at most twice what arrived).
TEST(ReadBufferTest, MemoryGrowsWithTheBytesThatArriveNotWithTheTarget) {
  Pipe p = MakePipe();
  ReadBuffer buf;
  constexpr size_t kClaim = size_t{16} << 20;
  WriteAll(p.writer.fd(), std::string(100, 'h'));
  auto r = buf.FillTo(p.reader, kClaim);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->would_block);
  EXPECT_EQ(buf.size(), 100u);
  EXPECT_LE(buf.allocated_bytes(), 4096u);
  const std::string more(50000, 'd');
  std::thread writer([&] { WriteAll(p.writer.fd(), more); });
  while (buf.size() < 100 + more.size()) {
    ASSERT_TRUE(buf.FillTo(p.reader, kClaim).ok());
    ASSERT_LE(buf.allocated_bytes(), std::max<size_t>(4096, 2 * buf.size()));
  }
  writer.join();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buf.data()) + 100, more.size()), more);
  // A small target is never over-allocated either.
  ReadBuffer header;
  WriteAll(p.writer.fd(), std::string(32, 'x'));
  ASSERT_TRUE(header.FillTo(p.reader, 32).ok());
  EXPECT_EQ(header.size(), 32u);
  EXPECT_EQ(header.allocated_bytes(), 32u);
}

TEST(ReadBufferTest, FillToResumesAcrossWouldBlockAndReportsEof) {
  Pipe p = MakePipe();
  ReadBuffer buf;
  WriteAll(p.writer.fd(), "abc");
  auto r1 = buf.FillTo(p.reader, 8);
  ASSERT_TRUE(r1.ok());
  EXPECT_TRUE(r1->would_block);
  EXPECT_EQ(buf.size(), 3u);
  WriteAll(p.writer.fd(), "defgh");
  auto r2 = buf.FillTo(p.reader, 8);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(buf.size(), 8u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buf.data()), 8), "abcdefgh");
  p.writer.Close();
  auto r3 = buf.FillTo(p.reader, 9);
  ASSERT_TRUE(r3.ok());
  EXPECT_TRUE(r3->eof);
  buf.Clear();
  EXPECT_EQ(buf.size(), 0u);
}

TEST(ScatterReaderTest, FillsRangesInOrderAndDiscardsLongRuns) {
  Pipe p = MakePipe();
  // Discard runs longer than the 64 KiB scratch buffer, between kept ranges.
  std::string a(1000, 'A'), junk1(200000, 'x'), b(70000, 'B'), junk2(5, 'y'), c(3, 'C');
  std::string stream = a + junk1 + b + junk2 + c;
  std::thread w([&] { WriteAll(p.writer.fd(), stream); });
  std::string got_a(a.size(), '\0'), got_b(b.size(), '\0'), got_c(c.size(), '\0');
  ScatterReader reader;
  reader.Add(got_a.data(), got_a.size());
  reader.AddDiscard(junk1.size());
  reader.Add(got_b.data(), got_b.size());
  reader.AddDiscard(junk2.size());
  reader.Add(got_c.data(), got_c.size());
  EXPECT_EQ(reader.remaining(), stream.size());
  size_t last_completed = 0;
  for (int i = 0; i < 10000000 && !reader.done(); ++i) {
    auto r = reader.ReadFrom(p.reader);
    ASSERT_TRUE(r.ok());
    ASSERT_FALSE(r->eof);
    EXPECT_GE(reader.completed_ranges(), last_completed);
    last_completed = reader.completed_ranges();
  }
  w.join();
  ASSERT_TRUE(reader.done());
  EXPECT_EQ(reader.completed_ranges(), 5u);
  EXPECT_TRUE(got_a == a);
  EXPECT_TRUE(got_b == b);
  EXPECT_TRUE(got_c == c);
  // Nothing beyond the ranges was consumed.
  WriteAll(p.writer.fd(), "next");
  char next[8];
  iovec iov{next, sizeof(next)};
  auto rr = ReadV(p.reader.fd(), &iov, 1);
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(std::string(next, rr->bytes), "next");
}

TEST(ScatterReaderTest, ReportsEofWithRangesUnfilled) {
  Pipe p = MakePipe();
  WriteAll(p.writer.fd(), "12");
  p.writer.Close();
  char dst[4];
  ScatterReader reader;
  reader.Add(dst, sizeof(dst));
  auto r = reader.ReadFrom(p.reader);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->eof);
  EXPECT_EQ(reader.remaining(), 2u);
  EXPECT_EQ(reader.completed_ranges(), 0u);
}

}  // namespace
}  // namespace kvport::net

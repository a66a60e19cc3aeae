// SPDX-License-Identifier: Apache-2.0
// The Python-driven peers' C++ side (bench/peer_driver.h): finding the make targets' venvs and
// reading what a driver reports. The driver here is a stand-in (a shell script in place of the
// venv's Python, printing a result the test wrote), so the parsing and every failure path run
// without Mooncake or LMCache; the real drivers against the released ones run in
// make test-engines (scripts/peers-check). Execs a child, so labelled needs-exec.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>

#include "bench/bench_matrix.h"
#include "bench/bench_report.h"
#include "bench/bench_run.h"
#include "bench/peer_driver.h"

namespace kvport::bench {
namespace {

// A peers directory whose "python" prints `result` and exits with `exit_code`.
class FakePeers {
 public:
  // `before`: shell commands the stand-in runs before printing the result.
  FakePeers(const std::string& result, int exit_code = 0, const std::string& before = "") {
    char dir_template[] = "/tmp/kvport-peers-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    ::mkdir((dir_ + "/venv").c_str(), 0700);
    ::mkdir((dir_ + "/venv/bin").c_str(), 0700);
    std::ofstream(dir_ + "/result.json") << result;
    std::ofstream(dir_ + "/mooncake_bench.py") << "# stand-in\n";
    const std::string python = dir_ + "/venv/bin/python";
    std::ofstream(python) << "#!/bin/sh\n"
                          << before << "\ncat \"$(dirname \"$0\")/../../result.json\"\nexit "
                          << exit_code << "\n";
    ::chmod(python.c_str(), 0700);
  }
  ~FakePeers() { std::system(("rm -rf " + dir_).c_str()); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

BenchOptions SmallShape() {
  BenchOptions o;
  o.value_bytes = 4096;
  o.batch = 2;
  o.count = 4;
  return o;
}

TEST(PeerDriverTest, WithoutTheMakeTargetsAPeerIsNotFoundSayingHowToInstall) {
  Result<PeerDriver> peer = FindPeerDriver("mooncake", "/nonexistent/peers");
  ASSERT_FALSE(peer.ok());
  EXPECT_EQ(peer.status().code(), StatusCode::kNotFound);
  EXPECT_NE(peer.status().message().find("make peers"), std::string::npos);
  peer = FindPeerDriver("lmcache-server", "/nonexistent/peers");
  ASSERT_FALSE(peer.ok());
  EXPECT_NE(peer.status().message().find("make engines peers"), std::string::npos);
  EXPECT_EQ(FindPeerDriver("redis", "/nonexistent/peers").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PeerDriverTest, TheDriversPhasesBecomePhaseResults) {
  FakePeers peers(R"({"system": "mooncake", "version": "0.3.13.post1", "phases": [
      {"op": "put", "calls": 4, "keys": 8, "bytes": 32768, "failed_keys": 0, "seconds": 0.5,
       "latency_ns": [1000, 2000, 3000, 4000]},
      {"op": "get", "calls": 4, "keys": 8, "bytes": 32768, "failed_keys": 1, "seconds": 0.25,
       "latency_ns": [500, 600, 700, 800]}], "note": "n"})");
  Result<PeerDriver> peer = FindPeerDriver("mooncake", peers.dir());
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  Result<std::vector<PhaseResult>> phases = RunPeerDriver(*peer, SmallShape(), 1 << 20);
  ASSERT_TRUE(phases.ok()) << phases.status().ToString();
  ASSERT_EQ(phases->size(), 2u);
  const PhaseResult& put = (*phases)[0];
  EXPECT_EQ(put.system, "mooncake");
  EXPECT_EQ(put.variant, "0.3.13.post1");
  EXPECT_EQ(put.op, Op::kPut);
  EXPECT_EQ(put.calls, 4u);
  EXPECT_EQ(put.bytes, 32768u);
  EXPECT_EQ(put.latency.count(), 4u);
  EXPECT_DOUBLE_EQ(put.gb_per_second(), 32768 / 0.5 / 1e9);
  EXPECT_EQ((*phases)[1].op, Op::kGet);
  EXPECT_EQ((*phases)[1].failed_keys, 1u);
}

TEST(PeerDriverTest, TheDriversReasonForNotRunningIsTheError) {
  FakePeers peers(R"({"error": "RuntimeError: mooncake_master did not start listening"})", 1);
  Result<std::vector<PhaseResult>> phases =
      RunPeerDriver(*FindPeerDriver("mooncake", peers.dir()), SmallShape(), 1 << 20);
  ASSERT_FALSE(phases.ok());
  EXPECT_EQ(phases.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(phases.status().message().find("mooncake_master did not start"), std::string::npos);
}

TEST(PeerDriverTest, NoResultOrAMalformedOneIsAnError) {
  {
    FakePeers peers("Traceback (most recent call last): ...", 1);
    Result<std::vector<PhaseResult>> phases =
        RunPeerDriver(*FindPeerDriver("mooncake", peers.dir()), SmallShape(), 1 << 20);
    ASSERT_FALSE(phases.ok());
    EXPECT_NE(phases.status().message().find("printed no result (exit status 1)"),
              std::string::npos)
        << phases.status().ToString();
  }
  {
    FakePeers peers(R"({"phases": [{"op": "scan", "calls": 1}]})");
    EXPECT_EQ(RunPeerDriver(*FindPeerDriver("mooncake", peers.dir()), SmallShape(), 1 << 20)
                  .status()
                  .code(),
              StatusCode::kCorruption);
  }
  {
    FakePeers peers(R"({"phases": [{"op": "put", "calls": "four"}]})");
    EXPECT_EQ(RunPeerDriver(*FindPeerDriver("mooncake", peers.dir()), SmallShape(), 1 << 20)
                  .status()
                  .code(),
              StatusCode::kCorruption);
  }
}

// The matrix puts the peer's phases beside each shape's TCP row, with kvport's ratio to them.
TEST(PeerDriverTest, TheMatrixHasAPeerTableBesideItsTcpRows) {
  FakePeers peers(R"({"version": "v", "phases": [
      {"op": "put", "calls": 2, "keys": 4, "bytes": 16384, "failed_keys": 0, "seconds": 1.0,
       "latency_ns": [1000, 2000]},
      {"op": "get", "calls": 2, "keys": 4, "bytes": 16384, "failed_keys": 0, "seconds": 2.0,
       "latency_ns": [1000, 2000]}]})");
  MatrixOptions options;
  options.value_sizes = {4096};
  options.batches = {2};
  options.connections = {1};
  options.transport = TransportChoice::kTcp;
  options.count = 4;
  options.max_seconds = 5;
  options.socket_baseline = false;
  options.python_peers = {"mooncake"};
  options.peers_dir = peers.dir();
  Result<MatrixReport> report = RunMatrix(options, nullptr);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->rows.size(), 1u);
  const MatrixRow& row = report->rows[0];
  ASSERT_EQ(row.peers.size(), 1u);
  EXPECT_EQ(row.peers[0].system, "mooncake");
  EXPECT_EQ(row.peers[0].put.system, "mooncake");
  EXPECT_DOUBLE_EQ(row.peers[0].get.gb_per_second(), 16384 / 2.0 / 1e9);
  ASSERT_TRUE(row.RatioToPeer("mooncake", Op::kGet).has_value());
  EXPECT_DOUBLE_EQ(*row.RatioToPeer("mooncake", Op::kGet),
                   row.get.gb_per_second() / row.peers[0].get.gb_per_second());
  EXPECT_FALSE(row.RatioToPeer("lmcache-server", Op::kGet).has_value());
  EXPECT_TRUE(report->peers_skipped.empty());
  EXPECT_NE(FormatMatrixText(*report).find("mooncake at the same shapes"), std::string::npos);

  options.peers_dir = "/nonexistent/peers";
  report = RunMatrix(options, nullptr);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->rows[0].peers.empty());
  ASSERT_EQ(report->peers_skipped.size(), 1u);
  EXPECT_NE(report->peers_skipped[0].second.find("make peers"), std::string::npos);
}

// A driver that hangs is killed at its deadline, with what it started (its process group).
TEST(PeerDriverTest, ADriverThatHangsIsKilledWithItsChildrenAtItsDeadline) {
  char pid_file_template[] = "/tmp/kvport-peer-child-XXXXXX";
  const int fd = ::mkstemp(pid_file_template);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string pid_file = pid_file_template;
  FakePeers peers("{}", 0, "sleep 300 & echo $! > " + pid_file + "\nsleep 300");
  BenchOptions shape = SmallShape();
  shape.max_seconds = 0.1;
  shape.ops = {Op::kPut};
  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<PhaseResult>> phases = RunPeerDriver(*FindPeerDriver("mooncake", peers.dir()),
                                                          shape, 1 << 20, std::chrono::seconds(1));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  ASSERT_FALSE(phases.ok());
  EXPECT_EQ(phases.status().code(), StatusCode::kTimeout) << phases.status().ToString();
  pid_t child = 0;
  std::ifstream(pid_file) >> child;
  ASSERT_GT(child, 0);
  // Killed with the group; reaped by init once orphaned, so wait until it is gone.
  bool gone = false;
  for (int i = 0; i < 2000 && !gone; ++i) {
    gone = ::kill(child, 0) != 0 && errno == ESRCH;
    if (!gone) ::usleep(5000);
  }
  EXPECT_TRUE(gone) << "the driver's child " << child << " outlived it";
  ::unlink(pid_file.c_str());
}

}  // namespace
}  // namespace kvport::bench

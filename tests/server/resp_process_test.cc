// SPDX-License-Identifier: Apache-2.0
// Real Redis clients against `kvport serve --resp` as a child process: redis-cli
// scripted through the commands, redis-benchmark (4 KiB and 1 MiB values, pipelined) with no
// error, and redis-py (tests/server/resp_redis_py.py); then the same clients over TLS
// (`redis-cli --tls`, redis-py's ssl=True) against a node with a certificate. Each client is
// Debian's (redis-tools, python3-redis; scripts/bootstrap installs them); a test whose client is
// missing is skipped. Child processes: labelled needs-exec.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "net/tls.h"
#include "support/cli_run.h"
#include "support/serve_process.h"

namespace kvport::testing {
namespace {

namespace fs = std::filesystem;

std::string Which(const std::string& tool) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
    const fs::path path = fs::path(dir) / tool;
    if (::access(path.c_str(), X_OK) == 0) return path.string();
  }
  return "";
}

class RespProcessTest : public ::testing::Test {
 protected:
  // Whether the node serves TLS (with certificates in dir_/certs).
  virtual bool tls() const { return false; }

  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kvport-resp-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::vector<std::string> args{
        "serve",  "--listen",  "127.0.0.1:0", "--unix-socket", "", "--capacity",
        "256MiB", "--threads", "2",           "--resp",        "0"};
    if (tls()) {
      ASSERT_TRUE(net::WriteTestCertificates((dir_ / "certs").string(), {}).ok());
      const fs::path config = dir_ / "node.yaml";
      std::ofstream(config) << "tls_cert_file: " << (dir_ / "certs" / "node.pem").string()
                            << "\ntls_key_file: " << (dir_ / "certs" / "node.key").string() << "\n";
      args.insert(args.begin() + 1, {"--config", config.string()});
    }
    node_ = std::make_unique<ServeProcess>(KVPORT_BINARY, args, dir_ / "serve.err");
    const std::string address = node_->WaitForLine("kvport: redis protocol on ");
    ASSERT_FALSE(address.empty()) << Slurp(dir_ / "serve.err");
    port_ = address.substr(address.rfind(':') + 1);
  }
  void TearDown() override {
    if (node_ != nullptr) {
      EXPECT_EQ(node_->Terminate(), 0) << Slurp(dir_ / "serve.err");
    }
    fs::remove_all(dir_);
  }

  // `tool ARGS` with `input` on its stdin.
  CliRun Run(const std::string& tool, const std::string& args, const std::string& input = "") {
    const fs::path in = dir_ / "stdin";
    std::ofstream(in, std::ios::binary) << input;
    return RunCli(tool, args, dir_, "timeout 120", in.string());
  }

  fs::path dir_;
  std::unique_ptr<ServeProcess> node_;
  std::string port_;
};

TEST_F(RespProcessTest, RedisCliScriptedThroughTheCommands) {
  const std::string cli = Which("redis-cli");
  if (cli.empty()) GTEST_SKIP() << "redis-cli is not installed (Debian redis-tools)";
  const std::string script =
      "PING\n"
      "ECHO hello\n"
      "SET k v1\n"
      "GET k\n"
      "SET k v2 NX\n"
      "SET k v3 XX GET\n"
      "SETEX s 100 x\n"
      "TTL s\n"
      "PSETEX p 100000 y\n"
      "PERSIST p\n"
      "PTTL p\n"
      "EXPIRE p 50\n"
      "TTL p\n"
      "MSET a 1 b 2\n"
      "MGET a b nope\n"
      "EXISTS a b nope\n"
      "STRLEN k\n"
      "GETDEL k\n"
      "DEL a\n"
      "UNLINK b\n"
      "DBSIZE\n"
      "SELECT 0\n"
      "CLIENT SETNAME cli\n"
      "CLIENT GETNAME\n"
      "CONFIG GET maxmemory\n"
      "NOSUCH x\n"
      "FLUSHDB\n"
      "DBSIZE\n";
  CliRun run = Run(cli, "-p " + port_, script);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "PONG\nhello\nOK\nv1\n\nv1\nOK\n100\nOK\n1\n-1\n1\n50\nOK\n1\n2\n\n2\n2\nv3\n1\n1\n"
            "2\nOK\nOK\ncli\nmaxmemory\n268435456\n"
            "ERR unknown command 'NOSUCH', with args beginning with: \n\nOK\n0\n");
  CliRun info = Run(cli, "-p " + port_ + " info");
  ASSERT_EQ(info.exit_code, 0);
  EXPECT_NE(info.out.find("redis_version:"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("maxmemory:268435456"), std::string::npos) << info.out;
  // RESP3 through redis-cli -3.
  CliRun hello = Run(cli, "-3 -p " + port_ + " hello 3");
  ASSERT_EQ(hello.exit_code, 0);
  EXPECT_NE(hello.out.find("proto"), std::string::npos) << hello.out;
  CliRun scan = Run(cli, "-p " + port_ + " --scan", "");
  EXPECT_EQ(scan.exit_code, 0);
}

// redis-benchmark's CSV: one "NAME","RPS",... line per test, and nothing about errors.
void ExpectBenchmarkClean(const CliRun& run) {
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const char* test : {"\"SET\"", "\"GET\"", "\"MSET (10 keys)\""}) {
    EXPECT_NE(run.out.find(test), std::string::npos) << test << " in " << run.out;
  }
  EXPECT_EQ((run.out + run.err).find("rror"), std::string::npos) << run.out << run.err;
}

TEST_F(RespProcessTest, RedisBenchmarkSmallValuesPipelined) {
  const std::string bench = Which("redis-benchmark");
  if (bench.empty()) GTEST_SKIP() << "redis-benchmark is not installed (Debian redis-tools)";
  ExpectBenchmarkClean(
      Run(bench, "-p " + port_ + " -t set,get,mset -P 16 -d 4096 -n 2000 -c 4 --csv"));
}

TEST_F(RespProcessTest, RedisBenchmarkOneMebibyteValues) {
  const std::string bench = Which("redis-benchmark");
  if (bench.empty()) GTEST_SKIP() << "redis-benchmark is not installed (Debian redis-tools)";
  ExpectBenchmarkClean(
      Run(bench, "-p " + port_ + " -t set,get,mset -P 16 -d 1048576 -n 32 -c 2 --csv"));
}

TEST_F(RespProcessTest, RedisPy) {
  const std::string python = Which("python3");
  if (python.empty()) GTEST_SKIP() << "no python3";
  // Debian's python3 (the one python3-redis installs into), not whichever is first on PATH.
  if (std::system(("'" + python + "' -c 'import redis' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "redis-py is not installed (Debian python3-redis)";
  }
  CliRun run = Run(python, std::string("'") + KVPORT_RESP_PY_SCRIPT + "' " + port_);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("redis-py: ok"), std::string::npos) << run.out << run.err;
}

class RespTlsProcessTest : public RespProcessTest {
 protected:
  bool tls() const override { return true; }
  std::string ca() const { return (dir_ / "certs" / "ca.pem").string(); }
};

// The RESP port speaks TLS with the node's certificate: redis-cli --tls verifies it with the
// CA and runs commands; a client in the clear is told the node requires TLS.
TEST_F(RespTlsProcessTest, RedisCliOverTls) {
  const std::string cli = Which("redis-cli");
  if (cli.empty()) GTEST_SKIP() << "redis-cli is not installed (Debian redis-tools)";
  CliRun run = Run(cli, "--tls --cacert '" + ca() + "' -h 127.0.0.1 -p " + port_,
                   "PING\nSET k v\nGET k\nDBSIZE\n");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out, "PONG\nOK\nv\n1\n");
  CliRun clear = Run(cli, "-h 127.0.0.1 -p " + port_ + " PING");
  EXPECT_NE((clear.out + clear.err).find("requires TLS"), std::string::npos)
      << clear.out << clear.err;
  // A certificate the client's CA did not sign: redis-cli refuses the node.
  ASSERT_TRUE(net::WriteTestCertificates((dir_ / "other").string(), {}).ok());
  CliRun other = Run(cli, "--tls --cacert '" + (dir_ / "other" / "ca.pem").string() +
                              "' -h 127.0.0.1 -p " + port_ + " PING");
  EXPECT_EQ(other.out.find("PONG"), std::string::npos) << other.out;
}

TEST_F(RespTlsProcessTest, RedisPyWithSsl) {
  const std::string python = Which("python3");
  if (python.empty()) GTEST_SKIP() << "no python3";
  if (std::system(("'" + python + "' -c 'import redis' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "redis-py is not installed (Debian python3-redis)";
  }
  CliRun run =
      Run(python, std::string("'") + KVPORT_RESP_PY_SCRIPT + "' " + port_ + " '" + ca() + "'");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("redis-py: ok"), std::string::npos) << run.out << run.err;
}

}  // namespace
}  // namespace kvport::testing

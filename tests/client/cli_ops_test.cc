// SPDX-License-Identifier: Apache-2.0
// `kvport put|get|exists|del|stat` run as a child process against an in-process node.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fake_node.h"
#include "support/cli_run.h"
#include "test_node.h"

namespace kvport {
namespace {
using kvport::testing::CliRun;
using kvport::testing::RunCli;
using kvport::testing::Slurp;

namespace fs = std::filesystem;

class CliOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = testing::StartNode(testing::SmallNodeOptions());
    ASSERT_NE(node_, nullptr);
    dir_ = fs::temp_directory_path() /
           ("kvport-cli-ops-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    url_ = "eic://" + node_->address();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void WriteFile(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }

  // Runs `kvport ARGS` through the shell, stdin from `stdin_path` if given.
  CliRun Kvport(const std::string& args, const std::string& stdin_path = "/dev/null") {
    return RunCli(KVPORT_BINARY, "--log-level warn " + args, dir_, "", stdin_path);
  }

  std::unique_ptr<Server> node_;
  fs::path dir_;
  std::string url_;
};

TEST_F(CliOpsTest, PutThenGetRoundTripsAFileByteForByte) {
  const std::vector<char> bytes = testing::Pattern(5, 1 << 20);
  std::string value(bytes.begin(), bytes.end());
  value[10] = '\0';
  value[11] = '\n';
  WriteFile(Path("in.bin"), value);

  CliRun put = Kvport("put --url " + url_ + " --ns ops blob '" + Path("in.bin") + "'");
  ASSERT_EQ(put.exit_code, 0) << put.err;
  CliRun to_file = Kvport("get --url " + url_ + " --ns ops blob '" + Path("out.bin") + "'");
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_TRUE(Slurp(Path("out.bin")) == value);
  CliRun to_stdout = Kvport("get --url " + url_ + "/ops blob");  // namespace from the URL
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
  EXPECT_TRUE(to_stdout.out == value);

  // From stdin.
  WriteFile(Path("small"), std::string("a\0b", 3));
  ASSERT_EQ(Kvport("put --url " + url_ + " small -", Path("small")).exit_code, 0);
  EXPECT_EQ(Kvport("get --url " + url_ + " small -").out, std::string("a\0b", 3));
}

// A value larger than --max-bytes (default 1 GiB) is refused before a buffer is allocated for
// it; a larger --max-bytes reads it.
TEST_F(CliOpsTest, GetRefusesAValueOverMaxBytesAndReadsItWithALargerOne) {
  const std::vector<char> bytes = testing::Pattern(6, 1 << 20);
  WriteFile(Path("in.bin"), std::string(bytes.begin(), bytes.end()));
  ASSERT_EQ(Kvport("put --url " + url_ + " blob '" + Path("in.bin") + "'").exit_code, 0);

  CliRun refused = Kvport("get --url " + url_ + " --max-bytes 512KiB blob '" + Path("out") + "'");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("TooLarge"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("more than --max-bytes 512 KiB"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(Path("out")));

  CliRun read = Kvport("get --url " + url_ + " --max-bytes 1MiB blob '" + Path("out") + "'");
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_TRUE(Slurp(Path("out")) == std::string(bytes.begin(), bytes.end()));
  EXPECT_EQ(Kvport("get --url " + url_ + " --max-bytes lots blob").exit_code, 1);
}

// A node that announces a 1 TiB value (within the limits it announced) gets a clear error, not
// an abort and not a 1 TiB allocation.
TEST_F(CliOpsTest, GetOfAHugeValueANodeAnnouncesFailsCleanly) {
  protocol::Limits limits;
  limits.max_value_bytes = uint64_t{1} << 40;
  testing::FakeNode liar([&](testing::FakeConn& conn, int) {
    testing::FakeFrame request;
    if (!conn.Hello(limits)) return;
    while (conn.Read(&request) && request.header.meta_only()) {
      protocol::MgetResponse sized;
      sized.meta_only = true;
      sized.results.push_back(protocol::MgetResult{StatusCode::kOk, "", limits.max_value_bytes});
      if (!conn.Write(testing::ResponseBytes(request.header.request_id, sized, limits))) return;
    }
  });
  CliRun get = Kvport("get --url eic://" + liar.address() + " huge '" + Path("out") + "'");
  EXPECT_EQ(get.exit_code, 1) << get.err;
  EXPECT_NE(get.err.find("1 TiB"), std::string::npos) << get.err;
  EXPECT_NE(get.err.find("--max-bytes"), std::string::npos) << get.err;
  EXPECT_FALSE(fs::exists(Path("out")));
}

TEST_F(CliOpsTest, ExistsDelAndMissingKeysReportPerKeyAndExitNonZero) {
  WriteFile(Path("v"), "value");
  ASSERT_EQ(Kvport("put --url " + url_ + " k '" + Path("v") + "'").exit_code, 0);
  CliRun exists = Kvport("exists --url " + url_ + " k nope");
  EXPECT_EQ(exists.exit_code, 1);
  EXPECT_EQ(exists.out, "k\texists\nnope\tKEY_NOT_EXIST\n");
  EXPECT_EQ(Kvport("exists --url " + url_ + " k").exit_code, 0);

  CliRun missing = Kvport("get --url " + url_ + " nope '" + Path("never") + "'");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("'nope' does not exist"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(Path("never")));  // a failed get writes no file

  CliRun del = Kvport("del --url " + url_ + " k");
  EXPECT_EQ(del.exit_code, 0) << del.err;
  EXPECT_EQ(Kvport("exists --url " + url_ + " k").exit_code, 1);
}

TEST_F(CliOpsTest, StatPrintsTheNodeCountersAsTextAndJson) {
  WriteFile(Path("v"), "12345");
  ASSERT_EQ(Kvport("put --url " + url_ + " --ns s k '" + Path("v") + "'").exit_code, 0);
  CliRun text = Kvport("stat --url " + url_);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("objects"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("namespace 's': 1 objects"), std::string::npos) << text.out;
  CliRun json = Kvport("stat --json --url " + url_);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out.front(), '{');
  // One line of compact JSON (tests/tools/cli_stat_test.cc parses it).
  EXPECT_NE(json.out.find("\"objects\":1"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("{\"name\":\"s\",\"objects\":1,\"bytes\":5}"), std::string::npos)
      << json.out;
}

TEST_F(CliOpsTest, StatOfAClusterSumsTheNodesAndListsEach) {
  std::unique_ptr<Server> second = testing::StartNode(testing::SmallNodeOptions());
  ASSERT_NE(second, nullptr);
  const std::string list = "'" + node_->address() + ";" + second->address() + "'";
  WriteFile(Path("v"), "12345");
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(
        Kvport("put --url " + list + " k" + std::to_string(i) + " '" + Path("v") + "'").exit_code,
        0);
  }
  CliRun text = Kvport("stat --url " + list);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("cluster " + node_->address() + ";" + second->address()),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("namespace '': 20 objects"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("node " + node_->address() + " at " + node_->address() + " epoch 0: "),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("node " + second->address()), std::string::npos) << text.out;
  second->Stop();
  CliRun json = Kvport("stat --json --timeout 2 --url " + list);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"nodes\":[{"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"status\":\"ok\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"status\":\"Unavailable"), std::string::npos) << json.out;
}

TEST_F(CliOpsTest, ConfigFileSuppliesUrlNamespaceAndTransport) {
  WriteFile(Path("rdma.yaml"),
            "remote_url: \"" + url_ + "\"\neic_trans_type: 2\neic_kv_ns: \"fromcfg\"\n");
  WriteFile(Path("v"), "cfg");
  CliRun put = Kvport("put --config '" + Path("rdma.yaml") + "' k '" + Path("v") + "'");
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_NE(put.out.find("namespace 'fromcfg'"), std::string::npos) << put.out;
  EXPECT_EQ(Kvport("exists --url " + url_ + " --ns fromcfg k").exit_code, 0);

  // GPUDirect on this host: refused at init with the reason, before touching the node.
  WriteFile(Path("gdr.yaml"), "remote_url: \"" + url_ + "\"\neic_trans_type: 3\n");
  CliRun gdr = Kvport("stat --config '" + Path("gdr.yaml") + "'");
  EXPECT_EQ(gdr.exit_code, 1);
  EXPECT_NE(gdr.err.find("NotSupported"), std::string::npos) << gdr.err;
  EXPECT_NE(gdr.err.find("GPUDirect"), std::string::npos) << gdr.err;

  CliRun no_node = Kvport("stat");
  EXPECT_NE(no_node.exit_code, 0);
}

}  // namespace
}  // namespace kvport

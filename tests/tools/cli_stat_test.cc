// SPDX-License-Identifier: Apache-2.0
// `kvport stat` against an in-process node whose namespace names hold newlines, NULs, terminal
// escapes and bytes that are not UTF-8: the text output escapes them (one namespace, one line,
// nothing raw), the JSON output stays valid JSON. Runs the CLI as a child process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/escape_text.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "support/cli_run.h"

namespace kvport {
namespace {
using kvport::testing::CliRun;
using kvport::testing::RunCli;
using kvport::testing::Slurp;

namespace fs = std::filesystem;
using namespace std::string_literals;

// The namespaces the node holds, one 3-byte object each.
const std::vector<std::string>& HostileNames() {
  static const std::vector<std::string> names = {
      "evil\nnamespace 'x': 999 objects, 0 bytes",  // tries to forge a line of its own
      "nul\0tail"s,                                 // a NUL must not cut the output short
      "bad\xff\xfe",                                // not UTF-8
      "esc\x1b[2J\r",                               // a terminal escape and a carriage return
      "quote' \\",                                  // the text output's quote and a backslash
      "caf\xc3\xa9",                                // valid UTF-8 passes through as it is
  };
  return names;
}

class CliStatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.capacity_bytes = uint64_t{16} << 20;
    options.threads = 1;
    Result<std::unique_ptr<Server>> server = Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    node_ = std::move(server).value();
    dir_ = fs::temp_directory_path() /
           ("kvport-cli-stat-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);

    Client client;
    ASSERT_TRUE(client.Init("cli-stat-test", node_->address()).ok());
    char value[3] = {'a', 'b', 'c'};
    for (const std::string& ns : HostileNames()) {
      IOBuffers buffers;
      buffers.Append(value, sizeof(value));
      SetOptions set;
      set.ns = ns;
      Result<BatchResult> r = client.MSet({"k"}, buffers, set);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->status, BatchCode::kSuccess) << EscapeText(ns);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliRun Kvport(const std::string& args) {
    return RunCli(KVPORT_BINARY, "--log-level warn " + args, dir_);
  }

  std::string Url() const { return "eic://" + node_->address(); }

  std::unique_ptr<Server> node_;
  fs::path dir_;
};

TEST_F(CliStatTest, TextEscapesEveryNameSoNoneCanForgeOrCutALine) {
  CliRun run = Kvport("stat --url " + Url());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& out = run.out;
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out.back(), '\n');

  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  // Every line is already clean: no control byte, no invalid UTF-8, nothing left to escape
  // but the backslashes of the escapes themselves.
  for (const std::string& line : lines) {
    std::string unescaped_backslashes = EscapeText(line);
    std::string::size_type at = 0;
    while ((at = unescaped_backslashes.find("\\\\", at)) != std::string::npos) {
      unescaped_backslashes.replace(at, 2, "\\");
      ++at;
    }
    EXPECT_EQ(unescaped_backslashes, line) << EscapeText(line);
  }
  // One line per namespace, and the forged one is not among them.
  const size_t namespace_lines =
      std::count_if(lines.begin(), lines.end(),
                    [](const std::string& l) { return l.rfind("namespace ", 0) == 0; });
  EXPECT_EQ(namespace_lines, HostileNames().size()) << EscapeText(out);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "namespace 'x': 999 objects, 0 bytes"), 0);

  const std::set<std::string> expected = {
      "namespace 'evil\\nnamespace \\'x\\': 999 objects, 0 bytes': 1 objects, 3 bytes",
      "namespace 'nul\\x00tail': 1 objects, 3 bytes",
      "namespace 'bad\\xff\\xfe': 1 objects, 3 bytes",
      "namespace 'esc\\x1b[2J\\r': 1 objects, 3 bytes",
      "namespace 'quote\\' \\\\': 1 objects, 3 bytes",
      "namespace 'caf\xc3\xa9': 1 objects, 3 bytes",
  };
  for (const std::string& line : expected) {
    EXPECT_EQ(std::count(lines.begin(), lines.end(), line), 1) << line << "\n" << EscapeText(out);
  }
}

TEST_F(CliStatTest, JsonIsValidAndKeepsEveryNameThatIsUtf8) {
  CliRun run = Kvport("stat --json --url " + Url());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_TRUE(nlohmann::json::accept(run.out)) << EscapeText(run.out);
  EXPECT_EQ(run.out.find('\n'), run.out.size() - 1);  // one line
  const nlohmann::json json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["node"], node_->address());
  EXPECT_EQ(json["counters"]["objects"], HostileNames().size());

  std::set<std::string> names;
  for (const nlohmann::json& ns : json["namespaces"]) {
    EXPECT_EQ(ns["objects"], 1);
    EXPECT_EQ(ns["bytes"], 3);
    names.insert(ns["name"].get<std::string>());
  }
  std::set<std::string> expected(HostileNames().begin(), HostileNames().end());
  // Bytes that are not UTF-8 become U+FFFD, one per byte; every other name is exact (the NUL,
  // the newline and the escape included).
  expected.erase("bad\xff\xfe");
  expected.insert("bad\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(names, expected);
}

}  // namespace
}  // namespace kvport

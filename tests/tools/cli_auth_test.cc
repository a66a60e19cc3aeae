// SPDX-License-Identifier: Apache-2.0
// Access control through the CLI, run as child processes: `kvport serve` refuses a
// non-loopback address without tokens (and says how to configure them), re-reads its tokens
// file on SIGHUP; `kvport put/get/stat` carry a token from --token-file, the config's
// token_file or $KVPORT_TOKEN; `kvport stat` warns about an insecure node.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>

#include "kvport/client.h"
#include "kvport/server.h"
#include "support/cli_run.h"

namespace kvport {
namespace {
using kvport::testing::CliRun;
using kvport::testing::RunCli;
using kvport::testing::Slurp;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kWriter[] = "writer-secret-0123456789";
constexpr char kReader[] = "reader-secret-0123456789";

class CliAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kvport-cli-auth-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path WriteFile(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::trunc) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }

  // Runs `kvport ARGS` with `env` prepended (VAR=value ...), without a config from the
  // environment.
  CliRun Kvport(const std::string& args, const std::string& env = "") {
    return RunCli(KVPORT_BINARY, args, dir_, "env -u LMCACHE_CONFIG_FILE -u KVPORT_TOKEN " + env);
  }

  static std::string Tokens(const char* writer_ns) {
    return std::string("tokens:\n") +
           "  - name: writer\n"
           "    secret: " +
           kWriter +
           "\n"
           "    read: [\"" +
           writer_ns + "\"]\n    write: [\"" + writer_ns +
           "\"]\n"
           "  - name: reader\n"
           "    secret: " +
           kReader + "\n    read: [\"*\"]\n";
  }

  fs::path dir_;
};

TEST_F(CliAuthTest, ServeRefusesANonLoopbackAddressWithoutTokens) {
  CliRun run = Kvport("serve --listen 0.0.0.0:0 --unix-socket ''");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("refusing to listen on 0.0.0.0:0 without access tokens"));
  EXPECT_THAT(run.err, HasSubstr("tokens_file"));
  EXPECT_THAT(run.err, HasSubstr("--insecure"));
}

TEST_F(CliAuthTest, ClientCommandsCarryTheTokenFromAFileTheConfigOrTheEnvironment) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.capacity_bytes = 8 << 20;
  options.threads = 1;
  options.tokens_file = WriteFile("tokens.yaml", Tokens("tenant")).string();
  Result<std::unique_ptr<Server>> node = Server::Start(options);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  const std::string url = "eic://" + (*node)->address() + "/tenant";
  const fs::path value = WriteFile("value", "hello");
  const fs::path writer_token = WriteFile("writer.token", std::string(kWriter) + "\n");

  CliRun anonymous = Kvport("put --url " + url + " k " + value.string());
  EXPECT_NE(anonymous.exit_code, 0);
  EXPECT_THAT(anonymous.err, HasSubstr("requires a token"));

  CliRun put = Kvport("put --url " + url + " --token-file " + writer_token.string() + " k " +
                      value.string());
  EXPECT_EQ(put.exit_code, 0) << put.err;

  const fs::path config =
      WriteFile("client.yaml", "remote_url: \"" + url + "\"\neic_trans_type: 1\ntoken_file: \"" +
                                   writer_token.string() + "\"\n");
  CliRun get = Kvport("get --config " + config.string() + " k -");
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(get.out, "hello");

  CliRun read_only =
      Kvport("put --url " + url + " k " + value.string(), std::string("KVPORT_TOKEN=") + kReader);
  EXPECT_NE(read_only.exit_code, 0);
  EXPECT_THAT(read_only.out + read_only.err, HasSubstr("PERMISSION_DENIED"));
  CliRun stat = Kvport("stat --url " + url, std::string("KVPORT_TOKEN=") + kReader);
  EXPECT_EQ(stat.exit_code, 0) << stat.err;
  EXPECT_THAT(stat.out, HasSubstr("auth_required"));
  EXPECT_THAT(stat.err, ::testing::Not(HasSubstr("INSECURE")));
}

TEST_F(CliAuthTest, StatWarnsAboutAnInsecureNode) {
  ServerOptions options;
  options.listen = "0.0.0.0:0";
  options.insecure = true;
  options.capacity_bytes = 8 << 20;
  options.threads = 1;
  Result<std::unique_ptr<Server>> node = Server::Start(options);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  CliRun stat = Kvport("stat --url 127.0.0.1:" + std::to_string((*node)->port()));
  EXPECT_EQ(stat.exit_code, 0) << stat.err;
  EXPECT_THAT(stat.err, HasSubstr("INSECURE"));
}

TEST_F(CliAuthTest, DoctorWarnsAboutAnInsecureNodeConfig) {
  const fs::path insecure =
      WriteFile("insecure.yaml", "listen: \"0.0.0.0:7470\"\ninsecure: true\n");
  CliRun run = Kvport("doctor --config " + insecure.string());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("insecure: true without a tokens_file"));
  const fs::path guarded = WriteFile("guarded.yaml",
                                     "listen: \"0.0.0.0:7470\"\ninsecure: true\n"
                                     "tokens_file: /etc/kvport/tokens.yaml\n");
  run = Kvport("doctor --config " + guarded.string());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("insecure")));
}

// `kvport serve` re-reads its tokens file on SIGHUP: a token added there is accepted without a
// restart, and one removed is refused.
TEST_F(CliAuthTest, ServeRereadsItsTokensFileOnSighup) {
  const fs::path tokens = WriteFile("tokens.yaml", Tokens("tenant"));
  const fs::path config = WriteFile(
      "node.yaml",
      "listen: \"127.0.0.1:0\"\nunix_socket: \"\"\ncapacity: 8MiB\nmax_value_bytes: 1MiB\n"
      "threads: 1\n"
      "tokens_file: \"" +
          tokens.string() + "\"\n");
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  const fs::path log = dir_ / "serve.log";
  if (child == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (log_fd >= 0) ::dup2(log_fd, STDERR_FILENO);
    ::unsetenv("LMCACHE_CONFIG_FILE");
    ::execl(KVPORT_BINARY, KVPORT_BINARY, "serve", "--config", config.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  // The address is the first line it prints ("kvport: serving on HOST:PORT"); each read waits
  // at most 10 s for the child.
  std::string printed;
  while (printed.find('\n') == std::string::npos) {
    pollfd readable{pipe_fds[0], POLLIN, 0};
    if (::poll(&readable, 1, 10'000) != 1) break;
    char buffer[256];
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    printed.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  std::string address;
  const auto at = printed.find("serving on ");
  if (at != std::string::npos) address = printed.substr(at + 11, printed.find('\n', at) - at - 11);
  ASSERT_FALSE(address.empty()) << "kvport serve did not start";

  auto connects = [&](const char* secret) {
    Client client;
    InitOptions init;
    init.token = secret;
    init.transport_type = 1;
    init.connect_timeout = std::chrono::seconds(2);
    return client.Init("sighup-test", address, init);
  };
  ASSERT_TRUE(connects(kReader).ok());
  // Drop the reader, add a third token.
  std::ofstream(tokens, std::ios::trunc)
      << "tokens:\n  - name: third\n    secret: third-secret-0123456789\n    read: [\"*\"]\n";
  ASSERT_EQ(::kill(child, SIGHUP), 0);
  // Tried only once the node says it has re-read the file (its log; at most 20 s): tries before
  // that would be failed authentications, and enough of them get the address backed off.
  bool reloaded = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!reloaded && std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log);
    reloaded = std::string(std::istreambuf_iterator<char>(in), {}).find("tokens reloaded") !=
               std::string::npos;
    if (!reloaded) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(reloaded) << "kvport serve did not say it re-read its tokens file";
  const Status third = connects("third-secret-0123456789");
  EXPECT_TRUE(third.ok()) << third.ToString();
  EXPECT_EQ(connects(kReader).code(), StatusCode::kPermissionDenied);

  ASSERT_EQ(::kill(child, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace kvport

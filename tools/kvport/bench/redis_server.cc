// SPDX-License-Identifier: Apache-2.0
#include "bench/redis_server.h"

#include "bench/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern char** environ;

namespace kvport::bench {
namespace {

using Clock = std::chrono::steady_clock;

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

Result<pid_t> Spawn(const std::string& executable, uint16_t port,
                    const std::vector<std::string>& extra_args) {
  const std::string port_text = std::to_string(port);
  std::vector<std::string> args = {
      executable, "--port",       port_text, "--bind",           "127.0.0.1", "--save",
      "",         "--appendonly", "no",      "--protected-mode", "no",        "--daemonize",
      "no",       "--loglevel",   "warning", "--logfile",        ""};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // stdin from /dev/null; the log (stdout, --logfile "") and stderr discarded.
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Status::FromErrno("start " + executable, rc);
  return pid;
}

bool AnswersPing(uint16_t port) {
  const timeval tv{0, 200'000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  bool ok = false;
  if (c != nullptr && c->err == 0) {
    redisSetTimeout(c, tv);
    auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS &&
         std::strcmp(reply->str, "PONG") == 0;
    if (reply != nullptr) freeReplyObject(reply);
  }
  if (c != nullptr) redisFree(c);
  return ok;
}

}  // namespace

Result<std::string> RedisServer::FindExecutable(std::string_view name_or_path) {
  const std::string name(name_or_path);
  if (name.find('/') != std::string::npos) {
    if (IsExecutableFile(name)) return name;
    return Status::NotFound(fmt::format("{} is not an executable file", name));
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string_view dir = std::string_view(dirs).substr(start, colon - start);
    const std::string candidate = fmt::format("{}/{}", dir.empty() ? "." : dir, name);
    if (IsExecutableFile(candidate)) return candidate;
    start = colon + 1;
  }
  return Status::NotFound(fmt::format(
      "{} is not installed (not found in PATH); `make bench` installs it (scripts/bootstrap "
      "redis-server), or pass --redis-server PATH",
      name));
}

Result<std::unique_ptr<RedisServer>> RedisServer::Start(
    const std::string& executable, std::chrono::milliseconds ready_timeout,
    const std::vector<std::string>& extra_args) {
  std::string last_error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    KVPORT_ASSIGN_OR_RETURN(uint16_t port, PickFreeLoopbackPort());
    KVPORT_ASSIGN_OR_RETURN(pid_t pid, Spawn(executable, port, extra_args));
    std::unique_ptr<RedisServer> server(new RedisServer(pid, port));
    const Clock::time_point deadline = Clock::now() + ready_timeout;
    while (Clock::now() < deadline) {
      int wstatus = 0;
      if (::waitpid(pid, &wstatus, WNOHANG) == pid) {
        server->pid_ = -1;  // already reaped
        last_error = WIFEXITED(wstatus) ? fmt::format("exited with status {}", WEXITSTATUS(wstatus))
                                        : fmt::format("was killed by signal {}", WTERMSIG(wstatus));
        break;
      }
      if (AnswersPing(port)) return server;
      // Polling: the child gives no other sign of being ready.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (server->pid_ > 0) {
      last_error = fmt::format("did not answer PING on 127.0.0.1:{} within {} ms", port,
                               ready_timeout.count());
      server->Stop();
    }
  }
  return Status::Unavailable(
      fmt::format("{} {} (run it by hand to see why)", executable, last_error));
}

RedisServer::~RedisServer() {
  Stop();
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  int wstatus = 0;
  while (::waitpid(pid_, &wstatus, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &wstatus, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
}

}  // namespace kvport::bench

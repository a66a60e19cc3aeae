// SPDX-License-Identifier: Apache-2.0
#include "bench/child_process.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <thread>

extern char** environ;

namespace kvport::bench {

namespace {

// Starts `args` in a process group of its own, stdin and stderr on /dev/null, stdout on
// `stdout_fd` (or /dev/null when it is -1); posix_spawn's error number, 0 on success.
int Spawn(const std::vector<std::string>& args, int stdout_fd, pid_t* pid) {
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  const int rc = ::posix_spawn(pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  return rc;
}

}  // namespace

Result<std::string> RunCapturingStdout(const std::vector<std::string>& args,
                                       std::chrono::seconds deadline, int* status) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  pid_t pid = 0;
  const int rc = Spawn(args, out[1], &pid);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return Status::FromErrno("start " + args[0], rc);
  }
  std::string text;
  char buf[65536];
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = true;
      break;
    }
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(out[0]);
  // The group goes in any case: a driver killed before its own clean-up leaves its servers.
  ::kill(-pid, SIGKILL);
  while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Status::Timeout(fmt::format("{} did not finish within {} s; it was killed",
                                       args.size() > 1 ? args[1] : args[0], deadline.count()));
  }
  return text;
}

Result<uint16_t> PickFreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno("bind 127.0.0.1:0", err);
  }
  ::close(fd);
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

Result<std::unique_ptr<BackgroundProcess>> BackgroundProcess::Start(
    const std::vector<std::string>& args) {
  pid_t pid = 0;
  const int rc = Spawn(args, -1, &pid);
  if (rc != 0) return Status::FromErrno("start " + args[0], rc);
  return std::unique_ptr<BackgroundProcess>(new BackgroundProcess(pid));
}

BackgroundProcess::~BackgroundProcess() {
  if (reaped_) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

Status BackgroundProcess::Terminate(std::chrono::milliseconds grace) {
  if (reaped_) return Status::Internal("the program was stopped already");
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done != pid_) {
    ::kill(-pid_, SIGKILL);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return Status::Timeout("did not exit within " + std::to_string(grace.count()) +
                           " ms of SIGTERM: killed");
  }
  reaped_ = true;
  ::kill(-pid_, SIGKILL);  // anything it started
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Status::Internal("exited with status " + std::to_string(status));
}

std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = ::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string file = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(file.c_str(), X_OK) == 0) return file;
  }
  return "";
}

}  // namespace kvport::bench

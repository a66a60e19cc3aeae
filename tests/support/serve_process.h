// SPDX-License-Identifier: Apache-2.0
// ServeProcess: a `kvport serve` (or any kvport subcommand) child process for the tests that
// run the real binary: stdout on a pipe (read for its start line), stderr in a file, killed
// with SIGKILL if the test does not end it. Tests that use it are labelled needs-exec.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace kvport::testing {

class ServeProcess {
 public:
  // Runs `binary ARGS...`, stderr to `err`.
  ServeProcess(const std::string& binary, const std::vector<std::string>& args,
               const std::filesystem::path& err) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) ::dup2(fd, 2);
      ::close(fds[0]);
      std::vector<char*> argv{const_cast<char*>(binary.c_str())};
      for (const std::string& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~ServeProcess() {
    if (pid_ > 0 && !reaped_) Kill();
    if (out_ >= 0) ::close(out_);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // The rest of the first stdout line starting with `prefix`; "" when the process ended or
  // printed none within 30 s (a bound on a broken build, not an expectation).
  std::string WaitForLine(const std::string& prefix) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      size_t nl;
      while ((nl = buffered_.find('\n')) != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      }
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 500) <= 0) continue;
      char chunk[512];
      const ssize_t n = ::read(out_, chunk, sizeof(chunk));
      if (n <= 0) return "";
      buffered_.append(chunk, static_cast<size_t>(n));
    }
    return "";
  }

  // Waits (at most 30 s) for the process to exit by itself; its exit code, -1 if it did not
  // exit (or died of a signal).
  int WaitExit() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  // SIGTERM, then the exit code (WaitExit).
  int Terminate() {
    ::kill(pid_, SIGTERM);
    return WaitExit();
  }

  pid_t pid() const { return pid_; }

  // kill -9: no shutdown of any kind.
  void Kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string buffered_;
};

}  // namespace kvport::testing

// SPDX-License-Identifier: Apache-2.0
#include "etcd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace kvport::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kStartTimeout = std::chrono::seconds(20);
constexpr auto kStopGrace = std::chrono::seconds(5);

// A loopback port nobody listens on now: bind port 0 and close. Another process could take it
// before etcd binds it; Launch then fails and Start retries with new ports.
Result<int> FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno("bind a free loopback port", err);
  }
  ::close(fd);
  return int(ntohs(addr.sin_port));
}

// Sends one HTTP/1.0 request to 127.0.0.1:`port` over a plain socket (so the fixture needs no
// HTTP library) and returns the whole answer, or "" when there was none.
std::string PlainRequest(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval tv{0, 500 * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
      char buffer[512];
      ssize_t n;
      while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0)
        answer.append(buffer, size_t(n));
    }
  }
  ::close(fd);
  return answer;
}

// Whether something accepts TCP connections on 127.0.0.1:`port` and answers GET /health with
// {"health":"true"}.
bool Healthy(int port) {
  return PlainRequest(port, "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
             .find("\"health\":\"true\"") != std::string::npos;
}

// POSTs `body` to etcd's gateway at `path`; Ok on a 200 answer.
Status Post(int port, const std::string& path, const std::string& body) {
  const std::string answer = PlainRequest(
      port, "POST " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  if (answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")) return Status::Ok();
  return Status::Unavailable("etcd " + path + " answered: " + answer.substr(0, 400));
}

std::string Tail(const std::string& path, size_t max_bytes = 3000) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  std::string text = all.str();
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  return text;
}

// The port of "http://127.0.0.1:P" or "127.0.0.1:P".
int PortOf(const std::string& url) {
  return std::atoi(url.substr(url.rfind(':') + 1).c_str());
}

}  // namespace

Result<std::unique_ptr<EtcdProcess>> EtcdProcess::Start(const EtcdProcessOptions& options) {
  const char* env = std::getenv("KVPORT_ETCD_BINARY");
  const std::string binary = env && *env ? env : "/usr/bin/etcd";
  if (::access(binary.c_str(), X_OK) != 0) {
    return Status::NotFound("no etcd binary at " + binary +
                            ": install Debian's etcd-server (make test's bootstrap does), or set "
                            "KVPORT_ETCD_BINARY");
  }
  // In memory when the host has /dev/shm: etcd fsyncs its log on every write, and on a disk busy
  // with a build a slow fsync delays lease renewals past the tests' 1 s leases.
  const bool in_memory = ::access("/dev/shm", W_OK | X_OK) == 0;
  char dir_template[] = "/dev/shm/kvport-etcd-XXXXXX";
  char disk_template[] = "/tmp/kvport-etcd-XXXXXX";
  char* dir = in_memory ? dir_template : disk_template;
  if (::mkdtemp(dir) == nullptr) return Status::FromErrno("mkdtemp", errno);

  std::unique_ptr<EtcdProcess> process(new EtcdProcess());
  process->options_ = options;
  process->data_dir_ = std::string(dir) + "/data";
  process->log_path_ = std::string(dir) + "/etcd.log";
  Status last;
  // A port taken between FreePort and etcd's bind makes etcd exit at once: new ports, again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    KVPORT_ASSIGN_OR_RETURN(int client_port, FreePort());
    KVPORT_ASSIGN_OR_RETURN(int peer_port, FreePort());
    if (client_port == peer_port) continue;
    process->health_port_ = client_port;
    if (!options.tls_dir.empty()) {
      // etcd's /health over TLS would need a TLS client here: ask the plain metrics listener.
      KVPORT_ASSIGN_OR_RETURN(process->health_port_, FreePort());
      if (process->health_port_ == client_port || process->health_port_ == peer_port) continue;
    }
    process->endpoint_ = "127.0.0.1:" + std::to_string(client_port);
    process->peer_url_ = "http://127.0.0.1:" + std::to_string(peer_port);
    last = process->Launch();
    if (last.ok()) return process;
    // A failed first start may leave a half-made data directory behind.
    std::error_code ec;
    std::filesystem::remove_all(process->data_dir_, ec);
  }
  return last;
}

Status EtcdProcess::Launch() {
  const char* env = std::getenv("KVPORT_ETCD_BINARY");
  const std::string binary = env && *env ? env : "/usr/bin/etcd";
  const std::string client_url = url();
  std::vector<std::string> args = {
      binary,
      "--name",
      "default",
      "--data-dir",
      data_dir_,
      "--listen-client-urls",
      client_url,
      "--advertise-client-urls",
      client_url,
      "--listen-peer-urls",
      peer_url_,
      "--initial-advertise-peer-urls",
      peer_url_,
      "--initial-cluster",
      "default=" + peer_url_,
      // Short raft intervals: a one-node cluster elects itself at once, and leases of 1 s
      // (etcd's minimum TTL is derived from the election timeout) lapse on time.
      "--heartbeat-interval",
      "10",
      "--election-timeout",
      "50",
  };
  if (!options_.tls_dir.empty()) {
    for (const std::string& arg :
         {"--cert-file=" + options_.tls_dir + "/node.pem",
          "--key-file=" + options_.tls_dir + "/node.key",
          "--listen-metrics-urls=http://127.0.0.1:" + std::to_string(health_port_)}) {
      args.push_back(arg);
    }
    if (options_.client_cert_auth) {
      args.push_back("--client-cert-auth");
      args.push_back("--trusted-ca-file=" + options_.tls_dir + "/ca.pem");
    }
  }
  if (!options_.progress_notify_interval.empty()) {
    args.push_back("--experimental-watch-progress-notify-interval=" +
                   options_.progress_notify_interval);
  }
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);

  int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::FromErrno("open " + log_path_, errno);
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(log_fd);
    return Status::FromErrno("fork", err);
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  pid_ = pid;

  const int port = health_port_;
  const auto deadline = Clock::now() + kStartTimeout;
  auto wait = std::chrono::milliseconds(5);
  while (Clock::now() < deadline) {
    int wstatus = 0;
    if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Unavailable("etcd exited at start (status " + std::to_string(wstatus) +
                                 "); its log " + log_path_ + " ends:\n" + Tail(log_path_));
    }
    if (Healthy(port)) return Status::Ok();
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(100));
  }
  Status timeout =
      Status::Unavailable("etcd did not answer on " + endpoint_ + " within 20 s; its log " +
                          log_path_ + " ends:\n" + Tail(log_path_));
  (void)Stop();
  return timeout;
}

Status EtcdProcess::Stop() {
  if (pid_ <= 0) return Status::Ok();
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + kStopGrace;
  int wstatus = 0;
  while (true) {
    pid_t done = ::waitpid(pid_, &wstatus, WNOHANG);
    if (done == pid_ || (done < 0 && errno == ECHILD)) break;
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &wstatus, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  return Status::Ok();
}

Status EtcdProcess::EnableAuth(const std::string& root_password) {
  if (!options_.tls_dir.empty()) return Status::NotSupported("EnableAuth: a plain-http etcd only");
  const int port = PortOf(endpoint_);
  KVPORT_RETURN_IF_ERROR(Post(port, "/v3/auth/user/add",
                              "{\"name\":\"root\",\"password\":\"" + root_password + "\"}"));
  KVPORT_RETURN_IF_ERROR(Post(port, "/v3/auth/role/add", "{\"name\":\"root\"}"));
  KVPORT_RETURN_IF_ERROR(
      Post(port, "/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}"));
  return Post(port, "/v3/auth/enable", "{}");
}

Status EtcdProcess::Restart() {
  KVPORT_RETURN_IF_ERROR(Stop());
  return Launch();
}

EtcdProcess::~EtcdProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int wstatus = 0;
    ::waitpid(pid_, &wstatus, 0);
  }
  if (!data_dir_.empty()) {
    std::error_code ec;
    // data_dir_ is <tmpdir>/data; the log sits next to it: remove the whole temporary folder.
    std::filesystem::remove_all(std::filesystem::path(data_dir_).parent_path(), ec);
  }
}

}  // namespace kvport::testing

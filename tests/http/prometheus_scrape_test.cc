// SPDX-License-Identifier: Apache-2.0
// A real Prometheus server (Debian's prometheus) scrapes an in-process node's /metrics every
// second; after a workload its HTTP API answers queries over kvport_* series with the values
// the node holds. Skipped, with the reason, when prometheus is not installed. Every wait is a
// bounded poll of a condition, never a fixed sleep.
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "http_test_util.h"

namespace kvport::testing {
namespace {

namespace fs = std::filesystem;

// A loopback port nobody listens on now (the kernel's pick for a socket bound to port 0).
uint16_t FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A prometheus child process, killed and reaped by the destructor.
class Prometheus {
 public:
  Prometheus(const fs::path& dir, uint16_t port, const std::string& target) : dir_(dir) {
    fs::create_directories(dir / "data");
    std::ofstream config(dir / "prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
           << "scrape_configs:\n  - job_name: kvport\n    static_configs:\n"
           << "      - targets: ['" << target << "']\n";
    config.close();
    const std::string config_arg = "--config.file=" + (dir / "prometheus.yml").string();
    const std::string storage_arg = "--storage.tsdb.path=" + (dir / "data").string();
    const std::string listen_arg = "--web.listen-address=127.0.0.1:" + std::to_string(port);
    const std::string log = (dir / "prometheus.log").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execlp("prometheus", "prometheus", config_arg.c_str(), storage_arg.c_str(),
               listen_arg.c_str(), "--log.level=warn", "--storage.tsdb.retention.time=1h",
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Prometheus() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  bool exited() {
    int status = 0;
    return pid_ <= 0 || ::waitpid(pid_, &status, WNOHANG) == pid_;
  }
  std::string Log() const {
    std::ifstream in(dir_ / "prometheus.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
};

// The value of the single series `query` selects, or nullopt while there is none.
std::optional<double> QueryOne(httplib::Client& api, const std::string& query) {
  auto r = api.Get("/api/v1/query", httplib::Params{{"query", query}}, httplib::Headers{});
  if (!r || r->status != 200) return std::nullopt;
  const auto json = nlohmann::json::parse(r->body, nullptr, false);
  if (json.is_discarded() || json["status"] != "success") return std::nullopt;
  const auto& result = json["data"]["result"];
  if (!result.is_array() || result.size() != 1) return std::nullopt;
  return std::stod(result[0]["value"][1].get<std::string>());
}

TEST(PrometheusScrape, KvportSeriesAppearInPrometheus) {
  if (!HaveProgram("prometheus")) {
    GTEST_SKIP() << "prometheus is not installed (Debian package prometheus; scripts/bootstrap "
                    "installs it)";
  }
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  const uint16_t port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  const fs::path dir =
      fs::temp_directory_path() / ("kvport-prometheus-" + std::to_string(::getpid()));
  Prometheus prometheus(dir, port, n.http->address());

  RunWorkload(*n.node, {"", "tenant-a"}, 25);

  httplib::Client api("127.0.0.1", port);
  api.set_connection_timeout(1, 0);
  api.set_read_timeout(5, 0);
  // Prometheus starts, scrapes every second, and then answers with the node's values. Bounded:
  // 90 s covers a slow CI machine many times over; it fails with Prometheus' log.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  std::optional<double> objects, up, msets, ns_objects;
  while (std::chrono::steady_clock::now() < deadline && !prometheus.exited()) {
    up = QueryOne(api, "up{job=\"kvport\"}");
    objects = QueryOne(api, "kvport_objects{job=\"kvport\"}");
    msets = QueryOne(api, "kvport_request_duration_seconds_count{job=\"kvport\",op=\"mset\"}");
    ns_objects = QueryOne(api, "kvport_namespace_objects{job=\"kvport\",namespace=\"tenant-a\"}");
    if (up == 1.0 && objects == 50.0 && msets == 50.0 && ns_objects == 25.0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // poll interval, not a wait
  }
  EXPECT_EQ(up, 1.0) << prometheus.Log();
  EXPECT_EQ(objects, 50.0) << prometheus.Log();
  EXPECT_EQ(msets, 50.0) << prometheus.Log();
  EXPECT_EQ(ns_objects, 25.0) << prometheus.Log();

  // Every family Prometheus ingested is one of ours (and it ingested kvport_ series at all).
  auto names = api.Get("/api/v1/label/__name__/values");
  ASSERT_TRUE(names);
  const auto json = nlohmann::json::parse(names->body, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << names->body;
  int kvport_series = 0;
  for (const auto& name : json["data"]) {
    if (name.get<std::string>().rfind("kvport_", 0) == 0) ++kvport_series;
  }
  EXPECT_GE(kvport_series, 30);
}

}  // namespace
}  // namespace kvport::testing

// SPDX-License-Identifier: Apache-2.0
// The operator's view of a node, through the CLI run as a child process: `kvport top` in its
// plain (non-terminal) form against an in-process node after a workload, and `kvport serve
// --http` with its /health and /metrics, its start line, and log settings from the config;
// `kvport serve --http` on a node with TLS: HTTPS, with no client certificate asked for.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kvport/client.h"
#include "kvport/server.h"
#include "net/stream.h"
#include "net/tls.h"
#include "support/cli_run.h"
#include "support/serve_process.h"

namespace kvport {
namespace {

using kvport::testing::ServeProcess;
using kvport::testing::Slurp;

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  fs::path dir =
      fs::temp_directory_path() / ("kvport-cli-observe-" + std::to_string(::getpid()) + "-" + name);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

TEST(CliTop, PlainOutputShowsTheNodeAfterAWorkload) {
  ServerOptions options;
  options.capacity_bytes = 8 << 20;
  options.threads = 1;
  auto node = Server::Start(options);
  ASSERT_TRUE(node.ok());
  {
    Client client;
    ASSERT_TRUE(client.Init("top-test", (*node)->address()).ok());
    std::string value(4096, 'x');
    for (int i = 0; i < 10; ++i) {
      IOBuffers in;
      in.Append(value.data(), value.size());
      ASSERT_TRUE(client.MSet({"k" + std::to_string(i)}, in).ok());
      IOBuffers out;
      out.Append(value.data(), value.size());
      ASSERT_TRUE(client.MGet({"k" + std::to_string(i)}, {}, out).ok());
    }
  }
  const fs::path dir = TempDir("top");
  const std::string cmd = std::string("'") + KVPORT_BINARY + "' --log-level warn top --url eic://" +
                          (*node)->address() + " --iterations 2 --interval 0.05 >'" +
                          (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  const std::string out = Slurp(dir / "out"), err = Slurp(dir / "err");
  fs::remove_all(dir);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << err;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no terminal escapes into a file";
  const std::vector<std::string> lines = Lines(out);
  int views = 0;
  for (const std::string& line : lines) {
    if (line.rfind("kvport top  node " + (*node)->address(), 0) == 0) ++views;
  }
  EXPECT_EQ(views, 2) << out;
  EXPECT_NE(out.find("ops/s       mget "), std::string::npos) << out;
  EXPECT_NE(out.find("throughput  in "), std::string::npos) << out;
  EXPECT_NE(out.find("total 10 hits, 0 misses"), std::string::npos) << out;
  EXPECT_NE(out.find("objects 10"), std::string::npos) << out;
  EXPECT_NE(out.find("connections "), std::string::npos) << out;
  // p50/p99 per op from the node's histograms: MGET and MSET each served 10 requests.
  const std::regex mget(R"(\s+mget\s+([0-9]+)\s+([0-9]+)\s+10$)");
  const std::regex mset(R"(\s+mset\s+([0-9]+)\s+([0-9]+)\s+10$)");
  bool saw_mget = false, saw_mset = false;
  for (const std::string& line : lines) {
    std::smatch m;
    if (std::regex_match(line, m, mget)) {
      saw_mget = true;
      EXPECT_LE(std::stoull(m[1]), std::stoull(m[2])) << line;  // p50 <= p99
    }
    saw_mset = saw_mset || std::regex_match(line, mset);
  }
  EXPECT_TRUE(saw_mget) << out;
  EXPECT_TRUE(saw_mset) << out;
}

TEST(CliServe, HttpEndpointStartLineAndJsonLogsFromTheConfig) {
  const fs::path dir = TempDir("serve");
  {
    std::ofstream config(dir / "node.yaml");
    config << "capacity: 32MiB\nmax_value_bytes: 8MiB\nlog_format: json\nlog_level: info\n";
  }
  ServeProcess serve(KVPORT_BINARY,
                     {"serve", "--config", (dir / "node.yaml").string(), "--listen", "127.0.0.1:0",
                      "--unix-socket", "", "--threads", "1", "--http", "0"},
                     dir / "err");
  const std::string node = serve.WaitForLine("kvport: serving on ");
  const std::string http = serve.WaitForLine("kvport: http on ");
  ASSERT_FALSE(node.empty()) << Slurp(dir / "err");
  ASSERT_EQ(http.rfind("127.0.0.1:", 0), 0u) << "a bare port is loopback: " << http;
  const int port = std::stoi(http.substr(http.find(':') + 1));
  httplib::Client client("127.0.0.1", port);
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("kvport_capacity_bytes 33554432\n"), std::string::npos);
  EXPECT_NE(metrics->body.find("kvport_build_info{version=\""), std::string::npos);
  EXPECT_EQ(serve.Terminate(), 0);

  // Every log line is a JSON object; the start line names the version, the addresses, the
  // capacity, the auth mode and where each non-default value came from.
  bool start_line = false;
  for (const std::string& line : Lines(Slurp(dir / "err"))) {
    const auto json = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(json.is_discarded()) << "not JSON: " << line;
    ASSERT_TRUE(json.contains("time") && json.contains("level") && json.contains("msg")) << line;
    const std::string msg = json["msg"];
    if (msg.rfind("kvport ", 0) == 0 && msg.find(" serving: ") != std::string::npos) {
      start_line = true;
      EXPECT_NE(msg.find("tcp " + node), std::string::npos) << msg;
      EXPECT_NE(msg.find("http " + http), std::string::npos) << msg;
      EXPECT_NE(msg.find("capacity 32 MiB"), std::string::npos) << msg;
      EXPECT_NE(msg.find("auth none"), std::string::npos) << msg;
      EXPECT_NE(msg.find("capacity=32 MiB (file:" + (dir / "node.yaml").string() + ")"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("http_listen=\"0\" (flag --http)"), std::string::npos) << msg;
    }
  }
  EXPECT_TRUE(start_line) << Slurp(dir / "err");
  fs::remove_all(dir);
}

// `request` sent over HTTPS to 127.0.0.1:port, verifying the node's certificate against
// `ca_file` and presenting no client certificate; the whole answer (the request should close the
// connection), or "" when the handshake failed. Blocking, each read bounded by SO_RCVTIMEO.
std::string HttpsExchange(int port, const std::string& ca_file, const std::string& request) {
  auto context = net::TlsContext::Create(net::TlsRole::kClient, {"", "", ca_file});
  EXPECT_TRUE(context.ok()) << context.status().ToString();
  if (!context.ok()) return "";
  net::Stream stream{net::Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0))};
  const timeval timeout{10, 0};
  ::setsockopt(stream.fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(stream.fd(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(stream.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return "";
  }
  if (!stream.StartTls(**context, "127.0.0.1").ok()) return "";
  Result<net::TlsWait> handshake = stream.Handshake();  // blocking: done or failed
  if (!handshake.ok() || *handshake != net::TlsWait::kNone) return "";
  iovec out{const_cast<char*>(request.data()), request.size()};
  Result<net::IoProgress> wrote = stream.WriteV(&out, 1);
  if (!wrote.ok() || wrote->bytes != request.size()) return "";
  std::string answer;
  for (int i = 0; i < 100; ++i) {
    char chunk[4096];
    iovec in{chunk, sizeof(chunk)};
    Result<net::IoProgress> read = stream.ReadV(&in, 1);
    if (!read.ok()) break;
    answer.append(chunk, read->bytes);
    if (read->eof || read->would_block) break;  // closed, or the 10 s passed
  }
  return answer;
}

// With TLS the endpoint is HTTPS with the node's certificate; with tls_ca_file (mutual TLS on
// the data port) it still asks no client certificate, so that a Kubernetes HTTPS probe passes.
TEST(CliServe, HttpsOnANodeWithTlsAndNoClientCertificateForHealth) {
  const fs::path dir = TempDir("https");
  ASSERT_TRUE(net::WriteTestCertificates((dir / "certs").string(), {}).ok());
  {
    std::ofstream config(dir / "node.yaml");
    config << "capacity: 8MiB\nmax_value_bytes: 1MiB\n"
           << "tls_cert_file: " << (dir / "certs" / "node.pem").string() << "\n"
           << "tls_key_file: " << (dir / "certs" / "node.key").string() << "\n"
           << "tls_ca_file: " << (dir / "certs" / "ca.pem").string() << "\n";
  }
  ServeProcess serve(KVPORT_BINARY,
                     {"serve", "--config", (dir / "node.yaml").string(), "--listen", "127.0.0.1:0",
                      "--unix-socket", "", "--threads", "1", "--http", "0"},
                     dir / "err");
  const std::string https = serve.WaitForLine("kvport: https on ");
  ASSERT_FALSE(https.empty()) << Slurp(dir / "err");
  const int port = std::stoi(https.substr(https.find(':') + 1));
  const std::string answer =
      HttpsExchange(port, (dir / "certs" / "ca.pem").string(),
                    "GET /health HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("\"serving\""), std::string::npos) << answer;
  EXPECT_EQ(serve.Terminate(), 0);
  const std::string err = Slurp(dir / "err");
  EXPECT_NE(err.find(", https " + https), std::string::npos) << "the start line: " << err;
  fs::remove_all(dir);
}

TEST(CliServe, LogLevelFromTheConfigUnlessTheFlagIsGiven) {
  const fs::path dir = TempDir("level");
  {
    std::ofstream config(dir / "node.yaml");
    config << "capacity: 8MiB\nmax_value_bytes: 1MiB\nlog_level: error\n";
  }
  for (bool flag : {false, true}) {
    std::vector<std::string> args;
    if (flag) args = {"--log-level", "info"};
    for (const char* a : {"serve", "--config", "", "--listen", "127.0.0.1:0", "--unix-socket", "",
                          "--threads", "1"})
      args.emplace_back(a);
    args[flag ? 4 : 2] = (dir / "node.yaml").string();
    ServeProcess serve(KVPORT_BINARY, args, dir / "err");
    ASSERT_FALSE(serve.WaitForLine("kvport: serving on ").empty()) << Slurp(dir / "err");
    EXPECT_EQ(serve.Terminate(), 0);
    const std::string err = Slurp(dir / "err");
    if (flag) {
      EXPECT_NE(err.find(" serving: "), std::string::npos) << "--log-level info wins: " << err;
    } else {
      EXPECT_EQ(err, "") << "log_level: error leaves no info line";
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvport

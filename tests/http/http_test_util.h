// SPDX-License-Identifier: Apache-2.0
// Helpers of the HTTP endpoint tests: an in-process node with its HTTP endpoint, a workload
// that moves every kind of counter, and running a program with its output captured.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "http/http_server.h"
#include "kvport/client.h"
#include "kvport/server.h"

namespace kvport::testing {

// "name{labels}" -> value, for every sample line of an exposition.
inline std::map<std::string, double> Samples(const std::string& page) {
  std::map<std::string, double> samples;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

struct NodeWithHttp {
  std::unique_ptr<Server> node;
  std::unique_ptr<http::HttpServer> http;

  static NodeWithHttp Start(http::HttpOptions http_options = {},
                            std::vector<AccessToken> tokens = {}) {
    NodeWithHttp n;
    http_options.context.version = "test-version";
    auto http = http::HttpServer::Start(http_options);
    EXPECT_TRUE(http.ok()) << http.status().ToString();
    if (!http.ok()) return n;
    n.http = std::move(http).value();
    ServerOptions options;
    options.capacity_bytes = 16 << 20;
    options.threads = 2;
    options.tokens = std::move(tokens);
    auto node = Server::Start(options);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    if (!node.ok()) return n;
    n.node = std::move(node).value();
    n.http->Attach(n.node.get());
    return n;
  }
  ~NodeWithHttp() {
    if (http) http->Stop();
  }
  NodeWithHttp() = default;
  NodeWithHttp(NodeWithHttp&&) = default;
  NodeWithHttp& operator=(NodeWithHttp&&) = default;
};

// Writes `keys` 1 KiB values into each of `namespaces`, reads every one back (hits) and as many
// keys that do not exist (misses).
inline void RunWorkload(const Server& node, const std::vector<std::string>& namespaces, int keys) {
  Client client;
  ASSERT_TRUE(client.Init("http-test", node.address()).ok());
  std::string value(1024, 'v');
  for (const std::string& ns : namespaces) {
    for (int i = 0; i < keys; ++i) {
      IOBuffers buffers;
      buffers.Append(value.data(), value.size());
      SetOptions set;
      set.ns = ns;
      auto r = client.MSet({"k" + std::to_string(i)}, buffers, set);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->status, BatchCode::kSuccess);
      std::string out(1024, '\0');
      IOBuffers into;
      into.Append(out.data(), out.size());
      GetOptions get;
      get.ns = ns;
      auto g = client.MGet({"k" + std::to_string(i)}, get, into);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      auto miss = client.MGet({"absent" + std::to_string(i)}, get, into);
      ASSERT_TRUE(miss.ok()) << miss.status().ToString();
    }
  }
}

struct CommandRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` with sh, its stdout and stderr captured in a temporary file.
inline CommandRun RunCommand(const std::string& command) {
  namespace fs = std::filesystem;
  const fs::path out =
      fs::temp_directory_path() / ("kvport-http-test-" + std::to_string(::getpid()) + "-" +
                                   std::to_string(std::rand()) + ".out");
  const int status = std::system((command + " >'" + out.string() + "' 2>&1").c_str());
  CommandRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out);
  run.output.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(out);
  return run;
}

inline bool HaveProgram(const std::string& name) {
  return RunCommand("command -v " + name).exit_code == 0;
}

}  // namespace kvport::testing

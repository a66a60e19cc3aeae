// SPDX-License-Identifier: Apache-2.0
// An engine's first program against an installed kvport (tests/install): an embedded node, one
// put and one get through kvport::Client. Built with find_package(kvport) and with pkg-config.
#include <kvport/client.h>
#include <kvport/server.h>

#include <cstdio>
#include <string>

int main() {
  kvport::ServerOptions options;  // 127.0.0.1, an ephemeral port
  options.capacity_bytes = 16 << 20;
  auto node = kvport::Server::Start(options);
  kvport::Client client;
  if (!node.ok() || !client.Init("consumer", (*node)->address()).ok()) return 1;
  std::string value = "stored through libkvport.so", read(value.size(), '\0');
  kvport::IOBuffers put, get;
  put.Append(value.data(), value.size());
  get.Append(read.data(), read.size());
  auto set = client.MSet({"installed"}, put);
  auto got = client.MGet({"installed"}, {}, get);
  bool ok = set.ok() && got.ok() && got->status == kvport::BatchCode::kSuccess && read == value;
  std::printf("consumer: put/get through %s: %s\n", (*node)->address().c_str(),
              ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

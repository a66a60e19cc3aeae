// SPDX-License-Identifier: Apache-2.0
// Active messages over the host's UCX (device/ucx_worker.h): a "node" worker that listens and a
// "client" worker that connects to it, both in this process. Most tests progress every worker
// from the test thread in turn (Pump); one runs the node on a thread of its own asleep on its
// event fd, as the node's event loop will. Run over UCX's tcp transport and over its
// shared-memory ones, UCX_TLS set by the test; skipped when this target had no libucp at build
// time. Every wait is bounded by a deadline.
#include "device/ucx_worker.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace kvport {
namespace {

using ::testing::HasSubstr;
using testing::ScopedEnv;
using Guard = ucx::Worker::Guard;
using namespace std::chrono_literals;

constexpr const char* kHostUcp = KVPORT_TEST_UCP_LIBRARY;
constexpr const char* kLoopback = "127.0.0.1";

// Message ids: requests to the node, answers to the client.
constexpr unsigned kRequest = 1;
constexpr unsigned kAnswer = 2;

constexpr size_t kLarge = 4 << 20;  // above every transport's eager limit: rendezvous

std::vector<char> Pattern(char seed, size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>(seed + i * 7 + (i >> 12));
  return v;
}

// What a handler saw of one message (the message itself is valid only during the call).
struct Received {
  std::string header;
  size_t bytes = 0;
  bool data_with_message = false;
  std::string data;  // when it came with the message
  ucx::EndpointId from = 0;
};

Received Copy(const ucx::Worker::Message& message) {
  Received r;
  r.header = std::string(message.header);
  r.bytes = message.bytes;
  r.data_with_message = message.data != nullptr;
  if (message.data != nullptr) r.data.assign(static_cast<const char*>(message.data), message.bytes);
  r.from = message.from;
  return r;
}

// The outcome of one operation: set once, by its Done.
struct Outcome {
  int calls = 0;
  std::optional<Status> status;
  bool done() const { return calls > 0; }
  bool ok() const { return status.has_value() && status->ok(); }
  bool failed() const { return status.has_value() && !status->ok(); }
  std::string text() const { return status ? status->ToString() : std::string("(not done)"); }
};

ucx::Worker::Done Record(Outcome* outcome) {
  return [outcome](Guard&, Status status) {
    ++outcome->calls;
    outcome->status = std::move(status);
  };
}

// Each worker progressed once in turn (each with its own Guard, so `finished` may take any of
// them) until `finished()` or `within` has passed; whether `finished()` became true.
bool Pump(std::initializer_list<ucx::Worker*> workers, const std::function<bool()>& finished,
          std::chrono::milliseconds within = 10s) {
  const auto deadline = MonotonicClock::now() + within;
  while (true) {
    for (ucx::Worker* worker : workers) {
      Guard held(*worker);
      worker->Progress(held);
    }
    if (finished()) return true;
    if (MonotonicClock::now() >= deadline) return false;
  }
}

bool IsOpen(ucx::Worker& worker, ucx::EndpointId endpoint) {
  Guard held(worker);
  return worker.IsOpen(held, endpoint);
}

size_t OpenEndpoints(ucx::Worker& worker) {
  Guard held(worker);
  return worker.open_endpoints(held);
}

size_t InFlight(ucx::Worker& worker) {
  Guard held(worker);
  return worker.operations_in_flight(held);
}

void Send(ucx::Worker& worker, ucx::EndpointId to, unsigned id, std::string_view header,
          const void* data, size_t bytes, Outcome* outcome) {
  Guard held(worker);
  worker.Send(held, to, id, header, data, bytes, Record(outcome));
}

Result<ucx::EndpointId> Connect(ucx::Worker& worker, uint16_t port) {
  Guard held(worker);
  return worker.Connect(held, kLoopback, port);
}

// A TCP port of the loopback nothing listens on (bound for a moment, then released).
uint16_t UnusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

// A node: a worker whose handler for kRequest records each message and, as told, answers it on
// `from` (header "re:" + the request's header), receives its large data, or drops it.
struct Node {
  std::unique_ptr<ucx::Worker> worker;
  ucx::Worker* self = nullptr;  // the worker, also while it is being destroyed
  uint16_t port = 0;
  std::vector<Received> requests;
  bool answer = true;
  bool receive_large = true;
  std::vector<char> landing = std::vector<char>(kLarge, '\0');  // where large data goes
  Outcome received;                                             // the last Receive's
  std::vector<ucx::EndpointId> answered;
  Outcome answer_sent;

  void Handle(Guard& held, const ucx::Worker::Message& message) {
    requests.push_back(Copy(message));
    if (message.data == nullptr && message.bytes > 0 && receive_large) {
      received = Outcome{};
      self->Receive(held, message, landing.data(), Record(&received));
    }
    if (answer && message.from != 0) {
      answered.push_back(message.from);
      answer_sent = Outcome{};
      self->Send(held, message.from, kAnswer, "re:" + std::string(message.header), nullptr, 0,
                 Record(&answer_sent));
    }
  }
};

// Workers over the host's UCX with UCX_TLS as the test says: UCX's tcp alone ("tcp"), or its
// shared-memory transports (posix, sysv, cma) with tcp beside them (UCX 1.13's shared-memory
// transports do not detect a peer's failure, which the endpoints' error handling requires).
class UcxWorkers {
 protected:
  void Open(const char* tls) {
    if (UcxBuildApiVersion().empty()) GTEST_SKIP() << "this build has no UCX";
    if (std::string(kHostUcp).empty()) GTEST_SKIP() << "no libucp for this target at build time";
    tls_ = std::make_unique<ScopedEnv>("UCX_TLS", tls);
    runtime_ = OpenUcxRuntime(kHostUcp);
    ASSERT_TRUE(runtime_->usable()) << runtime_->reason();
  }

  std::unique_ptr<ucx::Worker> OpenWorker() {
    Result<std::unique_ptr<ucx::Worker>> worker = ucx::Worker::Open(*runtime_);
    EXPECT_TRUE(worker.ok()) << worker.status().ToString();
    return worker.ok() ? std::move(worker).value() : nullptr;
  }

  // A node listening on the loopback (a free port), at most `max_endpoints` peers.
  std::unique_ptr<Node> OpenNode(size_t max_endpoints = 16) {
    auto node = std::make_unique<Node>();
    node->worker = OpenWorker();
    if (node->worker == nullptr) return nullptr;
    node->self = node->worker.get();
    Guard held(*node->worker);
    Node* n = node.get();
    Status set = node->worker->SetHandler(
        held, kRequest, [n](Guard& h, const ucx::Worker::Message& m) { n->Handle(h, m); });
    EXPECT_TRUE(set.ok()) << set.ToString();
    Result<uint16_t> port = node->worker->Listen(held, kLoopback, 0, max_endpoints);
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    if (!port.ok()) return nullptr;
    node->port = *port;
    return node;
  }

  // A client worker whose handler for kAnswer records into `answers`.
  std::unique_ptr<ucx::Worker> OpenClient(std::vector<Received>* answers) {
    auto client = OpenWorker();
    if (client == nullptr) return nullptr;
    Guard held(*client);
    Status set = client->SetHandler(
        held, kAnswer,
        [answers](Guard&, const ucx::Worker::Message& m) { answers->push_back(Copy(m)); });
    EXPECT_TRUE(set.ok()) << set.ToString();
    return client;
  }

  std::unique_ptr<ScopedEnv> tls_;
  std::unique_ptr<UcxRuntime> runtime_;
};

constexpr const char* kTcp = "tcp";
constexpr const char* kSharedMemory = "posix,sysv,cma,self,tcp";

std::string TransportName(std::string_view tls) {
  return tls == kTcp ? "Tcp" : "SharedMemory";
}

class UcxWorkerTest : public ::testing::TestWithParam<const char*>, protected UcxWorkers {
 protected:
  void SetUp() override { Open(GetParam()); }
};

// 1. A round trip: the request's header and small data reach the node's handler with the
// message, from an endpoint the node answers on; the answer reaches the client's handler.
TEST_P(UcxWorkerTest, AClientSendsAMessageAndTheNodeAnswersOnItsEndpoint) {
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_NE(node->port, 0);
  std::vector<Received> answers;
  auto client = OpenClient(&answers);
  ASSERT_NE(client, nullptr);
  Result<ucx::EndpointId> ep = Connect(*client, node->port);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_NE(*ep, 0u);
  EXPECT_TRUE(IsOpen(*client, *ep));

  const std::string data = "twelve bytes";
  Outcome sent;
  Send(*client, *ep, kRequest, "hdr", data.data(), data.size(), &sent);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()}, [&] { return !answers.empty(); }))
      << "sent: " << sent.text() << ", requests: " << node->requests.size();
  EXPECT_TRUE(sent.ok()) << sent.text();
  EXPECT_EQ(sent.calls, 1);

  ASSERT_EQ(node->requests.size(), 1u);
  const Received request = node->requests[0];  // a copy: more requests come below
  EXPECT_EQ(request.header, "hdr");
  EXPECT_EQ(request.bytes, data.size());
  EXPECT_TRUE(request.data_with_message);
  EXPECT_EQ(request.data, data);
  EXPECT_NE(request.from, 0u);
  EXPECT_TRUE(IsOpen(*node->worker, request.from));
  EXPECT_EQ(OpenEndpoints(*node->worker), 1u);

  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].header, "re:hdr");
  EXPECT_EQ(answers[0].bytes, 0u);
  EXPECT_EQ(answers[0].from, *ep);  // the answer came through the client's own endpoint
  EXPECT_TRUE(Pump({client.get(), node->worker.get()}, [&] { return node->answer_sent.done(); }));
  EXPECT_TRUE(node->answer_sent.ok()) << node->answer_sent.text();

  // A second one on the same endpoint, header only.
  Outcome again;
  Send(*client, *ep, kRequest, "two", nullptr, 0, &again);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()}, [&] { return answers.size() == 2; }));
  EXPECT_EQ(node->requests[1].header, "two");
  EXPECT_EQ(node->requests[1].bytes, 0u);
  EXPECT_EQ(node->requests[1].from, request.from);
  EXPECT_EQ(answers[1].header, "re:two");
  EXPECT_TRUE(Pump({client.get()}, [&] { return again.done(); }));
  EXPECT_TRUE(again.ok()) << again.text();
}

// 2. Large data stays at the sender until the handler receives it into memory of its choosing;
// data the handler does not receive is dropped, and the sender's send completes all the same.
TEST_P(UcxWorkerTest, LargeDataComesOnlyWhenTheHandlerReceivesIt) {
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  node->answer = false;
  std::vector<Received> answers;
  auto client = OpenClient(&answers);
  ASSERT_NE(client, nullptr);
  Result<ucx::EndpointId> ep = Connect(*client, node->port);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();

  const std::vector<char> large = Pattern('L', kLarge);
  Outcome sent;
  Send(*client, *ep, kRequest, "big", large.data(), large.size(), &sent);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()}, [&] { return !node->requests.empty(); }));
  ASSERT_FALSE(node->requests[0].data_with_message)
      << "4 MiB came with the message: sent eagerly, not left at the sender";
  ASSERT_TRUE(Pump({client.get(), node->worker.get()},
                   [&] { return node->received.done() && sent.done(); }))
      << "requests: " << node->requests.size() << ", received: " << node->received.text()
      << ", sent: " << sent.text();
  ASSERT_EQ(node->requests.size(), 1u);
  EXPECT_EQ(node->requests[0].header, "big");
  EXPECT_FALSE(node->requests[0].data_with_message);
  EXPECT_EQ(node->requests[0].bytes, kLarge);
  EXPECT_NE(node->requests[0].from, 0u);
  EXPECT_TRUE(node->received.ok()) << node->received.text();
  EXPECT_EQ(node->received.calls, 1);
  EXPECT_TRUE(node->landing == large) << "the received bytes differ";
  EXPECT_TRUE(sent.ok()) << sent.text();
  EXPECT_EQ(sent.calls, 1);

  // Not received: dropped; the sender's send completes.
  node->receive_large = false;
  std::fill(node->landing.begin(), node->landing.end(), '\0');
  const std::vector<char> other = Pattern('D', kLarge);
  Outcome dropped;
  Send(*client, *ep, kRequest, "drop", other.data(), other.size(), &dropped);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()},
                   [&] { return node->requests.size() == 2 && dropped.done(); }))
      << "requests: " << node->requests.size() << ", sent: " << dropped.text();
  EXPECT_EQ(node->requests[1].header, "drop");
  EXPECT_FALSE(node->requests[1].data_with_message);
  EXPECT_EQ(node->requests[1].bytes, kLarge);
  EXPECT_TRUE(dropped.ok()) << dropped.text();
  EXPECT_EQ(dropped.calls, 1);
  EXPECT_EQ(std::count(node->landing.begin(), node->landing.end(), '\0'),
            static_cast<std::ptrdiff_t>(kLarge));

  // The endpoint carries on: a small message, then a large one received again.
  Outcome small;
  Send(*client, *ep, kRequest, "next", "abc", 3, &small);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()},
                   [&] { return node->requests.size() == 3 && small.done(); }));
  EXPECT_EQ(node->requests[2].header, "next");
  EXPECT_EQ(node->requests[2].data, "abc");
  EXPECT_TRUE(small.ok()) << small.text();
  node->receive_large = true;
  Outcome last;
  Send(*client, *ep, kRequest, "big2", other.data(), other.size(), &last);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()}, [&] {
    return node->requests.size() == 4 && node->received.done() && last.done();
  }));
  EXPECT_TRUE(node->received.ok()) << node->received.text();
  EXPECT_TRUE(node->landing == other) << "the received bytes differ";
  EXPECT_TRUE(last.ok()) << last.text();
  EXPECT_EQ(InFlight(*client), 0u);
  EXPECT_EQ(InFlight(*node->worker), 0u);
}

// 3. The node closes a client's endpoint: the client learns (its endpoint closes, its sends
// fail), the node's count of open endpoints drops, and the client can connect again.
TEST_P(UcxWorkerTest, TheNodeClosesAnEndpointAndTheClientReconnects) {
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  std::vector<Received> answers;
  auto client = OpenClient(&answers);
  ASSERT_NE(client, nullptr);
  Result<ucx::EndpointId> ep = Connect(*client, node->port);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  Outcome first;
  Send(*client, *ep, kRequest, "hello", nullptr, 0, &first);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()}, [&] { return answers.size() == 1; }));
  const ucx::EndpointId at_node = node->requests[0].from;
  ASSERT_NE(at_node, 0u);
  EXPECT_EQ(OpenEndpoints(*node->worker), 1u);

  {
    Guard held(*node->worker);
    node->worker->Close(held, at_node);
    EXPECT_FALSE(node->worker->IsOpen(held, at_node));
    EXPECT_EQ(node->worker->open_endpoints(held), 0u);
    node->worker->Close(held, at_node);  // closed already: nothing happens
    EXPECT_EQ(node->worker->open_endpoints(held), 0u);
  }

  // The client learns of it: its endpoint is closed by the error handling, and a send fails.
  // (Sends meanwhile may fail on their own: a failed one is as good.)
  std::vector<std::unique_ptr<Outcome>> sends;
  const bool learnt = Pump({client.get(), node->worker.get()}, [&] {
    if (!IsOpen(*client, *ep)) return true;
    if (!sends.empty() && sends.back()->failed()) return true;
    if (sends.empty() || sends.back()->done()) {
      sends.push_back(std::make_unique<Outcome>());
      Send(*client, *ep, kRequest, "after", nullptr, 0, sends.back().get());
    }
    return false;
  });
  ASSERT_TRUE(learnt) << "the client's endpoint stayed open, its sends succeeding";
  EXPECT_TRUE(Pump({client.get(), node->worker.get()}, [&] { return !IsOpen(*client, *ep); }))
      << "a send failed but the endpoint stays open";
  EXPECT_EQ(OpenEndpoints(*client), 0u);
  Outcome refused;
  Send(*client, *ep, kRequest, "closed", nullptr, 0, &refused);
  EXPECT_TRUE(refused.failed()) << refused.text();  // at once: the endpoint is known closed
  EXPECT_EQ(refused.calls, 1);
  // Nothing sent after the close reached the node.
  EXPECT_TRUE(Pump({client.get(), node->worker.get()}, [&] {
    for (const auto& s : sends)
      if (!s->done()) return false;
    return true;
  }));
  for (const Received& r : node->requests)
    EXPECT_NE(r.header, "closed");
  EXPECT_EQ(OpenEndpoints(*node->worker), 0u);

  // A new endpoint works: a new number on both sides.
  Result<ucx::EndpointId> again = Connect(*client, node->port);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_NE(*again, *ep);
  const size_t before = answers.size();
  Outcome second;
  Send(*client, *again, kRequest, "back", nullptr, 0, &second);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()}, [&] { return answers.size() > before; }))
      << second.text();
  EXPECT_EQ(node->requests.back().header, "back");
  EXPECT_NE(node->requests.back().from, 0u);
  EXPECT_NE(node->requests.back().from, at_node);
  EXPECT_EQ(answers.back().header, "re:back");
  EXPECT_EQ(OpenEndpoints(*node->worker), 1u);
  EXPECT_TRUE(Pump({client.get()}, [&] { return second.done(); }));
  EXPECT_TRUE(second.ok()) << second.text();
}

// 4. A listener takes at most max_endpoints peers: the one over is rejected, the first works on.
TEST_P(UcxWorkerTest, APeerOverMaxEndpointsIsRejected) {
  auto node = OpenNode(/*max_endpoints=*/1);
  ASSERT_NE(node, nullptr);
  std::vector<Received> answers_a, answers_b;
  auto a = OpenClient(&answers_a);
  auto b = OpenClient(&answers_b);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  Result<ucx::EndpointId> ep_a = Connect(*a, node->port);
  ASSERT_TRUE(ep_a.ok()) << ep_a.status().ToString();
  Outcome sent_a;
  Send(*a, *ep_a, kRequest, "a1", nullptr, 0, &sent_a);
  ASSERT_TRUE(Pump({a.get(), node->worker.get()}, [&] { return answers_a.size() == 1; }));
  EXPECT_EQ(OpenEndpoints(*node->worker), 1u);

  Result<ucx::EndpointId> ep_b = Connect(*b, node->port);
  ASSERT_TRUE(ep_b.ok()) << ep_b.status().ToString();  // connecting goes on in the background
  Outcome sent_b;
  Send(*b, *ep_b, kRequest, "b1", "data", 4, &sent_b);
  ASSERT_TRUE(Pump({a.get(), b.get(), node->worker.get()}, [&] { return sent_b.done(); }))
      << "the rejected peer's send never completed";
  EXPECT_TRUE(sent_b.failed()) << sent_b.text();
  EXPECT_TRUE(Pump({a.get(), b.get(), node->worker.get()}, [&] { return !IsOpen(*b, *ep_b); }));
  EXPECT_TRUE(answers_b.empty());
  for (const Received& r : node->requests)
    EXPECT_NE(r.header, "b1");
  EXPECT_EQ(OpenEndpoints(*node->worker), 1u);

  // The first carries on.
  Outcome again_a;
  Send(*a, *ep_a, kRequest, "a2", nullptr, 0, &again_a);
  ASSERT_TRUE(Pump({a.get(), b.get(), node->worker.get()},
                   [&] { return answers_a.size() == 2 && again_a.done(); }));
  EXPECT_EQ(answers_a[1].header, "re:a2");
  EXPECT_TRUE(again_a.ok()) << again_a.text();
  EXPECT_TRUE(IsOpen(*a, *ep_a));
}

// 5. Nobody listens: the endpoint fails, and the send's done says so within a bounded time.
TEST_P(UcxWorkerTest, ConnectingWhereNothingListensFailsTheSend) {
  const uint16_t port = UnusedPort();
  ASSERT_NE(port, 0);
  std::vector<Received> answers;
  auto client = OpenClient(&answers);
  ASSERT_NE(client, nullptr);
  Result<ucx::EndpointId> ep = Connect(*client, port);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  Outcome sent;
  Send(*client, *ep, kRequest, "anyone?", "x", 1, &sent);
  {
    Guard held(*client);
    EXPECT_TRUE(client->ProgressUntil(
        held, [&] { return sent.done(); }, MonotonicClock::now() + 5s))
        << "no outcome within 5 s";
    EXPECT_TRUE(client->ProgressUntil(
        held, [&] { return !client->IsOpen(held, *ep); }, MonotonicClock::now() + 5s));
    EXPECT_EQ(client->operations_in_flight(held), 0u);
  }
  EXPECT_TRUE(sent.failed()) << sent.text();
  EXPECT_EQ(sent.calls, 1);
}

// 6. Malformed calls are refused without touching the network.
TEST_P(UcxWorkerTest, BadArgumentsAreRefused) {
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  {
    Guard held(*node->worker);
    // A second listener on the same worker.
    Result<uint16_t> second = node->worker->Listen(held, kLoopback, 0, 4);
    EXPECT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument) << second.status().ToString();
  }
  auto worker = OpenWorker();
  ASSERT_NE(worker, nullptr);
  {
    Guard held(*worker);
    for (const char* host : {"localhost", "not an address", "127.0.0.1.5"}) {
      Result<ucx::EndpointId> ep = worker->Connect(held, host, node->port);
      EXPECT_EQ(ep.status().code(), StatusCode::kInvalidArgument) << host;
      Result<uint16_t> port = worker->Listen(held, host, 0, 4);
      EXPECT_EQ(port.status().code(), StatusCode::kInvalidArgument) << host;
    }
    EXPECT_EQ(worker->open_endpoints(held), 0u);
    // A refused Listen leaves the worker free to listen.
    Result<uint16_t> port = worker->Listen(held, "::1", 0, 4);
    if (!port.ok()) port = worker->Listen(held, kLoopback, 0, 4);  // no IPv6 here
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    // An unknown endpoint: the send fails at once.
    Outcome nowhere;
    worker->Send(held, 12345, kRequest, "h", nullptr, 0, Record(&nowhere));
    EXPECT_TRUE(nowhere.failed()) << nowhere.text();
    Outcome none;
    worker->Send(held, 0, kRequest, "h", nullptr, 0, Record(&none));
    EXPECT_TRUE(none.failed()) << none.text();
    EXPECT_FALSE(worker->IsOpen(held, 0));
  }

  // Receive on a message whose data came with it: InvalidArgument, and the data was there.
  std::vector<Outcome> receives;
  std::vector<Received> seen;
  {
    Guard held(*node->worker);
    ucx::Worker* w = node->worker.get();
    ASSERT_TRUE(w->SetHandler(held, kRequest,
                              [w, &receives, &seen](Guard& h, const ucx::Worker::Message& m) {
                                seen.push_back(Copy(m));
                                char buffer[64];
                                receives.emplace_back();
                                w->Receive(h, m, buffer, Record(&receives.back()));
                              })
                    .ok());
  }
  std::vector<Received> answers;
  auto client = OpenClient(&answers);
  ASSERT_NE(client, nullptr);
  Result<ucx::EndpointId> ep = Connect(*client, node->port);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  Outcome sent;
  Send(*client, *ep, kRequest, "small", "0123456789", 10, &sent);
  ASSERT_TRUE(
      Pump({client.get(), node->worker.get()}, [&] { return !receives.empty() && sent.done(); }));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].data_with_message);
  EXPECT_EQ(seen[0].data, "0123456789");
  ASSERT_EQ(receives.size(), 1u);
  EXPECT_EQ(receives[0].calls, 1);
  ASSERT_TRUE(receives[0].status.has_value());
  EXPECT_EQ(receives[0].status->code(), StatusCode::kInvalidArgument) << receives[0].text();
  EXPECT_TRUE(sent.ok()) << sent.text();
}

// 7. Destroying a worker with operations in flight runs every completion callback before the
// destructor returns: sends on an endpoint whose connection never completes (a TCP listener
// that never accepts: not a UCX one, whose destruction while a peer is half connected UCX 1.13
// does not survive), and a large send to a node that stopped progressing.
TEST_P(UcxWorkerTest, DestroyingAWorkerCompletesEveryOperation) {
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(silent, 16), 0);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);

  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  node->receive_large = false;
  std::vector<Received> answers;
  auto client = OpenClient(&answers);
  ASSERT_NE(client, nullptr);
  Result<ucx::EndpointId> to_node = Connect(*client, node->port);
  ASSERT_TRUE(to_node.ok()) << to_node.status().ToString();
  Outcome hello;
  Send(*client, *to_node, kRequest, "hello", nullptr, 0, &hello);
  ASSERT_TRUE(Pump({client.get(), node->worker.get()},
                   [&] { return answers.size() == 1 && hello.done(); }));
  // From here on the node is never progressed again.
  Result<ucx::EndpointId> nowhere = Connect(*client, ntohs(address.sin_port));
  ASSERT_TRUE(nowhere.ok()) << nowhere.status().ToString();

  const std::vector<char> large = Pattern('S', kLarge);
  std::vector<Outcome> sends(5);
  Send(*client, *nowhere, kRequest, "one", "1", 1, &sends[0]);
  Send(*client, *nowhere, kRequest, "two", nullptr, 0, &sends[1]);
  Send(*client, *nowhere, kRequest, "big", large.data(), large.size(), &sends[2]);
  Send(*client, *to_node, kRequest, "big", large.data(), large.size(), &sends[3]);
  Send(*client, *to_node, kRequest, "after", "333", 3, &sends[4]);
  for (int i = 0; i < 20; ++i) {
    Guard held(*client);
    client->Progress(held);
  }
  const size_t in_flight = InFlight(*client);
  EXPECT_GE(in_flight, 3u) << "sends to a listener that never accepts completed";
  int before = 0;
  for (const Outcome& s : sends)
    before += s.calls;
  EXPECT_EQ(before + in_flight, sends.size());
  client.reset();
  for (size_t i = 0; i < sends.size(); ++i)
    EXPECT_EQ(sends[i].calls, 1) << i << ": " << sends[i].text();
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(sends[i].failed()) << i << ": " << sends[i].text();
  ::close(silent);
}

TEST_P(UcxWorkerTest, DestroyingANodeCompletesItsReceive) {
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  node->answer = false;
  std::vector<Received> answers;
  auto client = OpenClient(&answers);
  ASSERT_NE(client, nullptr);
  Result<ucx::EndpointId> ep = Connect(*client, node->port);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  const std::vector<char> large = Pattern('R', kLarge);
  Outcome sent;
  Send(*client, *ep, kRequest, "big", large.data(), large.size(), &sent);
  // Until the node's handler has started the Receive; the client then stops progressing.
  ASSERT_TRUE(Pump({client.get(), node->worker.get()}, [&] { return !node->requests.empty(); }));
  ASSERT_FALSE(node->requests[0].data_with_message)
      << "4 MiB came with the message: sent eagerly, not left at the sender";
  const bool was_in_flight = !node->received.done();
  if (was_in_flight) {
    EXPECT_GT(InFlight(*node->worker), 0u);
  }
  Outcome* received = &node->received;  // the Node outlives its worker
  node->worker.reset();
  EXPECT_EQ(received->calls, 1) << received->text();
  if (!was_in_flight) {
    GTEST_LOG_(INFO) << GetParam() << ": the Receive completed without the sender's progress";
  } else if (received->ok()) {
    EXPECT_TRUE(node->landing == large);
  }
  // The client's send completes too, one way or the other, once it progresses.
  EXPECT_TRUE(Pump({client.get()}, [&] { return sent.done(); })) << "the send never completed";
  client.reset();
  EXPECT_EQ(sent.calls, 1);
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxWorkerTest, ::testing::Values(kTcp, kSharedMemory),
                         [](const ::testing::TestParamInfo<const char*>& tls) {
                           return TransportName(tls.param);
                         });

// A node progressed on a thread of its own until destroyed, as the node's event loop will:
// asleep in poll(2) on its event fd between events (Arm), woken only by the fd.
class SleepingNode {
 public:
  explicit SleepingNode(std::unique_ptr<Node> node)
      : node_(std::move(node)), thread_([this] { Run(); }) {}
  ~SleepingNode() {
    stop_.store(true);
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof(one));
    thread_.join();
    ::close(stop_fd_);
  }
  int sleeps() const { return sleeps_.load(); }

 private:
  void Run() {
    ucx::Worker& worker = *node_->worker;
    while (!stop_.load()) {
      {
        Guard held(worker);
        if (worker.Progress(held) != 0) continue;
        if (!worker.Arm(held)) continue;
      }
      // No timeout: only the worker's fd (or the destructor's) wakes it, so a message the fd
      // did not announce leaves the client waiting into its deadline.
      pollfd fds[2] = {{worker.event_fd(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      ::poll(fds, 2, -1);
      ++sleeps_;
    }
  }

  std::unique_ptr<Node> node_;  // touched by the thread only, until it is joined
  const int stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  std::atomic<bool> stop_{false};
  std::atomic<int> sleeps_{0};
  std::thread thread_;
};

TEST_P(UcxWorkerTest, ANodeAsleepOnItsEventFdIsWokenForEachMessage) {
  auto opened = OpenNode();
  ASSERT_NE(opened, nullptr);
  const uint16_t port = opened->port;
  SleepingNode node(std::move(opened));
  std::vector<Received> answers;
  auto client = OpenClient(&answers);
  ASSERT_NE(client, nullptr);
  Result<ucx::EndpointId> ep = Connect(*client, port);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  const std::vector<char> large = Pattern('W', kLarge);
  for (int i = 0; i < 5; ++i) {
    const std::string header = "n" + std::to_string(i);
    Outcome sent;
    // Small, then large (received by the node's handler), alternately.
    const bool big = i % 2 == 1;
    Send(*client, *ep, kRequest, header, big ? large.data() : "s", big ? large.size() : 1, &sent);
    Guard held(*client);
    ASSERT_TRUE(client->ProgressUntil(
        held, [&] { return answers.size() == static_cast<size_t>(i + 1) && sent.done(); },
        MonotonicClock::now() + 10s))
        << i << ": answers " << answers.size() << ", sent " << sent.text();
    EXPECT_EQ(answers.back().header, "re:" + header);
    EXPECT_TRUE(sent.ok()) << sent.text();
  }
  EXPECT_GT(node.sleeps(), 0);
}

TEST(UcxWorker, AWorkerNeedsAUsableUcx) {
  auto absent = OpenUcxRuntime("/nonexistent/libucp.so.0");
  ASSERT_FALSE(absent->usable());
  Result<std::unique_ptr<ucx::Worker>> worker = ucx::Worker::Open(*absent);
  EXPECT_EQ(worker.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(worker.status().message(), HasSubstr("a UCX worker needs a usable UCX; "));
}

}  // namespace
}  // namespace kvport

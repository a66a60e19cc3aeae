// SPDX-License-Identifier: Apache-2.0
// The Redis protocol on an in-process node (docs/resp.md): every command's replies in RESP2
// and RESP3, access (NOAUTH, NOPERM, namespaces), and the hostile-input rules of the binary
// port (an announced 2^40-byte bulk, a byte-at-a-time writer, a client that never reads).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kvport/server.h"
#include "resp_test_client.h"
#include "server/resp_glob.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

using server::RespGlob;
using server::RespGlobMatch;

ServerOptions RespNodeOptions() {
  ServerOptions options = SmallNodeOptions();
  options.resp_listen = "127.0.0.1:0";
  options.max_value_bytes = 2 << 20;
  return options;
}

// A node whose commands must arrive whole within `deadline`, at any rate.
ServerOptions RespNodeWithDeadline(std::chrono::milliseconds deadline) {
  ServerOptions options = RespNodeOptions();
  options.request_timeout = deadline;
  options.min_request_bytes_per_sec = 0;
  return options;
}

class RespTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    server_ = StartNode(RespNodeOptions());
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(server_->resp_port(), 0);
  }
  // A client in the protocol version of the test's parameter.
  std::unique_ptr<RespTestClient> Connect() {
    auto client = std::make_unique<RespTestClient>(server_->resp_port());
    EXPECT_TRUE(client->connected());
    if (GetParam() == 3) {
      EXPECT_EQ(client->Call({"HELLO", "3"}).substr(0, 3), "%7{");
    }
    return client;
  }
  std::string Null() const { return "(nil)"; }
  std::unique_ptr<Server> server_;
};

TEST_P(RespTest, ConnectionCommands) {
  auto c = Connect();
  EXPECT_EQ(c->Call({"PING"}), "+PONG");
  EXPECT_EQ(c->Call({"ping", "hi"}), "$hi");
  EXPECT_EQ(c->Call({"ECHO", "a b"}), "$a b");
  EXPECT_EQ(c->Call({"ECHO"}), "-ERR wrong number of arguments for 'ECHO' command");
  EXPECT_EQ(c->Call({"SELECT", "0"}), "+OK");
  EXPECT_EQ(c->Call({"SELECT", "1"}), "-ERR DB index is out of range");
  EXPECT_EQ(c->Call({"CLIENT", "GETNAME"}), Null());
  EXPECT_EQ(c->Call({"CLIENT", "SETNAME", "worker-1"}), "+OK");
  EXPECT_EQ(c->Call({"CLIENT", "GETNAME"}), "$worker-1");
  EXPECT_EQ(c->Call({"CLIENT", "ID"}).substr(0, 1), ":");
  EXPECT_EQ(c->Call({"CLIENT", "NAMESPACE"}), "$");
  EXPECT_EQ(c->Call({"COMMAND", "COUNT"}).substr(0, 1), ":");
  EXPECT_EQ(c->Call({"COMMAND"}).substr(0, 6), "*29[*1");
  // Unknown commands are refused alone: the connection goes on.
  EXPECT_EQ(c->Call({"LPUSH", "k", "v"}).substr(0, 29), "-ERR unknown command 'LPUSH',");
  EXPECT_EQ(c->Call({"PING"}), "+PONG");
  EXPECT_EQ(c->Call({"HELLO", "4"}), "-NOPROTO unsupported protocol version");
  EXPECT_EQ(c->Call({"QUIT"}), "+OK");
  EXPECT_TRUE(c->ReadsToEof());
}

TEST_P(RespTest, Hello) {
  RespTestClient c(server_->resp_port());
  const std::string map = c.Call({"HELLO", "3", "SETNAME", "n"});
  EXPECT_EQ(map.substr(0, 30), "%7{$server=$redis $version=$7.") << map;
  EXPECT_NE(map.find("$proto=:3"), std::string::npos) << map;
  EXPECT_EQ(c.Call({"GET", "missing"}), "(nil)");
  EXPECT_EQ(c.Call({"CLIENT", "GETNAME"}), "$n");
  // Back to RESP2: a map is a flat array, a null is "$-1" (read as (nil) too).
  EXPECT_EQ(c.Call({"HELLO", "2"}).substr(0, 4), "*14[");
}

TEST_P(RespTest, Strings) {
  auto c = Connect();
  EXPECT_EQ(c->Call({"GET", "k"}), Null());
  EXPECT_EQ(c->Call({"SET", "k", "v1"}), "+OK");
  EXPECT_EQ(c->Call({"GET", "k"}), "$v1");
  EXPECT_EQ(c->Call({"STRLEN", "k"}), ":2");
  EXPECT_EQ(c->Call({"STRLEN", "nope"}), ":0");
  EXPECT_EQ(c->Call({"SET", "k", "v2", "NX"}), Null());
  EXPECT_EQ(c->Call({"SET", "k2", "v", "XX"}), Null());
  EXPECT_EQ(c->Call({"EXISTS", "k2"}), ":0");
  EXPECT_EQ(c->Call({"SET", "k", "v3", "XX", "GET"}), "$v1");
  EXPECT_EQ(c->Call({"SET", "new", "x", "GET"}), Null());
  EXPECT_EQ(c->Call({"GET", "new"}), "$x");
  EXPECT_EQ(c->Call({"SET", "k", "v", "NX", "XX"}), "-ERR syntax error");
  EXPECT_EQ(c->Call({"SET", "k", "v", "EX", "0"}), "-ERR invalid expire time in 'set' command");
  EXPECT_EQ(c->Call({"SET", "k", "v", "EX", "x"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(c->Call({"GETDEL", "k"}), "$v3");
  EXPECT_EQ(c->Call({"GETDEL", "k"}), Null());
  // Binary-safe values.
  const std::string binary("a\0b\r\nc", 6);
  EXPECT_EQ(c->Call({"SET", "bin", binary}), "+OK");
  EXPECT_EQ(c->Call({"GET", "bin"}), "$" + binary);
  EXPECT_EQ(c->Call({"SET", "empty", ""}), "+OK");
  EXPECT_EQ(c->Call({"GET", "empty"}), "$");
}

TEST_P(RespTest, LargeValuesComeFromTheArena) {
  auto c = Connect();
  const std::string value = ValueFor("big", 1 << 20);
  EXPECT_EQ(c->Call({"SET", "big", value}), "+OK");
  ASSERT_TRUE(c->Send({"GET", "big"}));
  std::optional<std::string> got = c->ReadBulk();
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got == value);
  // Over max_value_bytes: refused naming the limit, and the connection ends (the stream cannot
  // be resynchronised past a bulk it will not read).
  const std::string over((2 << 20) + 1, 'x');
  const std::string reply = c->Call({"SET", "over", over});
  EXPECT_NE(reply.find("max_value_bytes"), std::string::npos) << reply;
  EXPECT_EQ(reply.substr(0, 4), "-ERR");
}

TEST_P(RespTest, BatchedKeys) {
  auto c = Connect();
  EXPECT_EQ(c->Call({"MSET", "a", "1", "b", "2", "c", "3"}), "+OK");
  EXPECT_EQ(c->Call({"MSET", "a", "1", "b"}), "-ERR wrong number of arguments for 'MSET' command");
  EXPECT_EQ(c->Call({"MGET", "a", "x", "c"}), "*3[$1 " + Null() + " $3]");
  EXPECT_EQ(c->Call({"EXISTS", "a", "b", "x", "a"}), ":3");
  EXPECT_EQ(c->Call({"DEL", "a", "x"}), ":1");
  EXPECT_EQ(c->Call({"UNLINK", "b", "c"}), ":2");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":0");
}

TEST_P(RespTest, Expiry) {
  auto c = Connect();
  EXPECT_EQ(c->Call({"SET", "k", "v"}), "+OK");
  EXPECT_EQ(c->Call({"TTL", "k"}), ":-1");
  EXPECT_EQ(c->Call({"TTL", "nope"}), ":-2");
  EXPECT_EQ(c->Call({"PTTL", "nope"}), ":-2");
  EXPECT_EQ(c->Call({"EXPIRE", "k", "100"}), ":1");
  EXPECT_EQ(c->Call({"TTL", "k"}), ":100");
  const std::string pttl = c->Call({"PTTL", "k"});
  ASSERT_EQ(pttl.substr(0, 1), ":");
  EXPECT_GT(std::stoll(pttl.substr(1)), 90000);
  EXPECT_LE(std::stoll(pttl.substr(1)), 100000);
  EXPECT_EQ(c->Call({"EXPIRE", "k", "50", "GT"}), ":0");
  EXPECT_EQ(c->Call({"EXPIRE", "k", "50", "LT"}), ":1");
  EXPECT_EQ(c->Call({"EXPIRE", "k", "500", "NX"}), ":0");
  EXPECT_EQ(c->Call({"PEXPIRE", "k", "200000"}), ":1");
  EXPECT_EQ(c->Call({"TTL", "k"}), ":200");
  EXPECT_EQ(c->Call({"PERSIST", "k"}), ":1");
  EXPECT_EQ(c->Call({"PERSIST", "k"}), ":0");
  EXPECT_EQ(c->Call({"TTL", "k"}), ":-1");
  EXPECT_EQ(c->Call({"EXPIRE", "nope", "10"}), ":0");
  EXPECT_EQ(c->Call({"SETEX", "s", "30", "v"}), "+OK");
  EXPECT_EQ(c->Call({"TTL", "s"}), ":30");
  EXPECT_EQ(c->Call({"PSETEX", "p", "1500", "v"}), "+OK");
  const std::string p = c->Call({"PTTL", "p"});
  EXPECT_LE(std::stoll(p.substr(1)), 1500);
  EXPECT_EQ(c->Call({"SET", "s", "w", "KEEPTTL"}), "+OK");
  EXPECT_EQ(c->Call({"TTL", "s"}), ":30");
  EXPECT_EQ(c->Call({"SET", "s", "w", "PX", "40000"}), "+OK");
  EXPECT_EQ(c->Call({"TTL", "s"}), ":40");
  EXPECT_EQ(c->Call({"SET", "s", "w"}), "+OK");
  EXPECT_EQ(c->Call({"TTL", "s"}), ":-1");
  // A time in the past deletes the key, as in Redis.
  EXPECT_EQ(c->Call({"EXPIRE", "s", "0"}), ":1");
  EXPECT_EQ(c->Call({"EXISTS", "s"}), ":0");
}

TEST_P(RespTest, ScanWalksTheNamespaceOnItsCursors) {
  auto c = Connect();
  for (int i = 0; i < 25; ++i) {
    ASSERT_EQ(c->Call({"SET", "key:" + std::to_string(i), "v"}), "+OK");
  }
  ASSERT_EQ(c->Call({"SET", "other", "v"}), "+OK");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":26");
  std::string cursor = "0";
  int seen = 0;
  for (int pages = 0; pages < 100; ++pages) {
    const std::string reply = c->Call({"SCAN", cursor, "MATCH", "key:*", "COUNT", "7"});
    ASSERT_EQ(reply.substr(0, 4), "*2[$") << reply << " (cursor " << cursor << ")";
    const size_t space = reply.find(' ');
    cursor = reply.substr(4, space - 4);
    for (size_t at = reply.find("$key:"); at != std::string::npos; at = reply.find("$key:", at + 1))
      ++seen;
    EXPECT_EQ(reply.find("$other"), std::string::npos);
    if (cursor == "0") break;
  }
  EXPECT_EQ(cursor, "0");
  EXPECT_EQ(seen, 25);
  EXPECT_EQ(c->Call({"SCAN", "12345"}).substr(0, 18), "-ERR invalid curso");
}

// LMCache's Redis connector's pair (`<P>kv_bytes` then `<P>metadata`: docs/resp.md) is one
// object: the metadata folded into its data's.
TEST_P(RespTest, LMCachePairIsOneObject) {
  auto c = Connect();
  // LMCache announces itself (a client name in its URL, or its library's name).
  ASSERT_EQ(c->Call({"CLIENT", "SETNAME", "lmcache"}), "+OK");
  // Without its data, a `<P>metadata` is a key of its own.
  EXPECT_EQ(c->Call({"SET", "c1metadata", "alone"}), "+OK");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":1");
  EXPECT_EQ(c->Call({"SET", "c1kv_bytes", "chunk-1"}), "+OK");
  EXPECT_EQ(c->Call({"SET", "c1metadata", "meta-1"}), "+OK");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":1");  // folded: the plain key went
  EXPECT_EQ(c->Call({"GET", "c1metadata"}), "$meta-1");
  EXPECT_EQ(c->Call({"EXISTS", "c1metadata", "c1kv_bytes"}), ":2");
  EXPECT_EQ(c->Call({"STRLEN", "c1metadata"}), ":6");
  EXPECT_EQ(c->Call({"MGET", "c1metadata", "c1kv_bytes"}), "*2[$meta-1 $chunk-1]");
  EXPECT_EQ(c->Call({"SCAN", "0"}), "*2[$0 *2[$c1kv_bytes $c1metadata]]");
  // Its expiry is the pair's.
  EXPECT_EQ(c->Call({"TTL", "c1metadata"}), ":-1");
  EXPECT_EQ(c->Call({"EXPIRE", "c1metadata", "100"}), ":1");
  EXPECT_EQ(c->Call({"TTL", "c1kv_bytes"}), ":100");
  EXPECT_EQ(c->Call({"PERSIST", "c1metadata"}), ":1");
  EXPECT_EQ(c->Call({"TTL", "c1kv_bytes"}), ":-1");
  // The same metadata again (the chunk stored twice) changes nothing.
  EXPECT_EQ(c->Call({"SET", "c1metadata", "meta-1"}), "+OK");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":1");
  EXPECT_EQ(c->Call({"SET", "c1metadata", "meta-1", "NX"}), Null());
  // New data is a new version: the old metadata never describes it.
  EXPECT_EQ(c->Call({"SET", "c1kv_bytes", "chunk-2"}), "+OK");
  EXPECT_EQ(c->Call({"GET", "c1metadata"}), Null());
  EXPECT_EQ(c->Call({"EXISTS", "c1metadata"}), ":0");
  EXPECT_EQ(c->Call({"SET", "c1metadata", "meta-2"}), "+OK");
  EXPECT_EQ(c->Call({"GET", "c1metadata"}), "$meta-2");
  // Deleting the metadata deletes the pair (its data is unreachable without it).
  EXPECT_EQ(c->Call({"DEL", "c1metadata"}), ":1");
  EXPECT_EQ(c->Call({"EXISTS", "c1kv_bytes", "c1metadata"}), ":0");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":0");
  // With an expiry of its own, or other bytes than the folded ones, it is a plain key, which
  // reads see first.
  EXPECT_EQ(c->Call({"SET", "c2kv_bytes", "chunk"}), "+OK");
  EXPECT_EQ(c->Call({"SET", "c2metadata", "m", "EX", "100"}), "+OK");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":2");
  EXPECT_EQ(c->Call({"SET", "c3kv_bytes", "chunk"}), "+OK");
  EXPECT_EQ(c->Call({"SET", "c3metadata", "first"}), "+OK");
  EXPECT_EQ(c->Call({"SET", "c3metadata", "second"}), "+OK");
  EXPECT_EQ(c->Call({"GET", "c3metadata"}), "$second");
  EXPECT_EQ(c->Call({"GETDEL", "c3metadata"}), "$second");
  EXPECT_EQ(c->Call({"GET", "c3metadata"}), Null());  // the plain key, then the pair, went
  EXPECT_EQ(c->Call({"EXISTS", "c3kv_bytes"}), ":0");
  // Longer than 1 KiB: a plain key.
  EXPECT_EQ(c->Call({"SET", "c4kv_bytes", "chunk"}), "+OK");
  EXPECT_EQ(c->Call({"SET", "c4metadata", std::string(1025, 'm')}), "+OK");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":4");
}

// Through an 8 MiB node, 25 MiB of pairs written as LMCache writes them: whenever a metadata is
// there, so is its data (as two objects, LRU evicts the data and leaves its metadata).
TEST_P(RespTest, LMCachePairsAreEvictedTogether) {
  auto c = Connect();
  ASSERT_EQ(c->Call({"CLIENT", "SETINFO", "LIB-NAME", "lmcache"}), "+OK");
  constexpr int kPairs = 100;
  auto data_of = [](int i) { return ValueFor("chunk" + std::to_string(i), 256 << 10); };
  for (int i = 0; i < kPairs; ++i) {
    const std::string p = "chunk" + std::to_string(i);
    ASSERT_EQ(c->Call({"SET", p + "kv_bytes", data_of(i)}), "+OK");
    ASSERT_EQ(c->Call({"SET", p + "metadata", "meta" + std::to_string(i)}), "+OK");
    // LMCache's lookups probe metadata, and its gets read metadata then data: a use of each.
    for (int j = 0; j <= i; j += 7) {
      const std::string q = "chunk" + std::to_string(j);
      if (c->Call({"GET", q + "metadata"}) != Null()) {
        ASSERT_EQ(c->Call({"EXISTS", q + "kv_bytes"}), ":1") << j << " after " << i;
      }
    }
  }
  int present = 0;
  for (int i = 0; i < kPairs; ++i) {
    const std::string p = "chunk" + std::to_string(i);
    const std::string meta = c->Call({"GET", p + "metadata"});
    if (meta == Null()) continue;
    ++present;
    EXPECT_EQ(meta, "$meta" + std::to_string(i));
    ASSERT_TRUE(c->Send({"GET", p + "kv_bytes"}));
    std::optional<std::string> data = c->ReadBulk();
    ASSERT_TRUE(data.has_value()) << i;
    EXPECT_TRUE(*data == data_of(i)) << i;
  }
  EXPECT_GT(present, 0);
  EXPECT_LT(present, kPairs);  // eviction happened
}

// A client that has not announced LMCache, in a namespace without the fold setting, gets
// Redis's semantics: `<P>metadata` and `<P>kv_bytes` are two keys.
TEST_P(RespTest, PlainClientsGetPlainKeys) {
  auto c = Connect();
  EXPECT_EQ(c->Call({"SET", "xkv_bytes", "chunk"}), "+OK");
  EXPECT_EQ(c->Call({"SET", "xmetadata", "meta"}), "+OK");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":2");
  EXPECT_EQ(c->Call({"SCAN", "0"}), "*2[$0 *2[$xkv_bytes $xmetadata]]");
  EXPECT_EQ(c->Call({"DEL", "xmetadata"}), ":1");
  EXPECT_EQ(c->Call({"GET", "xkv_bytes"}), "$chunk");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":1");
  // A pair folded for LMCache reads as its data key alone here.
  auto lmcache = Connect();
  ASSERT_EQ(lmcache->Call({"CLIENT", "SETNAME", "LMCache-redis"}), "+OK");
  EXPECT_EQ(lmcache->Call({"SET", "xmetadata", "meta"}), "+OK");
  EXPECT_EQ(lmcache->Call({"DBSIZE"}), ":1");
  EXPECT_EQ(c->Call({"GET", "xmetadata"}), Null());
  EXPECT_EQ(c->Call({"EXISTS", "xmetadata"}), ":0");
  EXPECT_EQ(c->Call({"DEL", "xmetadata"}), ":0");
  EXPECT_EQ(lmcache->Call({"GET", "xmetadata"}), "$meta");
}

// The command table: what COMMAND answers (Redis 7's entries) is what the dispatcher checks.
TEST_P(RespTest, CommandTableIsWhatTheDispatcherChecks) {
  auto c = Connect();
  EXPECT_EQ(c->Call({"COMMAND", "COUNT"}), ":29");
  const std::string set = GetParam() == 3 ? "~" : "*";
  const std::string map = GetParam() == 3 ? "%" : "*";
  EXPECT_EQ(c->Call({"COMMAND", "INFO", "get"}),
            "*1[*10[$get :2 " + set + "2[+readonly +fast] :1 :1 :1 " + set +
                "3[+@read +@string +@fast] *0[] *1[" + map +
                (GetParam() == 3 ? "3{$flags=~1[+RO] $begin_search=%2{$type=$index "
                                   "$spec=%1{$index=:1}} $find_keys=%2{$type=$range "
                                   "$spec=%3{$lastkey=:0 $keystep=:1 $limit=:0}}}"
                                 : "6[$flags *1[+RO] $begin_search *4[$type $index $spec "
                                   "*2[$index :1]] $find_keys *4[$type $range $spec *6[$lastkey "
                                   ":0 $keystep :1 $limit :0]]]") +
                "] *0[]]]");
  const std::string mset = c->Call({"COMMAND", "INFO", "MSET", "nosuch", "client|setname"});
  EXPECT_EQ(mset.substr(0, 23), "*3[*10[$mset :-3 " + set + "2[+wr") << mset;
  EXPECT_NE(mset.find(":1 :-1 :2 "), std::string::npos) << mset;
  EXPECT_NE(mset.find("(nil) *10[$client|setname :3 "), std::string::npos) << mset;
  const std::string client = c->Call({"COMMAND", "INFO", "client"});
  EXPECT_NE(client.find("*5[*10[$client|setname"), std::string::npos) << client;
  EXPECT_EQ(c->Call({"COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"}), "*2[$a $b]");
  EXPECT_EQ(c->Call({"COMMAND", "GETKEYS", "DEL", "a", "b"}), "*2[$a $b]");
  EXPECT_EQ(c->Call({"COMMAND", "GETKEYS", "GET"}),
            "-ERR Invalid number of arguments specified for command");
  EXPECT_EQ(c->Call({"COMMAND", "GETKEYS", "PING"}), "-ERR The command has no key arguments");
  EXPECT_EQ(c->Call({"COMMAND", "GETKEYS", "LPUSH", "k"}), "-ERR Invalid command specified");
  EXPECT_EQ(c->Call({"COMMAND", "LIST"}).substr(0, 16), "*29[$ping $echo ");
  EXPECT_EQ(c->Call({"COMMAND", "DOCS"}), GetParam() == 3 ? "%0{}" : "*0[]");
  // Arity, Redis's convention, checked before any command runs.
  for (const std::vector<std::string>& wrong :
       std::vector<std::vector<std::string>>{{"GET"},
                                             {"GET", "a", "b"},
                                             {"SET", "k"},
                                             {"MGET"},
                                             {"DBSIZE", "x"},
                                             {"SETEX", "k", "1"},
                                             {"TTL"},
                                             {"CLIENT"}}) {
    EXPECT_EQ(c->Call(wrong), "-ERR wrong number of arguments for '" + wrong[0] + "' command");
  }
  EXPECT_EQ(c->Call({"MSET", "a", "1", "b"}), "-ERR wrong number of arguments for 'MSET' command");
  EXPECT_EQ(c->Call({"CLIENT", "SETNAME"}),
            "-ERR wrong number of arguments for 'CLIENT|SETNAME' command");
  EXPECT_EQ(c->Call({"CLIENT", "NOPE"}), "-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.");
  EXPECT_EQ(c->Call({"CONFIG", "SET", "maxmemory", "1"}),
            "-ERR unknown subcommand 'SET'. Try CONFIG HELP.");
  EXPECT_EQ(c->Call({"PING"}), "+PONG");
}

// SCAN's MATCH costs at most a small factor of the keys a page reads, whatever the pattern: a
// pattern past RespGlob::kMaxPatternBytes is refused, and one within it is matched by an
// automaton that never backtracks. (A backtracking matcher took 11 s for a 100 KB pattern over 8
// keys: this test's client would time out.)
TEST_P(RespTest, ScanMatchCostsNoMoreThanItsKeys) {
  auto c = Connect();
  for (int i = 0; i < 32; ++i) {
    ASSERT_EQ(c->Call({"SET", std::to_string(i) + std::string(8000, 'a'), "v"}), "+OK");
  }
  // A set a backtracking matcher reads again at every byte of every key: 100 KB x 8000 x 32.
  const std::string huge = "*[" + std::string(100 * 1024, 'b') + "]c";
  EXPECT_EQ(c->Call({"SCAN", "0", "MATCH", huge, "COUNT", "100"}),
            "-ERR MATCH pattern of " + std::to_string(huge.size()) +
                " bytes is longer than 1024 (docs/resp.md)");
  std::string worst = "*";
  while (worst.size() + 4 <= RespGlob::kMaxPatternBytes)
    worst += "[" + std::string(1, 'b') + "a]*";
  worst += "c";
  EXPECT_EQ(c->Call({"SCAN", "0", "MATCH", worst, "COUNT", "100"}), "*2[$0 *0[]]");
  EXPECT_EQ(c->Call({"SCAN", "0", "MATCH", "1?a*", "COUNT", "100"}).substr(0, 12), "*2[$0 *11[$1");
}

// DBSIZE and INFO's keyspace line read the store's per-namespace count (not a pass over every
// namespace): it follows writes, overwrites, deletes, expiries and evictions.
TEST_P(RespTest, DbSizeFollowsEveryChange) {
  auto c = Connect();
  auto keys_listed = [&] {
    size_t keys = 0;
    std::string cursor = "0";
    do {
      const std::string reply = c->Call({"SCAN", cursor, "COUNT", "1000"});
      cursor = reply.substr(4, reply.find(' ') - 4);
      for (size_t at = reply.find(" *"); (at = reply.find('$', at + 1)) != std::string::npos;)
        ++keys;
    } while (cursor != "0");
    return keys;
  };
  auto db_size = [&] { return c->Call({"DBSIZE"}); };
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(c->Call({"SET", "k" + std::to_string(i), "v"}), "+OK");
  EXPECT_EQ(db_size(), ":10");
  ASSERT_EQ(c->Call({"SET", "k0", "again"}), "+OK");
  ASSERT_EQ(c->Call({"MSET", "k1", "x", "k2", "y"}), "+OK");
  EXPECT_EQ(db_size(), ":10");
  EXPECT_EQ(c->Call({"DEL", "k0", "k1", "nope"}), ":2");
  EXPECT_EQ(c->Call({"GETDEL", "k2"}), "$y");
  EXPECT_EQ(db_size(), ":7");
  EXPECT_EQ(c->Call({"PEXPIRE", "k3", "1"}), ":1");
  EXPECT_EQ(c->Call({"EXPIRE", "k4", "0"}), ":1");  // deleted at once
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(c->Call({"GET", "k3"}), Null());  // expired
  EXPECT_EQ(db_size(), ":5");
  EXPECT_EQ(keys_listed(), 5u);
  // Through the 8 MiB node: evictions leave the count equal to what a listing finds.
  const std::string value(512 << 10, 'v');
  for (int i = 0; i < 40; ++i)
    ASSERT_EQ(c->Call({"SET", "big" + std::to_string(i), value}), "+OK");
  const std::string size = db_size();
  EXPECT_EQ(size, ":" + std::to_string(keys_listed()));
  EXPECT_LT(std::stoul(size.substr(1)), 45u);  // eviction happened
  EXPECT_NE(c->Call({"INFO", "keyspace"}).find("db0:keys=" + size.substr(1) + ","),
            std::string::npos);
  EXPECT_EQ(c->Call({"FLUSHDB"}), "+OK");
  EXPECT_EQ(db_size(), ":0");
}

TEST_P(RespTest, ServerCommands) {
  auto c = Connect();
  ASSERT_EQ(c->Call({"SET", "k", "v"}), "+OK");
  const std::string info = c->Call({"INFO"});
  for (const char* field : {"redis_version:", "used_memory:", "maxmemory:", "keyspace_hits:",
                            "connected_clients:", "db0:keys=1"}) {
    EXPECT_NE(info.find(field), std::string::npos) << field << " in " << info;
  }
  const std::string memory = c->Call({"INFO", "memory"});
  EXPECT_NE(memory.find("maxmemory:8388608"), std::string::npos) << memory;
  EXPECT_EQ(memory.find("keyspace_hits"), std::string::npos);
  const std::string config = c->Call({"CONFIG", "GET", "maxmemory"});
  EXPECT_EQ(config, GetParam() == 3 ? "%1{$maxmemory=$8388608}" : "*2[$maxmemory $8388608]");
  EXPECT_EQ(c->Call({"CONFIG", "GET", "nothing*"}), GetParam() == 3 ? "%0{}" : "*0[]");
  EXPECT_EQ(c->Call({"CONFIG", "SET", "maxmemory", "1"}).substr(0, 4), "-ERR");
  EXPECT_EQ(c->Call({"FLUSHDB"}), "+OK");
  EXPECT_EQ(c->Call({"DBSIZE"}), ":0");
}

TEST_P(RespTest, CommandsAreCountedPerCommand) {
  auto c = Connect();
  ASSERT_EQ(c->Call({"SET", "k", "v"}), "+OK");
  ASSERT_EQ(c->Call({"GET", "k"}), "$v");
  ASSERT_EQ(c->Call({"GET", "missing"}), Null());
  ASSERT_EQ(c->Call({"SET", "k"}).substr(0, 4), "-ERR");  // wrong arity: a failed call
  // INFO commandstats, in Redis's form; not among INFO's default sections.
  const std::string stats = c->Call({"INFO", "commandstats"});
  EXPECT_NE(stats.find("# Commandstats"), std::string::npos) << stats;
  EXPECT_NE(stats.find("cmdstat_get:calls=2,usec="), std::string::npos) << stats;
  EXPECT_NE(stats.find("cmdstat_set:calls=2,"), std::string::npos) << stats;
  EXPECT_NE(stats.find("rejected_calls=0,failed_calls=1\r\n"), std::string::npos) << stats;
  EXPECT_EQ(stats.find("cmdstat_del:"), std::string::npos) << stats;  // never called
  EXPECT_EQ(c->Call({"INFO"}).find("# Commandstats"), std::string::npos);
  // STATS (and so /metrics, `kvport top`): the op resp_<command>, with errors and latency.
  const ServerStats counters = server_->Stats();
  EXPECT_EQ(counters.Get("op_resp_get"), 2u);
  EXPECT_EQ(counters.Get("op_resp_set"), 2u);
  EXPECT_EQ(counters.Get("errors_resp_set"), 1u);
  EXPECT_EQ(counters.Get("errors_resp_get"), 0u);
  bool found = false;
  for (const ServerStats::Latency& l : counters.latencies) {
    if (l.op != "resp_get") continue;
    found = true;
    EXPECT_EQ(l.count, 2u);
    EXPECT_GT(l.sum_ns, 0u);
  }
  EXPECT_TRUE(found);
}

TEST_P(RespTest, PipelinedCommandsAnswerInOrder) {
  auto c = Connect();
  std::string batch;
  for (int i = 0; i < 200; ++i) {
    batch += RespTestClient::Encode({"SET", "p" + std::to_string(i), std::to_string(i)});
    batch += RespTestClient::Encode({"GET", "p" + std::to_string(i)});
  }
  ASSERT_TRUE(c->SendRaw(batch));
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(c->Read(), "+OK");
    ASSERT_EQ(c->Read(), "$" + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Resp2And3, RespTest, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return "Resp" + std::to_string(param.param);
                         });

TEST(RespGlobTest, RedisGlobRules) {
  EXPECT_TRUE(RespGlobMatch("*", ""));
  EXPECT_TRUE(RespGlobMatch("", ""));
  EXPECT_FALSE(RespGlobMatch("", "a"));
  EXPECT_TRUE(RespGlobMatch("key:*", "key:12"));
  EXPECT_FALSE(RespGlobMatch("key:*", "kez:12"));
  EXPECT_TRUE(RespGlobMatch("h?llo", "hello"));
  EXPECT_FALSE(RespGlobMatch("h?llo", "hllo"));
  EXPECT_TRUE(RespGlobMatch("h[ae]llo", "hallo"));
  EXPECT_FALSE(RespGlobMatch("h[^e]llo", "hello"));
  EXPECT_TRUE(RespGlobMatch("h[a-b]llo", "hbllo"));
  EXPECT_TRUE(RespGlobMatch("h[b-a]llo", "hbllo"));  // a reversed range
  EXPECT_TRUE(RespGlobMatch("a\\*b", "a*b"));
  EXPECT_FALSE(RespGlobMatch("a\\*b", "axb"));
  EXPECT_TRUE(RespGlobMatch("[\\]]", "]"));
  EXPECT_TRUE(RespGlobMatch("a[bc", "ab"));  // an unclosed set takes the rest
  EXPECT_TRUE(RespGlobMatch("*a*b*c*", "xxaxxbxxcxx"));
  EXPECT_FALSE(RespGlobMatch("*a*b*c*", "xxcxxbxxaxx"));
  EXPECT_TRUE(RespGlobMatch("**x", "x"));
  EXPECT_TRUE(RespGlobMatch("trailing\\", "trailing\\"));
  EXPECT_TRUE(RespGlobMatch(std::string(70, '?') + "*", std::string(70, 'z')));  // 2 words
  EXPECT_FALSE(RespGlobMatch(std::string(70, '?'), std::string(69, 'z')));
  EXPECT_TRUE(RespGlobMatch(std::string(63, '?') + "*z", std::string(80, 'z')));
}

// The work of a match is one step per text byte and 64 pattern states, whatever the pattern:
// the patterns that make a backtracking matcher take exponential or n*m*k time included.
TEST(RespGlobTest, AMatchIsLinearInTheText) {
  const std::string text(8000, 'a');
  for (std::string pattern :
       {std::string("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"), "*[" + std::string(1000, 'a') + "]*b",
        std::string(1000, '*') + "b", std::string("a*") + std::string(400, '?') + "*b"}) {
    uint64_t steps = 0;
    EXPECT_FALSE(RespGlob(pattern).Match(text, &steps)) << pattern.substr(0, 40);
    const uint64_t words = (pattern.size() + 64) / 64;
    EXPECT_LE(steps, text.size() * words) << pattern.substr(0, 40);
  }
}

// The node's setting folds LMCache's pairs in the namespaces it names, for every client there;
// the other namespaces keep Redis's keys.
TEST(RespFoldSettingTest, ANamespaceSettingFoldsItsPairsOnly) {
  ServerOptions options = RespNodeOptions();
  options.resp_fold_namespaces = {"lmcache"};
  std::unique_ptr<Server> server = StartNode(options);
  ASSERT_NE(server, nullptr);
  RespTestClient c(server->resp_port());
  for (const char* ns : {"lmcache", "plain"}) {
    ASSERT_EQ(c.Call({"CLIENT", "NAMESPACE", ns}), "+OK");
    EXPECT_EQ(c.Call({"SET", "pkv_bytes", "chunk"}), "+OK");
    EXPECT_EQ(c.Call({"SET", "pmetadata", "meta"}), "+OK");
    EXPECT_EQ(c.Call({"GET", "pmetadata"}), "$meta");
  }
  ASSERT_EQ(c.Call({"CLIENT", "NAMESPACE", "lmcache"}), "+OK");
  EXPECT_EQ(c.Call({"DBSIZE"}), ":1");
  EXPECT_EQ(c.Call({"DEL", "pmetadata"}), ":1");
  EXPECT_EQ(c.Call({"EXISTS", "pkv_bytes"}), ":0");  // the pair went
  ASSERT_EQ(c.Call({"CLIENT", "NAMESPACE", "plain"}), "+OK");
  EXPECT_EQ(c.Call({"DBSIZE"}), ":2");
  EXPECT_EQ(c.Call({"DEL", "pmetadata"}), ":1");
  EXPECT_EQ(c.Call({"GET", "pkv_bytes"}), "$chunk");  // Redis's DEL: that key alone
}

// --- access -----------------------------------------------------------------------------------

AccessToken Token(std::string name, std::string secret, std::vector<std::string> read,
                  std::vector<std::string> write, bool admin,
                  std::optional<std::string> default_ns) {
  AccessToken t;
  t.name = std::move(name);
  t.secret = std::move(secret);
  t.read = std::move(read);
  t.write = std::move(write);
  t.admin = admin;
  t.default_namespace = std::move(default_ns);
  return t;
}

class RespAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options = RespNodeOptions();
    options.tokens = {
        Token("writer", "writer-secret-0123456789", {"tenant-a"}, {"tenant-a"}, false, "tenant-a"),
        Token("reader", "reader-secret-0123456789", {"tenant-a"}, {}, false, std::nullopt),
        Token("other", "other-secret-01234567890", {"tenant-b"}, {"tenant-b"}, false, "tenant-b"),
        Token("admin", "admin-secret-01234567890", {"*"}, {"*"}, true, std::nullopt),
    };
    server_ = StartNode(options);
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<Server> server_;
};

TEST_F(RespAccessTest, NoAuthNoPermAndNamespaces) {
  RespTestClient c(server_->resp_port());
  EXPECT_EQ(c.Call({"GET", "k"}), "-NOAUTH Authentication required.");
  EXPECT_EQ(c.Call({"PING"}), "-NOAUTH Authentication required.");
  EXPECT_EQ(c.Call({"HELLO", "3"}).substr(0, 7), "-NOAUTH");
  EXPECT_EQ(c.Call({"AUTH", "wrong-secret-0123456789"}),
            "-WRONGPASS invalid username-password pair or user is disabled.");
  EXPECT_EQ(c.Call({"AUTH", "reader", "writer-secret-0123456789"}).substr(0, 10), "-WRONGPASS");
  EXPECT_EQ(c.Call({"AUTH", "writer", "writer-secret-0123456789"}), "+OK");
  EXPECT_EQ(c.Call({"CLIENT", "NAMESPACE"}), "$tenant-a");
  EXPECT_EQ(c.Call({"SET", "k", "from-a"}), "+OK");

  // Another token's default namespace: the same key name is another object.
  RespTestClient b(server_->resp_port());
  EXPECT_EQ(b.Call({"HELLO", "3", "AUTH", "other", "other-secret-01234567890"}).substr(0, 3),
            "%7{");
  EXPECT_EQ(b.Call({"GET", "k"}), "(nil)");
  EXPECT_EQ(b.Call({"CLIENT", "NAMESPACE", "tenant-a"}).substr(0, 7), "-NOPERM");
  EXPECT_EQ(b.Call({"FLUSHDB"}).substr(0, 7), "-NOPERM");

  // A read-only token reads and may not write.
  RespTestClient r(server_->resp_port());
  EXPECT_EQ(r.Call({"AUTH", "reader-secret-0123456789"}), "+OK");
  EXPECT_EQ(r.Call({"CLIENT", "SETNAME", "kvport.ns=tenant-a"}), "+OK");
  EXPECT_EQ(r.Call({"GET", "k"}), "$from-a");
  EXPECT_EQ(r.Call({"SET", "k", "x"}).substr(0, 7), "-NOPERM");
  EXPECT_EQ(r.Call({"DEL", "k"}).substr(0, 7), "-NOPERM");
  EXPECT_EQ(r.Call({"EXPIRE", "k", "10"}).substr(0, 7), "-NOPERM");
  EXPECT_EQ(r.Call({"DBSIZE"}), ":1");
  // The table's access check, before the command runs, in one message per right.
  EXPECT_EQ(r.Call({"MSET", "a", "1", "b", "2"}),
            "-NOPERM token 'reader' may not write namespace 'tenant-a'");
  EXPECT_EQ(r.Call({"CLIENT", "SETNAME", "kvport.ns=tenant-b"}), "+OK");
  EXPECT_EQ(r.Call({"MGET", "a", "b"}), "-NOPERM token 'reader' may not read namespace 'tenant-b'");
  EXPECT_EQ(r.Call({"SCAN", "0"}), "-NOPERM token 'reader' may not read namespace 'tenant-b'");
  EXPECT_EQ(r.Call({"DBSIZE"}), "-NOPERM token 'reader' may not read namespace 'tenant-b'");
  EXPECT_EQ(b.Call({"FLUSHDB"}),
            "-NOPERM token 'other' may not run FLUSHDB: it needs an admin token");

  // The admin flushes a namespace it names.
  RespTestClient admin(server_->resp_port());
  EXPECT_EQ(admin.Call({"AUTH", "admin", "admin-secret-01234567890"}), "+OK");
  EXPECT_EQ(admin.Call({"CLIENT", "NAMESPACE", "tenant-a"}), "+OK");
  EXPECT_EQ(admin.Call({"DBSIZE"}), ":1");
  EXPECT_EQ(admin.Call({"FLUSHDB"}), "+OK");
  EXPECT_EQ(c.Call({"GET", "k"}), "(nil)");
}

TEST_F(RespAccessTest, ALargeCommandPipelinedBehindAuthIsRead) {
  RespTestClient c(server_->resp_port());
  const std::string value = ValueFor("v", 64 << 10);
  ASSERT_TRUE(c.SendRaw(RespTestClient::Encode({"AUTH", "writer-secret-0123456789"}) +
                        RespTestClient::Encode({"SET", "big", value})));
  EXPECT_EQ(c.Read(), "+OK");
  EXPECT_EQ(c.Read(), "+OK");
  EXPECT_EQ(c.Call({"STRLEN", "big"}), ":65536");
}

TEST_F(RespAccessTest, BeforeAuthOnlySmallCommandsAreRead) {
  RespTestClient c(server_->resp_port());
  const std::string reply = c.Call({"AUTH", std::string(8192, 'x')});
  EXPECT_EQ(reply.substr(0, 20), "-ERR Protocol error:") << reply;
  EXPECT_TRUE(c.ReadsToEof());
}

TEST(RespAccessNodeTest, SilentConnectionsGiveWayToOneThatAuthenticates) {
  ServerOptions options = RespNodeOptions();
  options.tokens = {Token("t", "token-secret-0123456789", {"*"}, {"*"}, false, std::nullopt)};
  options.max_connections = 40;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  // More silent connections than the node serves: the oldest are closed to admit newer ones.
  std::vector<std::unique_ptr<RespTestClient>> silent;
  for (int i = 0; i < 60; ++i) {
    silent.push_back(std::make_unique<RespTestClient>(server->resp_port()));
    ASSERT_TRUE(silent.back()->connected());
  }
  RespTestClient c(server->resp_port());
  EXPECT_EQ(c.Call({"AUTH", "token-secret-0123456789"}), "+OK");
  EXPECT_EQ(c.Call({"SET", "k", "v"}), "+OK");
  EXPECT_EQ(c.Call({"GET", "k"}), "$v");
  EXPECT_GE(server->Stats().Get("unauthenticated_evictions"), 20u);
  // The first silent one was closed with a RESP error naming the limit.
  const std::string parting = silent.front()->Read();
  EXPECT_EQ(parting.substr(0, 4), "-ERR") << parting;
  EXPECT_NE(parting.find("max_connections"), std::string::npos) << parting;
}

TEST(RespListenTest, BeyondLoopbackNeedsTokensOrInsecure) {
  ServerOptions options = RespNodeOptions();
  options.resp_listen = "0.0.0.0:0";
  Result<std::unique_ptr<Server>> refused = Server::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("Redis protocol"), std::string::npos);
  options.insecure = true;
  Result<std::unique_ptr<Server>> insecure = Server::Start(options);
  ASSERT_TRUE(insecure.ok()) << insecure.status().ToString();
  EXPECT_EQ((*insecure)->Stats().Get("insecure"), 1u);
  // A bare port is loopback.
  options = RespNodeOptions();
  options.resp_listen = "0";
  Result<std::unique_ptr<Server>> bare = Server::Start(options);
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ((*bare)->resp_address().substr(0, 10), "127.0.0.1:");
}

// --- large values: read straight into their reservation (server/resp_value_capture.h) ---------

TEST(RespLargeValueTest, ASetsValueGoesToItsReservationNotTheInputBuffer) {
  auto server = StartNode(RespNodeOptions());
  ASSERT_NE(server, nullptr);
  RespTestClient c(server->resp_port());
  RespTestClient reader(server->resp_port());
  const std::string value = ValueFor("big", 1536 << 10);
  const std::string command = RespTestClient::Encode({"SET", "big", value, "EX", "100"});
  const size_t half = command.find(value) + value.size() / 2;
  ASSERT_TRUE(c.SendRaw(std::string_view(command).substr(0, half)));
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("bytes_received") >= half; }));
  // Half the value is in the arena, reserved: read into the input buffer it would hold 768 KiB.
  EXPECT_LT(server->Stats().Get("input_buffer_bytes"), 128u << 10);
  EXPECT_GE(server->Stats().Get("reserved_bytes"), value.size() / 2);
  EXPECT_EQ(reader.Call({"GET", "big"}), "(nil)");  // nothing of it visible yet
  ASSERT_TRUE(c.SendRaw(std::string_view(command).substr(half)));
  EXPECT_EQ(c.Read(), "+OK");
  EXPECT_EQ(reader.Call({"GET", "big"}), "$" + value);
  const std::string ttl = reader.Call({"TTL", "big"});  // the EX after the value
  EXPECT_TRUE(ttl == ":100" || ttl == ":99") << ttl;

  const std::string other = ValueFor("other", 1 << 20);
  // NX on a present key: not written, the reservation dropped.
  EXPECT_EQ(c.Call({"SET", "big", other, "NX"}), "(nil)");
  EXPECT_EQ(reader.Call({"GET", "big"}), "$" + value);
  // A syntax error after the value: nothing written.
  EXPECT_EQ(c.Call({"SET", "bad", other, "BOGUS"}), "-ERR syntax error");
  EXPECT_EQ(c.Call({"EXISTS", "bad"}), ":0");
  // SETEX, PSETEX and SET ... GET; pipelined behind each other with small commands.
  ASSERT_TRUE(c.SendRaw(RespTestClient::Encode({"PSETEX", "px", "100000", other}) +
                        RespTestClient::Encode({"SET", "big", other, "GET"}) + "PING\r\n" +
                        RespTestClient::Encode({"SETEX", "ex", "100", value})));
  EXPECT_EQ(c.Read(), "+OK");
  EXPECT_EQ(c.Read(), "$" + value);  // the old value
  EXPECT_EQ(c.Read(), "+PONG");
  EXPECT_EQ(c.Read(), "+OK");
  EXPECT_EQ(reader.Call({"GET", "px"}), "$" + other);
  EXPECT_EQ(reader.Call({"GET", "big"}), "$" + other);
  EXPECT_EQ(reader.Call({"GET", "ex"}), "$" + value);
  EXPECT_TRUE(Eventually([&] { return server->Stats().Get("reserved_bytes") == 0; }));
}

TEST(RespLargeValueTest, AStalledValueIsDroppedAtItsDeadline) {
  auto server = StartNode(RespNodeWithDeadline(std::chrono::milliseconds(300)));
  ASSERT_NE(server, nullptr);
  RespTestClient c(server->resp_port());
  const std::string value = ValueFor("stalled", 1 << 20);
  const std::string command = RespTestClient::Encode({"SET", "stalled", value});
  ASSERT_TRUE(c.SendRaw(std::string_view(command).substr(0, command.find(value) + (100 << 10))));
  const std::string reply = c.Read();  // the sweep answers within a few deadlines
  EXPECT_EQ(reply.substr(0, 12), "-ERR timeout") << reply;
  EXPECT_TRUE(c.ReadsToEof());
  RespTestClient reader(server->resp_port());
  EXPECT_EQ(reader.Call({"EXISTS", "stalled"}), ":0");
  EXPECT_TRUE(Eventually([&] {
    const ServerStats stats = server->Stats();
    return stats.Get("reserved_bytes") == 0 && stats.Get("reserved_unwritten_bytes") == 0;
  }));
}

TEST(RespLargeValueTest, AStepTheStoreRefusesIsAnsweredAndTheConnectionGoesOn) {
  ServerOptions options = RespNodeOptions();
  options.max_reserved_bytes = 1 << 20;  // steps of 512 KiB (WriteBatch::StepBytes)
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  const std::string value = ValueFor("a", 1 << 20);
  const std::string a_command = RespTestClient::Encode({"SET", "a", value});
  // All but the last byte of its first step: the step is not full, so not grown yet.
  const size_t a_first = a_command.find(value) + (512 << 10) - 1;
  RespTestClient a(server->resp_port());
  ASSERT_TRUE(a.SendRaw(std::string_view(a_command).substr(0, a_first)));
  // Written into its first step: one byte of it reserved and not written.
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("reserved_unwritten_bytes") == 1; }));
  // Two writers stalled after a byte hold the node's max_reserved_bytes between them.
  std::vector<std::unique_ptr<RespTestClient>> stalled;
  uint64_t unwritten = 1;
  for (const std::string key : {"b", "c"}) {
    const std::string command = RespTestClient::Encode({"SET", key, value});
    stalled.push_back(std::make_unique<RespTestClient>(server->resp_port()));
    ASSERT_TRUE(
        stalled.back()->SendRaw(std::string_view(command).substr(0, command.find(value) + 1)));
    unwritten += (512 << 10) - 1;
    ASSERT_TRUE(Eventually([&] {
      return server->Stats().Get("reserved_unwritten_bytes") == unwritten;
    })) << key
        << ": " << server->Stats().Get("reserved_unwritten_bytes");
  }
  // a's next step is refused: the rest of its bytes are read and dropped, and it is answered.
  ASSERT_TRUE(a.SendRaw(std::string_view(a_command).substr(a_first)));
  const std::string reply = a.Read();
  EXPECT_EQ(reply.substr(0, 4), "-OOM") << reply;
  EXPECT_EQ(a.Call({"PING"}), "+PONG");
  EXPECT_EQ(a.Call({"EXISTS", "a"}), ":0");
  stalled.clear();
  EXPECT_TRUE(Eventually([&] {
    const ServerStats stats = server->Stats();
    return stats.Get("reserved_bytes") == 0 && stats.Get("reserved_unwritten_bytes") == 0;
  }));
  EXPECT_EQ(a.Call({"SET", "a", value}), "+OK");  // with room again, the same value goes in
  EXPECT_EQ(a.Call({"STRLEN", "a"}), ":" + std::to_string(value.size()));
}

// --- hostile input ----------------------------------------------------------------------------

TEST(RespHostileTest, AnnouncedHugeBulkIsRefusedWithoutAllocating) {
  auto server = StartNode(RespNodeOptions());
  ASSERT_NE(server, nullptr);
  RespTestClient c(server->resp_port());
  ASSERT_TRUE(c.SendRaw("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1099511627776\r\n"));
  const std::string reply = c.Read();
  EXPECT_EQ(reply.substr(0, 20), "-ERR Protocol error:") << reply;
  EXPECT_NE(reply.find("max_value_bytes"), std::string::npos) << reply;
  EXPECT_TRUE(c.ReadsToEof());
  EXPECT_LE(server->Stats().Get("input_buffer_bytes"), 64u << 10);
  // Too many arguments, and a bad type inside the array: the same.
  RespTestClient d(server->resp_port());
  ASSERT_TRUE(d.SendRaw("*100000000\r\n"));
  EXPECT_EQ(d.Read().substr(0, 20), "-ERR Protocol error:");
  RespTestClient e(server->resp_port());
  ASSERT_TRUE(e.SendRaw("*1\r\n*1\r\n$1\r\nx\r\n"));
  EXPECT_EQ(e.Read(), "-ERR Protocol error: expected '$', got '*'");
}

TEST(RespHostileTest, OneByteAtATimeWriterIsServed) {
  auto server = StartNode(RespNodeOptions());
  ASSERT_NE(server, nullptr);
  RespTestClient c(server->resp_port());
  const std::string bytes = RespTestClient::Encode({"SET", "slow", "value"}) +
                            RespTestClient::Encode({"GET", "slow"}) + "PING\r\n";
  for (char byte : bytes)
    ASSERT_TRUE(c.SendRaw(std::string_view(&byte, 1)));
  EXPECT_EQ(c.Read(), "+OK");
  EXPECT_EQ(c.Read(), "$value");
  EXPECT_EQ(c.Read(), "+PONG");  // an inline command
}

TEST(RespHostileTest, IncompleteCommandMissesItsDeadline) {
  auto server = StartNode(RespNodeWithDeadline(std::chrono::milliseconds(200)));
  ASSERT_NE(server, nullptr);
  RespTestClient c(server->resp_port());
  ASSERT_TRUE(c.SendRaw("*2\r\n$3\r\nGET\r\n$10\r\nabc"));
  const std::string reply = c.Read();  // the sweep answers within a few deadlines
  EXPECT_EQ(reply.substr(0, 12), "-ERR timeout") << reply;
  EXPECT_TRUE(c.ReadsToEof());
  EXPECT_GE(server->Stats().Get("request_timeouts"), 1u);
}

TEST(RespHostileTest, ClientThatNeverReadsIsBoundedByTheQueueCap) {
  ServerOptions options = RespNodeOptions();
  options.max_connection_outstanding_bytes = 1 << 20;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  RespTestClient writer(server->resp_port());
  const std::string value = ValueFor("v", 256 << 10);
  ASSERT_EQ(writer.Call({"SET", "v", value}), "+OK");

  // Pipelined GETs of 256 KiB, never read: far more than the socket buffers and the cap hold.
  RespTestClient hog(server->resp_port());
  const std::string get = RespTestClient::Encode({"GET", "v"});
  std::string batch;
  for (int i = 0; i < 1024; ++i)
    batch += get;
  int sent = 0;
  // The node stops reading once its queue is over the cap, so the socket buffers fill and
  // sends stop going through: send without blocking until the socket refuses (bounded: 4000
  // batches would be 20 GiB of replies).
  for (; sent < 4000; ++sent) {
    const ssize_t n = ::send(hog.fd(), batch.data(), batch.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < static_cast<ssize_t>(batch.size())) break;
  }
  EXPECT_LT(sent, 4000);
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("paused_connections") >= 1; }));
  // What the node holds for it is bounded: the cap plus one reply.
  EXPECT_LE(server->Stats().Get("pinned_bytes"), (1u << 20) + 2 * value.size());
  // Others are served meanwhile.
  EXPECT_EQ(writer.Call({"GET", "missing"}), "(nil)");
  // Closed, the connections give every byte of the node's gauges back.
  hog.Close();
  writer.Close();
  EXPECT_TRUE(Eventually([&] {
    const ServerStats stats = server->Stats();
    return stats.Get("connections") == 0 && stats.Get("queued_response_bytes") == 0 &&
           stats.Get("input_buffer_bytes") == 0 && stats.Get("paused_connections") == 0 &&
           stats.Get("pinned_bytes") == 0;
  })) << "queued_response_bytes "
      << server->Stats().Get("queued_response_bytes");
}

}  // namespace
}  // namespace kvport::testing

namespace kvport::testing {
namespace {

constexpr int kSmallBuffer = 4096;

// An MGET naming one key so often that its answer would carry more than the node holds is
// refused whole, as the binary MGET is, and the connection goes on. Before: a short command
// naming a 1 MiB key 64 times on an 8 MiB node was answered with 64 MiB.
TEST(RespBoundsTest, AnMgetAnswerLargerThanTheNodeIsRefused) {
  std::unique_ptr<Server> server = StartNode(RespNodeOptions());
  ASSERT_NE(server, nullptr);
  RespTestClient c(server->resp_port());
  ASSERT_EQ(c.Call({"SET", "k", std::string(1 << 20, 'v')}), "+OK");
  std::vector<std::string> mget{"MGET"};
  for (int i = 0; i < 64; ++i)
    mget.push_back("k");
  const std::string refused = c.Call(mget);
  EXPECT_EQ(refused.rfind("-ERR an MGET answer of", 0), 0u) << refused.substr(0, 80);
  EXPECT_NE(refused.find("TooLarge"), std::string::npos) << refused.substr(0, 120);
  EXPECT_EQ(c.Call({"PING"}), "+PONG");
  EXPECT_EQ(server->Stats().Get("pinned_bytes"), 0u);
  mget.resize(1 + 7);  // 7 MiB: what the arena holds is answered
  EXPECT_EQ(c.Call(mget).substr(0, 3), "*7[") << "an array of seven values";
}

// A client that pipelines MGETs and reads nothing holds one answer past its share of the
// node's queued replies, however many it sent: replies gathered from a pipeline join the queue
// the throttle weighs (unweighed, a pipeline of eight ~16 MB answers held all eight).
TEST(RespBoundsTest, APipelineOfUnreadAnswersHoldsOneAnswerPastItsShare) {
  ServerOptions options = RespNodeOptions();
  options.max_queued_response_bytes = 2 << 20;
  std::unique_ptr<Server> server = StartNode(options);
  ASSERT_NE(server, nullptr);
  RespTestClient writer(server->resp_port());
  std::vector<std::string> mget{"MGET"};
  for (int i = 0; i < 200; ++i) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_EQ(writer.Call({"SET", key, std::string(4096, 'v')}), "+OK");
    mget.push_back(key);
  }
  const uint64_t answer = 200 * (4096 + 16);  // copied into the reply: values under 16 KiB
  RespTestClient hostile(server->resp_port());
  ASSERT_EQ(::setsockopt(hostile.fd(), SOL_SOCKET, SO_RCVBUF, &kSmallBuffer, sizeof(int)), 0);
  std::string pipeline;
  for (int i = 0; i < 8; ++i)
    pipeline += RespTestClient::Encode(mget);
  ASSERT_TRUE(hostile.SendRaw(pipeline));
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("paused_connections") == 1; }));
  EXPECT_LE(server->Stats().Get("queued_response_bytes"),
            options.max_queued_response_bytes / 8 + 2 * answer);
  EXPECT_EQ(writer.Call({"PING"}), "+PONG");
}

// Clients stalled in the middle of MSETs hold at most the node's input cap together, which
// scales with the node (capacity / 8, at least 64 MiB): the ones past it are not read. Before:
// the cap was 1 GiB whatever the node, and 4 stalled MSETs held +320 MiB on a 64 MiB node.
TEST(RespBoundsTest, StalledMsetsHoldAtMostTheNodesInputCap) {
  ServerOptions options = RespNodeOptions();
  options.capacity_bytes = 64 << 20;
  options.max_value_bytes = 64 << 20;
  options.request_timeout = std::chrono::seconds(120);  // the cap, not the deadline, must act
  std::unique_ptr<Server> server = StartNode(options);
  ASSERT_NE(server, nullptr);
  const uint64_t cap = server->Stats().Get("max_input_buffer_bytes");
  EXPECT_EQ(cap, uint64_t{64} << 20);
  std::vector<std::unique_ptr<RespTestClient>> stalled;
  const std::string chunk(1 << 20, 'v');
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(std::make_unique<RespTestClient>(server->resp_port()));
    RespTestClient& c = *stalled.back();
    timeval bound{0, 200 * 1000};  // a send the node does not read gives up, it does not block
    ASSERT_EQ(::setsockopt(c.fd(), SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound)), 0);
    // MSET k<i> <a 60 MiB value>: 24 MiB of it sent, the rest never.
    ASSERT_TRUE(c.SendRaw("*3\r\n$4\r\nMSET\r\n$2\r\nk" + std::to_string(i) + "\r\n$" +
                          std::to_string(60 << 20) + "\r\n"));
    for (int mib = 0; mib < 24 && c.SendRaw(chunk); ++mib) {
    }
  }
  // The node stops reading the ones its cap leaves no room for.
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("paused_connections") >= 1; }));
  // Each connection's first 16 KiB is always allowed (a node at its cap still reads small
  // commands); growth is what the cap stops.
  EXPECT_LE(server->Stats().Get("input_buffer_bytes"), cap + 4 * (16 << 10));
  RespTestClient other(server->resp_port());
  EXPECT_EQ(other.Call({"SET", "small", "v"}), "+OK");  // a small command is still read
  EXPECT_EQ(other.Call({"GET", "small"}), "$v");
}

}  // namespace
}  // namespace kvport::testing

// SPDX-License-Identifier: Apache-2.0
// `kvport bench` with its redis-server baseline: starts redis-server as a child process, so
// this binary is labelled needs-exec. Skipped, with the reason printed, when redis-server is
// not installed.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include "bench/bench_report.h"
#include "bench/bench_run.h"
#include "bench/load_report.h"
#include "bench/load_run.h"
#include "bench/redis_server.h"

namespace kvport::bench {
namespace {

bool Answers(uint16_t port) {
  const timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  bool ok = false;
  if (c != nullptr && c->err == 0) {
    auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
    if (reply != nullptr) freeReplyObject(reply);
  }
  if (c != nullptr) redisFree(c);
  return ok;
}

std::string RedisOrSkipReason() {
  Result<std::string> exe = RedisServer::FindExecutable("redis-server");
  return exe.ok() ? std::string() : exe.status().message();
}

TEST(RedisServerTest, MissingExecutableIsNotFoundWithHowToInstall) {
  Result<std::string> exe = RedisServer::FindExecutable("kvport-no-such-redis-server");
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kNotFound);
  EXPECT_NE(exe.status().message().find("make bench"), std::string::npos);
  EXPECT_FALSE(RedisServer::FindExecutable("/nonexistent/redis-server").ok());
}

TEST(RedisServerTest, StartsOnAnEphemeralPortAndStops) {
  if (const std::string why = RedisOrSkipReason(); !why.empty()) GTEST_SKIP() << why;
  Result<std::unique_ptr<RedisServer>> server =
      RedisServer::Start(*RedisServer::FindExecutable("redis-server"));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint16_t port = (*server)->port();
  EXPECT_NE(port, 0);
  EXPECT_TRUE(Answers(port));
  (*server)->Stop();
  EXPECT_FALSE(Answers(port));
  (*server)->Stop();  // idempotent
}

TEST(BenchRedisTest, TinyRunWithBothBaselines) {
  if (const std::string why = RedisOrSkipReason(); !why.empty()) GTEST_SKIP() << why;
  BenchOptions o;
  o.value_bytes = 32 << 10;
  o.batch = 4;
  o.connections = 2;
  o.count = 8;
  o.max_seconds = 120;
  o.exists_batch = 16;
  o.exists_count = 4;
  o.warmup_bytes = 1 << 20;
  Result<BenchReport> r = RunBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->redis_skipped.empty()) << r->redis_skipped;
  ASSERT_EQ(r->redis.size(), 3u);
  for (const PhaseResult& p : r->redis) {
    SCOPED_TRACE(std::string(OpName(p.op)));
    EXPECT_TRUE(p.error.empty()) << p.error;
    EXPECT_EQ(p.failed_keys, 0u);
    if (p.op == Op::kExists) {
      EXPECT_EQ(p.keys, o.exists_count * o.exists_batch);
    } else {
      EXPECT_EQ(p.bytes, o.count * o.batch * o.value_bytes);
    }
  }
  for (Op op : {Op::kPut, Op::kGet, Op::kExists}) {
    EXPECT_TRUE(r->RatioToRedis(op).has_value()) << OpName(op);
  }
  EXPECT_TRUE(r->AllPassed());
  const std::string text = FormatBenchText(*r);
  EXPECT_NE(text.find("kvport/redis"), std::string::npos) << text;
  EXPECT_EQ(text.find("redis baseline skipped"), std::string::npos) << text;
}

// `kvport load`'s short form with redis-server: the same steps against both, every answer right.
TEST(LoadRedisTest, TheSameLoadRunsAgainstRedis) {
  if (const std::string why = RedisOrSkipReason(); !why.empty()) GTEST_SKIP() << why;
  LoadOptions o;
  o.connections = 3;
  o.rates = {100, 150};
  o.seconds = 0.5;
  o.objects = 256;
  o.page_bytes = 4096;
  o.prompt_pages = 16;
  o.probe_pages = 8;
  o.get_batch = 4;
  o.write_batch = 4;
  Result<LoadReport> r = RunLoad(o, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->redis_skipped.empty()) << r->redis_skipped;
  ASSERT_FALSE(r->redis.empty());
  ASSERT_FALSE(r->kvport.empty());
  for (const LoadStep& s : r->redis) {
    EXPECT_EQ(s.system, "redis");
    EXPECT_GT(s.pages_read, 0u);
    EXPECT_GT(s.latency.meta.count(), 0u);
    EXPECT_GT(s.bytes_written, 0u);
    EXPECT_EQ(s.misses, 0u);
    EXPECT_EQ(s.wrong, 0u);
    EXPECT_EQ(s.failed, 0u) << s.error;
  }
  EXPECT_TRUE(r->AllCorrect());
  EXPECT_NE(FormatLoadText(*r).find("redis / kvport"), std::string::npos);
}

}  // namespace
}  // namespace kvport::bench

// SPDX-License-Identifier: Apache-2.0
// `kvport bench --disk` (bench/disk_bench.h) end to end on a tiny data set, 16 MiB through a
// node with 4 MiB of memory, with fio forced absent (its rows skipped with the reason), and
// fio's JSON parsed from a sample of its output.
#include "bench/disk_bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench_report.h"

namespace kvport::bench {
namespace {

namespace fs = std::filesystem;

class DiskBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kvport_bench_disk_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  BenchOptions Tiny() const {
    BenchOptions o;
    o.disk_dir = dir_;
    o.value_bytes = 64 << 10;
    o.batch = 4;
    o.connections = 2;
    o.max_seconds = 120;  // bounded by the data set; the time limit is only a safety net
    o.disk_data_bytes = 16 << 20;
    o.disk_memory_bytes = 4 << 20;
    o.node_threads = 2;
    o.fio = "/nonexistent/fio";  // absent: skipped with the reason
    return o;
  }

  std::string dir_;
};

TEST_F(DiskBenchTest, WritesThroughTheDiskTierRestartsAndReadsItAllBack) {
  const BenchOptions o = Tiny();
  std::vector<std::string> notes;
  Result<DiskBenchReport> r = RunDiskBench(o, [&](std::string_view n) { notes.emplace_back(n); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(notes.empty());

  EXPECT_EQ(r->keys_written, 256u);
  EXPECT_EQ(r->keys_filled, 64u);  // the memory's worth, untimed
  // Timed puts: every key past the fill, all stored; none dropped from the disk queue.
  EXPECT_TRUE(r->put.error.empty()) << r->put.error;
  EXPECT_EQ(r->put.failed_keys, 0u);
  EXPECT_EQ(r->put.keys, r->keys_written - r->keys_filled);
  EXPECT_EQ(r->put.bytes, r->put.keys * o.value_bytes);
  EXPECT_EQ(r->put_queue_drops, 0u);
  EXPECT_GT(r->put_disk_writes, 0u);
  EXPECT_GE(r->put.seconds, r->put_ack_seconds);

  // After the restart most of the data set is on disk (what was in memory is gone), and every
  // one of those keys was read once, right.
  EXPECT_GT(r->restored_objects, 0u);
  EXPECT_GT(r->restored_disk_bytes, 0u);
  EXPECT_GE(r->keys_on_disk, r->keys_written - 2 * r->keys_filled);
  EXPECT_LE(r->keys_on_disk, r->keys_written);
  EXPECT_TRUE(r->get.error.empty()) << r->get.error;
  EXPECT_EQ(r->get.failed_keys, 0u);
  EXPECT_EQ(r->get.keys, r->keys_on_disk);
  EXPECT_EQ(r->get.bytes, r->keys_on_disk * o.value_bytes);
  EXPECT_EQ(r->get_disk_hits, r->keys_on_disk);
  EXPECT_TRUE(r->page_cache_note.empty()) << r->page_cache_note;
  EXPECT_GT(r->page_cache_files, 0u);
  EXPECT_TRUE(r->RestartMsPerGib().has_value());
  EXPECT_TRUE(r->AllPassed());

  // fio absent: skipped, naming it; no ratio.
  EXPECT_TRUE(r->fio_read.system.empty());
  EXPECT_NE(r->fio_skipped.find("fio not found"), std::string::npos) << r->fio_skipped;
  EXPECT_FALSE(r->GetVsFio().has_value());

  // The run folder is gone.
  EXPECT_FALSE(fs::exists(r->run_dir)) << r->run_dir;

  const std::string text = FormatDiskBenchText(*r);
  EXPECT_NE(text.find("kvport/fio randread"), std::string::npos) << text;
  EXPECT_NE(text.find("fio skipped: fio not found"), std::string::npos) << text;
  EXPECT_NE(text.find("restart:"), std::string::npos) << text;
  EXPECT_EQ(text.find("FAILED"), std::string::npos) << text;

  const std::string dumped = FormatDiskBenchJson(*r);
  ASSERT_TRUE(nlohmann::json::accept(dumped)) << dumped;
  const nlohmann::json json = nlohmann::json::parse(dumped);
  EXPECT_EQ(json["mode"], "disk");
  EXPECT_EQ(json["passed"], true);
  EXPECT_TRUE(json["disk_get_gbps"].is_number());
  EXPECT_TRUE(json["disk_put_gbps"].is_number());
  EXPECT_TRUE(json["restart_ms_per_gib"].is_number());
  EXPECT_TRUE(json["fio_read_gbps"].is_null());
  EXPECT_TRUE(json["vs_fio"].is_null());
  EXPECT_NE(json["fio_skipped"].get<std::string>().find("fio not found"), std::string::npos);
  EXPECT_EQ(json["keys"]["on_disk"], r->keys_on_disk);
  EXPECT_EQ(json["options"]["data_bytes"], o.disk_data_bytes);
  EXPECT_EQ(json["options"]["fio_iodepth"], 32);
  ASSERT_EQ(json["phases"].size(), 2u);  // kvport's put and get; no fio
  EXPECT_EQ(json["phases"][0]["op"], "put");
  EXPECT_EQ(json["phases"][1]["op"], "get");
  EXPECT_EQ(json["phases"][1]["failed_keys"], 0);
}

TEST_F(DiskBenchTest, RefusesOptionsThatCannotWork) {
  BenchOptions o = Tiny();
  o.disk_data_bytes = 6 << 20;  // less than twice the memory
  Result<DiskBenchReport> r = RunDiskBench(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--disk-data"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_));  // nothing made
}

// What fio 3.33 prints with --output-format=json, cut down to the fields read (and a warning
// line before it, as fio prints some).
constexpr const char* kFioRead = R"(fio: some warning
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "kvport-bench-randread",
      "error" : 0,
      "read" : {"io_bytes" : 268435456, "bw_bytes" : 1342177280, "total_ios" : 256,
                "runtime" : 200},
      "write" : {"io_bytes" : 0, "bw_bytes" : 0, "total_ios" : 0, "runtime" : 0}
    }
  ]
}
)";

TEST(FioJsonTest, ReadsTheJobsBandwidth) {
  Result<PhaseResult> p = ParseFioJson(kFioRead, "read");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->system, "fio");
  EXPECT_EQ(p->op, Op::kGet);
  EXPECT_EQ(p->bytes, 268435456u);
  EXPECT_EQ(p->calls, 256u);
  EXPECT_NEAR(p->seconds, 0.2, 1e-9);
  EXPECT_NEAR(p->gb_per_second(), 1.342177280, 1e-9);

  // The write part moved nothing: not a result.
  EXPECT_EQ(ParseFioJson(kFioRead, "write").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseFioJson("fio: io_uring not supported\n", "read").status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(ParseFioJson(R"({"jobs": [{"error": 22, "read": {}}]})", "read").status().code(),
            StatusCode::kCorruption);
  // Older fio: bw in KiB/s only.
  Result<PhaseResult> old = ParseFioJson(
      R"({"jobs": [{"error": 0, "read": {"io_bytes": 1048576, "bw": 1024}}]})", "read");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_NEAR(old->seconds, 1.0, 1e-9);
}

}  // namespace
}  // namespace kvport::bench

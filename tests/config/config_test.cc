// SPDX-License-Identifier: Apache-2.0
#include "kvport/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvport {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kHostMemory = 16 * kGiB;  // injected: results never depend on this machine

// A YAML file in a fresh temporary directory, removed at the end of the test.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("kvport_config_test_") + info->name() + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteFile(const std::string& text, const std::string& name = "kvport.yaml") {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // Loads `yaml` (written to a file) with `env` as the whole environment.
  Result<Config> Load(const std::string& yaml, std::map<std::string, std::string> env = {},
                      uint64_t host_memory = kHostMemory) {
    ConfigSources sources;
    sources.file = WriteFile(yaml);
    sources.env = std::move(env);
    sources.host_memory_bytes = host_memory;
    sources.log_warnings = false;
    return LoadConfig(sources);
  }

  // Loads `yaml`, expecting an InvalidArgument; returns its message.
  std::string LoadError(const std::string& yaml, std::map<std::string, std::string> env = {},
                        uint64_t host_memory = kHostMemory) {
    Result<Config> r = Load(yaml, std::move(env), host_memory);
    EXPECT_FALSE(r.ok()) << "expected an error for:\n" << yaml;
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    return r.status().message();
  }

  std::filesystem::path dir_;
};

std::string OriginOf(const Config& c, const std::string& key) {
  const ConfigEntry* e = c.FindEntry(key);
  return e == nullptr ? "<no entry>" : e->origin;
}

TEST_F(ConfigTest, NoFileGivesDocumentedDefaults) {
  ConfigSources sources;
  sources.env = std::map<std::string, std::string>{};
  sources.host_memory_bytes = kHostMemory;
  Result<Config> r = LoadConfig(sources);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = *r;
  EXPECT_EQ(c.file, "");
  EXPECT_EQ(c.chunk_size, 256u);
  EXPECT_TRUE(c.local_cpu);
  EXPECT_EQ(c.max_local_cpu_size_bytes, 5 * kGiB);
  EXPECT_EQ(c.max_local_disk_size_bytes, 0u);
  EXPECT_EQ(c.remote_serde, "naive");
  EXPECT_FALSE(c.save_unfull_chunk);
  EXPECT_EQ(c.blocking_timeout_secs, 10u);
  EXPECT_EQ(c.eic_thread_num, 6u);
  EXPECT_EQ(c.eic_log_level, 1u);
  EXPECT_EQ(c.eic_trans_type, 3u);
  EXPECT_EQ(c.eic_kv_ttl, -1);
  EXPECT_EQ(c.node.listen, "127.0.0.1:7470");
  EXPECT_EQ(c.node.unix_socket, "auto");
  EXPECT_TRUE(c.node.shared_memory);
  EXPECT_EQ(c.node.max_leases_per_session, 4096u);
  EXPECT_EQ(c.node.max_reservations_per_session, 256u);
  EXPECT_EQ(c.node.capacity, kGiB);
  EXPECT_EQ(c.node.threads, 0u);
  EXPECT_EQ(c.node.max_frame_bytes, uint64_t{16} << 20);
  EXPECT_EQ(c.node.max_connection_outstanding_bytes, uint64_t{256} << 20);
  EXPECT_EQ(c.node.idle_timeout_secs, 300u);
  EXPECT_EQ(c.node.max_queued_response_bytes, 0u);  // automatic
  EXPECT_EQ(c.node.max_index_bytes, 0u);            // automatic
  EXPECT_EQ(c.node.max_reserved_bytes, 0u);
  EXPECT_EQ(c.node.max_pinned_bytes, 0u);
  EXPECT_EQ(c.node.request_timeout_secs, 10u);
  EXPECT_EQ(c.node.min_request_bytes_per_sec, uint64_t{1} << 20);
  EXPECT_EQ(c.log_level, "info");
  EXPECT_TRUE(c.warnings.empty());
  for (const ConfigEntry& e : c.entries) {
    EXPECT_EQ(e.origin, "default") << e.key;
    EXPECT_EQ(e.source, ConfigSource::kDefault) << e.key;
  }
  ASSERT_NE(c.FindEntry("max_local_cpu_size"), nullptr);
  EXPECT_EQ(c.FindEntry("max_local_cpu_size")->value, "5");
  EXPECT_EQ(c.FindEntry("max_local_cpu_size")->human, "5 GiB");
  EXPECT_EQ(c.FindEntry("max_local_cpu_size")->env_var, "LMCACHE_MAX_LOCAL_CPU_SIZE");
  EXPECT_EQ(c.FindEntry("capacity")->env_var, "KVPORT_CAPACITY");
  EXPECT_EQ(c.FindEntry("eic_trans_type")->env_var, "LMCACHE_EIC_TRANS_TYPE");
  EXPECT_EQ(c.FindEntry("extra_config")->value, "{}");
  EXPECT_EQ(c.busy_poll_us, 0u);
  EXPECT_EQ(c.FindEntry("busy_poll_us")->env_var, "KVPORT_BUSY_POLL_US");
  EXPECT_TRUE(c.checksums);
  EXPECT_EQ(c.FindEntry("checksums")->env_var, "KVPORT_CHECKSUMS");
}

TEST_F(ConfigTest, FileValuesAreTypedAndRememberTheirSource) {
  Result<Config> r = Load(
      "chunk_size: 128\n"
      "local_cpu: false\n"
      "max_local_cpu_size: 2.5\n"
      "max_local_disk_size: 10\n"
      "local_disk: /mnt/cache\n"
      "remote_url: eic://10.0.0.1:7470\n"
      "pre_caching_hash_algorithm: sha256_cbor\n"
      "save_unfull_chunk: true\n"
      "eic_trans_type: 2\n"
      "eic_kv_ttl: 3600\n"
      "eic_kv_ns: llama\n"
      "listen: 0.0.0.0:7471\n"
      "capacity: 8GiB\n"
      "threads: 4\n"
      "max_value_bytes: 64MiB\n"
      "cuda_runtime_library: /opt/cuda/libcudart.so.12\n"
      "log_level: debug\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = *r;
  EXPECT_EQ(c.chunk_size, 128u);
  EXPECT_FALSE(c.local_cpu);
  EXPECT_EQ(c.max_local_cpu_size_bytes, 5 * kGiB / 2);
  EXPECT_EQ(c.max_local_disk_size_bytes, 10 * kGiB);
  EXPECT_EQ(c.local_disk, "/mnt/cache");
  EXPECT_EQ(c.remote_url, "eic://10.0.0.1:7470");
  EXPECT_TRUE(c.save_unfull_chunk);
  EXPECT_EQ(c.eic_trans_type, 2u);
  EXPECT_EQ(c.eic_kv_ttl, 3600);
  EXPECT_EQ(c.eic_kv_ns, "llama");
  EXPECT_EQ(c.node.listen, "0.0.0.0:7471");
  EXPECT_EQ(c.node.capacity, 8 * kGiB);
  EXPECT_EQ(c.node.threads, 4u);
  EXPECT_EQ(c.node.max_value_bytes, uint64_t{64} << 20);
  EXPECT_EQ(c.cuda_runtime_library, "/opt/cuda/libcudart.so.12");
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.file, (dir_ / "kvport.yaml").string());
  EXPECT_EQ(OriginOf(c, "chunk_size"), "file:" + c.file);
  EXPECT_EQ(c.FindEntry("chunk_size")->source, ConfigSource::kFile);
  EXPECT_EQ(OriginOf(c, "blocking_timeout_secs"), "default");
  EXPECT_EQ(c.FindEntry("max_local_cpu_size")->value, "2.5");
  EXPECT_EQ(c.FindEntry("capacity")->value, "8589934592");
  EXPECT_EQ(c.FindEntry("capacity")->human, "8 GiB");
  EXPECT_EQ(c.FindEntry("eic_kv_ns")->value, "llama");  // a string as it is; printing quotes it
  EXPECT_TRUE(c.FindEntry("eic_kv_ns")->is_string);
  EXPECT_FALSE(c.FindEntry("capacity")->is_string);
  EXPECT_TRUE(c.warnings.empty());
}

TEST_F(ConfigTest, SizesAcceptUnits) {
  Result<Config> r = Load("max_local_cpu_size: 512MiB\ncapacity: 1.5 GiB\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->max_local_cpu_size_bytes, uint64_t{512} << 20);
  EXPECT_EQ(r->node.capacity, 3 * kGiB / 2);
}

TEST_F(ConfigTest, EnvironmentBeatsFileBeatsDefault) {
  Result<Config> r =
      Load("chunk_size: 128\nmax_local_cpu_size: 2\nthreads: 4\n", {{"LMCACHE_CHUNK_SIZE", "64"},
                                                                    {"KVPORT_THREADS", "8"},
                                                                    {"LMCACHE_EIC_TRANS_TYPE", "1"},
                                                                    {"KVPORT_CAPACITY", "2GiB"},
                                                                    {"UNRELATED", "x"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = *r;
  EXPECT_EQ(c.chunk_size, 64u);
  EXPECT_EQ(OriginOf(c, "chunk_size"), "env:LMCACHE_CHUNK_SIZE");
  EXPECT_EQ(c.FindEntry("chunk_size")->source, ConfigSource::kEnvironment);
  EXPECT_EQ(c.node.threads, 8u);
  EXPECT_EQ(OriginOf(c, "threads"), "env:KVPORT_THREADS");
  EXPECT_EQ(c.eic_trans_type, 1u);
  EXPECT_EQ(c.node.capacity, 2 * kGiB);
  EXPECT_EQ(c.max_local_cpu_size_bytes, 2 * kGiB);
  EXPECT_EQ(OriginOf(c, "max_local_cpu_size"), "file:" + c.file);
  EXPECT_EQ(OriginOf(c, "local_cpu"), "default");
}

TEST_F(ConfigTest, ConfigFileVariableNamesTheFileWhenNoneIsGiven) {
  const std::string from_variable = WriteFile("chunk_size: 32\n", "from_variable.yaml");
  const std::string explicit_file = WriteFile("chunk_size: 16\n", "explicit.yaml");
  ConfigSources sources;
  sources.env = std::map<std::string, std::string>{{"LMCACHE_CONFIG_FILE", from_variable}};
  sources.host_memory_bytes = kHostMemory;
  Result<Config> r = LoadConfig(sources);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunk_size, 32u);
  EXPECT_EQ(r->file, from_variable);

  sources.file = explicit_file;
  r = LoadConfig(sources);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunk_size, 16u);
  EXPECT_EQ(r->file, explicit_file);
}

// Regression: LMCache reads max_local_cpu_size in GiB; a byte count written there means about
// 477 EiB. It must be refused with an explanation, not accepted or silently clamped.
TEST_F(ConfigTest, ByteCountInGibKeyIsRefusedWithExplanation) {
  const std::string msg = LoadError("chunk_size: 256\nmax_local_cpu_size: 512000000000\n");
  EXPECT_THAT(msg, HasSubstr("kvport.yaml:2: max_local_cpu_size: 512000000000 (GiB)"));
  EXPECT_THAT(msg, HasSubstr("476.8 EiB"));
  EXPECT_THAT(msg, HasSubstr("this host's physical memory (16 GiB)"));
  EXPECT_THAT(msg, HasSubstr("did you mean max_local_cpu_size: 476.8 (GiB) for 512000000000 "
                             "bytes?"));
}

TEST_F(ConfigTest, ByteCountInGibKeyIsRefusedEvenWhenOverMemoryIsAllowed) {
  // 477 EiB cannot be represented at all; the flag only lifts the host-memory limit.
  const std::string msg =
      LoadError("allow_capacity_over_host_memory: true\nmax_local_cpu_size: 512000000000\n");
  EXPECT_THAT(msg, AllOf(HasSubstr("476.8 EiB"), HasSubstr("more than any size"),
                         HasSubstr("did you mean max_local_cpu_size: 476.8 (GiB)")));
  EXPECT_THAT(msg, Not(HasSubstr("physical memory")));
}

TEST_F(ConfigTest, ByteCountInGibKeyFromEnvironmentNamesTheVariable) {
  const std::string msg = LoadError("", {{"LMCACHE_MAX_LOCAL_CPU_SIZE", "512000000000"}});
  EXPECT_THAT(msg, HasSubstr("environment variable LMCACHE_MAX_LOCAL_CPU_SIZE: "
                             "max_local_cpu_size: 512000000000 (GiB)"));
  EXPECT_THAT(msg, HasSubstr("did you mean"));
}

TEST_F(ConfigTest, CapacityOverHostMemoryIsRefusedUnlessAllowed) {
  std::string msg = LoadError("capacity: 32GiB\n");
  EXPECT_THAT(
      msg, AllOf(HasSubstr("capacity: '32GiB' means 32 GiB"), HasSubstr("physical memory (16 GiB)"),
                 HasSubstr("allow_capacity_over_host_memory: true")));
  msg = LoadError("max_local_cpu_size: 20\n");
  EXPECT_THAT(msg, AllOf(HasSubstr("max_local_cpu_size: 20 (GiB) means 20 GiB"),
                         HasSubstr("physical memory (16 GiB)"),
                         HasSubstr("allow_capacity_over_host_memory: true")));
  EXPECT_THAT(msg, Not(HasSubstr("did you mean")));  // 20 does not look like bytes

  Result<Config> r =
      Load("allow_capacity_over_host_memory: true\ncapacity: 32GiB\nmax_local_cpu_size: 20\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.capacity, 32 * kGiB);
  EXPECT_EQ(r->max_local_cpu_size_bytes, 20 * kGiB);
}

TEST_F(ConfigTest, OverMemoryFlagFromEnvironmentAppliesToFileCapacity) {
  Result<Config> r =
      Load("capacity: 32GiB\n", {{"KVPORT_ALLOW_CAPACITY_OVER_HOST_MEMORY", "true"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.capacity, 32 * kGiB);
}

TEST_F(ConfigTest, UnknownHostMemorySkipsTheCheckWithAWarning) {
  Result<Config> r = Load("capacity: 32GiB\n", {}, /*host_memory=*/0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("physical memory could not be read"));
}

TEST_F(ConfigTest, DefaultOverHostMemoryIsOnlyAWarning) {
  Result<Config> r = Load("chunk_size: 256\n", {}, /*host_memory=*/2 * kGiB);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("max_local_cpu_size: the default 5 GiB"));
}

TEST_F(ConfigTest, CapacitiesMustBePositive) {
  EXPECT_THAT(LoadError("max_local_cpu_size: 0\n"),
              HasSubstr("max_local_cpu_size: 0 (GiB) must be more than 0"));
  EXPECT_THAT(LoadError("max_local_cpu_size: -1\n"),
              HasSubstr("max_local_cpu_size: -1 (GiB) must be more than 0"));
  EXPECT_THAT(LoadError("capacity: 0GiB\n"), HasSubstr("capacity: '0GiB' must be more than 0"));
  EXPECT_THAT(LoadError("max_local_disk_size: -5\n"),
              HasSubstr("max_local_disk_size: -5 (GiB) must be 0 or more"));
  EXPECT_THAT(LoadError("max_local_cpu_size: lots\n"), HasSubstr("max_local_cpu_size: 'lots'"));
  // A disk tier is not memory: 0 disables it and a large one is fine.
  Result<Config> r = Load("max_local_disk_size: 1000\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->max_local_disk_size_bytes, 1000 * kGiB);
}

TEST_F(ConfigTest, TinyByteCapacityWarnsAboutTheUnit) {
  Result<Config> r = Load("capacity: 64\nmax_value_bytes: 64\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_THAT(r->warnings[0], HasSubstr("capacity: 64 is read in bytes"));
  EXPECT_THAT(r->warnings[0], HasSubstr("did you mean 64GiB"));
}

TEST_F(ConfigTest, WrongTypesAreRefused) {
  EXPECT_THAT(LoadError("chunk_size: abc\n"),
              HasSubstr("kvport.yaml:1: chunk_size: expects a whole number from 1 to"));
  EXPECT_THAT(LoadError("chunk_size: 2.5\n"), HasSubstr("got '2.5'"));
  EXPECT_THAT(LoadError("local_cpu: maybe\n"),
              HasSubstr("local_cpu: expects a boolean (true or false), got 'maybe'"));
  EXPECT_THAT(LoadError("chunk_size: [1, 2]\n"),
              HasSubstr("chunk_size: expects a single value, got a list"));
  EXPECT_THAT(LoadError("remote_url: {a: 1}\n"),
              HasSubstr("remote_url: expects a single value, got a map"));
  EXPECT_THAT(LoadError("extra_config: 5\n"),
              HasSubstr("extra_config: expects a map of name: value"));
}

TEST_F(ConfigTest, OutOfRangeValuesAreRefused) {
  EXPECT_THAT(LoadError("eic_trans_type: 7\n"),
              HasSubstr("eic_trans_type: 7 is not a transport type; expected 0 (auto), 1 (TCP), "
                        "2 (RDMA) or 3 (GPUDirect RDMA)"));
  EXPECT_THAT(LoadError("eic_trans_type: -1\n"),
              HasSubstr("eic_trans_type: -1 is not a transport"));
  EXPECT_THAT(LoadError("chunk_size: 0\n"),
              HasSubstr("chunk_size: 0 (tokens) is out of range: expected from 1 to"));
  EXPECT_THAT(LoadError("threads: -1\n"), HasSubstr("threads: -1 (threads) is out of range"));
  EXPECT_THAT(LoadError("eic_kv_ttl: 0\n"), HasSubstr("use -1 for no expiry"));
  EXPECT_THAT(LoadError("max_namespace_bytes: 256\n"), HasSubstr("expected from 0 to 255 (bytes)"));
  EXPECT_THAT(LoadError("log_level: loud\n"), HasSubstr("'loud' is not a log level"));
  EXPECT_THAT(LoadError("remote_url: 127.0.0.1:7470\n"), HasSubstr("has no scheme"));
  EXPECT_THAT(LoadError("listen: localhost\n"), HasSubstr("is not HOST:PORT"));
  EXPECT_THAT(LoadError("listen: 0.0.0.0:99999\n"), HasSubstr("port '99999'"));
  EXPECT_THAT(LoadError("listen: ::1:7470\n"), HasSubstr("must be in brackets"));
  Result<Config> r = Load("listen: '[::1]:0'\n");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(LoadError("busy_poll_us: 1000001\n"),
              HasSubstr("busy_poll_us: 1000001 (microseconds) is out of range"));
  Result<Config> polled = Load("busy_poll_us: 50\n");
  ASSERT_TRUE(polled.ok()) << polled.status().ToString();
  EXPECT_EQ(polled->busy_poll_us, 50u);
  EXPECT_THAT(LoadError("ucx_devices: 'mlx5_0:1;;mlx5_1:1'\n"), HasSubstr("an empty lane"));
  Result<Config> lanes = Load("ucx_devices: 'mlx5_0:1,mlx5_2:1; mlx5_1:1'\n");
  ASSERT_TRUE(lanes.ok()) << lanes.status().ToString();
  EXPECT_EQ(SplitUcxLanes(lanes->ucx_devices),
            (std::vector<std::string_view>{"mlx5_0:1,mlx5_2:1", "mlx5_1:1"}));
  EXPECT_EQ(lanes->FindEntry("ucx_devices")->env_var, "KVPORT_UCX_DEVICES");
  Result<Config> unchecked = Load("checksums: false\n");
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().ToString();
  EXPECT_FALSE(unchecked->checksums);
  Result<Config> checked = Load("checksums: false\n", {{"KVPORT_CHECKSUMS", "on"}});
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_TRUE(checked->checksums);  // the environment wins, as for every key
  EXPECT_THAT(LoadError("checksums: sometimes\n"), HasSubstr("checksums"));
  EXPECT_THAT(LoadError("namespace_tiers: 'sglang=ssd'\n"),
              HasSubstr("tier 'ssd' is neither memory nor memory+disk"));
  EXPECT_THAT(LoadError("namespace_tiers: 'sglang'\n"), HasSubstr("is not NAMESPACE=TIER"));
  EXPECT_THAT(LoadError("namespace_tiers: 'a=memory,a=memory+disk'\n"),
              HasSubstr("namespace 'a' is given twice"));
  Result<Config> tiers =
      Load("namespace_tiers: ' sglang = memory, *=memory+disk,=memory'\ndisk_restore: false\n");
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  EXPECT_EQ(ParseNamespaceTiers(tiers->node.namespace_tiers).value(),
            (std::map<std::string, bool>{{"sglang", false}, {"*", true}, {"", false}}));
  EXPECT_FALSE(tiers->node.disk_restore);
  EXPECT_EQ(ParseNamespaceTiers("").value(), (std::map<std::string, bool>{}));
}

TEST_F(ConfigTest, RemoteUrlNeedsAKnownSchemeAHostAndAPort) {
  for (const char* good :
       {"eic://127.0.0.1:7470", "eic://cache-1.example.com:1", "eic://node_2:65535",
        "eic://[::1]:7470", "eic://[fe80::1%eth0]:7470", "eic://h:7470/llama", "eic://h:7470/",
        "eic://h:7470;", "eic://h:7470;/llama", "mem://", "mem://tests"}) {
    Result<Config> r = Load(std::string("remote_url: '") + good + "'\n");
    EXPECT_TRUE(r.ok()) << good << ": " << r.status().ToString();
  }
  const auto error = [&](const std::string& url) {
    return LoadError("remote_url: '" + url + "'\n");
  };
  EXPECT_THAT(error("redis://h:6379"),
              AllOf(HasSubstr("kvport.yaml:1: remote_url: 'redis://h:6379': unknown scheme "
                              "'redis://'; known: eic://HOST:PORT[;HOST:PORT...][/NAMESPACE]"),
                    HasSubstr("mem://[NAME]")));
  EXPECT_THAT(error("EIC://h:1"), HasSubstr("write the scheme in lowercase, eic://"));
  EXPECT_THAT(error("://h:1"), HasSubstr("has no scheme"));
  EXPECT_THAT(error("eic://"), HasSubstr("'eic://': no HOST:PORT"));
  EXPECT_THAT(error("eic://h"), HasSubstr("'eic://h': no port; expected HOST:PORT"));
  EXPECT_THAT(error("eic://h:"), HasSubstr("no port after ':'; expected a number from 1 to 65535"));
  EXPECT_THAT(error("eic://h:0"),
              HasSubstr("port '0' is out of range: expected a number from 1 to 65535; port 0 "
                        "names no node"));
  EXPECT_THAT(error("eic://h:65536"),
              HasSubstr("port '65536' is out of range: expected a number from 1 to 65535"));
  EXPECT_THAT(error("eic://h:99999999999"), HasSubstr("port '99999999999' is out of range"));
  EXPECT_THAT(error("eic://h:-1"), HasSubstr("port '-1' is not a number from 1 to 65535"));
  EXPECT_THAT(error("eic://h:74x"), HasSubstr("port '74x' is not a number"));
  EXPECT_THAT(error("eic://:7470"), HasSubstr("'eic://:7470': no host; expected HOST:PORT"));
  EXPECT_THAT(error("eic://[]:7470"), HasSubstr("no host: the IPv6 address in [ ] is empty"));
  EXPECT_THAT(error("eic://[::1]"), HasSubstr("no port; expected [IPV6]:PORT"));
  EXPECT_THAT(error("eic://::1:7470"), HasSubstr("an IPv6 address must be in brackets"));
  EXPECT_THAT(error("eic://bad host:7470"), HasSubstr("host 'bad host' is not a host name"));
  EXPECT_THAT(error("eic://h:7470/a/b"), HasSubstr("must be a single namespace name"));
  // EIC's static cluster list and the etcd form (docs/cluster.md), each entry checked.
  for (const char* good : {"eic://a:1;b:2;", "eic://a:1;b:2/ns?replicas=2",
                           "eic://etcd:127.0.0.1:2379,e2:2379/c1", "eic://etcd:e:2379/c1/ns/"}) {
    Result<Config> r = Load(std::string("remote_url: '") + good + "'\n");
    EXPECT_TRUE(r.ok()) << good << ": " << r.status().ToString();
  }
  EXPECT_THAT(error("eic://a:1;;"), HasSubstr("an empty entry in the node list"));
  EXPECT_THAT(error("eic://a:0;"), HasSubstr("port '0' is out of range"));
  EXPECT_THAT(error("eic://a:1;b:0"), HasSubstr("'b:0': port '0' is out of range"));
  EXPECT_THAT(error("eic://etcd:e:2379"), HasSubstr("no cluster name"));
  EXPECT_THAT(error("eic://etcd:e:x/c"), HasSubstr("'e:x': port 'x' is not a number"));
  EXPECT_THAT(error("eic://a:1?replicas=99"),
              HasSubstr("replicas=99: expected a number from 1 to 16"));
  // The environment goes through the same rules.
  EXPECT_THAT(LoadError("", {{"LMCACHE_REMOTE_URL", "eic://h:0"}}),
              HasSubstr("environment variable LMCACHE_REMOTE_URL: remote_url: 'eic://h:0'"));
}

TEST_F(ConfigTest, ListenIsHostAndPortZeroToMax) {
  for (const char* good :
       {"127.0.0.1:7470", "0.0.0.0:0", "localhost:65535", "[::]:7470", "[::1]:0"}) {
    Result<Config> r = Load(std::string("listen: '") + good + "'\n");
    EXPECT_TRUE(r.ok()) << good << ": " << r.status().ToString();
  }
  EXPECT_THAT(LoadError("listen: '0.0.0.0:65536'\n"),
              HasSubstr("port '65536' is out of range: expected a number from 0 to 65535 (0 "
                        "picks a free port)"));
  EXPECT_THAT(LoadError("listen: ':7470'\n"), HasSubstr("no host"));
  EXPECT_THAT(LoadError("listen: '127.0.0.1:'\n"), HasSubstr("no port after ':'"));
  EXPECT_THAT(LoadError("listen: '[]:7470'\n"), HasSubstr("no host"));
  EXPECT_THAT(LoadError("listen: '[::1]7470'\n"), HasSubstr("expected ':PORT' right after"));
  EXPECT_THAT(LoadError("listen: 'a b:1'\n"), HasSubstr("is not a host name"));
  EXPECT_THAT(LoadError("", {{"KVPORT_LISTEN", "h:-5"}}),
              HasSubstr("environment variable KVPORT_LISTEN: listen: 'h:-5': port '-5'"));
}

TEST_F(ConfigTest, ClusterKeysAreTypedAndChecked) {
  Result<Config> r = Load(
      "cluster: prod-1\n"
      "etcd: 10.0.0.1:2379,10.0.0.2:2379\n"
      "advertise: 10.0.0.5:7470\n"
      "node_id: rack1-node5\n"
      "lease_ttl_secs: 30\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.cluster, "prod-1");
  EXPECT_EQ(r->node.etcd, "10.0.0.1:2379,10.0.0.2:2379");
  EXPECT_EQ(r->node.advertise, "10.0.0.5:7470");
  EXPECT_EQ(r->node.node_id, "rack1-node5");
  EXPECT_EQ(r->node.lease_ttl_secs, 30u);
  EXPECT_EQ(OriginOf(*r, "cluster"), "file:" + (dir_ / "kvport.yaml").string());

  // Standalone by default; the environment overrides like every other node key.
  r = Load("", {{"KVPORT_CLUSTER", "c"},
                {"KVPORT_ETCD", "127.0.0.1:2379"},
                {"KVPORT_LEASE_TTL_SECS", "5"},
                {"KVPORT_NODE_ID", "n"},
                {"KVPORT_ADVERTISE", "127.0.0.1:7470"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.cluster, "c");
  EXPECT_EQ(r->node.lease_ttl_secs, 5u);
  EXPECT_EQ(OriginOf(*r, "etcd"), "env:KVPORT_ETCD");
  r = Load("");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node.cluster, "");
  EXPECT_EQ(r->node.lease_ttl_secs, 10u);

  EXPECT_THAT(LoadError("cluster: c\n"), HasSubstr("cluster 'c' needs etcd"));
  EXPECT_THAT(LoadError("cluster: a/b\netcd: h:1\n"), HasSubstr("is not a cluster name"));
  EXPECT_THAT(LoadError("etcd: 'h:1,,h:2'\n"), HasSubstr("empty entry"));
  EXPECT_THAT(LoadError("etcd: 'h:0'\n"), HasSubstr("etcd endpoint 'h:0'"));
  EXPECT_THAT(LoadError("etcd: 'h'\n"), HasSubstr("no port"));
  EXPECT_THAT(LoadError("advertise: '0.0.0.0:7470'\n"), HasSubstr("wildcard"));
  EXPECT_THAT(LoadError("advertise: 'host:0'\n"), HasSubstr("port '0' is out of range"));
  EXPECT_THAT(LoadError("node_id: 'a/b'\n"), HasSubstr("node id"));
  EXPECT_THAT(LoadError("lease_ttl_secs: 0\n"), HasSubstr("lease_ttl_secs"));
  EXPECT_THAT(LoadError("on_lease_loss: sometimes\n"),
              HasSubstr("'sometimes' is not a lease-loss policy; expected keep or drop"));
  EXPECT_THAT(LoadError("lease_ttl_secs: 3601\n"), HasSubstr("lease_ttl_secs"));
}

TEST_F(ConfigTest, EtcdTlsAndAuthKeys) {
  Result<Config> r = Load(
      "cluster: prod\n"
      "etcd: https://10.0.0.1:2379,https://10.0.0.2:2379/\n"
      "etcd_tls_ca_file: /etc/kvport/etcd-ca.pem\n"
      "etcd_tls_cert_file: /etc/kvport/etcd-client.pem\n"
      "etcd_tls_key_file: /etc/kvport/etcd-client.key\n"
      "etcd_user: kvport\n"
      "etcd_password_file: /etc/kvport/etcd-password\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.etcd_tls_ca_file, "/etc/kvport/etcd-ca.pem");
  EXPECT_EQ(r->node.etcd_tls_cert_file, "/etc/kvport/etcd-client.pem");
  EXPECT_EQ(r->node.etcd_tls_key_file, "/etc/kvport/etcd-client.key");
  EXPECT_EQ(r->node.etcd_user, "kvport");
  EXPECT_EQ(r->node.etcd_password_file, "/etc/kvport/etcd-password");

  r = Load("", {{"KVPORT_ETCD_TLS_CA_FILE", "/ca.pem"},
                {"KVPORT_ETCD_USER", "u"},
                {"KVPORT_ETCD_PASSWORD_FILE", "/pw"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.etcd_tls_ca_file, "/ca.pem");
  EXPECT_EQ(OriginOf(*r, "etcd_user"), "env:KVPORT_ETCD_USER");

  EXPECT_THAT(LoadError("etcd_tls_ca_file: /ca.pem\netcd_tls_cert_file: /c.pem\n"),
              HasSubstr("etcd_tls_cert_file and etcd_tls_key_file go together"));
  EXPECT_THAT(LoadError("etcd_tls_cert_file: /c.pem\netcd_tls_key_file: /c.key\n"),
              HasSubstr("etcd_tls_cert_file needs etcd_tls_ca_file"));
  EXPECT_THAT(LoadError("etcd_user: u\n"),
              HasSubstr("etcd_user and etcd_password_file go together"));
  EXPECT_THAT(LoadError("etcd: 'https://h:0'\n"), HasSubstr("etcd endpoint 'https://h:0'"));
}

TEST_F(ConfigTest, EicTransTypeZeroIsAutomatic) {
  Result<Config> r = Load("eic_trans_type: 0\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->eic_trans_type, 0u);
  r = Load("", {{"LMCACHE_EIC_TRANS_TYPE", "0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->eic_trans_type, 0u);
}

TEST_F(ConfigTest, RespListenIsAPortOrAnAddress) {
  Result<Config> r = Load("");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.resp_listen, "");  // no Redis protocol by default
  r = Load("resp_listen: 6379\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.resp_listen, "6379");
  r = Load("resp_listen: 10.0.0.5:6379\n", {{"KVPORT_RESP_LISTEN", "127.0.0.1:7000"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.resp_listen, "127.0.0.1:7000");
  EXPECT_NE(LoadError("resp_listen: 99999999\n").find("not a port"), std::string::npos);
}

TEST_F(ConfigTest, SharedMemoryKeysAreTypedAndChecked) {
  Result<Config> r = Load(
      "unix_socket: /run/kvport/node.sock\n"
      "shared_memory: false\n"
      "max_leases_per_session: 64\n"
      "max_reservations_per_session: 8\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.unix_socket, "/run/kvport/node.sock");
  EXPECT_FALSE(r->node.shared_memory);
  EXPECT_EQ(r->node.max_leases_per_session, 64u);
  EXPECT_EQ(r->node.max_reservations_per_session, 8u);
  EXPECT_EQ(OriginOf(*r, "unix_socket"), "file:" + r->file);
  EXPECT_TRUE(r->FindEntry("unix_socket")->is_string);
  EXPECT_EQ(r->FindEntry("shared_memory")->value, "false");
  EXPECT_EQ(r->FindEntry("max_leases_per_session")->value, "64");

  // "" turns the socket off; "auto" is the default; a path of exactly 107 bytes fits.
  r = Load("unix_socket: ''\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.unix_socket, "");
  r = Load("unix_socket: auto\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.unix_socket, "auto");
  const std::string longest = "/" + std::string(106, 'a');
  r = Load("unix_socket: " + longest + "\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.unix_socket, longest);

  // The environment overrides the file, and goes through the same rules.
  r = Load("unix_socket: /a.sock\nshared_memory: true\n",
           {{"KVPORT_UNIX_SOCKET", ""},
            {"KVPORT_SHARED_MEMORY", "off"},
            {"KVPORT_MAX_LEASES_PER_SESSION", "10"},
            {"KVPORT_MAX_RESERVATIONS_PER_SESSION", "3"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.unix_socket, "");
  EXPECT_EQ(OriginOf(*r, "unix_socket"), "env:KVPORT_UNIX_SOCKET");
  EXPECT_FALSE(r->node.shared_memory);
  EXPECT_EQ(r->node.max_leases_per_session, 10u);
  EXPECT_EQ(r->node.max_reservations_per_session, 3u);

  EXPECT_THAT(LoadError("unix_socket: kvport.sock\n"),
              HasSubstr("kvport.yaml:1: unix_socket: 'kvport.sock' is not an absolute path"));
  EXPECT_THAT(LoadError("unix_socket: Auto\n"),
              HasSubstr("unix_socket: 'Auto' is not an absolute"));
  EXPECT_THAT(
      LoadError("unix_socket: " + longest + "b\n"),
      HasSubstr("unix_socket: the path is 108 bytes; a Unix socket path holds at most 107"));
  EXPECT_THAT(LoadError("", {{"KVPORT_UNIX_SOCKET", "rel/x.sock"}}),
              HasSubstr("environment variable KVPORT_UNIX_SOCKET: unix_socket: 'rel/x.sock'"));
  EXPECT_THAT(LoadError("shared_memory: sometimes\n"),
              HasSubstr("shared_memory: expects a boolean (true or false), got 'sometimes'"));
  EXPECT_THAT(LoadError("max_connections: 0\n"),
              HasSubstr("max_connections: 0 (connections) is out of range: expected from 1"));
  EXPECT_THAT(LoadError("max_queued_response_bytes: lots\n"),
              HasSubstr("max_queued_response_bytes"));
  EXPECT_THAT(LoadError("request_timeout_secs: -1\n"),
              HasSubstr("request_timeout_secs: -1 (seconds) is out of range"));
  EXPECT_THAT(LoadError("capacity: 64MiB\nmax_value_bytes: 1MiB\nmax_reserved_bytes: 1GiB\n"),
              HasSubstr("max_reserved_bytes (1 GiB) is larger than capacity (64 MiB)"));
  EXPECT_THAT(LoadError("capacity: 64MiB\nmax_value_bytes: 1MiB\nmax_pinned_bytes: 65MiB\n"),
              HasSubstr("max_pinned_bytes (65 MiB) is larger than capacity (64 MiB)"));
  EXPECT_THAT(LoadError("max_index_bytes: lots\n"), HasSubstr("max_index_bytes"));
  EXPECT_THAT(LoadError("max_leases_per_session: 0\n"),
              HasSubstr("max_leases_per_session: 0 (leases) is out of range: expected from 1"));
  EXPECT_THAT(LoadError("max_leases_per_session: many\n"),
              HasSubstr("max_leases_per_session: expects a whole number"));
  EXPECT_THAT(LoadError("max_reservations_per_session: -3\n"),
              HasSubstr("max_reservations_per_session: -3 (reservations) is out of range"));
  EXPECT_THAT(LoadError("max_reservations_per_session: 4294967296\n"),
              HasSubstr("max_reservations_per_session: 4294967296 (reservations) is out of range"));
  EXPECT_THAT(LoadError("", {{"KVPORT_MAX_RESERVATIONS_PER_SESSION", "0"}}),
              HasSubstr("environment variable KVPORT_MAX_RESERVATIONS_PER_SESSION: "
                        "max_reservations_per_session: 0"));
}

TEST_F(ConfigTest, EnvironmentErrorsNameTheVariable) {
  EXPECT_THAT(LoadError("", {{"KVPORT_THREADS", "many"}}),
              HasSubstr("environment variable KVPORT_THREADS: threads: expects a whole number"));
  EXPECT_THAT(LoadError("", {{"LMCACHE_EIC_TRANS_TYPE", "7"}}),
              HasSubstr("environment variable LMCACHE_EIC_TRANS_TYPE: eic_trans_type: 7"));
}

TEST_F(ConfigTest, AllErrorsAreReportedTogether) {
  const std::string msg = LoadError("chunk_size: 0\nthreads: -1\neic_trans_type: 7\n");
  EXPECT_THAT(msg,
              AllOf(HasSubstr("chunk_size"), HasSubstr("threads"), HasSubstr("eic_trans_type")));
}

TEST_F(ConfigTest, CrossKeyRulesNameBothKeys) {
  EXPECT_THAT(LoadError("capacity: 1GiB\nmax_value_bytes: 2GiB\n"),
              HasSubstr("max_value_bytes (2 GiB) is larger than capacity (1 GiB)"));
  EXPECT_THAT(LoadError("max_frame_bytes: 1000\n"),
              HasSubstr("max_frame_bytes (1000 bytes) cannot hold one key"));
}

TEST_F(ConfigTest, MalformedYamlNamesTheLine) {
  const std::string msg = LoadError("chunk_size: 256\nlocal_cpu: true\nremote_url: [eic://x\n");
  EXPECT_THAT(msg, HasSubstr("malformed YAML"));
  EXPECT_THAT(msg, HasSubstr("kvport.yaml:"));
  // The error is on or after the third line, where the bracket is opened and never closed.
  const size_t at = msg.find("kvport.yaml:");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stoi(msg.substr(at + std::string("kvport.yaml:").size())), 3) << msg;
}

TEST_F(ConfigTest, TopLevelThatIsNotAMapIsRefused) {
  EXPECT_THAT(LoadError("- chunk_size\n- 256\n"),
              HasSubstr("expected a map of 'key: value' lines at the top level, got a list"));
  EXPECT_THAT(LoadError("just text\n"), HasSubstr("got a single value"));
}

TEST_F(ConfigTest, MissingFileIsNotFound) {
  ConfigSources sources;
  sources.file = (dir_ / "absent.yaml").string();
  sources.env = std::map<std::string, std::string>{};
  Result<Config> r = LoadConfig(sources);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("absent.yaml' does not exist"));

  sources.file = dir_.string();
  r = LoadConfig(sources);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is a directory"));
}

// Loads the file at `path` with an empty environment.
Result<Config> LoadPath(const std::string& path) {
  ConfigSources sources;
  sources.file = path;
  sources.env = std::map<std::string, std::string>{};
  sources.host_memory_bytes = kHostMemory;
  sources.log_warnings = false;
  return LoadConfig(sources);
}

TEST_F(ConfigTest, FifoIsRefusedWithoutBlocking) {
  // No writer ever opens the FIFO: a blocking open or read would hang the test.
  const std::string fifo = (dir_ / "pipe.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  Result<Config> r = LoadPath(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("config file '" + fifo + "' is a FIFO (named pipe), not a regular file"));
  // Named by LMCACHE_CONFIG_FILE, the same.
  ConfigSources sources;
  sources.env = std::map<std::string, std::string>{{"LMCACHE_CONFIG_FILE", fifo}};
  r = LoadConfig(sources);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is a FIFO"));
}

TEST_F(ConfigTest, DevicesAndDirectoriesAreRefused) {
  for (const char* device : {"/dev/zero", "/dev/null", "/dev/urandom"}) {
    Result<Config> r = LoadPath(device);
    ASSERT_FALSE(r.ok()) << device;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << device;
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("config file '") + device +
                                                "' is a character device, not a regular file"));
  }
  Result<Config> r = LoadPath(dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("is a directory, not a regular file"));
}

TEST_F(ConfigTest, SymlinkToARegularFileIsFollowed) {
  const std::string target = WriteFile("chunk_size: 64\n", "real.yaml");
  const std::string link = (dir_ / "link.yaml").string();
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  Result<Config> r = LoadPath(link);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunk_size, 64u);
  const std::string to_dev = (dir_ / "zero.yaml").string();
  ASSERT_EQ(::symlink("/dev/zero", to_dev.c_str()), 0);
  EXPECT_THAT(LoadPath(to_dev).status().message(), HasSubstr("is a character device"));
}

TEST_F(ConfigTest, FileOverTheSizeCapIsRefusedAndOneAtTheCapIsRead) {
  // A comment line pads the file: at the cap exactly it is read, one byte more is refused.
  const std::string head = "chunk_size: 32\n#";
  std::string text = head + std::string(kMaxConfigFileBytes - head.size() - 1, 'x') + "\n";
  ASSERT_EQ(text.size(), kMaxConfigFileBytes);
  Result<Config> r = LoadPath(WriteFile(text, "at_cap.yaml"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunk_size, 32u);

  text.insert(text.size() - 1, "x");
  const std::string big = WriteFile(text, "big.yaml");
  r = LoadPath(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("config file '" + big +
                                              "' is 1 MiB (1048577 bytes), larger than the 1 "
                                              "MiB a config file may be"));
}

TEST_F(ConfigTest, DeeplyNestedYamlIsAnErrorNotACrash) {
  // 64 Ki brackets, unclosed and closed: within the size cap, far deeper than any config.
  Result<Config> r = Load("extra_config: " + std::string(64 * 1024, '[') + "\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = Load("extra_config: {a: " + std::string(64 * 1024, '[') + std::string(64 * 1024, ']') +
           "}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("malformed YAML"));
}

TEST_F(ConfigTest, EmptyFileAndNullValuesLeaveDefaults) {
  Result<Config> r = Load("");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunk_size, 256u);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("empty"));

  r = Load("chunk_size:\nlocal_disk: ~\nextra_config:\n  eic_trans_type:\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunk_size, 256u);
  EXPECT_EQ(OriginOf(*r, "chunk_size"), "default");
  EXPECT_EQ(r->eic_trans_type, 3u);
  EXPECT_EQ(OriginOf(*r, "eic_trans_type"), "default");
}

TEST_F(ConfigTest, DuplicateKeyIsRefused) {
  EXPECT_THAT(LoadError("chunk_size: 256\nchunk_size: 128\n"),
              HasSubstr("kvport.yaml:2: chunk_size is given twice (first on line 1)"));
}

TEST_F(ConfigTest, UnknownKeysWarnAndAreDropped) {
  Result<Config> r = Load("max_local_cpu_sise: 4\nnot_a_key: true\nchunk_size: 128\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_THAT(r->warnings[0], HasSubstr("kvport.yaml:1: unknown key 'max_local_cpu_sise' is "
                                        "ignored (did you mean 'max_local_cpu_size'?)"));
  EXPECT_THAT(r->warnings[1], HasSubstr("unknown key 'not_a_key' is ignored"));
  EXPECT_THAT(r->warnings[1], Not(HasSubstr("did you mean")));
  EXPECT_EQ(r->FindEntry("not_a_key"), nullptr);
  EXPECT_TRUE(r->engine_keys.empty());
  EXPECT_EQ(r->max_local_cpu_size_bytes, 5 * kGiB);
  EXPECT_EQ(r->chunk_size, 128u);
}

// An LMCache file pointing at a node whose chunks it keys with Python's per-process hash (its
// default, or "builtin" written out) is warned about; a process-stable hash, no node, or a file
// that is not LMCache's (SGLang's shares remote_url) is not.
TEST_F(ConfigTest, PerProcessChunkHashOfASharedNodeWarns) {
  const std::string node = "remote_url: eic://127.0.0.1:7470\n";
  auto hash_warnings = [](const Result<Config>& r) {
    std::vector<std::string> found;
    for (const std::string& w : r->warnings)
      if (w.find("pre_caching_hash_algorithm") != std::string::npos) found.push_back(w);
    return found;
  };
  Result<Config> r = Load("chunk_size: 256\n" + node);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(hash_warnings(r).size(), 1u);
  EXPECT_THAT(hash_warnings(r)[0],
              HasSubstr("pre_caching_hash_algorithm is not set (LMCache's default: \"builtin\")"));
  EXPECT_THAT(hash_warnings(r)[0], HasSubstr("set pre_caching_hash_algorithm: sha256_cbor"));
  EXPECT_THAT(DescribeConfig(*r), HasSubstr("\nwarning: pre_caching_hash_algorithm is not set"));

  r = Load(node + "local_cpu: true\npre_caching_hash_algorithm: builtin\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(hash_warnings(r).size(), 1u);
  EXPECT_THAT(hash_warnings(r)[0],
              HasSubstr("kvport.yaml:3: pre_caching_hash_algorithm is \"builtin\""));

  for (const char* stable : {"sha256_cbor", "sha256"}) {
    r = Load("chunk_size: 256\n" + node + "pre_caching_hash_algorithm: " + stable + "\n");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(hash_warnings(r).empty()) << stable;
  }
  // The environment wins over the file, as in LMCache.
  r = Load("chunk_size: 256\n" + node + "pre_caching_hash_algorithm: sha256_cbor\n",
           {{"LMCACHE_PRE_CACHING_HASH_ALGORITHM", "builtin"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(hash_warnings(r).size(), 1u);
  EXPECT_THAT(hash_warnings(r)[0],
              HasSubstr("environment variable LMCACHE_PRE_CACHING_HASH_ALGORITHM: "
                        "pre_caching_hash_algorithm is \"builtin\""));
  r = Load("chunk_size: 256\n" + node, {{"LMCACHE_PRE_CACHING_HASH_ALGORITHM", "sha256_cbor"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(hash_warnings(r).empty());

  r = Load("chunk_size: 256\nlocal_cpu: true\n");  // no shared node
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(hash_warnings(r).empty());
  r = Load(node + "eic_namespace: sglang\neic_trans_type: 1\n");  // SGLang's file
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(hash_warnings(r).empty());
}

// An engine's own file: the keys LMCache or SGLang read and kvport does not are named as theirs,
// not warned about, and kept out of the effective values.
TEST_F(ConfigTest, EngineKeysAreNamedNotWarned) {
  Result<Config> r = Load(
      "use_layerwise: true\nchunk_size: 128\neic_namespace: sglang\nenable_kvset_direct: false\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];
  ASSERT_EQ(r->engine_keys.size(), 3u);
  EXPECT_THAT(r->engine_keys[0],
              HasSubstr("kvport.yaml:1: use_layerwise is read by LMCache, not by kvport"));
  EXPECT_THAT(r->engine_keys[1], HasSubstr("eic_namespace is read by SGLang, not by kvport"));
  EXPECT_THAT(r->engine_keys[2], HasSubstr("enable_kvset_direct is read by SGLang"));
  EXPECT_EQ(r->FindEntry("use_layerwise"), nullptr);
  EXPECT_EQ(r->chunk_size, 128u);
  EXPECT_THAT(DescribeConfig(*r), HasSubstr("\nengine key: /"));
  EXPECT_THAT(DescribeConfig(*r), HasSubstr("kvport.yaml:3: eic_namespace is read by SGLang"));
  EXPECT_THAT(DescribeConfigJson(*r), HasSubstr("\"engine_keys\":["));
}

TEST_F(ConfigTest, EicKeysAreReadFromExtraConfig) {
  Result<Config> r = Load(
      "extra_config:\n"
      "  eic_instance_id: inst-1\n"
      "  eic_trans_type: 2\n"
      "  eic_kv_ns: llama\n"
      "  eic_kv_ttl: 600\n"
      "  something_else: {a: 1}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = *r;
  EXPECT_EQ(c.eic_instance_id, "inst-1");
  EXPECT_EQ(c.eic_trans_type, 2u);
  EXPECT_EQ(c.eic_kv_ns, "llama");
  EXPECT_EQ(c.eic_kv_ttl, 600);
  EXPECT_EQ(OriginOf(c, "eic_kv_ns"), "file:" + c.file + " (extra_config)");
  // extra_config itself passes through whole.
  EXPECT_EQ(c.extra_config.at("eic_kv_ns"), "llama");
  EXPECT_EQ(c.extra_config.at("something_else"), "{a: 1}");
  EXPECT_EQ(OriginOf(c, "extra_config.something_else"), "file:" + c.file);
  EXPECT_EQ(c.FindEntry("extra_config"), nullptr);  // listed entry by entry instead
  EXPECT_TRUE(c.warnings.empty());
}

TEST_F(ConfigTest, ExtraConfigValuesAreValidated) {
  EXPECT_THAT(LoadError("extra_config:\n  eic_trans_type: 9\n"),
              HasSubstr("kvport.yaml:2: extra_config.eic_trans_type: 9 is not a transport type"));
}

TEST_F(ConfigTest, TopLevelEicKeyBeatsExtraConfigAndWarnsOnConflict) {
  Result<Config> r = Load("eic_kv_ns: top\nextra_config:\n  eic_kv_ns: nested\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->eic_kv_ns, "top");
  EXPECT_EQ(OriginOf(*r, "eic_kv_ns"), "file:" + r->file);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("eic_kv_ns is set at the top level"));

  r = Load("eic_kv_ns: top\nextra_config:\n  eic_kv_ns: nested\n",
           {{"LMCACHE_EIC_KV_NS", "from-env"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->eic_kv_ns, "from-env");
}

TEST_F(ConfigTest, ExtraConfigVariableReplacesTheFileMap) {
  Result<Config> r = Load("extra_config:\n  eic_kv_ns: file-ns\n  other: 1\n",
                          {{"LMCACHE_EXTRA_CONFIG", R"({"eic_kv_ns": "env-ns"})"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->eic_kv_ns, "env-ns");
  EXPECT_EQ(r->extra_config.count("other"), 0u);
  EXPECT_EQ(OriginOf(*r, "eic_kv_ns"), "env:LMCACHE_EXTRA_CONFIG (extra_config)");
  EXPECT_THAT(LoadError("", {{"LMCACHE_EXTRA_CONFIG", "[1, 2]"}}), HasSubstr("expects a map"));
}

TEST_F(ConfigTest, DescribeListsEveryKeyWithItsSource) {
  Result<Config> r = Load("chunk_size: 128\nunknown_thing: 1\n", {{"KVPORT_THREADS", "2"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string text = DescribeConfig(*r);
  EXPECT_THAT(text, HasSubstr("# config file: " + r->file + "\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nchunk_size: 128 +\\(file:[^)]*kvport.yaml\\)\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nthreads: 2 +\\(env:KVPORT_THREADS\\)\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nmax_local_cpu_size: 5 = 5 GiB +\\(default\\)\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nremote_url: \"\" +\\(default\\)\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nunix_socket: \"auto\" +\\(default\\)\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nshared_memory: true +\\(default\\)\n"));
  EXPECT_THAT(text, HasSubstr("warning: " + r->file + ":2: unknown key 'unknown_thing'"));
  // One line per entry, plus the header and the warning.
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), r->entries.size() + 2);
}

TEST_F(ConfigTest, DescribeJsonIsValidAndTyped) {
  Result<Config> r = Load(
      "chunk_size: 128\nremote_url: \"eic://h:1\"\nmax_local_cpu_size: 2.5\n"
      "extra_config: {k: \"v\\\"\"}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string text = DescribeConfigJson(*r);
  ASSERT_TRUE(nlohmann::json::accept(text)) << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1);  // one line
  const nlohmann::json json = nlohmann::json::parse(text);
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json["file"], r->file);
  EXPECT_EQ(json["values"]["chunk_size"]["value"], 128);
  EXPECT_TRUE(json["values"]["chunk_size"]["value"].is_number_integer());
  EXPECT_EQ(json["values"]["chunk_size"]["env"], "LMCACHE_CHUNK_SIZE");
  EXPECT_EQ(json["values"]["max_local_cpu_size"]["value"], 2.5);
  EXPECT_EQ(json["values"]["remote_url"]["value"], "eic://h:1");
  EXPECT_EQ(json["values"]["local_cpu"]["value"], true);
  EXPECT_EQ(json["values"]["capacity"]["human"], "1 GiB");
  EXPECT_FALSE(json["values"]["chunk_size"].contains("human"));
  EXPECT_EQ(json["values"]["extra_config.k"]["value"], "v\"");
  EXPECT_FALSE(json["values"]["extra_config.k"].contains("env"));
  EXPECT_EQ(json["values"]["threads"]["source"], "default");
  // The shared-memory keys of the node, with their defaults.
  EXPECT_EQ(json["values"]["unix_socket"]["value"], "auto");
  EXPECT_EQ(json["values"]["unix_socket"]["env"], "KVPORT_UNIX_SOCKET");
  EXPECT_EQ(json["values"]["shared_memory"]["value"], true);
  EXPECT_EQ(json["values"]["max_leases_per_session"]["value"], 4096);
  EXPECT_EQ(json["values"]["max_reservations_per_session"]["value"], 256);
  EXPECT_TRUE(json["warnings"].is_array());
  // The keys keep the documentation order, as in the text output.
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  std::vector<std::string> keys;
  for (const auto& item : ordered["values"].items())
    keys.push_back(item.key());
  ASSERT_EQ(keys.size(), r->entries.size());
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(keys[i], r->entries[i].key);

  ConfigSources none;
  none.env = std::map<std::string, std::string>{};
  none.host_memory_bytes = kHostMemory;
  Result<Config> defaults = LoadConfig(none);
  ASSERT_TRUE(defaults.ok());
  const nlohmann::json no_file = nlohmann::json::parse(DescribeConfigJson(*defaults));
  EXPECT_TRUE(no_file["file"].is_null());
  EXPECT_EQ(no_file["values"]["extra_config"]["value"], nlohmann::json::object());
}

TEST_F(ConfigTest, ControlBytesAndInvalidUtf8CannotBreakEitherOutput) {
  // YAML's double-quoted escapes put control bytes into a value; the environment passes any
  // bytes through, \xff and \x80 (not UTF-8) included.
  Result<Config> r = Load(
      "eic_kv_ns: \"a\\nwarning: forged\\x00z\\\"q\\\\\"\n"
      "extra_config: {\"k\\n\": \"v\\r\\tw\"}\n"
      "\"bad\\x1bkey\": 1\n",
      {{"LMCACHE_LOCAL_DISK", "/mnt/\xff\x80/x\x1b[2J"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->eic_kv_ns, std::string("a\nwarning: forged\0z\"q\\", 22));

  const std::string json_text = DescribeConfigJson(*r);
  ASSERT_TRUE(nlohmann::json::accept(json_text)) << json_text;
  const nlohmann::json json = nlohmann::json::parse(json_text);
  EXPECT_EQ(json["values"]["eic_kv_ns"]["value"].get<std::string>(), r->eic_kv_ns);  // exact
  // Bytes that are not UTF-8 become U+FFFD, one per byte.
  EXPECT_EQ(json["values"]["local_disk"]["value"].get<std::string>(),
            "/mnt/\xef\xbf\xbd\xef\xbf\xbd/x\x1b[2J");
  EXPECT_EQ(json["values"]["extra_config.k\n"]["value"], "v\r\tw");
  ASSERT_EQ(json["warnings"].size(), 1u);
  EXPECT_THAT(json["warnings"][0].get<std::string>(), HasSubstr("unknown key 'bad\x1bkey'"));

  // Text: one line per entry (plus the header and the warning), nothing raw.
  const std::string text = DescribeConfig(*r);
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), r->entries.size() + 2)
      << text;
  EXPECT_EQ(std::count_if(text.begin(), text.end(),
                          [](char c) { return c != '\n' && static_cast<unsigned char>(c) < 0x20; }),
            0)
      << text;
  EXPECT_THAT(text, HasSubstr("\neic_kv_ns: \"a\\nwarning: forged\\x00z\\\"q\\\\\" "));
  EXPECT_THAT(text, HasSubstr("\nlocal_disk: \"/mnt/\\xff\\x80/x\\x1b[2J\" "));
  EXPECT_THAT(text, HasSubstr("\nextra_config.k\\n: \"v\\r\\tw\" "));
  EXPECT_THAT(text, HasSubstr("\nwarning: " + r->file + ":3: unknown key 'bad\\x1bkey'"));
}

#ifndef KVPORT_SOURCE_DIR
#error "KVPORT_SOURCE_DIR must name the repository root"
#endif

TEST_F(ConfigTest, ShippedExamplesLoadCleanly) {
  for (const char* example : {"examples/eic/kvport.yaml", "examples/node.yaml"}) {
    ConfigSources sources;
    sources.file = std::string(KVPORT_SOURCE_DIR) + "/" + example;
    sources.env = std::map<std::string, std::string>{};
    sources.host_memory_bytes = uint64_t{1} << 40;  // examples target large hosts
    sources.log_warnings = false;
    Result<Config> r = LoadConfig(sources);
    ASSERT_TRUE(r.ok()) << example << ": " << r.status().ToString();
    EXPECT_TRUE(r->warnings.empty()) << example << ": " << r->warnings[0];
  }
  ConfigSources eic;
  eic.file = std::string(KVPORT_SOURCE_DIR) + "/examples/eic/kvport.yaml";
  eic.env = std::map<std::string, std::string>{};
  eic.host_memory_bytes = uint64_t{1} << 40;
  Result<Config> r = LoadConfig(eic);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->eic_trans_type, 2u);  // RDMA, as Ascend deployments use
  EXPECT_EQ(r->remote_url.rfind("eic://", 0), 0u);
}

}  // namespace
}  // namespace kvport

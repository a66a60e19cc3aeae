// SPDX-License-Identifier: Apache-2.0
// Memory and the disk tier together (TieredStore over an ObjectStore and a WriteBehindDisk): a read
// returns the newest acknowledged version of a key or a miss, never an older one, never a
// deleted one, across evictions, promotions, in-place changes and restarts. The interleavings
// that once broke it (a change of a key while its older version was being copied to disk) are
// forced with a latch in the eviction path.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "store/tiered_store.h"
#include "support/stalling_folder.h"

namespace kvport::store {
namespace {

constexpr uint64_t kBlock = 4096;
constexpr uint64_t kValueBytes = 4 * kBlock;  // four values fill the store below

// Hands evictions to the disk tier, holding the one of `key` (if set) between Leaving and
// Evicted until Release: the window where a change of the key must not slip in and be lost.
class LatchedSink final : public EvictionRelay {
 public:
  void Hold(std::string key) {
    std::lock_guard lock(mu_);
    held_key_ = std::move(key);
    reached_ = released_ = false;
  }
  // Waits until the held key's eviction is between its two steps.
  bool WaitReached() {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [&] { return reached_; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    changed_.notify_all();
  }

  bool Leaving(const EvictedObject& object) override { return next->Leaving(object); }
  void Evicted(const EvictedObject& object) override {
    {
      std::unique_lock lock(mu_);
      if (object.key == held_key_) {
        reached_ = true;
        changed_.notify_all();
        changed_.wait_for(lock, std::chrono::seconds(30), [&] { return released_; });
      }
    }
    next->Evicted(object);
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::string held_key_;
  bool reached_ = false;
  bool released_ = false;
};

std::string Value(char seed) {
  std::string value(kValueBytes, seed);
  value[0] = static_cast<char>(seed ^ 0x5a);  // not one repeated byte: a shifted read shows
  return value;
}

// What a get answered, in a line a failure can print: the seed of the Value it was, "miss", or
// "other bytes".
std::string Seen(const std::optional<std::string>& got) {
  if (!got) return "miss";
  if (got->size() == kValueBytes && *got == Value((*got)[1]))
    return std::string("value ") + (*got)[1];
  return "other bytes";
}

class TieredStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kvport_tiering_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    Open();
  }
  void TearDown() override {
    Close(/*flush=*/false);
    std::filesystem::remove_all(dir_);
  }

  // A node: 16 blocks of memory over a disk tier in dir_, restored from what is there.
  void Open() {
    TieredStoreOptions options;
    options.disk.dir = dir_;
    options.disk.capacity_bytes = 8 << 20;
    options.disk.namespace_on_disk = {{"mem", false}};  // a memory-only namespace
    options.disk.open_folder_for_testing =
        [this](const std::string& dir) -> Result<std::unique_ptr<SegmentFolder>> {
      KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<SegmentFolder> real, OpenSegmentFolder(dir));
      return std::unique_ptr<SegmentFolder>(
          std::make_unique<testing::StallingFolder>(std::move(real), &writes_, &reads_));
    };
    options.memory.capacity_bytes = 16 * kBlock;
    options.relay_for_testing = &sink_;
    Result<std::unique_ptr<TieredStore>> store = TieredStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    disk_ = store_->disk();
    memory_ = &store_->memory();
  }
  // A stop: with `flush`, what memory holds goes to disk first, as a clean stop does.
  void Close(bool flush) {
    if (flush && store_ != nullptr) {
      store_->FlushAtStop(std::chrono::steady_clock::now() + std::chrono::seconds(30));
    }
    disk_ = nullptr;
    memory_ = nullptr;
    store_.reset();
  }
  void Restart() {
    Close(/*flush=*/true);
    Open();
  }

  // A put as a client's reaches the node: its value and the checksum the client computed (0:
  // none).
  Status Put(std::string_view key, const std::string& value, uint64_t checksum = 0) {
    Result<WriteHandle> handle = store_->Reserve("ns", key, value.size(), "", 0);
    if (!handle.ok()) return handle.status();
    std::memcpy(handle->data(), value.data(), value.size());
    handle->SetChecksum(checksum);
    return store_->Commit(std::move(handle).value());
  }
  // The value a get answers, or nullopt for a miss.
  std::optional<std::string> Get(std::string_view key) {
    Result<ReadHandle> pin = store_->Lookup("ns", key);
    if (!pin.ok()) {
      EXPECT_EQ(pin.status().code(), StatusCode::kNotFound) << pin.status().ToString();
      return std::nullopt;
    }
    return std::string(reinterpret_cast<const char*>(pin->data()), pin->size());
  }
  Status Delete(std::string_view key) { return store_->Delete("ns", key); }
  // Puts four other values: whatever else memory held is evicted (to the disk tier).
  void FillMemory(const std::string& prefix) {
    for (int i = 0; i < 4; ++i)
      ASSERT_TRUE(Put(prefix + std::to_string(i), Value(static_cast<char>('0' + i))).ok());
  }
  // Waits until the disk tier's writer has written everything queued.
  void Drain() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (disk_->stats().pending_bytes != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(disk_->stats().pending_bytes, 0u);
  }

  std::string dir_;
  testing::StallGate writes_;  // the disk's writes and syncs
  testing::StallGate reads_;   // its reads
  LatchedSink sink_;
  std::unique_ptr<TieredStore> store_;
  WriteBehindDisk* disk_ = nullptr;  // store_'s
  ObjectStore* memory_ = nullptr;    // store_'s
};

// K@v1 is being evicted (out of memory, its copy to disk not made yet) when K@v2 is committed.
// v1 must not land on disk after v2's commit: when v2 is evicted in turn, the disk would already
// "have K" and the next get would answer v1.
TEST_F(TieredStoreTest, AnOverwriteDuringTheOldVersionsEvictionWinsOnDiskAndAfterARestart) {
  ASSERT_TRUE(Put("K", Value('a')).ok());
  sink_.Hold("K");
  std::thread evictor([&] { FillMemory("filler"); });  // K is the least recently used
  ASSERT_TRUE(sink_.WaitReached());
  ASSERT_TRUE(Put("K", Value('b')).ok());  // between the eviction's two steps
  sink_.Release();
  evictor.join();
  Drain();
  FillMemory("more");  // v2 goes to disk now
  Drain();
  ASSERT_EQ(memory_->Exists("ns", "K").code(), StatusCode::kNotFound);  // only the disk has K
  EXPECT_EQ(Seen(Get("K")), "value b");
  Restart();
  EXPECT_EQ(Seen(Get("K")), "value b");
}

// The same window, with a delete: the deleted version never comes back.
TEST_F(TieredStoreTest, ADeleteDuringTheEvictionKeepsTheKeyDeletedOnDiskAndAfterARestart) {
  ASSERT_TRUE(Put("K", Value('a')).ok());
  sink_.Hold("K");
  std::thread evictor([&] { FillMemory("filler"); });
  ASSERT_TRUE(sink_.WaitReached());
  EXPECT_TRUE(Delete("K").ok());  // it was there (on its way to disk): a delete of something
  sink_.Release();
  evictor.join();
  Drain();
  EXPECT_EQ(Seen(Get("K")), "miss");
  Restart();
  EXPECT_EQ(Seen(Get("K")), "miss");
}

// A version promoted from disk and evicted again is that very version: not written twice. One
// changed in place (a new expiry) is another: the disk copy of the old one ends.
TEST_F(TieredStoreTest, APromotedVersionIsNotWrittenAgainAndAChangedOneIs) {
  ASSERT_TRUE(Put("K", Value('a')).ok());
  FillMemory("filler");
  Drain();
  const uint64_t written = disk_->stats().written;
  EXPECT_EQ(Seen(Get("K")), "value a");  // promoted
  FillMemory("more");                    // evicted again: its copy is on disk already
  Drain();
  // The fillers (one evicted by the promotion, three by the puts), not K again.
  EXPECT_EQ(disk_->stats().written, written + 4);
  EXPECT_EQ(Seen(Get("K")), "value a");
  ASSERT_TRUE(store_->SetExpiry("ns", "K", 3600 * 1000).ok());
  EXPECT_FALSE(disk_->Contains("ns", "K", nullptr));  // the version before the change ended
  FillMemory("again");
  Drain();
  Restart();
  EXPECT_EQ(Seen(Get("K")), "value a");
  Result<uint64_t> ttl = store_->TimeToLive("ns", "K");
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(*ttl, 3000u * 1000);  // the changed version is the one kept
}

// A value goes to disk and comes back with its writer's checksum, which a reader checks; one
// put without comes back with the checksum the disk computed for its own record.
TEST_F(TieredStoreTest, AValueComesBackFromDiskWithItsChecksum) {
  const std::string value = Value('c');
  const uint64_t checksum = XXH3_64bits(value.data(), value.size());
  ASSERT_TRUE(Put("checked", value, checksum).ok());
  ASSERT_TRUE(Put("unchecked", value).ok());
  EXPECT_EQ(memory_->Lookup("ns", "checked")->checksum(), checksum);
  EXPECT_EQ(memory_->Lookup("ns", "unchecked")->checksum(), 0u);
  FillMemory("filler");
  Drain();
  ASSERT_EQ(memory_->Exists("ns", "checked").code(), StatusCode::kNotFound);  // on disk only
  for (const char* key : {"checked", "unchecked"}) {
    Result<ReadHandle> pin = store_->Lookup("ns", key);
    ASSERT_TRUE(pin.ok()) << key;
    EXPECT_EQ(pin->checksum(), checksum) << key;
  }
}

// Random puts, overwrites, deletes, in-place changes and restarts against a reference map, with
// memory far smaller than the keys' values so that gets go through evictions and promotions:
// each get answers the newest value put or a miss, and never a deleted key's value.
TEST_F(TieredStoreTest, RandomOperationsAgainstAReferenceMap) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 random(seed);
  std::map<std::string, std::string> model;  // absent: deleted or never put
  uint64_t misses = 0, hits = 0;
  for (int step = 0; step < 600; ++step) {
    const std::string key = "key" + std::to_string(random() % 12);
    const uint32_t op = random() % 100;
    if (op < 40) {
      const std::string value = Value(static_cast<char>('A' + random() % 50));
      ASSERT_TRUE(Put(key, value).ok());
      model[key] = value;
    } else if (op < 50) {
      (void)Delete(key);
      model.erase(key);
    } else if (op < 55) {
      if (store_->SetExpiry("ns", key, 3600 * 1000).ok()) {
        ASSERT_TRUE(model.count(key) != 0) << key << " changed in place after its delete";
      }
    } else if (op < 57) {
      Restart();
    } else if (op < 62) {
      // MEXIST's probe of every key: those in the model, in either tier, and no other.
      std::vector<std::string> names;
      for (int k = 0; k < 12; ++k)
        names.push_back("key" + std::to_string(k));
      std::vector<std::string_view> keys(names.begin(), names.end());
      std::vector<StatusCode> codes(keys.size());
      std::vector<uint64_t> lengths(keys.size());
      store_->ExistsMany("ns", keys, codes, lengths);
      for (size_t k = 0; k < keys.size(); ++k) {
        auto expected = model.find(names[k]);
        if (expected == model.end()) {
          ASSERT_EQ(codes[k], StatusCode::kNotFound) << names[k] << " (step " << step << ")";
        } else {
          ASSERT_EQ(codes[k], StatusCode::kOk) << names[k] << " (step " << step << ")";
          ASSERT_EQ(lengths[k], expected->second.size()) << names[k];
        }
      }
    } else {
      const std::optional<std::string> got = Get(key);
      auto expected = model.find(key);
      if (!got) {
        misses += expected != model.end() ? 1 : 0;
      } else {
        ++hits;
        ASSERT_TRUE(expected != model.end())
            << key << ": a deleted key came back (step " << step << ")";
        ASSERT_TRUE(*got == expected->second)
            << key << ": an older version came back (step " << step << ")";
      }
    }
  }
  // The disk holds every key many times over and one thread waits for each eviction's copy:
  // every key put and not deleted is found, in memory, in the writer's queue or on disk.
  EXPECT_EQ(misses, 0u) << hits << " hits";
  EXPECT_GT(hits, 0u);
}

// Counts what a change's waiter heard: Begin (the change waits for the disk) and End.
class CountingWaiter final : public DurabilityWaiter {
 public:
  void Begin() override {
    std::lock_guard lock(mu_);
    ++begun_;
  }
  void End(const Status& status) override {
    std::lock_guard lock(mu_);
    ++ended_;
    last_ = status;
    changed_.notify_all();
  }
  int begun() {
    std::lock_guard lock(mu_);
    return begun_;
  }
  int ended() {
    std::lock_guard lock(mu_);
    return ended_;
  }
  // Waits (at most 30 s: a bound on a broken test) until every change begun has ended.
  bool WaitEnded() {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [this] { return ended_ == begun_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int begun_ = 0;
  int ended_ = 0;
  Status last_;
};

// `call` run on a thread of its own, while `gate` stalls the disk: whether it returned within
// 30 s (a bound on a call that waits for the stalled disk, which never returns while the disk
// stays stalled). The gate opens when the test is done with it, so the call ends either way.
class CallOnAStalledDisk {
 public:
  CallOnAStalledDisk(testing::StallGate& gate, std::function<void()> call) : gate_(gate) {
    caller_ = std::thread([this, call = std::move(call)] {
      call();
      std::lock_guard lock(mu_);
      done_ = true;
      done_cv_.notify_all();
    });
  }
  ~CallOnAStalledDisk() {
    gate_.Open();
    caller_.join();
  }
  bool Returned() {
    std::unique_lock lock(mu_);
    return done_cv_.wait_for(lock, std::chrono::seconds(30), [this] { return done_; });
  }

 private:
  testing::StallGate& gate_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread caller_;
};

// The disk stops answering in the middle of a write (the writer thread holds the tier's append
// lock, as a stalled disk does): commits in a memory-only namespace, commits of keys the disk
// does not hold, an overwrite and a delete of keys it does hold all return at once. The
// overwrite and the delete are visible at once; they are durable (their waiters hear so) only
// once the disk answers again, and they hold across a restart.
TEST_F(TieredStoreTest, AStalledDiskWriteHoldsNoChangeOfAnyKey) {
  ASSERT_TRUE(Put("K", Value('a')).ok());
  ASSERT_TRUE(Put("D", Value('d')).ok());
  FillMemory("filler");
  Drain();
  ASSERT_EQ(memory_->Exists("ns", "K").code(), StatusCode::kNotFound);  // on disk only
  ASSERT_EQ(memory_->Exists("ns", "D").code(), StatusCode::kNotFound);

  writes_.Close();
  FillMemory("more");  // the fillers go to disk: the writer stalls in the middle of their write
  ASSERT_TRUE(writes_.WaitForACall());

  auto waiter = std::make_shared<CountingWaiter>();
  Status memory_only, fresh, overwrite, deleted;
  CallOnAStalledDisk changes(writes_, [&] {
    Result<WriteHandle> handle = store_->Reserve("mem", "M", kValueBytes, "", 0);
    memory_only = handle.ok() ? store_->Commit(std::move(handle).value(), waiter) : handle.status();
    handle = store_->Reserve("ns", "fresh", kValueBytes, "", 0);
    fresh = handle.ok() ? store_->Commit(std::move(handle).value(), waiter) : handle.status();
    handle = store_->Reserve("ns", "K", kValueBytes, "", 0);
    if (handle.ok()) std::memcpy(handle->data(), Value('b').data(), kValueBytes);
    overwrite = handle.ok() ? store_->Commit(std::move(handle).value(), waiter) : handle.status();
    deleted = store_->Delete("ns", "D", waiter);
  });
  const bool returned = changes.Returned();
  EXPECT_TRUE(returned) << "a change waited for the stalled disk";
  if (returned) {
    EXPECT_TRUE(memory_only.ok()) << memory_only.ToString();
    EXPECT_TRUE(fresh.ok()) << fresh.ToString();
    EXPECT_TRUE(overwrite.ok()) << overwrite.ToString();
    EXPECT_TRUE(deleted.ok()) << deleted.ToString();
    // Only the overwrite and the delete wait for the disk, and they have not been told yet.
    EXPECT_EQ(waiter->begun(), 2);
    EXPECT_EQ(waiter->ended(), 0);
    // Visible at once: the new version, and no trace of the deleted key in either tier.
    EXPECT_EQ(Seen(Get("K")), "value b");
    EXPECT_EQ(Seen(Get("D")), "miss");
    EXPECT_EQ(store_->Exists("ns", "D").code(), StatusCode::kNotFound);
  }
  writes_.Open();
  ASSERT_TRUE(waiter->WaitEnded());
  Drain();
  Restart();
  EXPECT_EQ(Seen(Get("K")), "value b");
  EXPECT_EQ(Seen(Get("D")), "miss");
}

// Reads that must go to a stalled disk are promoted in the background: the call returns at
// once, its `done` comes when the disk answers, and the keys are then in memory.
TEST_F(TieredStoreTest, APromotionInTheBackgroundHoldsNoCaller) {
  ASSERT_TRUE(Put("K1", Value('1')).ok());
  ASSERT_TRUE(Put("K2", Value('2')).ok());
  FillMemory("filler");
  Drain();
  const std::vector<std::string_view> keys = {"K1", "K2"};
  ASSERT_TRUE(store_->NeedsDisk("ns", false, keys));
  reads_.Close();
  struct Done {  // shared with the task, which may outlive a failed test's body
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  {
    CallOnAStalledDisk promote(reads_, [&] {
      store_->PromoteInBackground("ns", false, {"K1", "K2"}, {}, [done] {
        std::lock_guard lock(done->mu);
        done->done = true;
        done->cv.notify_all();
      });
    });
    EXPECT_TRUE(promote.Returned()) << "the promotion waited for the stalled disk";
    ASSERT_TRUE(reads_.WaitForACall());
    std::lock_guard lock(done->mu);
    EXPECT_FALSE(done->done);
  }  // the disk answers again
  {
    std::unique_lock lock(done->mu);
    ASSERT_TRUE(done->cv.wait_for(lock, std::chrono::seconds(30), [&] { return done->done; }));
  }
  EXPECT_TRUE(memory_->Exists("ns", "K1").ok());
  EXPECT_TRUE(memory_->Exists("ns", "K2").ok());
  EXPECT_FALSE(store_->NeedsDisk("ns", false, keys));
  EXPECT_EQ(Seen(Get("K1")), "value 1");
}

}  // namespace
}  // namespace kvport::store

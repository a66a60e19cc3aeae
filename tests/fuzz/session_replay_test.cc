// SPDX-License-Identifier: Apache-2.0
// The session fuzzer's driver in every build (and under ASan in the sanitizer lane): each seed
// input, fed in every way (on both connections where that matters), and cut short at several
// points, must leave the node serving, closing the connection at the end of the stream, with
// nothing half-written visible (session_driver.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "session_driver.h"
#include "session_inputs.h"

namespace kvport::fuzz {
namespace {

class SessionReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = SessionDriver::Start();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    driver_ = std::move(started).value().release();
  }
  static void TearDownTestSuite() {
    delete driver_;
    driver_ = nullptr;
  }
  static SessionDriver* driver_;
};
SessionDriver* SessionReplayTest::driver_ = nullptr;

std::string WithControl(const std::string& input, uint8_t feed, bool unix_socket) {
  std::string out = input;
  auto c = static_cast<uint8_t>(out[0]);
  c = static_cast<uint8_t>((c & ~(3 | kUnixSocket)) | feed | (unix_socket ? kUnixSocket : 0));
  out[0] = static_cast<char>(c);
  return out;
}

TEST_F(SessionReplayTest, SeedsFedEveryWay) {
  ASSERT_NE(driver_, nullptr);
  for (const SeedInput& seed : SeedInputs()) {
    for (uint8_t feed : {kFeedByteByByte, kFeedSmallChunks, kFeedChunks, kFeedAtOnce}) {
      for (bool unix_socket : {false, true}) {
        // The Unix socket for the seeds whose requests differ there (shared memory) and one
        // other; the rest behave alike on both connections.
        if (unix_socket && seed.name.rfind("shm", 0) != 0 && seed.name.rfind("keys", 0) != 0) {
          continue;
        }
        const std::string input = WithControl(seed.bytes, feed, unix_socket);
        Status s = driver_->Run(input);
        ASSERT_TRUE(s.ok()) << seed.name << " feed " << int{feed}
                            << (unix_socket ? " unix" : " tcp") << ": " << s.ToString();
      }
    }
  }
}

TEST_F(SessionReplayTest, SeedsCutShort) {
  ASSERT_NE(driver_, nullptr);
  for (const SeedInput& seed : SeedInputs()) {
    const size_t n = seed.bytes.size();
    for (size_t cut :
         {size_t{1}, size_t{2}, size_t{17}, size_t{33}, size_t{40}, n / 3, n / 2, n - 1}) {
      if (cut == 0 || cut >= n) continue;
      const std::string input = WithControl(seed.bytes.substr(0, cut), kFeedSmallChunks, false);
      Status s = driver_->Run(input);
      ASSERT_TRUE(s.ok()) << seed.name << " cut at " << cut << ": " << s.ToString();
    }
  }
}

}  // namespace
}  // namespace kvport::fuzz

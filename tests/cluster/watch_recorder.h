// SPDX-License-Identifier: Apache-2.0
// WatchRecorder: runs EtcdClient::Watch on another thread and collects what it delivers, for the
// etcd tests.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"

namespace kvport::testing {

// Collects what a Watch on another thread delivers.
class WatchRecorder {
 public:
  void Start(cluster::EtcdClient& client, std::string prefix, int64_t from,
             std::chrono::milliseconds max_silence = std::chrono::milliseconds(100)) {
    done_ = std::async(std::launch::async, [this, &client, prefix, from, max_silence] {
      return client.Watch(
          prefix, from,
          [this](const std::vector<cluster::EtcdEvent>& events) {
            std::lock_guard<std::mutex> lock(mu_);
            events_.insert(events_.end(), events.begin(), events.end());
          },
          stop_, max_silence);
    });
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.size();
  }
  std::vector<cluster::EtcdEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // Stops the watch and returns how it ended; Aborted if it did not end within a bound.
  Status Stop() {
    stop_ = true;
    return Wait();
  }
  Status Wait() {
    if (done_.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      stop_ = true;
      done_.wait();
      return Status::Aborted("the watch did not return within 20 s");
    }
    return done_.get();
  }
  ~WatchRecorder() {
    stop_ = true;
    if (done_.valid()) done_.wait();
  }

 private:
  std::mutex mu_;
  std::vector<cluster::EtcdEvent> events_;
  std::atomic<bool> stop_{false};
  std::future<Status> done_;
};

}  // namespace kvport::testing

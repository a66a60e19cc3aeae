// SPDX-License-Identifier: Apache-2.0
#include "cluster/membership.h"

#include <fmt/core.h>

#include <algorithm>

namespace kvport::cluster {

StaticMembership::StaticMembership(std::vector<std::string> addresses) {
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  for (std::string& address : addresses) {
    Member member;
    member.id = address;
    member.address = std::move(address);
    members_.push_back(std::move(member));
  }
}

std::string StaticMembership::Describe() const {
  return fmt::format("static list of {} node{}", members_.size(), members_.size() == 1 ? "" : "s");
}

}  // namespace kvport::cluster

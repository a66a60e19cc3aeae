// SPDX-License-Identifier: Apache-2.0
#include "net/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace kvport::net {

namespace {

bool SameAddress(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

Result<AddressInterfaces> InterfacesOf(std::string_view host) {
  const std::string name = host.empty() ? std::string("0.0.0.0") : std::string(host);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Status::InvalidArgument("cannot resolve '" + name + "': " + gai_strerror(rc));
  }
  AddressInterfaces out;
  char text[INET6_ADDRSTRLEN] = {};
  const sockaddr* address = found->ai_addr;
  if (address->sa_family == AF_INET) {
    const in_addr& a = reinterpret_cast<const sockaddr_in*>(address)->sin_addr;
    inet_ntop(AF_INET, &a, text, sizeof(text));
    out.wildcard = a.s_addr == htonl(INADDR_ANY);
  } else {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    inet_ntop(AF_INET6, &a, text, sizeof(text));
    out.wildcard = IN6_IS_ADDR_UNSPECIFIED(&a);
  }
  out.numeric_host = text;
  if (!out.wildcard) {
    ifaddrs* interfaces = nullptr;
    if (getifaddrs(&interfaces) == 0) {
      for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
        if (!SameAddress(i->ifa_addr, address)) continue;
        if (std::find(out.names.begin(), out.names.end(), i->ifa_name) == out.names.end())
          out.names.emplace_back(i->ifa_name);
      }
      freeifaddrs(interfaces);
    }
  }
  freeaddrinfo(found);
  if (!out.wildcard && out.names.empty()) {
    return Status::NotFound("no network interface of this host holds " + out.numeric_host);
  }
  return out;
}

}  // namespace kvport::net

// SPDX-License-Identifier: Apache-2.0
#include "common/endpoint_text.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>

namespace kvport {
namespace {

// Splits "A<sep>B<sep>C"; an empty entry is an error.
Result<std::vector<std::string>> SplitList(std::string_view list, char sep, std::string_view what) {
  std::vector<std::string> entries;
  for (size_t begin = 0; begin <= list.size();) {
    const size_t end = std::min(list.find(sep, begin), list.size());
    if (end == begin) {
      return Status::InvalidArgument(
          fmt::format("an empty entry in the {}; expected HOST:PORT{}HOST:PORT", what, sep));
    }
    entries.emplace_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return entries;
}

Result<int> ParseCount(std::string_view name, std::string_view value, int max) {
  int n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || n < 1 ||
      n > max) {
    return Status::InvalidArgument(
        fmt::format("option {}={}: expected a number from 1 to {}", name, std::string(value), max));
  }
  return n;
}

Status ParseOptions(std::string_view query, EndpointText* out) {
  while (!query.empty()) {
    const size_t amp = std::min(query.find('&'), query.size());
    const std::string_view option = query.substr(0, amp);
    query.remove_prefix(std::min(amp + 1, query.size()));
    const size_t eq = option.find('=');
    const std::string_view name = option.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : option.substr(eq + 1);
    if (name == "replicas") {
      KVPORT_ASSIGN_OR_RETURN(out->replicas, ParseCount(name, value, kMaxReplicas));
    } else if (name == "write_quorum") {
      KVPORT_ASSIGN_OR_RETURN(out->write_quorum, ParseCount(name, value, kMaxReplicas));
    } else {
      return Status::InvalidArgument(fmt::format(
          "unknown option '{}'; known: replicas=N, write_quorum=M", std::string(option)));
    }
  }
  if (out->write_quorum > std::max(out->replicas, 1)) {
    return Status::InvalidArgument(fmt::format("write_quorum={} is more than replicas={}",
                                               out->write_quorum, std::max(out->replicas, 1)));
  }
  return Status::Ok();
}

// "NS" (one segment) or "" into out->ns.
Status ParseNamespacePath(std::string_view path, EndpointText* out) {
  if (path.find('/') != std::string_view::npos) {
    return Status::InvalidArgument(
        "the path must be a single namespace name, e.g. eic://host:7470/myns");
  }
  out->ns = std::string(path);
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> SplitEtcdEndpoints(std::string_view list) {
  if (list.empty()) return std::vector<std::string>();
  return SplitList(list, ',', "etcd list");
}

Result<EndpointText> ParseEndpointText(std::string_view text) {
  std::string_view rest = text;
  EndpointText out;
  if (rest.starts_with("unix:")) {
    rest.remove_prefix(5);
    if (rest.starts_with("//")) rest.remove_prefix(2);  // unix:///path
    if (rest.empty() || rest[0] != '/') {
      return Status::InvalidArgument("a Unix socket is written unix:/ABSOLUTE/PATH");
    }
    out.kind = EndpointText::Kind::kUnix;
    out.unix_path = std::string(rest);
    return out;
  }
  if (size_t scheme_end = rest.find("://"); scheme_end != std::string_view::npos) {
    const std::string_view scheme = rest.substr(0, scheme_end);
    if (scheme != "eic") {
      return Status::InvalidArgument(
          fmt::format("unknown scheme '{}://'; a kvport node is addressed as eic://HOST:PORT or "
                      "HOST:PORT",
                      std::string(scheme)));
    }
    rest.remove_prefix(scheme_end + 3);
  }
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    KVPORT_RETURN_IF_ERROR(ParseOptions(rest.substr(q + 1), &out));
    rest = rest.substr(0, q);
  }
  if (rest.ends_with('/')) rest.remove_suffix(1);

  if (rest.starts_with("etcd:") && rest.find(':', 5) != std::string_view::npos) {
    rest.remove_prefix(5);
    out.kind = EndpointText::Kind::kEtcd;
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos || slash + 1 == rest.size()) {
      return Status::InvalidArgument(
          "no cluster name; the etcd form is etcd:HOST:PORT[,HOST:PORT]/CLUSTER[/NS]");
    }
    KVPORT_ASSIGN_OR_RETURN(out.addresses, SplitEtcdEndpoints(rest.substr(0, slash)));
    std::string_view path = rest.substr(slash + 1);
    const size_t ns_slash = path.find('/');
    out.cluster = std::string(path.substr(0, ns_slash));
    if (ns_slash != std::string_view::npos) {
      KVPORT_RETURN_IF_ERROR(ParseNamespacePath(path.substr(ns_slash + 1), &out));
    }
    return out;
  }

  const size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    KVPORT_RETURN_IF_ERROR(ParseNamespacePath(rest.substr(slash + 1), &out));
    rest = rest.substr(0, slash);
  }
  if (rest.empty()) return Status::InvalidArgument("no HOST:PORT");
  if (rest.size() > 1 && rest.back() == ';') rest.remove_suffix(1);  // EIC writes "HOST:PORT;"
  KVPORT_ASSIGN_OR_RETURN(out.addresses, SplitList(rest, ';', "node list"));
  return out;
}

}  // namespace kvport

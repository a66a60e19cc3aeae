#include "bench/bench_options.h"

#include <fmt/core.h>

#include <algorithm>

namespace kvport::bench {

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kPut:
      return "put";
    case Op::kGet:
      return "get";
    case Op::kExists:
      return "exists";
  }
  return "?";
}

Result<std::vector<Op>> ParseOps(std::string_view list) {
  std::vector<Op> ops;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view name = list.substr(start, comma - start);
    Op op;
    if (name == "put") {
      op = Op::kPut;
    } else if (name == "get") {
      op = Op::kGet;
    } else if (name == "exists") {
      op = Op::kExists;
    } else {
      return Status::InvalidArgument(
          fmt::format("--ops: unknown operation '{}' in '{}': expected a comma-separated list "
                      "of put, get, exists",
                      name, list));
    }
    if (std::find(ops.begin(), ops.end(), op) != ops.end()) {
      return Status::InvalidArgument(
          fmt::format("--ops: '{}' is listed twice in '{}'", name, list));
    }
    ops.push_back(op);
    start = comma + 1;
  }
  return ops;
}

Status BenchOptions::Validate() const {
  if (value_bytes == 0) return Status::InvalidArgument("--value-size must be at least 1 byte");
  if (batch == 0) return Status::InvalidArgument("--batch must be at least 1");
  if (connections < 1) return Status::InvalidArgument("--connections must be at least 1");
  if (threads < 0) return Status::InvalidArgument("--threads must be 0 (per connection) or more");
  if (ops.empty()) return Status::InvalidArgument("--ops: no operation given");
  if (count == 0) return Status::InvalidArgument("--count must be at least 1");
  if (!(max_seconds > 0)) return Status::InvalidArgument("--seconds must be positive");
  if (exists_batch == 0) return Status::InvalidArgument("--exists-batch must be at least 1");
  if (exists_count == 0) return Status::InvalidArgument("--exists-count must be at least 1");
  return Status::Ok();
}

}  // namespace kvport::bench

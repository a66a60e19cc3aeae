// SPDX-License-Identifier: Apache-2.0
#include "bench/load_options.h"

#include <algorithm>

namespace kvport::bench {

std::vector<double> LoadOptions::StepRates() const {
  if (!rates.empty()) return rates;
  std::vector<double> out;
  double r = rate;
  for (int i = 0; i < steps; ++i, r *= step_factor)
    out.push_back(r);
  return out;
}

uint64_t LoadOptions::prompts() const {
  return std::max<uint64_t>(1, objects / static_cast<uint64_t>(std::max(prompt_pages, 1)));
}

uint64_t LoadOptions::new_slots() const {
  return std::max<uint64_t>(objects / 4, static_cast<uint64_t>(std::max(write_batch, 1)));
}

Status LoadOptions::Validate() const {
  auto bad = [](std::string_view what) { return Status::InvalidArgument(std::string(what)); };
  if (connections < 1 || connections > 1024) return bad("--connections: 1 to 1024");
  for (double r : StepRates()) {
    if (!(r > 0)) return bad("--rate/--rates: offered rates must be above 0");
  }
  if (rates.empty() && (steps < 1 || steps > 64)) return bad("--steps: 1 to 64");
  if (rates.empty() && steps > 1 && !(step_factor > 1)) return bad("--step-factor: above 1");
  if (!(seconds > 0) || seconds > 3600) return bad("--seconds: above 0, at most 3600");
  if (objects < 1) return bad("--objects: at least 1");
  // Each value carries a stamp at each end (load_mix.h).
  if (page_bytes < 32 || page_bytes > (uint64_t{1} << 31)) {
    return bad("--page-size: 32 bytes to 2 GiB");
  }
  if (prompt_pages < 1 || prompt_pages > 4096) return bad("--prompt-pages: 1 to 4096");
  if (probe_pages < 1 || probe_pages > prompt_pages) {
    return bad("--probe-pages: 1 to --prompt-pages");
  }
  if (get_batch < 1 || get_batch > 4096) return bad("--get-batch: 1 to 4096");
  if (write_batch < 1 || write_batch > 4096) return bad("--write-batch: 1 to 4096");
  if (!(zipf >= 0) || zipf > 10) return bad("--zipf: 0 to 10");
  if (lmcache_weight < 0 || hicache_weight < 0 || write_weight < 0 ||
      !(lmcache_weight + hicache_weight + write_weight > 0)) {
    return bad("--mix: weights of at least 0, not all 0");
  }
  return Status::Ok();
}

std::string_view ArrivalsName(Arrivals a) {
  return a == Arrivals::kFixed ? "fixed" : "poisson";
}

}  // namespace kvport::bench

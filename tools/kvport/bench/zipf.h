// SPDX-License-Identifier: Apache-2.0
// ZipfSampler: ranks 0 .. n-1 drawn with probability proportional to 1 / (rank + 1)^exponent,
// the popularity of cached prompts (a few hot system prompts and documents, a long tail).
//
// Rejection-inversion (Hörmann and Derflinger, "Rejection-inversion to generate variates from
// monotone discrete distributions", 1996): the inverse of the integral of the continuous
// density x^-exponent picks a candidate, accepted with the exact discrete probability. Constant
// memory and an expected constant number of tries whatever n is, so a key space of ten million
// objects costs nothing to set up. exponent 0 is uniform; YCSB's default is 0.99.
//
// Not thread-safe: give each thread its own sampler (and its own random engine).
#pragma once

#include <cstdint>
#include <random>

namespace kvport::bench {

class ZipfSampler {
 public:
  // n >= 1, exponent >= 0 (both clamped there).
  ZipfSampler(uint64_t n, double exponent);

  // A rank in [0, n).
  uint64_t Sample(std::mt19937_64& random) const;

  uint64_t n() const { return n_; }
  double exponent() const { return exponent_; }

 private:
  // The density's integral H(x) = (x^(1-s) - 1) / (1-s) (log x for s = 1), its inverse, and the
  // density h(x) = x^-s, for the 1-based rank x.
  double H(double x) const;
  double HInverse(double y) const;
  double h(double x) const;

  uint64_t n_;
  double exponent_;
  double h_integral_first_;  // H(1.5) - h(1): the left end of the candidates' range
  double h_integral_n_;      // H(n + 0.5): the right end
  double squeeze_;           // candidates within this of their rank are accepted at once
};

}  // namespace kvport::bench

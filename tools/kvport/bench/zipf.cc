// SPDX-License-Identifier: Apache-2.0
#include "bench/zipf.h"

#include <algorithm>
#include <cmath>

namespace kvport::bench {
namespace {

// (e^x - 1) / x and log(1 + x) / x, accurate near x = 0 (where the exponent is close to 1).
double ExpM1OverX(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x / 2 * (1 + x / 3);
}
double Log1pOverX(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x / 2 + x * x / 3;
}

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double exponent)
    : n_(std::max<uint64_t>(n, 1)), exponent_(std::max(exponent, 0.0)) {
  h_integral_first_ = H(1.5) - h(1);
  h_integral_n_ = H(static_cast<double>(n_) + 0.5);
  squeeze_ = 2 - HInverse(H(2.5) - h(2));
}

// With t = (1 - s) log x: H(x) = (e^t - 1) / (1 - s) = log x * ExpM1OverX(t), which is log x at
// s = 1 and stays accurate around it.
double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return ExpM1OverX((1 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HInverse(double y) const {
  double t = y * (1 - exponent_);
  t = std::max(t, -1.0);  // rounding can take it just below the domain's edge
  return std::exp(Log1pOverX(t) * y);
}

double ZipfSampler::h(double x) const {
  return std::exp(-exponent_ * std::log(x));
}

uint64_t ZipfSampler::Sample(std::mt19937_64& random) const {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  while (true) {
    // u uniform over (H(1.5) - h(1), H(n + 0.5)]: each rank k owns the piece
    // (H(k + 0.5) - h(k), H(k + 0.5)] of it, of length h(k) (the probability wanted), plus a
    // share of the gaps between pieces that the test below rejects.
    const double u = h_integral_n_ + uniform(random) * (h_integral_first_ - h_integral_n_);
    const double x = HInverse(u);
    double k = std::floor(x + 0.5);
    k = std::clamp(k, 1.0, static_cast<double>(n_));
    if (k - x <= squeeze_ || u >= H(k + 0.5) - h(k)) return static_cast<uint64_t>(k) - 1;
  }
}

}  // namespace kvport::bench

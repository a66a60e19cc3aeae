// SPDX-License-Identifier: Apache-2.0
#include "bench/zipf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace kvport::bench {
namespace {

// Frequencies of `samples` draws over ranks 0 .. n-1, from a fixed seed.
std::vector<double> Frequencies(uint64_t n, double exponent, int samples) {
  ZipfSampler zipf(n, exponent);
  std::mt19937_64 random(42);
  std::vector<double> counts(n, 0);
  for (int i = 0; i < samples; ++i) {
    const uint64_t rank = zipf.Sample(random);
    EXPECT_LT(rank, n);
    if (rank < n) counts[rank] += 1;
  }
  for (double& c : counts)
    c /= samples;
  return counts;
}

// The exact probabilities: (k + 1)^-s normalised.
std::vector<double> Exact(uint64_t n, double exponent) {
  std::vector<double> p(n);
  double sum = 0;
  for (uint64_t k = 0; k < n; ++k)
    sum += p[k] = std::pow(static_cast<double>(k + 1), -exponent);
  for (double& x : p)
    x /= sum;
  return p;
}

TEST(ZipfSamplerTest, OneRankIsAlwaysZero) {
  ZipfSampler zipf(1, 0.99);
  std::mt19937_64 random(1);
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(zipf.Sample(random), 0u);
}

TEST(ZipfSamplerTest, FrequenciesFallWithRank) {
  const std::vector<double> f = Frequencies(100, 1.0, 400'000);
  for (int k = 0; k + 1 < 6; ++k)
    EXPECT_GT(f[k], f[k + 1]) << "rank " << k;
  // With exponent 1, rank 0 is drawn twice as often as rank 1 and ten times as often as rank 9.
  EXPECT_NEAR(f[0] / f[1], 2.0, 0.1);
  EXPECT_NEAR(f[0] / f[9], 10.0, 1.0);
}

TEST(ZipfSamplerTest, MatchesTheDistributionForSeveralExponents) {
  for (double s : {0.0, 0.5, 0.99, 1.0, 1.2, 2.0}) {
    const uint64_t n = 50;
    const std::vector<double> f = Frequencies(n, s, 300'000);
    const std::vector<double> p = Exact(n, s);
    double distance = 0;  // total variation
    for (uint64_t k = 0; k < n; ++k)
      distance += std::abs(f[k] - p[k]) / 2;
    EXPECT_LT(distance, 0.01) << "exponent " << s;
  }
}

TEST(ZipfSamplerTest, ExponentZeroIsUniform) {
  const std::vector<double> f = Frequencies(10, 0.0, 200'000);
  for (double x : f)
    EXPECT_NEAR(x, 0.1, 0.005);
}

TEST(ZipfSamplerTest, HugeKeySpaceNeedsNoTable) {
  // Ten million ranks: constant set-up, the head still the most popular.
  const uint64_t n = 10'000'000;
  ZipfSampler zipf(n, 0.99);
  std::mt19937_64 random(7);
  uint64_t zeros = 0, tail = 0;
  for (int i = 0; i < 100'000; ++i) {
    const uint64_t r = zipf.Sample(random);
    ASSERT_LT(r, n);
    zeros += r == 0;
    tail += r >= n / 2;
  }
  // P(rank 0) ~ 1 / H(n, 0.99) ~ 0.058; the upper half of the ranks gets about 4%.
  EXPECT_GT(zeros, 4000u);
  EXPECT_GT(tail, 1000u);
  EXPECT_GT(zeros, tail / 2);
}

}  // namespace
}  // namespace kvport::bench

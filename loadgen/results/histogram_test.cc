#include "loadgen/results/histogram.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rsslab {
namespace {

// The exact value of rank ceil(q/100*n) in the sorted sample, the definition
// Histogram::Percentile promises to approximate.
uint64_t Exact(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  uint64_t rank = static_cast<uint64_t>(std::ceil(q / 100.0 * v.size()));
  rank = std::clamp<uint64_t>(rank, 1, v.size());
  return v[rank - 1];
}

// Three significant digits: within 1/1000 of the exact value (the bucket
// layout guarantees 1/2048 for midpoints).
void ExpectClose(const std::vector<uint64_t>& values, const Histogram& h,
                 const char* what) {
  for (double q : {0.0, 1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const double exact = static_cast<double>(Exact(values, q));
    const double got = h.Percentile(q);
    EXPECT_LE(std::abs(got - exact), exact / 1000.0 + 0.5)
        << what << " q=" << q << " exact=" << exact << " got=" << got;
  }
  EXPECT_EQ(h.max(), *std::max_element(values.begin(), values.end())) << what;
  EXPECT_EQ(h.min(), *std::min_element(values.begin(), values.end())) << what;
  EXPECT_EQ(h.count(), values.size()) << what;
}

Histogram Fill(const std::vector<uint64_t>& values) {
  Histogram h;
  for (uint64_t v : values) h.Record(v);
  return h;
}

TEST(HistogramTest, BucketsCoverEveryValueWithBoundedWidth) {
  for (size_t i = 1; i < Histogram::BucketCount(); ++i) {
    ASSERT_EQ(Histogram::LowestEquivalent(i),
              Histogram::HighestEquivalent(i - 1) + 1)
        << i;
    const double lo = Histogram::LowestEquivalent(i);
    const double width = Histogram::HighestEquivalent(i) - lo + 1;
    // Exact below 2048; beyond, never wider than 1/1024 of the lower edge.
    if (width > 1) {
      ASSERT_LE(width / lo, 1.0 / 1024 + 1e-12) << i;
    }
    ASSERT_EQ(Histogram::IndexOf(Histogram::LowestEquivalent(i)), i);
    ASSERT_EQ(Histogram::IndexOf(Histogram::HighestEquivalent(i)), i);
  }
  EXPECT_EQ(Histogram::HighestEquivalent(Histogram::BucketCount() - 1),
            Histogram::kMaxTrackable);
}

TEST(HistogramTest, FixedMemoryWhateverTheCount) {
  Histogram h;
  const size_t buckets = Histogram::BucketCount();
  EXPECT_LT(buckets * sizeof(uint64_t), 300 * 1024);
  for (int i = 0; i < 1000000; ++i) h.Record(i * 7919ULL % 10000000);
  EXPECT_EQ(h.count(), 1000000u);
  EXPECT_EQ(h.ToProto().sig_digits(), 3);
}

TEST(HistogramTest, RandomLognormalMatchesSortedValues) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(std::log(200000.0), 1.2);
  std::vector<uint64_t> v;
  for (int i = 0; i < 200000; ++i) v.push_back(static_cast<uint64_t>(dist(rng)));
  ExpectClose(v, Fill(v), "lognormal");
}

TEST(HistogramTest, RandomUniformWideRange) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> dist(0, uint64_t{1} << 40);
  std::vector<uint64_t> v;
  for (int i = 0; i < 100000; ++i) v.push_back(dist(rng));
  ExpectClose(v, Fill(v), "uniform");
}

TEST(HistogramTest, AdversarialDistributions) {
  // All equal.
  ExpectClose(std::vector<uint64_t>(1000, 123456789), Fill(std::vector<uint64_t>(1000, 123456789)), "constant");
  // Bimodal extremes: 1 ns and an hour; the tail must not be smeared.
  std::vector<uint64_t> bi(9990, 1);
  bi.insert(bi.end(), 10, uint64_t{3600} * 1000000000);
  ExpectClose(bi, Fill(bi), "bimodal");
  // Bucket edges: powers of two and their neighbours.
  std::vector<uint64_t> edges;
  for (int b = 0; b < 42; ++b) {
    const uint64_t p = uint64_t{1} << b;
    edges.push_back(p);
    edges.push_back(p - 1);
    edges.push_back(p + 1);
  }
  ExpectClose(edges, Fill(edges), "edges");
  // One giant outlier among many small values: p100 is it, p99.99 is not.
  std::vector<uint64_t> outlier(100000, 50000);
  outlier.push_back(1000000000);
  Histogram h = Fill(outlier);
  ExpectClose(outlier, h, "outlier");
  EXPECT_EQ(h.Percentile(100), 1e9);
  // A single sample.
  ExpectClose({987654321}, Fill({987654321}), "single");
  // Zeros.
  ExpectClose({0, 0, 0, 5}, Fill({0, 0, 0, 5}), "zeros");
}

TEST(HistogramTest, ValuesBeyondTheRangeKeepAnExactMax) {
  Histogram h;
  h.Record(Histogram::kMaxTrackable * 4);
  EXPECT_EQ(h.max(), Histogram::kMaxTrackable * 4);
  EXPECT_EQ(h.Percentile(100), static_cast<double>(Histogram::kMaxTrackable * 4));
}

TEST(HistogramTest, MergeEqualsRecordingEverythingInOne) {
  std::mt19937_64 rng(1);
  std::exponential_distribution<double> dist(1.0 / 300000);
  std::vector<uint64_t> all;
  Histogram a, b, c;
  for (int i = 0; i < 50000; ++i) {
    const uint64_t v = static_cast<uint64_t>(dist(rng));
    all.push_back(v);
    (i % 3 == 0 ? a : i % 3 == 1 ? b : c).Record(v);
  }
  Histogram m;
  m.Merge(a);
  m.Merge(b);
  m.Merge(c);
  Histogram one = Fill(all);
  for (double q : {50.0, 99.0, 99.9, 100.0}) {
    EXPECT_EQ(m.Percentile(q), one.Percentile(q)) << q;
  }
  EXPECT_DOUBLE_EQ(m.mean(), one.mean());
  ExpectClose(all, m, "merged");
}

TEST(HistogramTest, ProtoRoundTripKeepsPercentiles) {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> dist(std::log(1e6), 0.8);
  std::vector<uint64_t> v;
  for (int i = 0; i < 20000; ++i) v.push_back(static_cast<uint64_t>(dist(rng)));
  Histogram h = Fill(v);
  auto back = Histogram::FromProto(h.ToProto());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->count(), h.count());
  for (double q : {50.0, 90.0, 99.0, 99.9}) {
    const double exact = static_cast<double>(Exact(v, q));
    EXPECT_LE(std::abs(back->Percentile(q) - exact), exact / 1000.0) << q;
  }
  rsslab::v1::HistogramData bad = h.ToProto();
  bad.set_sig_digits(2);
  EXPECT_FALSE(Histogram::FromProto(bad).ok());
}

TEST(HistogramTest, LatencyMicrosConvertsFromNanoseconds) {
  Histogram h;
  for (int i = 1; i <= 100; ++i) h.Record(i * 1000);  // 1..100 us
  auto l = h.LatencyMicros();
  EXPECT_NEAR(l.p50_us(), 50, 0.05);
  EXPECT_NEAR(l.p99_us(), 99, 0.1);
  EXPECT_NEAR(l.max_us(), 100, 1e-9);
  EXPECT_NEAR(l.mean_us(), 50.5, 1e-9);
  EXPECT_EQ(l.count(), 100u);
  EXPECT_EQ(Histogram().Percentile(50), 0);
}

}  // namespace
}  // namespace rsslab

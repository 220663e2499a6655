// The prefetch queue model: depths a user would accept for the situations
// they would recognise.
#include "pipetune/models/queue_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pipetune::models {
namespace {

TEST(SizePrefetch, DrainingConsumerGetsTwo) {
  PrefetchQuery query;
  query.producer_throughput = 1000;
  PrefetchSizing sizing = SizePrefetch(query);
  EXPECT_EQ(sizing.buffer, 2);
  EXPECT_FALSE(sizing.reason.empty());
}

TEST(SizePrefetch, PipelineSlowerThanTheConsumerGetsTwo) {
  PrefetchQuery query;
  query.producer_throughput = 40;  // 0.8 outputs per 20 ms step
  query.step_seconds = 0.020;
  PrefetchSizing sizing = SizePrefetch(query);
  EXPECT_FALSE(sizing.pipeline_faster);
  EXPECT_EQ(sizing.buffer, 2);
}

TEST(SizePrefetch, MatchesTheFormulaWhenThePipelineIsFaster) {
  PrefetchQuery query;
  query.producer_throughput = 60;  // 1.2 per step
  query.step_seconds = 0.020;
  query.arrival_cv = 1;
  query.stall_probability = 0.01;
  PrefetchSizing sizing = SizePrefetch(query);
  EXPECT_TRUE(sizing.pipeline_faster);
  double d = 0.2, v = 1.2;
  EXPECT_NEAR(sizing.drift_per_step, d, 1e-12);
  EXPECT_NEAR(sizing.variance_per_step, v, 1e-12);
  EXPECT_EQ(sizing.buffer, static_cast<int64_t>(std::ceil(v * std::log(100.0) / (2 * d) + 1)));
}

TEST(SizePrefetch, MoreSpreadOrLessSlackNeedsADeeperBuffer) {
  PrefetchQuery query;
  query.producer_throughput = 75;
  query.step_seconds = 0.020;
  query.arrival_cv = 0.5;
  int64_t calm = SizePrefetch(query).buffer;
  query.arrival_cv = 2.0;
  int64_t bursty = SizePrefetch(query).buffer;
  EXPECT_GT(bursty, calm);
  query.producer_throughput = 52;  // barely faster than 50/s
  int64_t tight = SizePrefetch(query).buffer;
  EXPECT_GT(tight, bursty);
}

TEST(SizePrefetch, NearBalanceIsCappedAndSaysSo) {
  PrefetchQuery query;
  query.producer_throughput = 50.05;
  query.step_seconds = 0.020;
  query.arrival_cv = 1.5;
  query.max_buffer = 32;
  PrefetchSizing sizing = SizePrefetch(query);
  EXPECT_EQ(sizing.buffer, 32);
  EXPECT_TRUE(sizing.clamped);
  EXPECT_NE(sizing.reason.find("capped"), std::string::npos);
}

TEST(SpreadFromCounts, RegularArrivalsHaveNoSpreadAndBurstyOnesDo) {
  std::optional<ArrivalSpread> regular = SpreadFromCounts({10, 10, 10, 10, 10});
  ASSERT_TRUE(regular);
  EXPECT_NEAR(regular->cv, 0, 1e-12);
  // Mean 10, sample variance 64 / 5: index of dispersion 1.28.
  std::optional<ArrivalSpread> poisson = SpreadFromCounts({6, 14, 10, 6, 14, 10});
  ASSERT_TRUE(poisson);
  EXPECT_NEAR(poisson->cv, std::sqrt(1.28), 1e-12);
  EXPECT_EQ(poisson->samples, 6u);
}

TEST(SpreadFromCounts, TooFewIntervalsOrArrivalsSayNothing) {
  EXPECT_FALSE(SpreadFromCounts({5, 5}));
  EXPECT_FALSE(SpreadFromCounts({1, 2, 3}));
}

}  // namespace
}  // namespace pipetune::models

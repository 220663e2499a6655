#include "pipetune/analyzer/collector.h"

#include <gtest/gtest.h>

#include "synthetic_trace.h"

namespace pipetune::analyzer {
namespace {

TEST(TraceCollector, MemoryStaysBoundedAndTheTotalsExact) {
  testing::SyntheticRun run;
  run.config_json = "";
  run.seconds = 2000;  // 20000 snapshots
  run.stages = {{"src", "range", 1, 1, 0, 1e-6, 1e-6}, {"work", "map", 1, 1, 1, 0.001, 0.001}};
  CollectedTrace trace = testing::Collect(run);
  EXPECT_LE(trace.frames.size(), TraceCollector::kMaxFrames);
  EXPECT_GE(trace.frames.size(), TraceCollector::kMaxFrames / 4);
  EXPECT_EQ(trace.frames.back().time_ns, 2000'000'000'000ull);
  EXPECT_EQ(trace.frames.back().stages[1].produced, static_cast<uint64_t>((2000 - 1) * 100));
  EXPECT_EQ(trace.frames.front().time_ns, 100'000'000ull);
  for (size_t i = 1; i < trace.frames.size(); ++i)
    EXPECT_LT(trace.frames[i - 1].time_ns, trace.frames[i].time_ns);
}

TEST(TraceCollector, IntegratesBufferOccupancyOverTime) {
  testing::SyntheticRun run;
  run.seconds = 5;
  run.stages = {{"src", "range", 1, 1, 0, 1e-6, 1e-6, 250}};
  CollectedTrace trace = testing::Collect(run);
  // 1000 bytes held from the first snapshot (0.1 s) on; before it, a ramp
  // from nothing.
  EXPECT_NEAR(trace.frames.back().stages[0].occupancy_byte_seconds, 1000 * 4.9 + 50, 1e-6);
}

TEST(LatencyHistogram, QuantilesAreWithinABucket) {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.Add(static_cast<uint64_t>(i) * 10'000);  // 10 us .. 10 ms
  EXPECT_NEAR(h.Quantile(0.5) / 0.005, 1.0, 0.2);
  EXPECT_NEAR(h.Quantile(0.99) / 0.0099, 1.0, 0.2);
  EXPECT_EQ(LatencyHistogram().Quantile(0.5), 0);
}

}  // namespace
}  // namespace pipetune::analyzer

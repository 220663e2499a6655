// RunPipeline as `pipetune run` uses it: the consumer, time limits, the
// summary, memory accounting, and the speed-ups parallelism should give.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "test_util.h"

namespace pipetune::runtime::test {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

TEST(RunTest, MaxSecondsStopsAnEndlessPipelinePromptly) {
  auto config = Config(R"({"name": "endless", "stages": [
      {"name": "src", "op": "range"},
      {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 20}, "parallelism": 4},
      {"name": "batch", "op": "batch", "args": {"size": 8}},
      {"name": "prefetch", "op": "prefetch", "buffer": 4}]})");
  RunOptions options;
  options.max_seconds = 0.3;
  auto begin = Clock::now();
  auto summary = RunPipeline(config, options);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_LT(Seconds(begin), 1.0);
  EXPECT_TRUE(summary->stopped_early);
  EXPECT_GT(summary->outputs, 0u);
  EXPECT_NEAR(summary->seconds, 0.3, 0.2);
  EXPECT_EQ(summary->source_elements, summary->outputs * 8);
}

TEST(RunTest, SteadyRateExcludesTheWarmUp) {
  // 5 ms per element, one worker: about 200 elements/s from the first one on.
  auto config = Config(R"({"name": "steady", "stages": [
      {"name": "src", "op": "range"},
      {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 5}}]})");
  RunOptions options;
  options.max_seconds = 1.0;
  auto summary = RunPipeline(config, options);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  // The report's rule: at least the first quarter of a 1 s run is warm-up.
  EXPECT_GE(summary->steady_from_seconds, 0.25);
  EXPECT_LT(summary->steady_from_seconds, 0.5);
  EXPECT_GT(summary->steady_examples_per_second, 100);
  EXPECT_LT(summary->steady_examples_per_second, 210);
  auto json = SummaryToJson(*summary);
  EXPECT_EQ(json["steady_examples_per_second"].get<double>(), summary->steady_examples_per_second);
}

TEST(RunTest, SlowConsumerSetsThePaceAndDoesNotStall) {
  auto config = Config(R"({"name": "slow_consumer", "stages": [
      {"name": "src", "op": "range", "args": {"count": 30}},
      {"name": "prefetch", "op": "prefetch", "buffer": 2}],
      "consumer": {"step_time_ms": 10}})");
  auto summary = RunPipeline(config);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->outputs, 30u);
  EXPECT_GE(summary->seconds, 0.29);
  EXPECT_LT(summary->seconds, 1.0);
  EXPECT_LT(summary->stall_fraction, 0.2);
  EXPECT_FALSE(summary->stopped_early);
}

TEST(RunTest, SlowPipelineStallsTheConsumer) {
  auto config = Config(R"({"name": "slow_pipeline", "stages": [
      {"name": "src", "op": "range", "args": {"count": 20}},
      {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 10}}]})");
  auto summary = RunPipeline(config);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->outputs, 20u);
  EXPECT_GT(summary->stall_fraction, 0.8);
  EXPECT_LT(summary->throughput, 101);
}

TEST(RunTest, SummaryJsonHasWhatRunReports) {
  auto config = Config(R"({"name": "t", "stages": [
      {"name": "src", "op": "range", "args": {"count": 64}},
      {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 1}, "parallelism": 2},
      {"name": "batch", "op": "batch", "args": {"size": 16}}]})");
  std::vector<uint64_t> seen;
  std::vector<double> progress_seconds;
  RunOptions options;
  options.on_output = [&](const Element& e) { seen.push_back(e.id); };
  auto summary = RunPipeline(config, options);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(seen.size(), 4u);
  auto json = SummaryToJson(*summary);
  for (const char* key : {"throughput", "examples_per_second", "elements", "seconds", "stall_fraction",
                          "failed_elements", "peak_buffer_bytes", "cache_bytes", "stages"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json["elements"], 4);
  EXPECT_EQ(json["source_elements"], 64);
  ASSERT_EQ(json["stages"].size(), 3u);
  EXPECT_EQ(json["stages"][1]["name"], "work");
  EXPECT_EQ(json["stages"][1]["op"], "map");
  EXPECT_EQ(json["stages"][1]["parallelism"], 2);
  EXPECT_EQ(json["stages"][1]["elements"], 64);
  EXPECT_EQ(json["stages"][2]["elements"], 4);
  EXPECT_GT(json["stages"][1]["busy_seconds"].get<double>(), 0);
}

TEST(RunTest, ProgressIsReportedWhileRunning) {
  auto config = Config(R"({"name": "t", "stages": [
      {"name": "src", "op": "range", "args": {"count": 40}}],
      "consumer": {"step_time_ms": 10}})");
  std::vector<Progress> reports;
  std::mutex mu;
  RunOptions options;
  options.progress_interval_s = 0.1;
  options.on_progress = [&](const Progress& p) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(p);
  };
  ASSERT_TRUE(RunPipeline(config, options).ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(reports.size(), 2u);
  EXPECT_GT(reports.back().outputs, reports.front().outputs);
  EXPECT_GT(reports.back().throughput, 50);
}

TEST(MemoryTest, PrefetchHoldsAtMostItsBufferAndBuffersAreAccounted) {
  auto config = Config(R"({"name": "t", "stages": [
      {"name": "src", "op": "range", "args": {"count": 200, "bytes": 10000}},
      {"name": "prefetch", "op": "prefetch", "buffer": 3}],
      "consumer": {"step_time_ms": 1}})");
  auto summary = RunPipeline(config);
  ASSERT_TRUE(summary.ok());
  EXPECT_LE(summary->stages[1].peak_buffer_bytes, 3u * 10000u);
  EXPECT_GE(summary->stages[1].peak_buffer_bytes, 2u * 10000u);
  EXPECT_GE(summary->peak_buffer_bytes, summary->stages[1].peak_buffer_bytes);
  EXPECT_EQ(summary->cache_bytes, 0u);
}

TEST(MemoryTest, ShuffleBufferIsAccounted) {
  Outputs out = Drain(Config(R"({"name": "t", "stages": [
      {"name": "src", "op": "range", "args": {"count": 500, "bytes": 1000}},
      {"name": "shuffle", "op": "shuffle", "args": {"buffer": 100}}]})"));
  ASSERT_TRUE(out.status.ok());
  EXPECT_GE(out.stages[1].peak_buffer_bytes, 100u * 1000u);
  EXPECT_GE(out.peak_buffer_bytes, 100u * 1000u);
}

// A latency-bound stage needs workers, not cores: 8 workers wait 8 at a time.
TEST(ScalingTest, IoWaitAtParallelism8IsAbout8TimesFaster) {
  auto run = [](int parallelism) {
    auto config = RangeThen(48, fmt::format(R"({{"name": "fetch", "op": "map", "fn": "io_wait",
                                                 "args": {{"ms": 10}}, "parallelism": {}}})",
                                            parallelism));
    auto summary = RunPipeline(config);
    EXPECT_TRUE(summary.ok());
    return summary.ok() ? summary->throughput : 0.0;
  };
  // A ratio, not absolute rates: on a loaded machine every sleep overshoots.
  double one = run(1), eight = run(8);
  EXPECT_LT(one, 101);
  EXPECT_GT(eight / one, 5.5) << "p=1: " << one << "/s, p=8: " << eight << "/s";
}

// Every stage has its own thread: two stages of 20 ms each overlap (a
// pipeline, not a sequence), so the pair runs at one stage's rate (50/s, 25/s
// if they took turns). Latency (io_wait) rather than CPU, so that the test
// does not depend on idle cores.
TEST(ScalingTest, SequentialStagesRunConcurrently) {
  auto config = RangeThen(30, R"(
      {"name": "a", "op": "map", "fn": "io_wait", "args": {"ms": 20}},
      {"name": "b", "op": "map", "fn": "io_wait", "args": {"ms": 20}})");
  auto summary = RunPipeline(config);
  ASSERT_TRUE(summary.ok());
  EXPECT_GT(summary->throughput, 36) << "stages did not overlap";
}

}  // namespace
}  // namespace pipetune::runtime::test

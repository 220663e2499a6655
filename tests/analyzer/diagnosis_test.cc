// Diagnoses of synthetic traces whose costs, and so whose answers, are known.
#include "pipetune/analyzer/diagnosis.h"

#include <gtest/gtest.h>

#include <cmath>

#include "synthetic_trace.h"

namespace pipetune::analyzer {
namespace {

using testing::Collect;
using testing::SyntheticRun;
using testing::SyntheticStage;

// files -> decode (10 ms CPU, 1 worker) -> batch 4 -> prefetch, on 2 cores,
// draining consumer: decode limits at 100 elements/s = 25 batches/s.
SyntheticRun DecodeBound() {
  SyntheticRun run;
  run.name = "decode_bound";
  run.config_json = R"({"name": "decode_bound", "stages": [
    {"name": "src", "op": "range"},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 10000}, "parallelism": 1},
    {"name": "batch", "op": "batch", "args": {"size": 4}},
    {"name": "prefetch", "op": "prefetch", "buffer": 2}]})";
  run.throughput = 25;
  run.stages = {
      {"src", "range", 1, 4, 0, 1e-6, 1e-6},
      {"decode", "map", 1, 4, 1, 0.010, 0.010},
      {"batch", "batch", 1, 1, 4, 1e-5, 1e-5, 4000},
      {"prefetch", "prefetch", 1, 1, 1, 1e-6, 1e-6, 4000},
  };
  return run;
}

Diagnosis DiagnoseOrDie(const CollectedTrace& trace, std::vector<std::string> what_ifs = {}) {
  DiagnoseOptions options;
  options.what_ifs = std::move(what_ifs);
  StatusOr<Diagnosis> d = Diagnose(trace, "synthetic.trace", options);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return *d;
}

// A window of a second or of a handful of outputs holds no rate to judge a
// prediction by (a tf.data run of four short epochs measured 0.83x to 1.52x
// of the same prediction from run to run): the report says so in its window
// line and gives no ratio as if it were judged.
TEST(Diagnose, AWindowTooShortToJudgeThePredictionIsSaidSo) {
  SyntheticRun run = DecodeBound();
  run.seconds = 1.6;  // nothing flows in the first second: a window of 0.6 s
  Diagnosis d = DiagnoseOrDie(Collect(run));
  EXPECT_FALSE(d.prediction_judged);
  EXPECT_NE(d.window_reason.find("too short to judge the prediction"), std::string::npos) << d.window_reason;
  run.seconds = 4;  // 3 s and 75 outputs: judged
  Diagnosis longer = DiagnoseOrDie(Collect(run));
  EXPECT_TRUE(longer.prediction_judged) << longer.window_reason;
  EXPECT_EQ(longer.window_reason.find("too short"), std::string::npos) << longer.window_reason;
}

TEST(Diagnose, NamesTheStageWhoseCostsLimitThroughput) {
  Diagnosis d = DiagnoseOrDie(Collect(DecodeBound()));
  EXPECT_NEAR(d.measured_throughput, 25, 0.5);
  EXPECT_NEAR(d.prediction_ratio, 1.0, 0.03);
  EXPECT_EQ(d.bound, models::BoundKind::kConcurrency);
  ASSERT_TRUE(d.bottleneck);
  EXPECT_EQ(*d.bottleneck, "decode");
  ASSERT_EQ(d.stages.size(), 4u);
  const StageDiagnosis& decode = d.stages[1];
  EXPECT_TRUE(decode.bottleneck);
  EXPECT_EQ(decode.limited_by, StageLimit::kCpu);
  EXPECT_NEAR(decode.cores_used, 1.0, 0.03);
  EXPECT_NEAR(decode.rate_per_core, 25, 0.5);  // 40 ms of CPU per batch
  EXPECT_NEAR(decode.max_throughput, 25, 0.5);
  EXPECT_NEAR(decode.busy_fraction, 1.0, 0.03);
  EXPECT_EQ(decode.visit_ratio, 4);
  // Two workers fill the two cores: 50 batches/s less the other stages' share.
  EXPECT_NE(d.summary.find("Stage decode limits throughput at 25.0 outputs/s"), std::string::npos)
      << d.summary;
  EXPECT_NE(d.summary.find("parallelism 2 would reach"), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("the CPU bound"), std::string::npos) << d.summary;
}

// Slow outputs (25 batches/s against 10 snapshots/s) would make
// per-snapshot rates jump between 0 and 3x the mean: each timeline point
// spans enough snapshots to hold about 8 outputs, and there are still at
// least 20 points.
TEST(Diagnose, TimelinePointsHoldSeveralOutputsEach) {
  Diagnosis d = DiagnoseOrDie(Collect(DecodeBound()));
  ASSERT_GE(d.timeline.size(), 20u);
  ASSERT_LE(d.timeline.size(), 40u);
  for (size_t i = 1; i < d.timeline.size(); ++i) {
    EXPECT_GE(d.timeline[i].seconds - d.timeline[i - 1].seconds, 0.3 - 1e-9);
    if (d.timeline[i - 1].seconds >= 2) {
      EXPECT_NEAR(d.timeline[i].throughput, 25, 25 * 0.35) << i;
    }
  }
  SyntheticRun fast = DecodeBound();
  fast.throughput = 1000;  // 100 outputs a snapshot: every snapshot is its own point
  Diagnosis busy = DiagnoseOrDie(Collect(fast));
  EXPECT_GE(busy.timeline.size(), 90u);
}

TEST(Diagnose, SkipsTheWarmUpAndSaysWhichWindowItUsed) {
  SyntheticRun run = DecodeBound();
  run.start_seconds = 2.5;  // the consumer's first step comes late
  Diagnosis d = DiagnoseOrDie(Collect(run));
  EXPECT_GE(d.window_begin_seconds, 2.5);
  EXPECT_NEAR(d.window_end_seconds, 10, 1e-9);
  EXPECT_NE(d.window_reason.find("first step"), std::string::npos) << d.window_reason;
  EXPECT_NEAR(d.measured_throughput, 25, 0.5);

  Diagnosis early = DiagnoseOrDie(Collect(DecodeBound()));
  EXPECT_NEAR(early.window_begin_seconds, 1.0, 0.11);  // 10% of 10 s, and the 1 s warm-up
}

TEST(Diagnose, LatencyBoundStageNeedsWorkers) {
  SyntheticRun run;
  run.name = "remote";
  run.config_json = R"({"name": "remote", "stages": [
    {"name": "src", "op": "range"},
    {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 50}, "parallelism": 2}],
    "consumer": {"step_time_ms": 20}})";
  run.throughput = 40;  // 2 workers / 50 ms
  run.step_seconds = 0.020;
  run.stages = {{"src", "range", 1, 1, 0, 1e-6, 1e-6}, {"fetch", "map", 2, 1, 1, 2e-5, 0.050}};
  Diagnosis d = DiagnoseOrDie(Collect(run), {"fetch.parallelism=3", "cores=+2"});
  EXPECT_EQ(*d.bottleneck, "fetch");
  EXPECT_EQ(d.stages[1].limited_by, StageLimit::kLatency);
  EXPECT_NEAR(d.prediction_ratio, 1.0, 0.03);
  EXPECT_NE(d.summary.find("latency-bound at parallelism 2"), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("parallelism 3 would reach 50"), std::string::npos) << d.summary;
  ASSERT_EQ(d.what_ifs.size(), 2u);
  EXPECT_NEAR(d.what_ifs[0].throughput, 1 / 0.020, 0.5);
  EXPECT_EQ(d.what_ifs[0].bound, models::BoundKind::kDemand);
  EXPECT_NEAR(d.what_ifs[1].speedup, 1.0, 1e-6);  // cores do not help a latency-bound stage
}

TEST(Diagnose, DemandBoundPipelineKeepsUp) {
  SyntheticRun run = DecodeBound();
  run.config_json = R"({"name": "decode_bound", "stages": [
    {"name": "src", "op": "range"},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 10000}, "parallelism": 1},
    {"name": "batch", "op": "batch", "args": {"size": 4}},
    {"name": "prefetch", "op": "prefetch", "buffer": 2}], "consumer": {"step_time_ms": 50}})";
  run.throughput = 20;
  run.step_seconds = 0.050;
  Diagnosis d = DiagnoseOrDie(Collect(run));
  EXPECT_EQ(d.bound, models::BoundKind::kDemand);
  EXPECT_FALSE(d.bottleneck);
  ASSERT_TRUE(d.next_limit);
  EXPECT_EQ(*d.next_limit, "decode");
  EXPECT_NEAR(d.next_limit_throughput, 25, 0.5);
  EXPECT_NEAR(d.prediction_ratio, 1.0, 0.03);
  EXPECT_NE(d.summary.find("keeps up with the consumer"), std::string::npos) << d.summary;
}

TEST(Diagnose, CacheWindowStartsAfterTheFirstEpochAndUpstreamCostIsGone) {
  SyntheticRun run;
  run.name = "cached";
  run.config_json = R"({"name": "cached", "stages": [
    {"name": "src", "op": "range", "args": {"count": 200}},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 10000}},
    {"name": "cache", "op": "cache", "location": "memory"},
    {"name": "repeat", "op": "repeat"},
    {"name": "augment", "op": "map", "fn": "cpu_work", "args": {"us": 1000}, "random": true}]})";
  run.throughput = 1000;
  run.start_seconds = 1;
  run.stages = {{"src", "range", 1, 1, 0, 1e-6, 1e-6, 100, 3.0},
                {"decode", "map", 1, 1, 1, 0.001, 0.001, 1000, 3.0},
                {"cache", "cache", 1, 1, 1, 1e-6, 1e-6},
                {"repeat", "repeat", 1, 1, 1, 1e-6, 1e-6},
                {"augment", "map", 1, 1, 1, 0.001, 0.001}};
  Diagnosis d = DiagnoseOrDie(Collect(run));
  EXPECT_GE(d.window_begin_seconds, 3.0);
  EXPECT_NE(d.window_reason.find("first epoch"), std::string::npos) << d.window_reason;
  EXPECT_EQ(d.stages[1].elements, 0);
  EXPECT_EQ(*d.bottleneck, "augment");
  EXPECT_NEAR(d.prediction_ratio, 1.0, 0.03);
}

TEST(Diagnose, DropsAndTruncationAreReported) {
  SyntheticRun run = DecodeBound();
  run.dropped_spans = 17;
  tracer::ReadReport report;
  report.path = "cut.trace";
  report.file_bytes = 1000;
  report.bytes_read = 900;
  report.bytes_not_read = 100;
  report.warning = "cut.trace: trace truncated at byte 900: 100 bytes (10%) not read";
  Diagnosis d = DiagnoseOrDie(Collect(run, report));
  EXPECT_EQ(d.drops.spans, 17u);
  EXPECT_EQ(d.truncation_warning, report.warning);
}

TEST(Diagnose, ATooShortTraceIsAnErrorNamingTheFile) {
  TraceCollector collector;
  tracer::TraceHeader header;
  collector.OnHeader(header);
  tracer::ReadReport report;
  report.path = "short.trace";
  CollectedTrace trace = collector.Finish(report);
  StatusOr<Diagnosis> d = Diagnose(trace, "short.trace");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(d.status().message().find("short.trace"), std::string::npos);
}

TEST(Diagnose, AConfigOfOtherStagesIsSetAsideWithANote) {
  SyntheticRun run = DecodeBound();
  run.config_json = R"({"name": "other", "stages": [{"name": "numbers", "op": "range"}]})";
  Diagnosis d = DiagnoseOrDie(Collect(run));
  EXPECT_EQ(*d.bottleneck, "decode");
  EXPECT_NEAR(d.stages[0].visit_ratio, 4, 0.1);  // measured now
  bool noted = false;
  for (const std::string& a : d.assumptions) noted |= a.find("was ignored") != std::string::npos;
  EXPECT_TRUE(noted);

  run.config_json = "{not json";
  EXPECT_EQ(*DiagnoseOrDie(Collect(run)).bottleneck, "decode");
}

TEST(Diagnose, BadWhatIfIsAnError) {
  CollectedTrace trace = Collect(DecodeBound());
  EXPECT_FALSE(Diagnose(trace, "t", DiagnoseOptions{{"nosuch.parallelism=2"}}).ok());
  EXPECT_FALSE(Diagnose(trace, "t", DiagnoseOptions{{"batch.parallelism=2"}}).ok());
  EXPECT_FALSE(Diagnose(trace, "t", DiagnoseOptions{{"cores=zero"}}).ok());
}

TEST(Diagnose, ScalingPointsFromAnotherTraceReplaceLinear) {
  SyntheticRun two = DecodeBound();
  two.stages[1].parallelism = 2;
  two.stages[1].wall_seconds = 0.016;  // 2 workers, each slower: 125 elements/s
  two.throughput = 125.0 / 4;
  two.cores = 4;
  SyntheticRun one = DecodeBound();
  one.cores = 4;
  StatusOr<Diagnosis> d = Diagnose(Collect(one), "one.trace", {}, {Collect(two)});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_NE(d->stages[1].scaling.find("Amdahl"), std::string::npos) << d->stages[1].scaling;
  StatusOr<WhatIfOutcome> w = EvaluateWhatIf(d->profile, *ParseWhatIf("decode.parallelism=2"));
  ASSERT_TRUE(w.ok());
  EXPECT_NEAR(w->throughput, 125.0 / 4, 0.5);
}

}  // namespace
}  // namespace pipetune::analyzer

// The rate model on hand-built windows whose answers are known.
#include "pipetune/models/rate_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "pipetune/models/config.h"
#include "pipetune/models/profile.h"

namespace pipetune::models {
namespace {

PipelineConfig Config(const std::string& json) {
  StatusOr<PipelineConfig> config = ParseConfig(json);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return *config;
}

// A stage that ran `seconds` with each element costing cpu_ms of CPU and
// wall_ms of wall time per worker.
StageMeasurement Stage(const std::string& name, const std::string& op, double elements, double cpu_ms,
                       double wall_ms, int parallelism = 1, double consumed_per_element = 1) {
  StageMeasurement m;
  m.name = name;
  m.op = op;
  m.parallelism = parallelism;
  m.elements = elements;
  m.consumed = elements * consumed_per_element;
  m.bytes = elements * 1000;
  m.cpu_seconds = elements * cpu_ms / 1e3;
  m.work_seconds = elements * wall_ms / 1e3;
  return m;
}

WindowMeasurement Window(double seconds, double outputs, double cores, std::vector<StageMeasurement> stages) {
  WindowMeasurement w;
  w.pipeline_name = "test";
  w.begin_seconds = 1;
  w.end_seconds = 1 + seconds;
  w.outputs = outputs;
  w.host_cores = cores;
  w.stages = std::move(stages);
  double cpu = 0;
  for (const StageMeasurement& s : w.stages) cpu += s.cpu_seconds;
  w.process_cpu_seconds = cpu;
  return w;
}

Profile MakeOrDie(const WindowMeasurement& window, const PipelineConfig* config) {
  StatusOr<Profile> profile = MakeProfile(window, config);
  EXPECT_TRUE(profile.ok()) << profile.status().message();
  return *profile;
}

const char* kChain = R"({"name": "chain", "stages": [
  {"name": "src", "op": "range"},
  {"name": "a", "op": "map", "fn": "cpu_work", "args": {"us": 1000}},
  {"name": "b", "op": "map", "fn": "cpu_work", "args": {"us": 500}}]})";

TEST(RateModel, CpuBoundChainIsLimitedByTheSlowestStageThenByTheCores) {
  PipelineConfig config = Config(kChain);
  Profile profile = MakeOrDie(Window(10, 10000, 2,
                                     {Stage("src", "range", 10000, 0.001, 0.001),
                                      Stage("a", "map", 10000, 1, 1), Stage("b", "map", 10000, 0.5, 0.5)}),
                              &config);
  Configuration observed = ObservedConfiguration(profile);
  Prediction p = Predict(profile, observed);
  EXPECT_NEAR(p.throughput, 1000, 1);
  EXPECT_EQ(p.binding.kind, BoundKind::kConcurrency);
  ASSERT_TRUE(p.bottleneck_stage);
  EXPECT_EQ(profile.stages[*p.bottleneck_stage].name, "a");
  EXPECT_NEAR(p.throughput / profile.measured_throughput, 1.0, 0.01);
  EXPECT_NEAR(p.stages[1].cores_used, 1.0, 0.01);
  EXPECT_FALSE(profile.stages[1].latency_bound);

  // Two workers on stage a: the two cores (1.5 ms of CPU per output) bind.
  Configuration more = observed;
  more.parallelism[1] = 2;
  Prediction q = Predict(profile, more);
  EXPECT_EQ(q.binding.kind, BoundKind::kCpu);
  EXPECT_NEAR(q.throughput, 2.0 / 0.001501, 2);
  EXPECT_EQ(ParallelismForBestThroughput(profile, observed, 1), 2);

  // Four cores: b (2000/s) binds at parallelism 2 of a.
  more.cores = 4;
  Prediction r = Predict(profile, more);
  EXPECT_NEAR(r.throughput, 2000, 1);
  EXPECT_EQ(profile.stages[*r.bottleneck_stage].name, "a");  // tie 2000/2000: the first stage named
}

TEST(RateModel, LatencyBoundStageNeedsWorkersNotCores) {
  PipelineConfig config = Config(R"({"name": "remote", "stages": [
    {"name": "src", "op": "range"},
    {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 50}}],
    "consumer": {"step_time_ms": 20}})");
  WindowMeasurement w =
      Window(10, 200, 2, {Stage("src", "range", 200, 0.001, 0.001), Stage("fetch", "map", 200, 0.02, 50)});
  w.consumer_step_seconds = 200 * 0.020;
  Profile profile = MakeOrDie(w, &config);
  EXPECT_TRUE(profile.stages[1].latency_bound);
  Configuration observed = ObservedConfiguration(profile);
  Prediction p = Predict(profile, observed);
  EXPECT_NEAR(p.throughput, 20, 0.01);
  EXPECT_EQ(p.binding.kind, BoundKind::kConcurrency);
  EXPECT_NEAR(p.cores_used, 20 * 0.00002 + 20 * 0.000001, 1e-6);
  // 3 workers reach the consumer's 50 steps/s; more cores alone do nothing.
  EXPECT_EQ(ParallelismForBestThroughput(profile, observed, 1), 3);
  Configuration cores = observed;
  cores.cores = 16;
  EXPECT_NEAR(Predict(profile, cores).throughput, 20, 0.01);
  Configuration three = observed;
  three.parallelism[1] = 3;
  Prediction q = Predict(profile, three);
  EXPECT_EQ(q.binding.kind, BoundKind::kDemand);
  EXPECT_NEAR(q.throughput, 50, 0.01);
  EXPECT_FALSE(q.bottleneck_stage);
}

TEST(RateModel, BatchMultipliesTheVisitRatioOfEveryStageBeforeIt) {
  PipelineConfig config = Config(R"({"name": "batched", "stages": [
    {"name": "src", "op": "range"},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 1000}},
    {"name": "batch", "op": "batch", "args": {"size": 64}}]})");
  // 10 s: 9984 elements, 156 batches; the measured ratio (~64) is not used.
  Profile profile =
      MakeOrDie(Window(10, 156, 4,
                       {Stage("src", "range", 10000, 0.001, 0.001), Stage("work", "map", 9984, 1, 1),
                        Stage("batch", "batch", 156, 0.01, 0.01, 1, 9984.0 / 156)}),
                &config);
  EXPECT_EQ(profile.stages[2].local_ratio, 64);
  EXPECT_FALSE(profile.stages[2].local_ratio_measured);
  EXPECT_EQ(profile.stages[1].visit_ratio, 64);
  EXPECT_EQ(profile.stages[0].visit_ratio, 64);
  EXPECT_NEAR(profile.stages[1].cpu_seconds_per_output, 0.064, 1e-9);
  Prediction p = Predict(profile, ObservedConfiguration(profile));
  EXPECT_NEAR(p.throughput, 1000.0 / 64, 1e-6);
  EXPECT_EQ(profile.stages[*p.bottleneck_stage].name, "work");
  EXPECT_NEAR(p.stages[1].max_throughput, 1000.0 / 64, 1e-6);
}

TEST(RateModel, FilterRatioIsMeasuredOrTakenFromKeepEvery) {
  PipelineConfig config = Config(R"({"name": "filtered", "stages": [
    {"name": "src", "op": "range"},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 100}},
    {"name": "keep", "op": "filter", "fn": "keep_every", "args": {"n": 4}}]})");
  Profile profile =
      MakeOrDie(Window(10, 2500, 2,
                       {Stage("src", "range", 10000, 0.001, 0.001), Stage("decode", "map", 10000, 0.1, 0.1),
                        Stage("keep", "filter", 2500, 0.001, 0.001, 1, 4.02)}),
                &config);
  EXPECT_TRUE(profile.stages[2].local_ratio_measured);
  EXPECT_NEAR(profile.stages[2].local_ratio, 4.02, 1e-9);
  EXPECT_NEAR(profile.stages[1].visit_ratio, 4.02, 1e-9);

  // Three outputs in the window: too few to measure; keep_every's n is used.
  Profile few =
      MakeOrDie(Window(10, 3, 2,
                       {Stage("src", "range", 13, 0.001, 0.001), Stage("decode", "map", 13, 0.1, 0.1),
                        Stage("keep", "filter", 3, 0.001, 0.001, 1, 13.0 / 3)}),
                &config);
  EXPECT_FALSE(few.stages[2].local_ratio_measured);
  EXPECT_EQ(few.stages[2].local_ratio, 4);
}

const char* kCached = R"({"name": "cached", "resources": {"memory": "1MiB"}, "stages": [
  {"name": "src", "op": "range", "args": {"count": 500}},
  {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 2000}},
  {"name": "augment", "op": "map", "fn": "cpu_work", "args": {"us": 200}, "random": true},
  {"name": "repeat", "op": "repeat"}]})";

TEST(RateModel, CacheRemovesTheCostOfEveryStageUpToIt) {
  PipelineConfig config = Config(kCached);
  Profile profile = MakeOrDie(
      Window(10, 5000, 2,
             {Stage("src", "range", 5000, 0.001, 0.001), Stage("decode", "map", 5000, 2, 2, 2),
              Stage("augment", "map", 5000, 0.2, 0.2), Stage("repeat", "repeat", 5000, 0.001, 0.001)}),
      &config);
  Configuration observed = ObservedConfiguration(profile);
  Prediction p = Predict(profile, observed);
  EXPECT_EQ(p.binding.kind, BoundKind::kCpu);  // 2.2 ms per output on 2 cores
  EXPECT_NEAR(p.throughput, 2 / 0.002202, 1);

  EXPECT_FALSE(CacheNotAllowed(profile, 1)) << *CacheNotAllowed(profile, 1);
  EXPECT_NEAR(*CacheBytes(profile, 1), 500 * 1000, 1e-6);
  Configuration cached = observed;
  cached.cache_after = 1;
  Prediction q = Predict(profile, cached);
  EXPECT_TRUE(q.stages[0].cached);
  EXPECT_TRUE(q.stages[1].cached);
  EXPECT_FALSE(q.stages[2].cached);
  EXPECT_NEAR(q.throughput, 5000, 1);  // augment alone, one worker: 0.2 ms
  EXPECT_EQ(profile.stages[*q.bottleneck_stage].name, "augment");

  ASSERT_TRUE(CacheNotAllowed(profile, 2));
  EXPECT_NE(CacheNotAllowed(profile, 2)->find("random"), std::string::npos);
}

TEST(RateModel, CacheNeedsAKnownEpochAndFitsTheMemoryBudget) {
  PipelineConfig config = Config(R"({"name": "endless", "resources": {"memory": "100KiB"}, "stages": [
    {"name": "src", "op": "range"},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 2000}}]})");
  Profile endless = MakeOrDie(
      Window(10, 100, 2, {Stage("src", "range", 100, 0.001, 0.001), Stage("decode", "map", 100, 2, 2)}),
      &config);
  ASSERT_TRUE(CacheNotAllowed(endless, 1));
  EXPECT_NE(CacheNotAllowed(endless, 1)->find("epoch"), std::string::npos);

  WindowMeasurement w =
      Window(10, 100, 2, {Stage("src", "range", 100, 0.001, 0.001), Stage("decode", "map", 100, 2, 2)});
  w.source_elements_per_epoch = 1000;  // 1000 elements of 1000 bytes > 100 KiB
  Profile finite = MakeOrDie(w, &config);
  ASSERT_TRUE(CacheNotAllowed(finite, 1));
  EXPECT_NE(CacheNotAllowed(finite, 1)->find("memory budget"), std::string::npos);
}

TEST(RateModel, DemandBindsWhenThePipelineKeepsUp) {
  PipelineConfig config = Config(R"({"name": "fast", "stages": [
    {"name": "src", "op": "range"},
    {"name": "a", "op": "map", "fn": "cpu_work", "args": {"us": 1000}}],
    "consumer": {"step_time_ms": 20}})");
  WindowMeasurement w =
      Window(10, 495, 2, {Stage("src", "range", 495, 0.001, 0.001), Stage("a", "map", 495, 1, 1)});
  w.consumer_step_seconds = 495 * 0.0202;  // the measured step, with sleep overshoot
  w.consumer_wait_seconds = 0.001;
  Profile profile = MakeOrDie(w, &config);
  EXPECT_NEAR(*profile.step_time_seconds, 0.0202, 1e-9);
  Prediction p = Predict(profile, ObservedConfiguration(profile));
  EXPECT_EQ(p.binding.kind, BoundKind::kDemand);
  EXPECT_NEAR(p.throughput, 1 / 0.0202, 1e-6);
  EXPECT_FALSE(p.bottleneck_stage);
  EXPECT_NEAR(p.stages[1].utilisation, (1 / 0.0202) / 1000, 1e-6);
}

// A loop that makes a new iterator each epoch (a tf.data `for` loop) waits
// consumer.epoch_start_ms for it every epoch: a user reading the prediction
// for such a run sees it below the steady rate by that much, cached or not.
TEST(RateModel, ANewIteratorPerEpochIsPaidEveryEpoch) {
  PipelineConfig config = Config(R"({"name": "loop", "stages": [
    {"name": "src", "op": "range", "args": {"count": 1000}},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 1000}},
    {"name": "batch", "op": "batch", "args": {"size": 10}}],
    "consumer": {"epoch_start_ms": 250}})");
  Profile profile =
      MakeOrDie(Window(10, 500, 2,
                       {Stage("src", "range", 5000, 0.001, 0.001), Stage("decode", "map", 5000, 1, 1),
                        Stage("batch", "batch", 500, 0.001, 0.001, 1, 10)}),
                &config);
  EXPECT_NEAR(*profile.outputs_per_epoch, 100, 1e-9);  // 1000 elements, 10 per output
  EXPECT_NEAR(profile.epoch_start_seconds, 0.25, 1e-12);
  Prediction p = Predict(profile, ObservedConfiguration(profile));
  // decode, one worker: 10 ms per output, so 1 s per epoch of 100, + 0.25 s.
  EXPECT_NEAR(p.steady_throughput, 1 / (10 * 0.001002), 0.5);
  EXPECT_NEAR(p.throughput, 100 / (100 / p.steady_throughput + 0.25), 1e-6);
  EXPECT_NEAR(p.startup_seconds_per_epoch, 0.25, 1e-12);

  PipelineConfig plain = Config(R"({"name": "loop", "stages": [
    {"name": "src", "op": "range", "args": {"count": 1000}},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 1000}},
    {"name": "batch", "op": "batch", "args": {"size": 10}}]})");
  Profile without =
      MakeOrDie(Window(10, 500, 2,
                       {Stage("src", "range", 5000, 0.001, 0.001), Stage("decode", "map", 5000, 1, 1),
                        Stage("batch", "batch", 500, 0.001, 0.001, 1, 10)}),
                &plain);
  EXPECT_FALSE(without.outputs_per_epoch);
  EXPECT_NEAR(Predict(without, ObservedConfiguration(without)).throughput, p.steady_throughput, 1e-6);
}

// A tf.data loop's epoch start as measured holds the iterator's making and
// the pipeline's teardown and fill, which belong to the stages that run each
// epoch. A plan that caches after the costly map replays it: its epochs pay
// the making and the small fill of what runs after the cache. Priced whole
// (the old figure), the plan caching examples/tfdata/train_tf.py's decoded
// images was promised 233.7 batches/s and ran 412 after its first epoch.
TEST(RateModel, ACachedPlansEpochStartPaysTheMakingAndWhatStillRuns) {
  PipelineConfig config = Config(R"({"name": "loop", "stages": [
    {"name": "src", "op": "range", "args": {"count": 1000}},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 1000}, "parallelism": 2},
    {"name": "flip", "op": "map", "fn": "cpu_work", "args": {"us": 100}, "random": true},
    {"name": "batch", "op": "batch", "args": {"size": 10}}],
    "consumer": {"epoch_start_ms": 250, "epoch_iterator_ms": 50}})");
  Profile profile = MakeOrDie(
      Window(10, 1000, 2,
             {Stage("src", "range", 10000, 0.001, 0.001), Stage("decode", "map", 10000, 1, 1, 2),
              Stage("flip", "map", 10000, 0.1, 0.1), Stage("batch", "batch", 1000, 0.001, 0.001, 1, 10)}),
      &config);
  ASSERT_TRUE(profile.epoch_iterator_seconds);
  // As traced, the epoch start is what was measured.
  Prediction traced = Predict(profile, ObservedConfiguration(profile));
  EXPECT_NEAR(traced.startup_seconds_per_epoch, 0.25, 1e-9);
  // First output as traced: decode 10 x 1 ms / 2 + flip 10 x 0.1 ms (+ the
  // source's and the batch's microseconds) = 6 ms. Cached after decode,
  // flip's 1 ms remains: 50 ms + 200 ms x (1/6).
  Configuration cached = ObservedConfiguration(profile);
  cached.cache_after = 1;
  Prediction plan = Predict(profile, cached);
  const double first_traced = 10 * 1e-6 + 10 * 0.001 / 2 + 10 * 0.0001 + 1e-6;
  const double first_cached = 10 * 0.0001 + 1e-6;
  EXPECT_NEAR(plan.startup_seconds_per_epoch, 0.05 + 0.2 * first_cached / first_traced, 1e-6);
  EXPECT_LT(plan.startup_seconds_per_epoch, 0.1);  // not the 0.25 s priced whole
  EXPECT_NEAR(plan.throughput, 100 / (100 / plan.steady_throughput + plan.startup_seconds_per_epoch), 1e-6);
  // Without the making measured, all of it is paid whatever the knobs.
  PipelineConfig whole = config;
  whole.consumer.epoch_iterator_ms.reset();
  Profile unsplit = MakeOrDie(
      Window(10, 1000, 2,
             {Stage("src", "range", 10000, 0.001, 0.001), Stage("decode", "map", 10000, 1, 1, 2),
              Stage("flip", "map", 10000, 0.1, 0.1), Stage("batch", "batch", 1000, 0.001, 0.001, 1, 10)}),
      &whole);
  EXPECT_NEAR(Predict(unsplit, cached).startup_seconds_per_epoch, 0.25, 1e-9);
}

TEST(RateModel, OversubscribedCoresAreTakenOutOfTheLatency) {
  // Three CPU-bound stages, one worker each, on 2 cores: every thread got 2/3
  // of a core, so each 1 ms element took 1.5 ms of wall time.
  PipelineConfig config = Config(R"({"name": "three", "stages": [
    {"name": "src", "op": "range"},
    {"name": "a", "op": "map", "fn": "cpu_work", "args": {"us": 1000}},
    {"name": "b", "op": "map", "fn": "cpu_work", "args": {"us": 1000}},
    {"name": "c", "op": "map", "fn": "cpu_work", "args": {"us": 1000}}]})");
  Profile profile =
      MakeOrDie(Window(10, 6660, 2,
                       {Stage("src", "range", 6660, 0.0001, 0.0001), Stage("a", "map", 6660, 1, 1.5),
                        Stage("b", "map", 6660, 1, 1.5), Stage("c", "map", 6660, 1, 1.5)}),
                &config);
  EXPECT_NEAR(profile.cpu_contention, 1.5, 1e-9);
  EXPECT_NEAR(profile.stages[1].latency_seconds, 0.001, 1e-9);
  EXPECT_NEAR(profile.stages[1].measured_latency_seconds, 0.0015, 1e-9);
  Prediction p = Predict(profile, ObservedConfiguration(profile));
  EXPECT_EQ(p.binding.kind, BoundKind::kCpu);
  EXPECT_NEAR(p.throughput / profile.measured_throughput, 1.0, 0.01);
  // With 3 cores each stage has a core: 1000/s, the concurrency bound.
  Configuration more = ObservedConfiguration(profile);
  more.cores = 3;
  EXPECT_NEAR(Predict(profile, more).throughput, 1000, 1);
}

TEST(RateModel, FittedScalingReplacesLinear) {
  PipelineConfig config = Config(kChain);
  WindowMeasurement w = Window(10, 10000, 16,
                               {Stage("src", "range", 10000, 0.001, 0.001), Stage("a", "map", 10000, 1, 1),
                                Stage("b", "map", 10000, 0.01, 0.01)});
  // At 4 workers the stage ran 4/1.6 = 2.5x as fast: Amdahl with sigma 0.2.
  w.stages[1].scaling_points = {{4, 2500}};
  Profile profile = MakeOrDie(w, &config);
  EXPECT_EQ(profile.stages[1].scaling.kind, ScalingKind::kAmdahl);
  Configuration four = ObservedConfiguration(profile);
  four.parallelism[1] = 4;
  EXPECT_NEAR(Predict(profile, four).throughput, 2500, 1);
  for (const std::string& a : profile.assumptions) EXPECT_EQ(a.find("stage a"), std::string::npos) << a;
}

TEST(MakeProfile, RejectsATraceOfAnotherPipeline) {
  PipelineConfig config = Config(kChain);
  StatusOr<Profile> profile = MakeProfile(
      Window(10, 10, 2, {Stage("src", "range", 10, 0, 0), Stage("zzz", "map", 10, 1, 1)}), &config);
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(profile.status().message().find("\"zzz\""), std::string::npos);
  WindowMeasurement empty = Window(0, 0, 2, {Stage("src", "range", 0, 0, 0)});
  EXPECT_FALSE(MakeProfile(empty, nullptr).ok());
}

TEST(MakeProfile, WithoutAConfigEveryRatioIsMeasured) {
  Profile profile = MakeOrDie(
      Window(10, 100, 2,
             {Stage("src", "range", 6400, 0.001, 0.001), Stage("b", "batch", 100, 0.01, 0.01, 1, 64)}),
      nullptr);
  EXPECT_TRUE(profile.stages[1].local_ratio_measured);
  EXPECT_NEAR(profile.stages[0].visit_ratio, 64, 1e-9);
  EXPECT_EQ(profile.stages[1].op, Op::kBatch);
}

TEST(ElementsPerEpoch, FollowsTheRatiosFromTheSource) {
  PipelineConfig config = Config(R"({"name": "e", "stages": [
    {"name": "src", "op": "range", "args": {"count": 6400}},
    {"name": "batch", "op": "batch", "args": {"size": 64}},
    {"name": "repeat", "op": "repeat"}]})");
  Profile profile = MakeOrDie(
      Window(10, 100, 2,
             {Stage("src", "range", 6400, 0.001, 0.001), Stage("batch", "batch", 100, 0.01, 0.01, 1, 64),
              Stage("repeat", "repeat", 100, 0.001, 0.001)}),
      &config);
  EXPECT_EQ(*ElementsPerEpoch(profile, 0), 6400);
  EXPECT_EQ(*ElementsPerEpoch(profile, 1), 100);
  EXPECT_FALSE(ElementsPerEpoch(profile, 2));
}

}  // namespace
}  // namespace pipetune::models

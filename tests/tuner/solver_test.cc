// The solver on hand-built profiles whose answers are known.
#include "pipetune/tuner/solver.h"

#include <gtest/gtest.h>

#include <cmath>

#include "pipetune/tuner/plan_report.h"
#include "test_profiles.h"

namespace pipetune::tuner {
namespace {

using testing::Budget;
using testing::FindPlanned;
using testing::MakeInput;
using testing::ParallelismOf;
using testing::StageCost;

const char* kCpuChain = R"({"name": "chain", "stages": [
  {"name": "src", "op": "range"},
  {"name": "a", "op": "map", "fn": "cpu_work", "args": {"us": 1000}},
  {"name": "b", "op": "map", "fn": "cpu_work", "args": {"us": 2000}}]})";

Plan SolveOrDie(const TuneInput& input, const Resources& resources, Objective objective = Objective::kMax,
                const SolverOptions& options = {}) {
  StatusOr<Plan> plan = Solve(input, resources, objective, options);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? *plan : Plan{};
}

TEST(Solver, CpuBoundChainSharesTheCoresAndReachesTheCpuBound) {
  TuneInput input = MakeInput(kCpuChain, {{"a", {1.0, 1.0}}, {"b", {2.0, 2.0}}}, 4);
  Plan plan = SolveOrDie(input, Budget(4));
  // 4 cores / 3 ms of CPU per output (plus microseconds of pass-through).
  EXPECT_NEAR(plan.predicted_throughput, 4 / 3e-3, 4 / 3e-3 * 0.01);
  EXPECT_EQ(plan.binding, models::BoundKind::kCpu);
  // b needs twice a's workers: 1.33 and 2.67 busy; the cores bind, so each
  // CPU-bound stage is kept two-thirds busy: a 2, b 4.
  EXPECT_EQ(ParallelismOf(plan, "a"), 2);
  EXPECT_EQ(ParallelismOf(plan, "b"), 4);
  EXPECT_LE(plan.cores_used, 4 + 1e-9);
  EXPECT_GT(plan.predicted_throughput, plan.predicted_throughput_before * 2);
}

TEST(Solver, LatencyBoundStageGetsLittlesLawWorkersBeyondTheCoreCount) {
  const char* config = R"({"name": "remote", "stages": [
    {"name": "src", "op": "range"},
    {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 10}},
    {"name": "parse", "op": "map", "fn": "cpu_work", "args": {"us": 200}}],
    "consumer": {"step_time_ms": 2}})";
  TuneInput input = MakeInput(config, {{"fetch", {0.02, 10.0}}, {"parse", {0.2, 0.2}}}, 2);
  Plan plan = SolveOrDie(input, Budget(2));
  // 500 outputs/s x 10 ms = 5 busy workers; a latency-bound stage is kept
  // 75% busy at most: 5 / 0.75 = 6.67, so 7.
  EXPECT_EQ(ParallelismOf(plan, "fetch"), 7);
  EXPECT_GT(ParallelismOf(plan, "fetch"), 2);
  EXPECT_NEAR(plan.predicted_throughput, 500, 1e-6);
  EXPECT_EQ(plan.binding, models::BoundKind::kDemand);
  EXPECT_TRUE(plan.demand_met);
}

TEST(Solver, ThreadLimitCapsLatencyBoundWorkersAndSaysSo) {
  const char* config = R"({"name": "remote", "stages": [
    {"name": "src", "op": "range"},
    {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 10}}]})";
  TuneInput input = MakeInput(config, {{"fetch", {0.01, 10.0}}}, 2);
  Plan plan = SolveOrDie(input, Budget(2, 4e9, 12));
  // 12 threads: the source and the inserted prefetch take one each.
  EXPECT_EQ(ParallelismOf(plan, "fetch"), 10);
  EXPECT_LE(plan.threads, 12);
  EXPECT_NEAR(plan.predicted_throughput, 1000, 1e-6);
  EXPECT_NE(plan.binding_reason.find("thread"), std::string::npos) << plan.binding_reason;
}

TEST(Solver, InsertsAPrefetchAtTheEndWhenMissingAndSizesIt) {
  TuneInput input = MakeInput(kCpuChain, {{"a", {1.0, 1.0}}, {"b", {2.0, 2.0}}}, 4);
  Plan plan = SolveOrDie(input, Budget(4));
  ASSERT_FALSE(plan.stages.empty());
  const PlannedStage& last = plan.stages.back();
  EXPECT_EQ(last.op, models::Op::kPrefetch);
  EXPECT_TRUE(last.inserted());
  ASSERT_TRUE(last.buffer);
  EXPECT_GE(*last.buffer, 2);
}

TEST(Solver, NonScalingStageIsNotGivenWorkersItCannotUse) {
  // "locked" serialises on a lock: per-worker latency grows with workers
  // (1 ms at 1, 2 ms at 2, 4 ms at 4): the fit says adding workers does not help.
  const char* config = R"({"name": "locked", "stages": [
    {"name": "src", "op": "range"},
    {"name": "locked", "op": "map", "fn": "cpu_work", "args": {"us": 1000}}]})";
  StageCost cost{1.0, 1.0, 1000, {{2, 2.0}, {4, 4.0}}};
  TuneInput input = MakeInput(config, {{"locked", cost}}, 8);
  Plan plan = SolveOrDie(input, Budget(8));
  EXPECT_LE(ParallelismOf(plan, "locked"), 2);
  EXPECT_NEAR(plan.predicted_throughput, 1000, 50);
}

TEST(Solver, FlatteningScalingCurveIsNotChasedWithEveryThread) {
  // Amdahl with sigma 0.5: throughput tends to twice one worker's; the
  // asymptote is not worth 250 threads.
  const char* config = R"({"name": "flat", "stages": [
    {"name": "src", "op": "range"},
    {"name": "flat", "op": "map", "fn": "io_wait", "args": {"ms": 1}}]})";
  StageCost cost{0.01, 1.0, 1000, {{2, 1.5}, {4, 2.5}}};
  TuneInput input = MakeInput(config, {{"flat", cost}}, 2);
  Plan plan = SolveOrDie(input, Budget(2));
  EXPECT_LE(ParallelismOf(plan, "flat"), 8);
  EXPECT_NE(plan.binding_reason.find("fitted scaling"), std::string::npos) << plan.binding_reason;
  EXPECT_EQ(UsefulParallelism(input.profile.stages[1]), FindPlanned(plan, "flat")->useful_parallelism);
}

const char* kCacheable = R"({"name": "cacheable", "stages": [
  {"name": "src", "op": "range", "args": {"count": 1000}},
  {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 4000}},
  {"name": "repeat", "op": "repeat"},
  {"name": "augment", "op": "map", "fn": "cpu_work", "args": {"us": 500}, "random": true}]})";

TEST(Solver, CachesInMemoryWhenTheEpochFits) {
  TuneInput input = MakeInput(kCacheable, {{"decode", {4.0, 4.0, 1e5}}, {"augment", {0.5, 0.5, 1e5}}}, 2);
  Plan plan = SolveOrDie(input, Budget(2, 1e9));
  ASSERT_TRUE(plan.cache_stage);
  EXPECT_EQ(plan.cache.kind, CacheKind::kMemory);
  EXPECT_EQ(plan.stages[*plan.cache_stage - 1].name, "decode");
  // After the first epoch only augment's 0.5 ms per output remains.
  EXPECT_NEAR(plan.predicted_throughput, 2 / 0.5e-3, 2 / 0.5e-3 * 0.02);
  EXPECT_LE(plan.memory.Total(), 1e9);
  EXPECT_GE(plan.memory.cache, 1000 * 1e5);
}

TEST(Solver, CacheThatDoesNotFitGoesToDiskOrNowhere) {
  TuneInput input = MakeInput(kCacheable, {{"decode", {4.0, 4.0, 1e6}}, {"augment", {0.5, 0.5, 1e6}}}, 2);
  // 1000 x 1 MB = 1 GB of cache; 512 MB of memory.
  Plan no_disk = SolveOrDie(input, Budget(2, 512e6));
  EXPECT_FALSE(no_disk.cache_stage);
  EXPECT_LE(no_disk.memory.Total(), 512e6);
  bool explained = false;
  for (const CacheOption& option : no_disk.cache_options) {
    if (!option.feasible && option.note.find("budget") != std::string::npos) explained = true;
  }
  EXPECT_TRUE(explained) << FormatPlanText(no_disk);

  Resources with_disk = Budget(2, 512e6);
  with_disk.disk_cache_dir = "/tmp/cache";
  Plan disk = SolveOrDie(input, with_disk);
  ASSERT_TRUE(disk.cache_stage);
  EXPECT_EQ(disk.cache.kind, CacheKind::kDisk);
  EXPECT_EQ(disk.stages[*disk.cache_stage].location, models::CacheLocation::Disk("/tmp/cache"));
  EXPECT_GT(disk.predicted_throughput, no_disk.predicted_throughput * 2);
}

// A user with little memory and no --cache-dir: the plan places no cache,
// and says what a cache on disk would reach, priced as --cache-dir prices it.
TEST(Solver, MemoryShortWithoutCacheDirSaysWhatADiskCacheWouldReach) {
  TuneInput input = MakeInput(kCacheable, {{"decode", {4.0, 4.0, 1e6}}, {"augment", {0.5, 0.5, 1e6}}}, 2);
  Plan plan = SolveOrDie(input, Budget(2, 512e6));
  EXPECT_FALSE(plan.cache_stage);
  ASSERT_TRUE(plan.disk_cache_hint) << FormatPlanText(plan);
  EXPECT_EQ(plan.disk_cache_hint->after, "decode");
  EXPECT_NEAR(plan.disk_cache_hint->cache_bytes, 1000 * 1e6, 1e6);
  Resources with_disk = Budget(2, 512e6);
  with_disk.disk_cache_dir = "/tmp/cache";
  Plan disk = SolveOrDie(input, with_disk);
  EXPECT_NEAR(plan.disk_cache_hint->throughput, disk.predicted_throughput, disk.predicted_throughput * 1e-6);
  EXPECT_FALSE(disk.disk_cache_hint);  // the directory was given: the plan holds the cache itself
  const std::string text = FormatPlanText(plan);
  EXPECT_NE(text.find("a cache on disk after \"decode\""), std::string::npos) << text;
  EXPECT_NE(text.find("--cache-dir"), std::string::npos) << text;
  Json json = PlanToJson(plan);
  EXPECT_EQ(json["disk_cache_hint"]["after"], "decode");
  EXPECT_GT(json["disk_cache_hint"]["gain"].get<double>(), kDiskCacheHintGain);
}

TEST(Solver, NoDiskCacheHintWhereTheMemoryCacheFits) {
  TuneInput input = MakeInput(kCacheable, {{"decode", {4.0, 4.0, 1e5}}, {"augment", {0.5, 0.5, 1e5}}}, 2);
  Plan plan = SolveOrDie(input, Budget(2, 1e9));
  ASSERT_TRUE(plan.cache_stage);
  EXPECT_EQ(plan.cache.kind, CacheKind::kMemory);
  EXPECT_FALSE(plan.disk_cache_hint) << FormatPlanText(plan);
  EXPECT_EQ(FormatPlanText(plan).find("--cache-dir"), std::string::npos);
  EXPECT_TRUE(PlanToJson(plan)["disk_cache_hint"].is_null());
}

TEST(Solver, NoCacheAtOrAfterARandomStage) {
  const char* config = R"({"name": "random_middle", "stages": [
    {"name": "src", "op": "range", "args": {"count": 1000}},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 4000}},
    {"name": "augment", "op": "map", "fn": "cpu_work", "args": {"us": 500}, "random": true},
    {"name": "repeat", "op": "repeat"},
    {"name": "batch", "op": "batch", "args": {"size": 2}}]})";
  TuneInput input = MakeInput(config, {{"decode", {4.0, 4.0, 1e3}}, {"augment", {0.5, 0.5, 1e3}}}, 2);
  Plan plan = SolveOrDie(input, Budget(2));
  ASSERT_TRUE(plan.cache_stage);
  EXPECT_EQ(plan.stages[*plan.cache_stage - 1].name, "decode");
  bool rejected = false;
  for (const CacheOption& option : plan.cache_options) {
    if (option.description.find("augment") == std::string::npos) continue;
    EXPECT_FALSE(option.feasible);
    EXPECT_NE(option.note.find("random"), std::string::npos) << option.note;
    rejected = true;
  }
  EXPECT_TRUE(rejected) << FormatPlanText(plan);
}

TEST(Solver, DemandObjectivePicksTheFewestCores) {
  const char* config = R"({"name": "slow_consumer", "stages": [
    {"name": "src", "op": "range"},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 2000}}],
    "consumer": {"step_time_ms": 10}})";
  TuneInput input = MakeInput(config, {{"work", {2.0, 2.0}}}, 8);
  Plan demand = SolveOrDie(input, Budget(8), Objective::kDemand);
  // 100 outputs/s x 2 ms = 0.2 cores; with 10% headroom still one core and one worker.
  EXPECT_TRUE(demand.demand_met);
  EXPECT_EQ(demand.cores_needed, 1);
  EXPECT_EQ(ParallelismOf(demand, "work"), 1);
  EXPECT_NEAR(demand.predicted_throughput, 100, 1e-6);
}

TEST(Solver, DemandObjectiveCachesWhenThatSavesCores) {
  const char* config = R"({"name": "demand_cache", "stages": [
    {"name": "src", "op": "range", "args": {"count": 100}},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 20000}},
    {"name": "repeat", "op": "repeat"}],
    "consumer": {"step_time_ms": 10}})";
  TuneInput input = MakeInput(config, {{"decode", {20.0, 20.0, 1e4}}}, 8);
  Plan demand = SolveOrDie(input, Budget(8), Objective::kDemand);
  EXPECT_TRUE(demand.demand_met);
  EXPECT_TRUE(demand.cache_stage);
  EXPECT_EQ(demand.cores_needed, 1);
}

TEST(Solver, UnreachableDemandFallsBackToMaxAndSaysSo) {
  const char* config = R"({"name": "fast_consumer", "stages": [
    {"name": "src", "op": "range"},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 2000}}],
    "consumer": {"step_time_ms": 0.1}})";
  TuneInput input = MakeInput(config, {{"work", {2.0, 2.0}}}, 2);
  Plan plan = SolveOrDie(input, Budget(2), Objective::kDemand);
  EXPECT_FALSE(plan.demand_met);
  EXPECT_NEAR(plan.predicted_throughput, 1000, 10);
  ASSERT_FALSE(plan.notes.empty());
  EXPECT_NE(plan.notes.back().find("cannot be met"), std::string::npos);
}

TEST(Solver, NoPlanFitsSaysWhy) {
  TuneInput input = MakeInput(kCpuChain, {{"a", {1.0, 1.0, 1e6}}, {"b", {2.0, 2.0, 1e6}}}, 2);
  StatusOr<Plan> tiny_memory = Solve(input, Budget(2, 1e6), Objective::kMax);
  ASSERT_FALSE(tiny_memory.ok());
  EXPECT_EQ(tiny_memory.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(tiny_memory.status().message().find("memory"), std::string::npos)
      << tiny_memory.status().message();
  EXPECT_NE(tiny_memory.status().message().find("budget"), std::string::npos);

  StatusOr<Plan> few_threads = Solve(input, Budget(2, 4e9, 3), Objective::kMax);
  ASSERT_FALSE(few_threads.ok());
  EXPECT_NE(few_threads.status().message().find("threads"), std::string::npos)
      << few_threads.status().message();

  StatusOr<Plan> no_cores = Solve(input, Budget(0), Objective::kMax);
  ASSERT_FALSE(no_cores.ok());
  EXPECT_NE(no_cores.status().message().find("core"), std::string::npos);
}

TEST(Solver, EveryKnobHasAReasonAndChangesAreMarked) {
  TuneInput input = MakeInput(kCpuChain, {{"a", {1.0, 1.0}}, {"b", {2.0, 2.0}}}, 4);
  Plan plan = SolveOrDie(input, Budget(4));
  ASSERT_GE(plan.knobs.size(), 3u);  // a, b, the inserted prefetch
  for (const KnobChange& knob : plan.knobs) {
    EXPECT_FALSE(knob.reason.empty()) << knob.stage << "." << KnobName(knob.knob);
    EXPECT_EQ(knob.changed, knob.old_value != knob.new_value) << knob.stage;
  }
  Json json = PlanToJson(plan);
  EXPECT_TRUE(json["predicted_throughput"].is_number());
  EXPECT_EQ(json["binding"]["kind"], "cpu");
  std::string text = FormatPlanText(plan);
  EXPECT_NE(text.find("a.parallelism"), std::string::npos) << text;
}

}  // namespace
}  // namespace pipetune::tuner

// The one solver on profiles with a worker group (a DataLoader) against a
// brute force over every setting of the group, priced by the model alone:
// the same optimum within the tie tolerance and the same tie-break
// (exact_test.cc does the same for cache choices and parallelism).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <random>
#include <tuple>
#include <utility>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/tuner/candidate.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/solver.h"
#include "test_profiles.h"

namespace pipetune::tuner {
namespace {

using testing::Instance;

// A random DataLoader run (one to three sample stages, CPU- or
// latency-bound; traced with 0 to 4 workers, any prefetch_factor,
// persistence and pin_memory, with or without CUDA; a GPU or CPU step or
// none), under random budgets, tight enough that memory often binds. A
// third of them read a stream of 1 to 6 shards, drawn from `shard_rng` (so
// that the other draws stay those the cases were chosen by): no worker past
// the shards has work.
Instance RandomGroupInstance(std::mt19937& rng, std::mt19937& shard_rng) {
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto integer = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  auto stage = [&](const std::string& name, analyzer::DataLoaderStageKind kind, uint64_t count) {
    analyzer::DataLoaderStage s;
    s.name = name;
    s.kind = kind;
    s.count = count;
    s.cpu_seconds_each = uniform(1e-5, 3e-3);
    s.seconds_each = coin(0.3) ? s.cpu_seconds_each * uniform(2, 20) : s.cpu_seconds_each;
    return s;
  };
  analyzer::DataLoaderProfile run;
  run.settings.batch_size = integer(1, 32);
  run.settings.num_workers = integer(0, 4);
  run.settings.prefetch_factor = integer(1, 4);
  run.settings.persistent_workers = run.settings.num_workers > 0 && coin(0.5);
  run.settings.pin_memory = coin(0.5);
  run.cuda_available = coin(0.3);
  int epochs = integer(1, 4), per_epoch = integer(5, 200);
  run.batches = static_cast<uint64_t>(epochs * per_epoch);
  uint64_t samples = run.batches * static_cast<uint64_t>(run.settings.batch_size);
  run.sample_stages.push_back(stage("load", analyzer::DataLoaderStageKind::kLoad, samples));
  for (int t = integer(0, 2); t > 0; --t)
    run.sample_stages.push_back(
        stage(fmt::format("transform[{}]", t), analyzer::DataLoaderStageKind::kTransform, samples));
  run.collate = stage("collate", analyzer::DataLoaderStageKind::kCollate, run.batches);
  run.transfer.name = "transfer";
  if (run.settings.num_workers > 0)
    run.transfer = stage("transfer", analyzer::DataLoaderStageKind::kTransfer, run.batches);
  run.pin_memory.name = "pin_memory";
  if (coin(0.8)) {
    run.step = stage("step", analyzer::DataLoaderStageKind::kStep, run.batches);
    run.step.seconds_each = uniform(1e-3, 0.05);
    run.step.cpu_seconds_each = coin(0.5) ? 0 : run.step.seconds_each;
  }
  run.wait_seconds = uniform(0.1, 5);
  run.step_seconds = run.step.seconds_each * static_cast<double>(run.step.count);
  run.batch_bytes = std::exp(uniform(std::log(1e4), std::log(5e7)));
  run.main_rss_bytes = uniform(100, 800) * 1024 * 1024;
  run.worker_rss_bytes = uniform(100, 500) * 1024 * 1024;
  run.host.cores_allowed = integer(1, 16);
  for (int e = 0; e < epochs; ++e) {
    bool started = run.settings.num_workers > 0 && (e == 0 || !run.settings.persistent_workers);
    run.epochs.push_back({static_cast<uint64_t>(per_epoch), started ? uniform(0.01, 0.5) : 0,
                          started ? run.settings.num_workers : 0});
  }
  if (std::bernoulli_distribution(0.35)(shard_rng)) {
    run.settings.iterable = true;
    run.settings.shards = std::uniform_int_distribution<int>(1, 6)(shard_rng);
  }
  Instance instance;
  instance.input.profile = analyzer::DataLoaderModelProfile(run);
  instance.resources.cores = integer(1, 16);
  instance.resources.memory_bytes = static_cast<uint64_t>(std::exp(uniform(std::log(3e8), std::log(2e10))));
  instance.description = fmt::format(
      "workers {} prefetch {} persistent {} pin {} cuda {} stages {} batch {} B epochs {}x{} cores {} memory "
      "{} "
      "shards {}",
      run.settings.num_workers, run.settings.prefetch_factor, run.settings.persistent_workers,
      run.settings.pin_memory, run.cuda_available, run.sample_stages.size(), run.batch_bytes, epochs,
      per_epoch, instance.resources.cores, instance.resources.memory_bytes, run.settings.shards.value_or(0));
  return instance;
}

// One setting of the DataLoader, priced by the model alone, with the
// tie-break's key written out from its documented rule: fewer workers, a
// buffer nearer the traced one (below it counts double), persistence kept,
// pin_memory in its preferred state (off without CUDA), fetch threads
// nearer the traced ones, then fewer cores, then less memory.
struct GroupSetting {
  int workers = 0, buffer = 0;
  bool persistent = false, pin = false;
  int fetch_threads = 1;
  double throughput = 0, memory = 0;
  std::tuple<int, int, int, int, int, int, double> key;
};

// pin_memory both ways where it may switch off (else as traced), each with
// every fetch thread count.
std::vector<std::pair<bool, int>> PinsAndThreads(bool may_switch, bool traced_pin,
                                                 const std::vector<int>& thread_counts) {
  std::vector<std::pair<bool, int>> out;
  for (bool pinned : {false, true}) {
    if (pinned != traced_pin && !may_switch) continue;
    for (int k : thread_counts) out.push_back({pinned, k});
  }
  return out;
}

// Every setting within the budgets: workers 0 to 32 (past a stream's
// shards too: the oracle knows nothing of the search's limit, only the
// model's idle workers), buffers 1 to 8,
// persistence both ways, pin_memory off where the run pinned without CUDA,
// and for a map-style dataset every fetch thread count a plan may set.
std::vector<GroupSetting> BruteForceGroup(const Instance& instance) {
  const models::Profile& profile = instance.input.profile;
  const models::WorkerGroup& group = profile.groups[0];
  size_t pin = *profile.FindStage("pin_memory");
  bool traced_pin = profile.stages[pin].enabled, may_switch = profile.stages[pin].may_switch_off;
  bool preferred_pin = traced_pin && !may_switch;
  std::vector<int> thread_counts{group.fetch_threads};
  if (!group.fetch_threads_knob.empty())
    thread_counts.assign(std::begin(kFetchThreadChoices), std::end(kFetchThreadChoices));
  std::vector<GroupSetting> out;
  for (int w = 0; w <= 32; ++w) {
    for (int b = 1; b <= (w > 0 ? 8 : 1); ++b) {
      for (bool persistent : {false, true}) {
        if (w == 0 && persistent != group.persistent) continue;
        for (auto [pinned, k] : PinsAndThreads(traced_pin && may_switch, traced_pin, thread_counts)) {
          models::Configuration c = models::ObservedConfiguration(profile);
          c.cores = instance.resources.cores;
          c.group_workers[0] = w;
          c.group_buffer[0] = w > 0 ? b : group.buffer_per_worker;
          c.group_persistent[0] = persistent;
          c.stage_enabled[pin] = pinned;
          c.group_fetch_threads[0] = k;
          GroupSetting s{w, c.group_buffer[0], persistent, pinned, k};
          s.memory = models::WorkerMemoryBytes(profile, c);
          if (s.memory > static_cast<double>(instance.resources.memory_bytes)) continue;
          models::Prediction p = models::Predict(profile, c);
          s.throughput = p.throughput;
          int traced = group.buffer_per_worker;
          int buffer_cost = s.buffer >= traced ? s.buffer - traced : 2 * (traced - s.buffer);
          int cores = std::max(1, static_cast<int>(std::ceil(std::min(p.cores_used, c.cores) - 1e-9)));
          s.key = {w,
                   buffer_cost,
                   persistent != group.persistent,
                   pinned != preferred_pin,
                   std::abs(k - group.fetch_threads),
                   cores,
                   s.memory};
          out.push_back(s);
        }
      }
    }
  }
  return out;
}

// The least key among the settings that reach `floor`.
const GroupSetting* LeastDeparture(const std::vector<GroupSetting>& all, double floor) {
  const GroupSetting* chosen = nullptr;
  for (const GroupSetting& s : all) {
    if (s.throughput >= floor && (chosen == nullptr || s.key < chosen->key)) chosen = &s;
  }
  return chosen;
}

TEST(ExactSolver, WorkerGroupPlansMatchBruteForceOverEverySetting) {
  std::mt19937 rng(28), shard_rng(40);
  const double tolerance = SolverOptions{}.tie_tolerance;
  int compared = 0, refused = 0, no_workers = 0, memory_binds = 0, persistence = 0, unpinned = 0, demand = 0;
  int shards_bind = 0, threaded = 0;
  for (int trial = 0; trial < 30; ++trial) {
    Instance instance = RandomGroupInstance(rng, shard_rng);
    std::vector<GroupSetting> all = BruteForceGroup(instance);
    for (Objective objective : {Objective::kMax, Objective::kDemand}) {
      StatusOr<Plan> plan = Solve(instance.input, instance.resources, objective);
      if (all.empty()) {
        EXPECT_FALSE(plan.ok()) << instance.description;
        ++refused;
        continue;
      }
      ASSERT_TRUE(plan.ok()) << plan.status().message() << "\n" << instance.description;
      double best = 0;
      for (const GroupSetting& s : all) best = std::max(best, s.throughput);
      const GroupSetting* expected = LeastDeparture(all, best * (1 - tolerance));
      const std::optional<double>& step = instance.input.profile.step_time_seconds;
      if (objective == Objective::kDemand && step && *step > 0) {
        if (const GroupSetting* meets = LeastDeparture(all, (1 / *step) * (1 - tolerance))) {
          expected = meets;
          ++demand;
        }
      }
      const models::Configuration& got = *plan->configuration;
      size_t pin = *instance.input.profile.FindStage("pin_memory");
      std::string what = instance.description + "\n" + FormatPlanText(*plan);
      EXPECT_EQ(got.group_workers[0], expected->workers) << what;
      EXPECT_EQ(got.group_buffer[0], expected->buffer) << what;
      EXPECT_EQ(got.group_persistent[0], expected->persistent) << what;
      EXPECT_EQ(got.stage_enabled[pin], expected->pin) << what;
      EXPECT_EQ(got.group_fetch_threads[0], expected->fetch_threads) << what;
      EXPECT_NEAR(plan->predicted_throughput, expected->throughput, expected->throughput * 1e-9) << what;
      EXPECT_LE(plan->memory.Total(), static_cast<double>(instance.resources.memory_bytes)) << what;
      // Every knob the plan sets has its reason from the explainer.
      for (const KnobChange& knob : plan->knobs) {
        EXPECT_NE(knob.reason, knob.changed ? "set by the plan" : "unchanged") << what;
      }
      ++compared;
      no_workers += expected->workers == 0;
      persistence += expected->persistent != instance.input.profile.groups[0].persistent;
      threaded += expected->fetch_threads > 1;
      unpinned += !expected->pin && instance.input.profile.stages[pin].enabled;
      memory_binds += plan->binding_reason.find("memory budget") != std::string::npos;
      // No idle worker is proposed, and a plan the shards stop says so.
      int shards = instance.input.profile.groups[0].max_workers;
      if (shards > 0) {
        EXPECT_LE(got.group_workers[0], shards) << what;
      }
      if (plan->binding_reason.find("the stream's shards") != std::string::npos) {
        EXPECT_EQ(got.group_workers[0], shards) << what;
        ++shards_bind;
      }
    }
  }
  // The instances exercise every part of the rule.
  EXPECT_GT(compared, 40);
  EXPECT_GT(refused, 0);
  EXPECT_GT(no_workers, 0);
  EXPECT_GT(memory_binds, 0);
  EXPECT_GT(persistence, 0);
  EXPECT_GT(unpinned, 0);
  EXPECT_GT(demand, 0);
  EXPECT_GT(shards_bind, 0);
  EXPECT_GT(threaded, 0);
}

}  // namespace
}  // namespace pipetune::tuner

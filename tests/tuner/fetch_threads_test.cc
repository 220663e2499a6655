// Fetch threads (WorkerGroup::fetch_threads): a DataLoader whose every read
// waits on slow storage, priced by the model and planned by the solver as
// workers x threads, as a user of `pipetune tune` sees it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/solver.h"

namespace pipetune::tuner {
namespace {

// A run of `workers` workers over a dataset whose each sample waits
// `wait_s` on storage and uses `cpu_s` of CPU, batches of 32, on 2 cores.
analyzer::DataLoaderProfile SlowStoreRun(int workers, double wait_s, double cpu_s, bool iterable = false) {
  analyzer::DataLoaderProfile run;
  run.settings.batch_size = 32;
  run.settings.num_workers = workers;
  run.settings.prefetch_factor = 2;
  run.settings.iterable = iterable;
  run.batches = 200;
  const uint64_t samples = run.batches * 32;
  run.sample_stages.push_back({});
  analyzer::DataLoaderStage& load = run.sample_stages.back();
  load.name = "load";
  load.kind = analyzer::DataLoaderStageKind::kLoad;
  load.count = samples;
  load.cpu_seconds_each = cpu_s;
  load.seconds_each = wait_s + cpu_s;
  run.collate.name = "collate";
  run.collate.kind = analyzer::DataLoaderStageKind::kCollate;
  run.collate.count = run.batches;
  run.collate.cpu_seconds_each = run.collate.seconds_each = 2e-4;
  run.transfer.name = "transfer";
  if (workers > 0) {
    run.transfer.kind = analyzer::DataLoaderStageKind::kTransfer;
    run.transfer.count = run.batches;
    run.transfer.cpu_seconds_each = run.transfer.seconds_each = 3e-4;
  }
  run.pin_memory.name = "pin_memory";
  // As traced: the workers' wait bounds the loop.
  run.wait_seconds = run.batches * 32 * (wait_s + cpu_s) / std::max(1, workers);
  run.batch_bytes = 32 * 4096;
  run.main_rss_bytes = 300e6;
  run.worker_rss_bytes = 250e6;
  run.host.cores_allowed = 2;
  run.epochs.push_back({run.batches, workers > 0 ? 0.1 : 0, workers});
  return run;
}

Resources TwoCores() {
  Resources resources;
  resources.cores = 2;
  resources.memory_bytes = 16ull << 30;
  return resources;
}

models::Configuration With(const models::Profile& profile, int workers, int threads) {
  models::Configuration c = models::ObservedConfiguration(profile);
  c.cores = 2;
  c.group_workers[0] = workers;
  c.group_fetch_threads[0] = threads;
  return c;
}

// The model. A worker that holds one index list at a time (prefetch 1)
// reads an output's 32 samples in rounds of K, each round one read's
// latency plus the GIL-held CPU of the round's other reads (they wait
// together and queue for the GIL together), then collates with no read in
// flight; with K = 1 the sum of the samples' latency, as without threads.
// With prefetch 2 it holds its next list and its threads read it while this
// batch is collated, so the 32 reads spread over K threads: what a user sees
// as reads always in flight.
TEST(FetchThreads, ReadsOverlapInRoundsOrStayInFlight) {
  models::Profile profile = analyzer::DataLoaderModelProfile(SlowStoreRun(2, 0.025, 4e-4));
  ASSERT_EQ(profile.groups[0].fetch_threads_knob, "fetch_threads");
  auto rate = [&](int threads, int prefetch) {
    models::Configuration c = With(profile, 1, threads);
    c.group_buffer[0] = prefetch;
    return models::Predict(profile, c).steady_throughput;
  };
  const double one = rate(1, 1), eight = rate(8, 1), twelve = rate(12, 1);
  // One worker: 32 reads of 25.4 ms one after another, or 4 rounds of 8,
  // each 25.4 ms and the other 7 reads' 0.4 ms of GIL-held CPU (no probe:
  // all of it).
  EXPECT_NEAR(one, 1 / (32 * 0.0254 + 2e-4), one * 0.01);
  EXPECT_NEAR(eight, 1 / (4 * (0.0254 + 7 * 4e-4) + 2e-4), eight * 0.01);
  // 12 threads still take 3 rounds for 32 samples: about a third more than 8, not half.
  EXPECT_NEAR(twelve, 1 / (3 * 0.0254 + 29 * 4e-4 + 2e-4), twelve * 0.01);
  EXPECT_LT(twelve / eight, 1.4);
  // Reads in flight through collate: 12 threads give 12 reads per 25.4 ms, no rounds, no collate added.
  const double flowing = rate(12, 2);
  EXPECT_NEAR(flowing, 12 / (32 * 0.0254), flowing * 0.01);
  EXPECT_NEAR(rate(1, 2), one, one * 0.01) << "one thread reads as the DataLoader does";
}

// The GIL: a read that is mostly CPU gains nothing from threads in one
// process (its CPU holds the GIL); processes are what overlap it.
TEST(FetchThreads, CpuOfAFetchDoesNotOverlapInOneProcess) {
  models::Profile profile = analyzer::DataLoaderModelProfile(SlowStoreRun(2, 5e-4, 5e-3));
  const double one = models::Predict(profile, With(profile, 1, 1)).steady_throughput;
  const double eight = models::Predict(profile, With(profile, 1, 8)).steady_throughput;
  EXPECT_LT(eight, one * 1.12) << "the GIL-held CPU of 32 reads is 160 ms per batch whatever the threads";
}

TEST(FetchThreads, EachThreadCountsAgainstMemory) {
  models::Profile profile = analyzer::DataLoaderModelProfile(SlowStoreRun(2, 0.025, 4e-4));
  const double one = models::WorkerMemoryBytes(profile, With(profile, 4, 1));
  const double eight = models::WorkerMemoryBytes(profile, With(profile, 4, 8));
  EXPECT_NEAR(eight - one, 4 * 8 * profile.groups[0].memory_bytes_per_fetch_thread, 1);
  EXPECT_GT(profile.groups[0].memory_bytes_per_fetch_thread, 4096);
}

// The case: 25 ms reads of 0.4 ms CPU. The plan reaches the best
// that worker processes alone reach (up to 32), with at most 4 of them and
// a quarter of that setting's memory, and says why in the user's numbers.
TEST(FetchThreads, PlanUsesFewWorkersAndManyThreadsForSlowReads) {
  TuneInput input;
  input.profile = analyzer::DataLoaderModelProfile(SlowStoreRun(2, 0.025, 4e-4));
  const Resources resources = TwoCores();
  StatusOr<Plan> plan = Solve(input, resources, Objective::kMax);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::string text = FormatPlanText(*plan);
  const models::Configuration& got = *plan->configuration;
  EXPECT_LE(got.group_workers[0], 4) << text;
  EXPECT_GT(got.group_fetch_threads[0], 1) << text;

  double grid_best = 0, grid_memory = 0;
  for (int w = 0; w <= 32; ++w) {
    models::Configuration c = With(input.profile, w, 1);
    double x = models::Predict(input.profile, c).throughput;
    if (x > grid_best * 1.0001) grid_best = x, grid_memory = models::WorkerMemoryBytes(input.profile, c);
  }
  EXPECT_GE(plan->predicted_throughput, grid_best * 0.99) << text;
  EXPECT_LE(plan->memory.Total(), grid_memory / 4) << text;
  bool said = false;
  for (const KnobChange& knob : plan->knobs) {
    if (knob.stage != "fetch_threads") continue;
    said = knob.reason.find("fetch threads: each fetch waits 25 ms on storage and uses 0.4 ms of CPU") !=
           std::string::npos;
  }
  EXPECT_TRUE(said) << text;
}

// A stream is read in order by one thread: no plan sets threads for it.
TEST(FetchThreads, NoThreadsForAnIterableDataset) {
  TuneInput input;
  input.profile = analyzer::DataLoaderModelProfile(SlowStoreRun(2, 0.025, 4e-4, /*iterable=*/true));
  EXPECT_TRUE(input.profile.groups[0].fetch_threads_knob.empty());
  StatusOr<Plan> plan = Solve(input, TwoCores(), Objective::kMax);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->configuration->group_fetch_threads[0], 1);
  for (const KnobChange& knob : plan->knobs) EXPECT_NE(knob.stage, "fetch_threads");
}

}  // namespace
}  // namespace pipetune::tuner

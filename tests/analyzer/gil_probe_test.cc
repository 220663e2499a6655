// The GIL probe's figures (DataLoaderGilProbe, python/pipetune/_gilprobe.py)
// as the model takes them: how much of a fetch's CPU fetch threads cannot
// overlap, measured where the probe woke often enough, else assumed to be
// all of it, as a user reads it in the report's assumptions and the plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/analyzer/report.h"
#include "pipetune/analyzer/what_if.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::analyzer {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// A map-style run at num_workers=0 whose each sample waits `wait_s` on
// storage and uses `cpu_s` of CPU, batches of 16.
DataLoaderProfile GilRun(double wait_s, double cpu_s) {
  DataLoaderProfile run;
  run.settings.batch_size = 16;
  run.settings.num_workers = 0;
  run.batches = 100;
  DataLoaderStage load;
  load.name = "load";
  load.kind = DataLoaderStageKind::kLoad;
  load.count = run.batches * 16;
  load.cpu_seconds_each = cpu_s;
  load.seconds_each = wait_s + cpu_s;
  run.sample_stages.push_back(load);
  run.collate.name = "collate";
  run.collate.kind = DataLoaderStageKind::kCollate;
  run.collate.count = run.batches;
  run.collate.cpu_seconds_each = run.collate.seconds_each = 1e-4;
  run.transfer.name = "transfer";
  run.pin_memory.name = "pin_memory";
  run.wait_seconds = run.batches * 16 * (wait_s + cpu_s);
  run.main_rss_bytes = 300e6;
  run.host.cores_allowed = 2;
  run.epochs.push_back({run.batches, 0, 0});
  return run;
}

// A probe that woke `wakes` times in 10 s of fetch windows holding 1600
// samples, `late` of them finding the GIL held.
DataLoaderGilProbe Probe(uint64_t wakes, uint64_t late) { return {wakes, late, 1600, 10.0, 0.02}; }

const std::string* Assumption(const models::Profile& profile, const std::string& part) {
  for (const std::string& a : profile.assumptions) {
    if (a.find(part) != std::string::npos) return &a;
  }
  return nullptr;
}

TEST(GilProbe, WithoutProbeAllOfTheCpuIsAssumedToHoldTheGil) {
  models::Profile profile = DataLoaderModelProfile(GilRun(0.02, 4e-3));
  EXPECT_NEAR(profile.groups[0].fetch_gil_seconds_per_sample, 4e-3, 1e-9);
  EXPECT_NEAR(profile.groups[0].fetch_cpu_seconds_per_sample, 4e-3, 1e-9);
  const std::string* said = Assumption(profile, "fetch threads overlap");
  ASSERT_NE(said, nullptr);
  EXPECT_THAT(*said, HasSubstr("priced as holding Python's GIL, which threads of one process cannot overlap "
                               "(no usable probe figure)"));
}

// 10 s of windows for 1600 samples is 6.25 ms a sample; a quarter of the
// wakes late: 1.5625 ms of each sample held the GIL, under its 4 ms of CPU.
// A fetch that is mostly CPU (2 ms of wait beside 4 ms of CPU) is priced
// with it.
TEST(GilProbe, AMeasuredShareReplacesTheAssumption) {
  DataLoaderProfile run = GilRun(2e-3, 4e-3);
  run.gil_probe = Probe(1000, 250);
  models::Profile profile = DataLoaderModelProfile(run);
  EXPECT_NEAR(profile.groups[0].fetch_gil_seconds_per_sample, 1.5625e-3, 1e-9);
  EXPECT_NEAR(profile.groups[0].fetch_cpu_seconds_per_sample, 4e-3, 1e-9);
}

// A fetch that waits on storage (20 ms beside 4 ms of CPU) is priced with
// all of its CPU: with threads waiting, its GIL releases are handoffs, and
// a round queues for about all of it. The probe's figure is said beside.
TEST(GilProbe, AFetchThatWaitsIsPricedWithAllItsCpuAndTheProbeSaid) {
  DataLoaderProfile run = GilRun(0.02, 4e-3);
  run.gil_probe = Probe(1000, 250);
  models::Profile profile = DataLoaderModelProfile(run);
  EXPECT_NEAR(profile.groups[0].fetch_gil_seconds_per_sample, 4e-3, 1e-9);
  const std::string* said = Assumption(profile, "fetch threads overlap");
  ASSERT_NE(said, nullptr);
  EXPECT_THAT(*said, HasSubstr("uses 4.00 ms of CPU: fetch threads overlap the waits; its CPU is priced as "
                               "holding Python's GIL, which threads of one process cannot overlap (the probe "
                               "measured 1.56 ms of it holding the GIL (1000 wakes)"));
}

// What the report says of it: the probe's figure, and for a fetch that
// waits, that the model priced all of the CPU.
TEST(GilProbe, TheReportSaysWhatTheModelPriced) {
  auto gil_line = [](const DataLoaderProfile& run) {
    StatusOr<Diagnosis> d = DiagnoseDataLoader(run);
    EXPECT_TRUE(d.ok()) << d.status().message();
    if (!d.ok()) return std::string();
    const std::string text = RenderReport(*d, ReportFormat::kText);
    const size_t at = text.find("GIL ");
    return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  DataLoaderProfile waiting = GilRun(0.02, 4e-3), busy = GilRun(2e-3, 4e-3);
  waiting.gil_probe = busy.gil_probe = Probe(1000, 250);
  EXPECT_THAT(gil_line(waiting), HasSubstr("1.56 ms of each sample's 4.00 ms CPU (probe, 1000 wakes"));
  EXPECT_THAT(gil_line(waiting), HasSubstr("priced as all of the CPU: the fetch waits on storage"));
  EXPECT_THAT(gil_line(busy), HasSubstr("1.56 ms of each sample's 4.00 ms CPU"));
  EXPECT_THAT(gil_line(busy), Not(HasSubstr("priced as all")));
}

// Held beyond the CPU is another thread's hold: at most the CPU. None held: 0.
TEST(GilProbe, TheMeasuredShareIsClampedToTheCpu) {
  DataLoaderProfile run = GilRun(2e-3, 4e-3);
  run.gil_probe = Probe(1000, 1000);  // 6.25 ms held a sample
  EXPECT_NEAR(DataLoaderModelProfile(run).groups[0].fetch_gil_seconds_per_sample, 4e-3, 1e-9);
  run.gil_probe = Probe(1000, 0);
  EXPECT_EQ(DataLoaderModelProfile(run).groups[0].fetch_gil_seconds_per_sample, 0);
}

// Enough wakes: the share within 10 points at two standard errors. A half
// needs 100; nearly all late, 20 (a fetch that starves the probe).
TEST(GilProbe, TooFewWakesKeepTheAssumption) {
  DataLoaderProfile run = GilRun(2e-3, 4e-3);
  run.gil_probe = Probe(99, 50);
  models::Profile profile = DataLoaderModelProfile(run);
  EXPECT_NEAR(profile.groups[0].fetch_gil_seconds_per_sample, 4e-3, 1e-9);
  DataLoaderProfile waiting = GilRun(0.02, 4e-3);
  waiting.gil_probe = Probe(99, 50);
  EXPECT_THAT(DataLoaderModelProfile(waiting).assumptions, Contains(HasSubstr("(no usable probe figure)")));
  run.gil_probe = Probe(100, 0);
  EXPECT_EQ(DataLoaderModelProfile(run).groups[0].fetch_gil_seconds_per_sample, 0);
  run.gil_probe = Probe(19, 0);
  EXPECT_NEAR(DataLoaderModelProfile(run).groups[0].fetch_gil_seconds_per_sample, 4e-3, 1e-9);
  run.gil_probe = Probe(20, 0);
  EXPECT_EQ(DataLoaderModelProfile(run).groups[0].fetch_gil_seconds_per_sample, 0);
  run.gil_probe = Probe(30, 15);
  EXPECT_NEAR(DataLoaderModelProfile(run).groups[0].fetch_gil_seconds_per_sample, 4e-3, 1e-9)
      << "a half from 30 wakes is within 18 points";
}

// A batch read in rounds at 0 workers: K reads start together, their waits
// end together, and their GIL-held parts queue behind the wait. 16 samples
// that each wait 25 ms and hold the GIL 1 ms: 16 threads take one round of
// 25 + 1 + 15 x 1 = 41 ms, not max(26, 16) ms; 4 threads four rounds of
// 25 + 1 + 3 x 1 = 29 ms.
TEST(GilProbe, ARoundsGilTimeQueuesBehindItsWait) {
  DataLoaderProfile run = GilRun(0.025, 1e-3);
  run.gil_probe = Probe(1000, 1000);  // 6.25 ms a sample: clamped to the 1 ms of CPU
  models::Profile profile = DataLoaderModelProfile(run);
  models::Configuration c = models::ObservedConfiguration(profile);
  c.cores = 2;
  auto batch_seconds = [&](int threads) {
    c.group_fetch_threads[0] = threads;
    return 1 / models::Predict(profile, c).steady_throughput;
  };
  EXPECT_NEAR(batch_seconds(16), 0.041 + 1e-4, 0.5e-3);
  EXPECT_NEAR(batch_seconds(4), 4 * 0.029 + 1e-4, 0.5e-3);
  EXPECT_NEAR(batch_seconds(1), 16 * 0.026 + 1e-4, 0.5e-3);
}

// A run traced with K threads in rounds measured each read with its wait
// behind the round's others in it, half of (K - 1) x g on average: the
// model takes that out, so that the storage's latency is what it sees, and
// predicts the traced setting as it ran. 8 threads, 1 ms held a sample: a
// read measured 25 + 1 + 3.5 = 29.5 ms is 25 ms on storage, and a round
// (its last read) lasts 25 + 1 + 7 = 33 ms.
TEST(GilProbe, ATracedRoundsQueueIsNotTakenForStorage) {
  DataLoaderProfile run = GilRun(0.025 + 0.0035, 1e-3);
  run.settings.fetch_threads = 8;
  run.gil_probe = Probe(1000, 1000);
  models::Profile profile = DataLoaderModelProfile(run);
  EXPECT_NEAR(profile.groups[0].fetch_wait_seconds_per_sample, 0.025, 1e-6);
  const std::string* said = Assumption(profile, "behind half of the round's other samples");
  ASSERT_NE(said, nullptr);
  EXPECT_THAT(*said, HasSubstr("8 fetch threads in rounds: 3.5 ms of each sample's 29.5 ms read"));
  models::Configuration c = models::ObservedConfiguration(profile);
  c.cores = 2;
  EXPECT_NEAR(1 / models::Predict(profile, c).steady_throughput, 2 * (0.025 + 0.001 + 0.007) + 1e-4, 0.5e-3)
      << "as traced: two rounds of 33 ms, the last read of each";
  // What a user asks of it: `report --what-if fetch_threads=16` is one round of 25 + 1 + 15 ms.
  StatusOr<WhatIf> question = ParseWhatIf("fetch_threads=16");
  ASSERT_TRUE(question.ok()) << question.status().message();
  StatusOr<models::Configuration> asked = ApplyWhatIf(profile, *question);
  ASSERT_TRUE(asked.ok()) << asked.status().message();
  asked->cores = 2;
  EXPECT_NEAR(1 / models::Predict(profile, *asked).steady_throughput, 0.025 + 0.001 + 0.015 + 1e-4, 0.5e-3);
  // Workers that read ahead (prefetch 2) keep their threads apart: nothing taken.
  run.settings.num_workers = 2;
  EXPECT_NEAR(DataLoaderModelProfile(run).groups[0].fetch_wait_seconds_per_sample, 0.0285, 1e-6);
}

// What a user gets from it: a fetch whose CPU releases the GIL (hashing, a
// C decoder) overlaps across fetch threads; one that holds it does not.
TEST(GilProbe, ThreadsGainWhereTheFetchReleasesTheGil) {
  DataLoaderProfile held = GilRun(1e-3, 4e-3), released = held;
  held.gil_probe = Probe(1000, 1000);
  released.gil_probe = Probe(1000, 20);
  auto gain = [](const DataLoaderProfile& run) {
    models::Profile profile = DataLoaderModelProfile(run);
    models::Configuration c = models::ObservedConfiguration(profile);
    c.cores = 2;
    const double one = models::Predict(profile, c).steady_throughput;
    c.group_fetch_threads[0] = 2;
    return models::Predict(profile, c).steady_throughput / one;
  };
  EXPECT_LT(gain(held), 1.3) << "4 ms of GIL-held CPU a sample binds one process";
  EXPECT_GT(gain(released), 1.5) << "two threads hash on two cores";
}

// The record's "gil_probe", read from the main trace at num_workers=0; one
// that does not add up is read as absent.
TEST(GilProbe, TheMainRecordsProbeIsReadAndCheckedAtZeroWorkers) {
  StatusOr<tracer::Trace> main = tracer::LoadTrace(std::string(PIPETUNE_SOURCE_DIR) +
                                                   "/tests/analyzer/dataloader_golden/map_workers0/trace");
  ASSERT_TRUE(main.ok()) << main.status().message();
  StatusOr<DataLoaderProfile> before = MakeDataLoaderProfile(*main, {});
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_EQ(before->gil_probe.wakes, 0u) << "traces from before the probe have none";

  std::string& config = main->header.pipeline.config_json;
  const std::string key = "\"role\": \"main\"";
  const size_t at = config.find(key);
  ASSERT_NE(at, std::string::npos);
  config.insert(at, R"("gil_probe": {"wakes": 400, "gil_late": 100, "seconds": 2.5, "samples": 80, )"
                    R"("cpu_seconds": 0.01, "period_ms": 5.0}, )");
  StatusOr<DataLoaderProfile> p = MakeDataLoaderProfile(*main, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->gil_probe.wakes, 400u);
  EXPECT_EQ(p->gil_probe.gil_late, 100u);
  EXPECT_EQ(p->gil_probe.samples, 80u);
  EXPECT_DOUBLE_EQ(p->gil_probe.seconds, 2.5);

  config.replace(config.find("\"gil_late\": 100"), 15, "\"gil_late\": 900");
  StatusOr<DataLoaderProfile> damaged = MakeDataLoaderProfile(*main, {});
  ASSERT_TRUE(damaged.ok());
  EXPECT_EQ(damaged->gil_probe.wakes, 0u) << "more late wakes than wakes";
}

}  // namespace
}  // namespace pipetune::analyzer

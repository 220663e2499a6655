// ReadDataLoaderProfile on golden traces of real DataLoader runs
// (tests/analyzer/dataloader_golden/, made by its make_goldens.py): a
// synthetic dataset whose costs are known, so counts are exact and times
// near what the dataset spends. Per sample: load sleeps 2 ms and spins 1 ms
// of CPU, transform[0]:Spin spins 0.5 ms, transform[1]:Nap sleeps 1 ms; per
// batch of 4 the loop sleeps 3 ms and spins 1 ms. The runs shared a busy
// 2-core host, so the bounds above the costs are loose.
#include "pipetune/analyzer/dataloader_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace pipetune::analyzer {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;

std::string GoldenTrace(const std::string& name) {
  return std::string(PIPETUNE_SOURCE_DIR) + "/tests/analyzer/dataloader_golden/" + name + "/trace";
}

DataLoaderProfile ReadGolden(const std::string& name) {
  StatusOr<DataLoaderProfile> p = ReadDataLoaderProfile(GoldenTrace(name));
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : DataLoaderProfile{};
}

std::vector<std::string> SampleStageNames(const DataLoaderProfile& p) {
  std::vector<std::string> names;
  for (const DataLoaderStage& s : p.sample_stages) names.push_back(s.name);
  return names;
}

std::vector<uint64_t> EpochBatches(const DataLoaderProfile& p) {
  std::vector<uint64_t> batches;
  for (const DataLoaderEpoch& e : p.epochs) batches.push_back(e.batches);
  return batches;
}

// Every sample stage counted `samples` times, with its wall time and its
// own CPU near the dataset's costs (and not the thread's whole CPU).
void ExpectSampleCosts(const DataLoaderProfile& p, uint64_t samples) {
  ASSERT_THAT(SampleStageNames(p), ElementsAre("load", "transform[0]:Spin", "transform[1]:Nap"));
  for (const DataLoaderStage& s : p.sample_stages) EXPECT_EQ(s.count, samples) << s.name;
  const DataLoaderStage& load = p.sample_stages[0];
  const DataLoaderStage& spin = p.sample_stages[1];
  const DataLoaderStage& nap = p.sample_stages[2];
  // load: 3 ms of wall, 1 ms of CPU, the transforms' time not included.
  EXPECT_GT(load.seconds_each, 0.0029);
  EXPECT_LT(load.seconds_each, 0.02);
  EXPECT_GT(load.cpu_seconds_each, 0.00095);
  EXPECT_LT(load.cpu_seconds_each, 0.003);
  EXPECT_DOUBLE_EQ(load.per_batch, load.seconds_each * 4);
  EXPECT_GT(spin.cpu_seconds_each, 0.00048);
  EXPECT_LT(spin.cpu_seconds_each, 0.002);
  EXPECT_GE(spin.seconds_each, spin.cpu_seconds_each * 0.99);
  EXPECT_GT(nap.seconds_each, 0.00095);
  EXPECT_LT(nap.cpu_seconds_each, 0.0004);  // asleep, not on the CPU
  EXPECT_GE(p.collate.cpu_seconds_each, 0.0);
}

// The loop's step: 4 ms of wall, 1 ms of the main thread's CPU.
void ExpectStepCosts(const DataLoaderProfile& p) {
  EXPECT_GT(p.step.seconds_each, 0.0039);
  EXPECT_LT(p.step.seconds_each, 0.03);
  EXPECT_GT(p.step.cpu_seconds_each, 0.00095);
  EXPECT_LT(p.step.cpu_seconds_each, 0.003);
}

TEST(DataLoaderTraceTest, MapStyleAtZeroWorkersOverThreeEpochs) {
  DataLoaderProfile p = ReadGolden("map_workers0");
  EXPECT_EQ(p.settings.num_workers, 0);
  EXPECT_EQ(p.settings.batch_size, 4);
  EXPECT_EQ(p.settings.dataset, "Samples");
  EXPECT_FALSE(p.settings.iterable);
  EXPECT_EQ(p.settings.dataset_length, 16);
  EXPECT_EQ(p.settings.batches_per_epoch, 4);
  EXPECT_EQ(p.worker_traces, 0);
  EXPECT_TRUE(p.ended_cleanly);
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_EQ(p.batches, 12u);
  EXPECT_THAT(EpochBatches(p), ElementsAre(4, 4, 4));
  // Every epoch wraps the samples again; each transform still counts once.
  ExpectSampleCosts(p, 48);
  EXPECT_EQ(p.collate.count, 12u);
  EXPECT_EQ(p.step.count, 12u);
  EXPECT_EQ(p.transfer.count, 0u);
  ExpectStepCosts(p);
  EXPECT_NEAR(p.step_seconds, p.step.seconds_each * 12, 1e-9);
  EXPECT_GT(p.wait_seconds, 12 * 4 * 0.0045);  // the samples load inside next()
  EXPECT_GT(p.batch_bytes, 4 * 3 * 8 * 8 * 4 - 1);
  // The main process's CPU besides the samples' own: the step's 1 ms a batch
  // and the loop's overhead (the samples' stages' CPU, not their wall time,
  // is what is left out).
  EXPECT_GT(p.main_other_cpu_per_batch, 0.0009);
  EXPECT_LT(p.main_other_cpu_per_batch, 0.02);
  // The step spins on the loop's own thread and starts none: the process's
  // CPU beside that thread is the recorder's sampling and the clock's
  // rounding, below what counts as the step's.
  EXPECT_GE(p.step_threads_cpu_seconds_each, 0.0);
  EXPECT_LT(p.step_threads_cpu_seconds_each, 0.0005);
  EXPECT_FALSE(p.hostname.empty());
  EXPECT_FALSE(p.rank.has_value());  // not a distributed run
  EXPECT_FALSE(p.world_size.has_value());
}

TEST(DataLoaderTraceTest, MapStyleWithTwoPersistentForkedWorkers) {
  std::vector<std::string> paths = DataLoaderTracePaths(GoldenTrace("map_workers2_fork"));
  ASSERT_EQ(paths.size(), 3u);  // the main trace and its two T.<pid>
  DataLoaderProfile p = ReadGolden("map_workers2_fork");
  EXPECT_EQ(p.settings.num_workers, 2);
  EXPECT_EQ(p.settings.start_method, "fork");
  EXPECT_TRUE(p.settings.persistent_workers);
  EXPECT_EQ(p.worker_traces, 2);
  EXPECT_EQ(p.batches, 8u);
  EXPECT_THAT(EpochBatches(p), ElementsAre(4, 4));
  ASSERT_EQ(p.epochs.size(), 2u);
  EXPECT_EQ(p.epochs[0].workers_started, 2);
  EXPECT_GT(p.epochs[0].startup_seconds, 0.0);
  EXPECT_EQ(p.epochs[1].workers_started, 0);  // persistent: started once
  ExpectSampleCosts(p, 32);
  EXPECT_EQ(p.collate.count, 8u);
  EXPECT_EQ(p.transfer.count, 8u);
  EXPECT_GE(p.transfer.cpu_seconds_each, 0.0);
  EXPECT_EQ(p.step.count, 8u);
  ExpectStepCosts(p);
  EXPECT_GT(p.worker_rss_bytes, 0.0);
  EXPECT_GT(p.worker_cpu_seconds, 0.0);
}

// The run over time: one frame per snapshot of the main process, each
// stage's counts summed over the processes that ran it, ending at the totals.
void ExpectTimelineEndsAtTheTotals(const DataLoaderProfile& p, const std::string& trace) {
  StatusOr<tracer::Trace> main = tracer::LoadTrace(trace);
  ASSERT_TRUE(main.ok());
  ASSERT_GE(p.timeline.frames.size(), 5u);
  EXPECT_EQ(p.timeline.frames.size(), main->process_samples.size());
  ASSERT_EQ(p.timeline.stages.size(), p.sample_stages.size() + 3);
  EXPECT_EQ(p.timeline.stages[0].def.name, "load");
  EXPECT_EQ(p.timeline.stages.back().def.name, "pin_memory");
  const Frame& first = p.timeline.frames.front();
  const Frame& last = p.timeline.frames.back();
  EXPECT_EQ(first.steps, 0u);  // the loop began after the session did
  EXPECT_EQ(last.steps, p.batches);
  EXPECT_NEAR(last.step_wait_ns / 1e9, p.wait_seconds, 1e-6);
  for (size_t s = 0; s < p.sample_stages.size(); ++s) {
    EXPECT_EQ(last.stages[s].produced, p.sample_stages[s].count) << p.sample_stages[s].name;
    EXPECT_EQ(last.stages[s].parallelism, static_cast<uint32_t>(std::max(1, p.settings.num_workers)));
  }
  EXPECT_EQ(last.stages[p.sample_stages.size()].produced, p.collate.count);
  // Cumulative counts never go back, and the frames are in time order.
  for (size_t i = 1; i < p.timeline.frames.size(); ++i) {
    const Frame& a = p.timeline.frames[i - 1];
    const Frame& b = p.timeline.frames[i];
    EXPECT_LT(a.time_ns, b.time_ns);
    EXPECT_LE(a.steps, b.steps);
    EXPECT_LE(a.process_cpu_ns, b.process_cpu_ns);
    for (size_t s = 0; s < b.stages.size() && s < a.stages.size(); ++s)
      EXPECT_LE(a.stages[s].work_ns, b.stages[s].work_ns);
  }
  EXPECT_GT(p.loop_begin_seconds, 0);
  EXPECT_LT(p.loop_begin_seconds + p.wait_seconds + p.step_seconds, p.trace_seconds + 0.2);
}

TEST(DataLoaderTraceTest, TimelineOfAZeroWorkerRun) {
  DataLoaderProfile p = ReadGolden("map_workers0");
  ExpectTimelineEndsAtTheTotals(p, GoldenTrace("map_workers0"));
}

// The workers' counts come from their own traces, on the main process's clock.
TEST(DataLoaderTraceTest, TimelineSumsTheWorkersTraces) {
  DataLoaderProfile p = ReadGolden("map_workers2_fork");
  ExpectTimelineEndsAtTheTotals(p, GoldenTrace("map_workers2_fork"));
  // The main process alone has no load stage: the samples' counts are the workers'.
  StatusOr<tracer::Trace> main = tracer::LoadTrace(GoldenTrace("map_workers2_fork"));
  ASSERT_TRUE(main.ok());
  for (const tracer::StageDef& stage : main->stages) EXPECT_THAT(stage.name, Not(EndsWith("/load")));
  // The samples were loaded while the loop ran, not before it began.
  const std::vector<Frame>& frames = p.timeline.frames;
  for (const Frame& f : frames) {
    if (static_cast<double>(f.time_ns) / 1e9 < p.loop_begin_seconds - 0.06) {
      EXPECT_EQ(f.stages[0].produced, 0u);
    }
  }
}

// A hand-made main trace at num_workers=0, snapshots every 100 ms: the loop's
// first next() waits 1 s (from 0.05 s, as for spawned workers), then 10
// batches of a 10 ms wait and a 40 ms step each. Every call is a span.
tracer::Trace LongFirstWait() {
  const uint64_t start = 1'000'000'000, ms = 1'000'000;
  tracer::Trace t;
  t.report.path = "long_first_wait";
  t.header.clock.start_ns = start;
  t.header.host.hostname = "h";
  t.header.host.cores_allowed = 2;
  t.header.pipeline.config_json =
      R"({"pipetune_dataloader": {"role": "main", "version": 2, "loaders": [{"id": 1, "settings": )"
      R"({"batch_size": 2, "num_workers": 0}}]}})";
  const char* names[] = {"loader1/next", "loader1/step", "loader1/load", "loader1/collate"};
  for (uint32_t id = 0; id < 4; ++id) t.stages.push_back({id, names[id], "map", 1});
  // (stage, begin, end, elements) of every call, relative to the start.
  std::vector<std::tuple<uint32_t, uint64_t, uint64_t, uint64_t>> calls{{0, 50 * ms, 1050 * ms, 1}};
  for (uint64_t b = 0; b < 10; ++b) {
    uint64_t at = 1050 * ms + b * 50 * ms;
    if (b > 0) calls.emplace_back(0, at, at + 10 * ms, 1);
    calls.emplace_back(1, at + 10 * ms, at + 50 * ms, 1);
    calls.emplace_back(2, at - 10 * ms, at - 2 * ms, 2);
    calls.emplace_back(3, at - 2 * ms, at - 1 * ms, 1);
  }
  for (const auto& [stage, begin, end, n] : calls) {
    t.spans.push_back({stage, 0, 0, start + begin, start + end});
  }
  for (uint64_t tick = 100 * ms; tick <= 1600 * ms; tick += 100 * ms) {
    for (uint32_t id = 0; id < 4; ++id) {
      tracer::StageSnapshot s;
      s.time_ns = start + tick;
      s.stage = id;
      for (const auto& [stage, begin, end, n] : calls) {
        if (stage != id || end > tick) continue;
        s.produced += n;
        s.work_ns += end - begin;
      }
      t.snapshots.push_back(s);
    }
    tracer::ProcessSample process;
    process.time_ns = start + tick;
    process.cpu_ns = tick / 4;
    t.process_samples.push_back(process);
  }
  return t;
}

// A call's time reaches the counters when it returns; the recorded spans
// spread a long wait over the snapshot intervals it covered.
TEST(DataLoaderTraceTest, TimelineSpreadsALongWaitOverTheIntervalsItCovered) {
  tracer::Trace main = LongFirstWait();
  StatusOr<DataLoaderProfile> p = MakeDataLoaderProfile(main, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->batches, 10u);
  ASSERT_EQ(p->timeline.frames.size(), 16u);
  for (const Frame& f : p->timeline.frames) {
    double t = static_cast<double>(f.time_ns) / 1e9;
    if (t < 1.05) {
      EXPECT_NEAR(f.step_wait_ns / 1e9, t - 0.05, 1e-9) << t;
    }
  }
  EXPECT_NEAR(p->timeline.frames.back().step_wait_ns / 1e9, 1.09, 1e-9);
  // With no epoch recorded, the loop began with its first wait.
  EXPECT_NEAR(p->loop_begin_seconds, 0.05, 1e-9);
  EXPECT_NEAR(p->loop_end_seconds, 1.55, 1e-9);

  // Without the spans the whole second lands in the interval where it ended.
  main.spans.clear();
  StatusOr<DataLoaderProfile> lumped = MakeDataLoaderProfile(main, {});
  ASSERT_TRUE(lumped.ok());
  EXPECT_EQ(lumped->timeline.frames[5].step_wait_ns, 0u);
  EXPECT_NEAR(lumped->timeline.frames[10].step_wait_ns / 1e9, 1.0, 1e-9);
  // ... and the loop's start is known to a snapshot interval.
  EXPECT_NEAR(lumped->loop_begin_seconds, 1.0, 1e-9);
}

TEST(DataLoaderTraceTest, IterableDatasetAtZeroWorkers) {
  DataLoaderProfile p = ReadGolden("iterable_workers0");
  EXPECT_TRUE(p.settings.iterable);
  EXPECT_EQ(p.settings.dataset, "Stream");
  EXPECT_FALSE(p.settings.dataset_length.has_value());  // a stream has no len()
  EXPECT_EQ(p.batches, 8u);
  EXPECT_THAT(EpochBatches(p), ElementsAre(4, 4));
  ExpectSampleCosts(p, 32);  // each element of the stream, less its transforms
  EXPECT_EQ(p.collate.count, 8u);
  EXPECT_EQ(p.worker_traces, 0);
  EXPECT_FALSE(p.sharded_by_worker_info);
  // Recorded with the environment torchrun gives rank 1 of 2.
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.world_size, 2);
  EXPECT_FALSE(p.hostname.empty());
}

TEST(DataLoaderTraceTest, IterableDatasetShardedByWorkerInfo) {
  DataLoaderProfile p = ReadGolden("iterable_workers2");
  EXPECT_TRUE(p.settings.iterable);
  EXPECT_EQ(p.worker_traces, 2);
  EXPECT_EQ(p.sharded_workers, 2);
  EXPECT_TRUE(p.sharded_by_worker_info);
  EXPECT_EQ(p.batches, 4u);  // 16 samples, each once
  ExpectSampleCosts(p, 16);
  EXPECT_EQ(p.transfer.count, 4u);  // the workers' end-of-stream markers are not batches
  EXPECT_EQ(p.epochs.size(), 1u);
}

TEST(DataLoaderTraceTest, IterableDatasetNotSharded) {
  DataLoaderProfile p = ReadGolden("iterable_workers2_unsharded");
  EXPECT_TRUE(p.settings.iterable);
  EXPECT_EQ(p.worker_traces, 2);
  EXPECT_EQ(p.sharded_workers, 0);
  EXPECT_FALSE(p.sharded_by_worker_info);
  EXPECT_EQ(p.batches, 8u);  // each worker read the whole stream
  ExpectSampleCosts(p, 32);
}

// A webdataset pipeline: its stages are rows of their own, and those that
// do not run once per sample are modelled at the rate their counts show:
// the stages before `batched` once per sample (4 per batch), `batched` and
// what reads the stream (load) once per batch.
TEST(DataLoaderTraceTest, WebDatasetStagesRunAtTheRateTheirCountsShow) {
  DataLoaderProfile p = ReadGolden("webdataset_workers0");
  ASSERT_THAT(SampleStageNames(p), ElementsAre("load", "transform[1]:decode", "transform[2]:to_tuple",
                                               "transform[3]:map:spin_sample", "transform[4]:batched"));
  EXPECT_EQ(p.batches, 4u);
  EXPECT_EQ(p.collate.count, 4u);
  std::vector<double> visits;
  for (const DataLoaderStage& s : p.sample_stages) {
    visits.push_back(s.visits_per_batch);
    EXPECT_DOUBLE_EQ(s.per_batch, s.seconds_each * s.visits_per_batch) << s.name;
  }
  EXPECT_THAT(visits, ElementsAre(1.0, 4.0, 4.0, 4.0, 1.0));
  // The map's 0.5 ms of CPU is its own, not the reading's nor decode's.
  const DataLoaderStage& map = p.sample_stages[3];
  EXPECT_GT(map.cpu_seconds_each, 0.00048);
  EXPECT_LT(map.cpu_seconds_each, 0.002);
  EXPECT_LT(p.sample_stages[0].cpu_seconds_each, 0.0005);
}

TEST(DataLoaderTraceTest, KilledRunGivesTheBatchesItRecorded) {
  // SIGKILLed after 6 batches, in its second epoch, once a snapshot held them.
  DataLoaderProfile p = ReadGolden("killed");
  EXPECT_FALSE(p.ended_cleanly);
  EXPECT_EQ(p.batches, 6u);
  EXPECT_THAT(EpochBatches(p), ElementsAre(4, 2));
  ExpectSampleCosts(p, 24);
  EXPECT_EQ(p.collate.count, 6u);
  EXPECT_EQ(p.step.count, 5u);  // the sixth batch's step never ended
}

// A damaged trace whose epoch counter says far more epochs than its batches
// allow is read with the epochs the batches allow, and says so; it had the
// profile allocate 400 GB (fuzz/trace_analysis_fuzz.cc; the input is in
// tests/analyzer/regressions/).
// Sets every snapshot's count of the stage named `name` to `produced`; false
// when the trace has no such stage.
bool DamageCounter(tracer::Trace& trace, const std::string& name, uint64_t produced) {
  tracer::StageId id = tracer::kInvalidStage;
  for (const tracer::StageDef& stage : trace.stages) {
    if (stage.name == name) id = stage.id;
  }
  for (tracer::StageSnapshot& snapshot : trace.snapshots) {
    if (snapshot.stage == id) snapshot.produced = produced;
  }
  return id != tracer::kInvalidStage;
}

// What `tune --engine` rebuilds the input from: the dataset, its folder and
// the transforms a wrapper object holds (as torchvision's reference recipe
// does), each with its parameters; and the loader's shuffle and drop_last.
TEST(DataLoaderTraceTest, ImageFolderWithAWrappedComposeRecordsEachTransform) {
  DataLoaderProfile p = ReadGolden("image_folder_preset");
  EXPECT_EQ(p.settings.batch_size, 3);
  EXPECT_EQ(p.settings.shuffle, std::optional<bool>(true));
  EXPECT_TRUE(p.settings.drop_last);
  ASSERT_TRUE(p.dataset.has_value());
  const DataLoaderDataset& d = *p.dataset;
  EXPECT_EQ(d.class_name, "ImageFolder");
  EXPECT_EQ(d.folder_base, "ImageFolder");
  EXPECT_EQ(d.root.rfind("/tmp", 0), 0u) << d.root;
  ASSERT_TRUE(d.extensions.has_value());
  EXPECT_THAT(*d.extensions, Contains(".jpeg"));
  EXPECT_EQ(d.loader, "torchvision.datasets.folder.default_loader");
  EXPECT_EQ(d.classes, std::optional<int64_t>(2));
  EXPECT_EQ(d.samples, std::optional<int64_t>(8));
  EXPECT_EQ(d.transform_holder, "TrainPreset.transforms");
  std::vector<std::string> names;
  for (const DataLoaderTransform& t : d.transforms) names.push_back(t.name);
  ASSERT_THAT(names, ElementsAre("RandomResizedCrop", "RandomHorizontalFlip", "ToTensor", "Normalize"));
  const Json& crop = d.transforms[0].params;
  EXPECT_EQ(crop["size"], Json::array({32, 32}));
  EXPECT_EQ(crop["scale"], Json::array({0.25, 1.0}));
  EXPECT_EQ(crop["interpolation"], "bilinear");
  EXPECT_DOUBLE_EQ(d.transforms[1].params["p"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(d.transforms[3].params["std"][2].get<double>(), 0.225);
  // Held by a wrapper, the transforms are timed one by one, not folded into load.
  EXPECT_THAT(SampleStageNames(p),
              ElementsAre("load", "transform[0]:RandomResizedCrop", "transform[1]:RandomHorizontalFlip",
                          "transform[2]:ToTensor", "transform[3]:Normalize"));
}

// Traces recorded before the dataset was: read as before, the record absent.
TEST(DataLoaderTraceTest, OlderTracesHaveNoDatasetRecord) {
  DataLoaderProfile p = ReadGolden("map_workers0");
  EXPECT_FALSE(p.dataset.has_value());
  EXPECT_FALSE(p.settings.shuffle.has_value());
  EXPECT_EQ(p.settings.batch_size, 4);
}

// A record of the wrong shape reads as absent fields, never as an error.
TEST(DataLoaderTraceTest, AMalformedDatasetRecordReadsAsAbsentFields) {
  StatusOr<tracer::Trace> main = tracer::LoadTrace(GoldenTrace("image_folder_preset"));
  ASSERT_TRUE(main.ok()) << main.status().message();
  std::string& config = main->header.pipeline.config_json;
  const std::string from = "\"transforms\": [";
  size_t at = config.find(from);
  ASSERT_NE(at, std::string::npos);
  config.replace(at, from.size(), "\"transforms\": [7, {\"name\": 3, \"params\": []}, ");
  config.replace(config.find("\"classes\": 2"), 12, "\"classes\": \"2\"");
  StatusOr<DataLoaderProfile> p = MakeDataLoaderProfile(*main, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->dataset.has_value());
  EXPECT_FALSE(p->dataset->classes.has_value());
  ASSERT_EQ(p->dataset->transforms.size(), 6u);
  EXPECT_EQ(p->dataset->transforms[0].name, "?");
  EXPECT_TRUE(p->dataset->transforms[1].params.is_object());
  EXPECT_EQ(p->dataset->transforms[2].name, "RandomResizedCrop");
}

TEST(DataLoaderTraceTest, AnEpochCounterBeyondTheBatchesIsCappedNotAllocated) {
  StatusOr<tracer::Trace> main = tracer::LoadTrace(GoldenTrace("map_workers0"));
  ASSERT_TRUE(main.ok()) << main.status().message();
  ASSERT_TRUE(DamageCounter(*main, "loader1/epoch", uint64_t{1} << 40));
  StatusOr<DataLoaderProfile> p = MakeDataLoaderProfile(*main, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_LE(p->epochs.size(), p->batches + 4);
  EXPECT_THAT(p->warnings, Contains(HasSubstr("counts 1099511627776 epochs, more than its")));

  // With the batches' counter damaged too, at most 65536 epochs whose start
  // went unrecorded (a second input the fuzzer found).
  ASSERT_TRUE(DamageCounter(*main, "loader1/next", uint64_t{1} << 40));
  StatusOr<DataLoaderProfile> both = MakeDataLoaderProfile(*main, {});
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_LE(both->epochs.size(), (size_t{1} << 16) + 4);
}

TEST(DataLoaderTraceTest, TruncatedTraceIsReadUpToItsLastWholeChunk) {
  std::ifstream in(GoldenTrace("killed"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 100u);
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("pipetune_dataloader_truncated." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "trace").string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 7));
  StatusOr<DataLoaderProfile> p = ReadDataLoaderProfile(path);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_FALSE(p->warnings.empty());
  EXPECT_THAT(p->warnings[0], HasSubstr("truncated"));
  EXPECT_GT(p->batches, 0u);
  EXPECT_LE(p->batches, 6u);
}

TEST(DataLoaderTraceTest, WorkerTraceNamesItsMainTrace) {
  std::vector<std::string> paths = DataLoaderTracePaths(GoldenTrace("map_workers2_fork"));
  ASSERT_EQ(paths.size(), 3u);
  StatusOr<DataLoaderProfile> p = ReadDataLoaderProfile(paths[1]);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(p.status().message(), paths[1] + " is a DataLoader worker's trace; report its main trace " +
                                      GoldenTrace("map_workers2_fork"));
}

TEST(DataLoaderTraceTest, ProgramThatBuiltNoDataLoader) {
  StatusOr<DataLoaderProfile> p = ReadDataLoaderProfile(GoldenTrace("no_dataloader"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(p.status().message(), GoldenTrace("no_dataloader") + ": the program built no DataLoader");
}

TEST(DataLoaderTraceTest, ProgramThatTookNoBatch) {
  StatusOr<DataLoaderProfile> p = ReadDataLoaderProfile(GoldenTrace("no_batch"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(p.status().message(), HasSubstr(GoldenTrace("no_batch") + ": "));
  EXPECT_THAT(p.status().message(), HasSubstr("took no batch"));
}

TEST(DataLoaderTraceTest, TraceOfAnotherProgramIsNotADataLoaders) {
  std::string path = std::string(PIPETUNE_SOURCE_DIR) + "/tests/cli/golden/two_stage_cpu.trace";
  EXPECT_FALSE(IsDataLoaderTraceFile(path));
  StatusOr<DataLoaderProfile> p = ReadDataLoaderProfile(path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(p.status().message(), HasSubstr("not the trace of a PyTorch DataLoader's main process"));
}

// Four workers on two cores get half a core each while they load: that is
// the run's own oversubscription, and the report must not tell the user to
// look for other programs (a 4-worker benchmark run said so before). The
// same half core for two workers on two cores is other programs' doing.
TEST(DataLoaderTraceTest, WorkersOutnumberingTheCoresAreNotASharedHost) {
  EXPECT_FALSE(LoadingShareMeansSharedHost(0.5, 4, 2));
  EXPECT_FALSE(LoadingShareMeansSharedHost(0.4, 4, 2));
  EXPECT_TRUE(LoadingShareMeansSharedHost(0.3, 4, 2));  // under 0.75 of its half core
  EXPECT_TRUE(LoadingShareMeansSharedHost(0.5, 2, 2));
  EXPECT_TRUE(LoadingShareMeansSharedHost(0.5, 0, 2));  // the main process loads, on a core of its own
  EXPECT_FALSE(LoadingShareMeansSharedHost(0.9, 0, 2));
  EXPECT_FALSE(LoadingShareMeansSharedHost(0.9, 8, 16));
  EXPECT_TRUE(LoadingShareMeansSharedHost(0.5, 4, 0));  // cores unknown: a core each
}

// A low share of a core while loading is other programs' doing only when
// the loading waited for a core (run-queue delay) for half its time off the
// CPU or more; the rest is waiting inside load (a GET from slow storage).
// Unknown delay (an older trace) decides nothing.
TEST(DataLoaderTraceTest, RunQueueDelayTellsContentionFromWaitingInsideLoad) {
  EXPECT_FALSE(RunDelayMeansContention(0.03, 1.2));  // 25 ms GETs: a few ms of wake-up delay
  EXPECT_TRUE(RunDelayMeansContention(0.9, 1.2));    // a spinning neighbour on the core
  EXPECT_TRUE(RunDelayMeansContention(0.6, 1.2));
  EXPECT_FALSE(RunDelayMeansContention(-1, 1.2));
}

}  // namespace
}  // namespace pipetune::analyzer

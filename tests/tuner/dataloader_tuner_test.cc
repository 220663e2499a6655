// The DataLoader model and tuner on hand-made profiles.
#include <gtest/gtest.h>

#include "pipetune/analyzer/dataloader.h"
#include "pipetune/tuner/dataloader_tuner.h"

namespace pipetune::tuner {
namespace {

using analyzer::DataLoaderKnobs;
using analyzer::DataLoaderProfile;
using analyzer::DataLoaderStage;
using analyzer::DataLoaderStageKind;

constexpr double kMiB = 1024.0 * 1024.0;

DataLoaderStage Stage(const std::string& name, DataLoaderStageKind kind, double each, int batch) {
  DataLoaderStage s;
  s.name = name;
  s.kind = kind;
  s.count = 100;
  s.seconds_each = each;
  bool per_sample = kind == DataLoaderStageKind::kLoad || kind == DataLoaderStageKind::kTransform;
  s.per_batch = each * (per_sample ? batch : 1);
  return s;
}

// batch 32: load 2 ms, crop 1 ms, to-tensor 3 ms per sample; collate 5 ms;
// a 40 ms step. One worker needs 197 ms per batch.
DataLoaderProfile Profile(int num_workers = 0) {
  DataLoaderProfile p;
  p.settings.batch_size = 32;
  p.settings.num_workers = num_workers;
  p.sample_stages = {Stage("load", DataLoaderStageKind::kLoad, 0.002, 32),
                     Stage("transform[0]:RandomResizedCrop", DataLoaderStageKind::kTransform, 0.001, 32),
                     Stage("transform[1]:ToTensor", DataLoaderStageKind::kTransform, 0.003, 32)};
  p.collate = Stage("collate", DataLoaderStageKind::kCollate, 0.005, 32);
  p.transfer = Stage("transfer", DataLoaderStageKind::kTransfer, 0.001, 32);
  p.pin_memory.name = "pin_memory";
  p.step = Stage("training step", DataLoaderStageKind::kStep, 0.040, 32);
  p.batches = 100;
  p.batch_bytes = 20 * kMiB;
  p.main_rss_bytes = 400 * kMiB;
  p.worker_rss_bytes = 300 * kMiB;
  p.epochs.push_back({100, 0, 0});
  return p;
}

TEST(DataLoaderModel, SerialAtZeroWorkersNamesTheCostliestStage) {
  DataLoaderProfile p = Profile();
  analyzer::DataLoaderPrediction x = analyzer::PredictDataLoader(p, {0, 2, false, false}, 4);
  EXPECT_NEAR(x.batches_per_second, 1.0 / (0.197 + 0.040), 1e-9);
  EXPECT_EQ(x.limiting_stage, "transform[1]:ToTensor");
  EXPECT_EQ(x.limiting_kind, DataLoaderStageKind::kTransform);
}

TEST(DataLoaderModel, WorkersScaleUntilTheStepBinds) {
  DataLoaderProfile p = Profile();
  double two = analyzer::PredictDataLoader(p, {2, 2, false, false}, 16).steady_batches_per_second;
  double four = analyzer::PredictDataLoader(p, {4, 2, false, false}, 16).steady_batches_per_second;
  EXPECT_NEAR(four / two, 2.0, 0.05);
  analyzer::DataLoaderPrediction many = analyzer::PredictDataLoader(p, {12, 2, false, false}, 16);
  EXPECT_EQ(many.limiting_kind, DataLoaderStageKind::kStep);
  EXPECT_EQ(many.bound, analyzer::DataLoaderBound::kMainProcess);
}

TEST(DataLoaderModel, CoresBindBeforeWorkers) {
  DataLoaderProfile p = Profile();
  analyzer::DataLoaderPrediction x = analyzer::PredictDataLoader(p, {4, 2, false, false}, 2);
  EXPECT_EQ(x.bound, analyzer::DataLoaderBound::kCores);
  EXPECT_NEAR(x.steady_batches_per_second, 2 / 0.198 * (1 - 0.04 / 8), 1e-6);
}

TEST(DataLoaderModel, MemoryCountsWorkersAndBatchesInFlight) {
  DataLoaderProfile p = Profile();
  analyzer::DataLoaderPrediction x = analyzer::PredictDataLoader(p, {3, 4, false, false}, 4);
  EXPECT_NEAR(x.memory_bytes, (400 + 3 * 300 + 12 * 20) * kMiB, 1);
}

TEST(DataLoaderTuner, PicksWorkersUpToTheCores) {
  DataLoaderPlan plan = TuneDataLoader(Profile(), {.cores = 2, .memory_bytes = uint64_t(64) << 30});
  EXPECT_EQ(plan.knobs.num_workers, 2);
  EXPECT_EQ(plan.knobs.prefetch_factor, 2);
  EXPECT_FALSE(plan.knobs.pin_memory);  // no CUDA
  EXPECT_EQ(plan.binding, DataLoaderBinding::kCores);
  EXPECT_GT(plan.predicted.batches_per_second, 1.5 * plan.current_prediction.batches_per_second);
}

TEST(DataLoaderTuner, MemoryBelowWhatTheWorkersNeedMeansFewerWorkers) {
  // 4 workers would help on 8 cores, but 1000 MiB leaves room for one worker
  // (the main process 400 MiB, a worker 300 MiB, each batch in flight 20 MiB).
  DataLoaderPlan plan = TuneDataLoader(Profile(), {.cores = 8, .memory_bytes = uint64_t(1000 * kMiB)});
  EXPECT_EQ(plan.knobs.num_workers, 1);
  EXPECT_EQ(plan.binding, DataLoaderBinding::kMemory);
  EXPECT_LE(plan.predicted.memory_bytes, 1000 * kMiB);
  ASSERT_FALSE(plan.notes.empty());
  EXPECT_NE(plan.notes[0].find("memory binds"), std::string::npos);
}

TEST(DataLoaderTuner, NeverOverTheMemoryBudget) {
  for (uint64_t mib : {500, 800, 1000, 1500, 2000, 4000}) {
    DataLoaderPlan plan = TuneDataLoader(Profile(), {.cores = 16, .memory_bytes = uint64_t(mib * kMiB)});
    EXPECT_LE(plan.predicted.memory_bytes, mib * kMiB) << mib;
  }
}

TEST(DataLoaderTuner, PersistentWorkersWhenStartUpRepeatsEveryEpoch) {
  DataLoaderProfile p = Profile(2);
  p.epochs = {{20, 1.5, 2}, {20, 1.5, 2}, {20, 1.5, 2}, {20, 1.5, 2}, {20, 1.5, 2}};
  DataLoaderPlan plan = TuneDataLoader(p, {.cores = 2, .memory_bytes = uint64_t(64) << 30});
  EXPECT_TRUE(plan.knobs.persistent_workers);
}

TEST(DataLoaderTuner, PinMemoryOffWithoutCuda) {
  DataLoaderProfile p = Profile(2);
  p.settings.pin_memory = true;
  DataLoaderPlan plan = TuneDataLoader(p, {.cores = 2, .memory_bytes = uint64_t(64) << 30});
  EXPECT_FALSE(plan.knobs.pin_memory);
}

TEST(DataLoaderTuner, KwargsAndCodeChange) {
  DataLoaderKnobs k{3, 4, true, false};
  nlohmann::json j = DataLoaderKwargs(k);
  EXPECT_EQ(j["num_workers"], 3);
  EXPECT_EQ(j["prefetch_factor"], 4);
  EXPECT_EQ(DataLoaderCodeChange(k),
            "DataLoader(dataset, ..., num_workers=3, prefetch_factor=4, persistent_workers=True, pin_memory=False)");
  EXPECT_TRUE(DataLoaderKwargs({0, 2, false, false})["prefetch_factor"].is_null());
}

}  // namespace
}  // namespace pipetune::tuner

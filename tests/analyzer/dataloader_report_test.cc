// The one model and the one report on the golden DataLoader traces
// (tests/analyzer/dataloader_golden/, recorded by the Python bootstrap from
// real DataLoaders; see its README): a DataLoader run is stages of the rate
// model, diagnosed, asked what-ifs and reported like a config's run. These
// run where torch is absent; tests/python runs live DataLoaders.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "pipetune/analyzer/dataloader.h"
#include "pipetune/analyzer/report.h"

namespace pipetune::analyzer {
namespace {

using ::testing::HasSubstr;

std::string GoldenPath(const std::string& name) {
  return std::string(PIPETUNE_SOURCE_DIR) + "/tests/analyzer/dataloader_golden/" + name + "/trace";
}

Diagnosis DiagnoseGolden(const std::string& name, const std::vector<std::string>& what_ifs = {}) {
  StatusOr<DataLoaderProfile> run = ReadDataLoaderProfile(GoldenPath(name));
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (!run.ok()) return {};
  DiagnoseOptions options;
  options.what_ifs = what_ifs;
  StatusOr<Diagnosis> d = DiagnoseDataLoader(*run, options);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : Diagnosis{};
}

// The goldens ran on a busy 2-core host, so the bound is wider than the
// benchmark's (bench/pytorch/model_accuracy.py measures the 5%).
void ExpectPredictsWhatRan(const Diagnosis& d) {
  EXPECT_GT(d.measured_throughput, 0);
  EXPECT_GT(d.prediction_ratio, 0.75) << d.summary;
  EXPECT_LT(d.prediction_ratio, 1.33) << d.summary;
}

TEST(DataLoaderReport, ZeroWorkersRunsOnTheConsumersThreadAndBlamesTheInputSide) {
  Diagnosis d = DiagnoseGolden("map_workers0");
  ExpectPredictsWhatRan(d);
  // Per batch of 4: samples cost 4 x 4.5 ms against a 4 ms step.
  EXPECT_EQ(d.bound, models::BoundKind::kConsumer);
  ASSERT_TRUE(d.bottleneck.has_value());
  EXPECT_EQ(*d.bottleneck, "load");
  for (const StageDiagnosis& s : d.stages) {
    if (s.name == "pin_memory") continue;
    EXPECT_EQ(s.runs_on, "consumer") << s.name;
  }
  EXPECT_THAT(d.summary, HasSubstr("num_workers="));
}

TEST(DataLoaderReport, WorkersAreOneGroupAndTheirStagesShareItsBound) {
  Diagnosis d = DiagnoseGolden("map_workers2_fork");
  ExpectPredictsWhatRan(d);
  double group_bound = -1;
  for (const StageDiagnosis& s : d.stages) {
    if (s.runs_on != "workers") continue;
    EXPECT_EQ(s.parallelism, 2) << s.name;
    if (group_bound < 0) group_bound = s.max_throughput;
    EXPECT_DOUBLE_EQ(s.max_throughput, group_bound) << s.name;
  }
  EXPECT_GT(group_bound, 0);
  ASSERT_TRUE(d.dataloader.has_value());
  EXPECT_EQ(d.dataloader->settings.num_workers, 2);
  EXPECT_EQ(d.dataloader->worker_traces, 2);
}

TEST(DataLoaderReport, WhatIfNumWorkersAnswersFromTheSameModel) {
  Diagnosis d = DiagnoseGolden("map_workers0", {"num_workers=2", "num_workers=2,cores=8", "pin_memory=true"});
  ASSERT_EQ(d.what_ifs.size(), 3u);
  // The input side was most of each batch; the golden's epochs are 4 batches,
  // so the workers' start-up every epoch takes much of the gain.
  EXPECT_GT(d.what_ifs[0].speedup, 1.2);
  EXPECT_GE(d.what_ifs[1].throughput, d.what_ifs[0].throughput);
  EXPECT_LE(d.what_ifs[2].speedup, 1.0);  // pinning only adds work (little: the batches are small)
}

TEST(DataLoaderReport, AKnobThePipelineDoesNotHaveIsRefused) {
  StatusOr<DataLoaderProfile> run = ReadDataLoaderProfile(GoldenPath("map_workers0"));
  ASSERT_TRUE(run.ok());
  DiagnoseOptions options;
  options.what_ifs = {"decode.parallelism=2"};
  StatusOr<Diagnosis> d = DiagnoseDataLoader(*run, options);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("no stage \"decode\""));
}

TEST(DataLoaderReport, IterableStreamsAreModelledAndAnUnshardedOneIsCalledOut) {
  ExpectPredictsWhatRan(DiagnoseGolden("iterable_workers0"));
  Diagnosis sharded = DiagnoseGolden("iterable_workers2");
  ExpectPredictsWhatRan(sharded);
  ASSERT_TRUE(sharded.dataloader.has_value());
  EXPECT_TRUE(sharded.dataloader->settings.iterable);
  for (const std::string& note : sharded.dataloader->notes) EXPECT_THAT(note, Not(HasSubstr("not sharded")));
  Diagnosis unsharded = DiagnoseGolden("iterable_workers2_unsharded");
  ASSERT_TRUE(unsharded.dataloader.has_value());
  EXPECT_THAT(::testing::PrintToString(unsharded.dataloader->notes), HasSubstr("not sharded"));
}

TEST(DataLoaderReport, AKilledRunReportsWhatItRecorded) {
  Diagnosis d = DiagnoseGolden("killed");
  EXPECT_FALSE(d.ended_cleanly);
  ASSERT_TRUE(d.dataloader.has_value());
  EXPECT_GT(d.dataloader->batches, 0u);
  EXPECT_GT(d.measured_throughput, 0);
}

TEST(DataLoaderReport, JsonIsTheOneSchemaWithTheDataLoadersSettingsAdded) {
  Diagnosis d = DiagnoseGolden("map_workers2_fork", {"num_workers=4"});
  nlohmann::json j = nlohmann::json::parse(RenderReport(d, ReportFormat::kJson));
  for (const char* key : {"schema_version", "throughput", "predicted_throughput", "bottleneck", "bound",
                          "stall_fraction", "stages", "what_if", "dataloader"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_FALSE(j.contains("limiting_stage"));
  EXPECT_EQ(j["dataloader"]["settings"]["num_workers"], 2);
  EXPECT_EQ(j["stages"][0]["name"], "load");
  EXPECT_EQ(j["stages"][0]["runs_on"], "workers");
  EXPECT_TRUE(j["what_if"][0]["throughput"].is_number());
  for (ReportFormat format : {ReportFormat::kText, ReportFormat::kMarkdown, ReportFormat::kHtml}) {
    std::string text = RenderReport(d, format);
    EXPECT_THAT(text, HasSubstr("num_workers=2"));
    EXPECT_THAT(text, HasSubstr("transform[0]:Spin"));
  }
}

}  // namespace
}  // namespace pipetune::analyzer

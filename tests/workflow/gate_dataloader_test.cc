// The CI gate on a PyTorch DataLoader's runs, made up as the reader would
// measure them: the same verdicts as a config's, its settings as the knobs,
// and its bad inputs (another loader, a missing worker trace).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/workflow/baseline.h"
#include "pipetune/workflow/check.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;
using analyzer::DataLoaderStage;
using analyzer::DataLoaderStageKind;

DataLoaderStage LoaderStage(const std::string& name, DataLoaderStageKind kind, uint64_t count, double cpu) {
  DataLoaderStage s;
  s.name = name;
  s.kind = kind;
  s.count = count;
  s.seconds_each = cpu;
  s.cpu_seconds_each = cpu;
  return s;
}

// One run of a loader with one worker: 96 samples in batches of 8, Scale
// 0.5 ms and Blur `blur_ms` per sample, the consumer stalled on the worker.
analyzer::DataLoaderProfile LoaderRun(double blur_ms, double noise = 1, int workers = 1) {
  analyzer::DataLoaderProfile p;
  p.trace_path = "run.trace";
  p.settings.batch_size = 8;
  p.settings.num_workers = workers;
  p.settings.dataset = "Squares";
  p.host.cores_online = p.host.cores_allowed = 4;
  p.worker_traces = workers;
  p.epochs.push_back({12, 0.02, workers});
  p.sample_stages = {
      LoaderStage("load", DataLoaderStageKind::kLoad, 96, 50e-6 * noise),
      LoaderStage("transform[0]:Scale", DataLoaderStageKind::kTransform, 96, 0.5e-3 * noise),
      LoaderStage("transform[1]:Blur", DataLoaderStageKind::kTransform, 96, blur_ms * 1e-3 * noise)};
  p.collate = LoaderStage("collate", DataLoaderStageKind::kCollate, 12, 0.1e-3 * noise);
  p.transfer = LoaderStage("transfer", DataLoaderStageKind::kTransfer, 12, 0.2e-3 * noise);
  p.pin_memory.name = "pin_memory";
  p.pin_memory.kind = DataLoaderStageKind::kPinMemory;
  p.step = LoaderStage("training step", DataLoaderStageKind::kStep, 12, 1e-3);
  p.batches = 12;
  double per_batch = 8 * (50e-6 + 0.5e-3 + blur_ms * 1e-3) * noise + 0.1e-3;
  p.step_seconds = 12 * 1e-3;
  p.wait_seconds = 12 * per_batch;
  return p;
}

std::vector<RunRecord> LoaderRecords(double blur_ms) {
  std::vector<RunRecord> runs;
  for (double n : {1.0, 1.01, 0.99, 1.005, 0.995})
    runs.push_back(RecordOf(analyzer::DataLoaderModelProfile(LoaderRun(blur_ms, n))));
  return runs;
}

Baseline LoaderBaseline() {
  analyzer::DataLoaderProfile run = LoaderRun(2);
  Baseline b;
  b.kind = kDataLoaderBaseline;
  b.model = analyzer::DataLoaderModelProfile(run);
  b.pipeline = b.model.pipeline_name;
  b.dataloader = DataLoaderGateSettingsOf(run.settings, analyzer::DataLoaderModelProfile(run));
  b.stages = DataLoaderStagesOf(b.model);
  b.identity = DataLoaderIdentityHash(*b.dataloader, b.stages);
  b.runs = LoaderRecords(2);
  b.command = {"python3", "train.py"};
  return b;
}

// What the gate judges now: a DataLoader's settings, the profile they are
// priced on (null: not priced), its runs and stages, when given.
MeasuredRuns LoaderNow(const DataLoaderGateSettings& settings, const models::Profile* profile,
                       const std::vector<RunRecord>* runs, const std::vector<StageKnobs>& stages = {}) {
  MeasuredRuns now;
  now.dataloader = settings;
  if (profile != nullptr) now.first_profile = *profile;
  if (runs != nullptr) now.runs = *runs;
  now.stages = stages;
  return now;
}

const StageCheck* FindStage(const CheckReport& report, const std::string& name) {
  for (const StageCheck& s : report.stages) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(GateDataLoaderTest, UnchangedLoaderPasses) {
  Baseline b = LoaderBaseline();
  std::vector<RunRecord> runs = LoaderRecords(2);
  models::Profile now = analyzer::DataLoaderModelProfile(LoaderRun(2));
  CheckReport report = Judge(b, LoaderNow(*b.dataloader, &now, &runs), {});
  EXPECT_EQ(report.verdict, Verdict::kPass) << FormatCheckText(report);
  EXPECT_TRUE(report.knobs.empty());
}

TEST(GateDataLoaderTest, ATransformFourTimesSlowerFailsNamingIt) {
  Baseline b = LoaderBaseline();
  std::vector<RunRecord> runs = LoaderRecords(8);
  models::Profile now = analyzer::DataLoaderModelProfile(LoaderRun(8));
  CheckReport report = Judge(b, LoaderNow(*b.dataloader, &now, &runs), {});
  EXPECT_EQ(report.verdict, Verdict::kRegression);
  EXPECT_TRUE(FindStage(report, "transform[1]:Blur")->regressed);
  EXPECT_FALSE(FindStage(report, "transform[0]:Scale")->regressed);
  EXPECT_TRUE(report.throughput_regressed);
  EXPECT_NE(FormatCheckText(report).find("REGRESSION: stage transform[1]:Blur costs"), std::string::npos);
  // The stage the run did not have is not judged (its cost is an estimate).
  EXPECT_FALSE(FindStage(report, "pin_memory")->judged);
}

TEST(GateDataLoaderTest, FewerWorkersIsASettingsChangePricedByTheModel) {
  Baseline b = LoaderBaseline();
  b.dataloader->knobs["num_workers"] = 3;  // the baseline ran 3 workers; now 1
  analyzer::DataLoaderProfile run = LoaderRun(2);
  models::Profile now = analyzer::DataLoaderModelProfile(run);
  CheckReport report = Judge(b, LoaderNow(DataLoaderGateSettingsOf(run.settings, now), &now, nullptr), {});
  ASSERT_EQ(report.knobs.size(), 1u);
  EXPECT_EQ(report.knobs[0].knob, "num_workers");
  EXPECT_EQ(report.knobs[0].baseline, "3");
  EXPECT_EQ(report.knobs[0].now, "1");
  ASSERT_TRUE(report.knobs[0].predicted_change.has_value());
  EXPECT_LT(*report.knobs[0].predicted_change, -0.3);
  EXPECT_TRUE(report.config_regressed);
  EXPECT_EQ(report.verdict, Verdict::kRegression);
}

TEST(GateDataLoaderTest, EveryStageSlowerByOneFactorIsTheMachine) {
  Baseline b = LoaderBaseline();
  std::vector<RunRecord> runs;
  for (double n : {1.3, 1.31, 1.29, 1.305, 1.295})
    runs.push_back(RecordOf(analyzer::DataLoaderModelProfile(LoaderRun(2, n))));
  CheckReport report = Judge(b, LoaderNow(*b.dataloader, nullptr, &runs), {});
  EXPECT_EQ(report.verdict, Verdict::kMachine) << FormatCheckText(report);
  EXPECT_EQ(OutcomeOf(report, false), CheckOutcome::kPassed);
}

TEST(GateDataLoaderTest, BaselineRoundTripsThroughJsonWithItsSettingsAndCommand) {
  Baseline b = LoaderBaseline();
  Json j = BaselineToJson(b);
  EXPECT_EQ(j["kind"], "dataloader");
  StatusOr<Baseline> back = ParseBaseline(j.dump(2), "b.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->kind, kDataLoaderBaseline);
  ASSERT_TRUE(back->dataloader.has_value());
  EXPECT_EQ(back->dataloader->batch_size, 8);
  EXPECT_EQ(back->dataloader->dataset, "Squares");
  EXPECT_TRUE(back->dataloader->knobs == b.dataloader->knobs);
  EXPECT_EQ(back->command, b.command);
  std::vector<RunRecord> runs = LoaderRecords(2);
  EXPECT_EQ(Judge(*back, LoaderNow(*b.dataloader, nullptr, &runs), {}).verdict, Verdict::kPass);

  j["dataloader"]["pin_memory"] = "yes";
  StatusOr<Baseline> bad = ParseBaseline(j.dump(), "b.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dataloader.pin_memory"), std::string::npos);
  // A kind no adapter has is refused with the kinds this pipetune reads.
  j["kind"] = "graph";
  StatusOr<Baseline> unknown = ParseBaseline(j.dump(), "b.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(
      unknown.status().message().find(
          "b.json: baseline key \"kind\": expected \"config\", \"dataloader\" or \"tfdata\", got \"graph\""),
      std::string::npos)
      << unknown.status().message();
}

TEST(GateDataLoaderTest, AnotherLoaderIsRefused) {
  Baseline b = LoaderBaseline();
  DataLoaderGateSettings other = *b.dataloader;
  other.batch_size = 16;
  Status batch = SameRun(b, LoaderNow(other, nullptr, nullptr, b.stages), "base.json");
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.message().find("its batch_size is 8, this run's 16"), std::string::npos);
  std::vector<StageKnobs> stages = b.stages;
  stages[2].name = "transform[1]:Sharpen";
  Status renamed = SameRun(b, LoaderNow(*b.dataloader, nullptr, nullptr, stages), "base.json");
  ASSERT_FALSE(renamed.ok());
  // Which stage differs, as for a config (one comparison for both).
  EXPECT_NE(renamed.message().find("stage #3 is"), std::string::npos) << renamed.message();
  EXPECT_NE(renamed.message().find("\"transform[1]:Sharpen\" in this run"), std::string::npos);
  // Knobs are not identity.
  DataLoaderGateSettings tuned = *b.dataloader;
  tuned.knobs["num_workers"] = 4;
  EXPECT_TRUE(SameRun(b, LoaderNow(tuned, nullptr, nullptr, b.stages), "base.json").ok());
  EXPECT_EQ(DataLoaderIdentityHash(tuned, b.stages), b.identity);
}

TEST(GateDataLoaderTest, AMissingWorkerTraceIsNamed) {
  analyzer::DataLoaderProfile run = LoaderRun(2, 1, 2);
  EXPECT_TRUE(CheckWorkerTraces(run).ok());
  run.epochs.push_back({12, 0.02, 2});  // two epochs, not persistent: 4 workers
  run.worker_traces = 3;
  Status missing = CheckWorkerTraces(run);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("run.trace: 1 of the 4 worker traces expected"), std::string::npos)
      << missing.message();
  run.settings.persistent_workers = true;  // started once
  EXPECT_TRUE(CheckWorkerTraces(run).ok());
  EXPECT_TRUE(CheckWorkerTraces(LoaderRun(2, 1, 0)).ok());
}

TEST(GateDataLoaderTest, ArgumentsAreAConfigTracesOrAProgram) {
  fs::path dir = fs::temp_directory_path() / ("gate_dl_test." + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string trace = (dir / "run.trace").string();
  std::ofstream(trace) << "x";
  EXPECT_EQ(ClassifyGateInputs({"pipeline.json"}), GateInputKind::kConfig);
  EXPECT_EQ(ClassifyGateInputs({trace, trace}), GateInputKind::kTraces);
  EXPECT_EQ(ClassifyGateInputs({"python3", "train.py"}), GateInputKind::kCommand);
  EXPECT_EQ(ClassifyGateInputs({"/bin/sh", "-c", "true"}), GateInputKind::kCommand);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetune::workflow

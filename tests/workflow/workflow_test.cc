// The workflow's operations as a user meets them through any entry point:
// exit codes, a traced run that `tune` can find its config from, the tuned
// config's destination and diff, and the refusals.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "jpeg_files.h"
#include "pipetune/workflow/exit_code.h"
#include "pipetune/workflow/report.h"
#include "pipetune/workflow/run.h"
#include "pipetune/workflow/tune.h"
#include "test_dir.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class WorkflowTest : public test_support::TestDir {
 protected:
  // Runs the config file traced for `seconds` into NAME.ptrace beside it and
  // returns the trace's path; a failed run fails the test.
  std::string RunTraced(const std::string& config, double seconds) {
    RunConfigOptions run;
    run.seconds = seconds;
    run.trace_path =
        (fs::path(config).parent_path() / (fs::path(config).stem().string() + ".ptrace")).string();
    StatusOr<runtime::RunSummary> summary = RunConfigFile(config, run);
    EXPECT_TRUE(summary.ok()) << summary.status().message();
    EXPECT_TRUE(summary.ok() && summary->outputs > 0) << "the run delivered nothing";
    return run.trace_path;
  }
};

// True when the unified diff adds a line (not the "+++" header) holding `text`.
bool HasAddedLineWith(const std::string& diff, const std::string& text) {
  size_t begin = 0;
  while (begin < diff.size()) {
    size_t end = diff.find('\n', begin);
    if (end == std::string::npos) end = diff.size();
    std::string line = diff.substr(begin, end - begin);
    if (line.rfind("+", 0) == 0 && line.rfind("+++", 0) != 0 && line.find(text) != std::string::npos)
      return true;
    begin = end + 1;
  }
  return false;
}

// One CPU-heavy map behind a source: parallelism 1 of 2 cores, so the plan
// raises it.
constexpr const char* kUnderTuned = R"({"name": "under", "resources": {"cores": 2, "memory": "256MiB"},
  "stages": [
    {"name": "src", "op": "range"},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 400}, "parallelism": 1}]})";

TEST(ExitCodes, OkCheckFailedAndBadInputAreZeroOneTwo) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), 0);
  EXPECT_EQ(ExitCodeFor(InvalidInput("bad key")), 2);
  EXPECT_EQ(ExitCodeFor(NotFound("no such file")), 2);
  EXPECT_EQ(ExitCodeFor(Failed("decode failed on element 3")), 2);
  EXPECT_EQ(ExitCodeFor(CheckOutcome::kPassed), 0);
  EXPECT_EQ(ExitCodeFor(CheckOutcome::kFailed), 1);
  EXPECT_EQ(RunExitCode(true, SIGINT), 130);
  EXPECT_EQ(RunExitCode(false, 0), 0);
}

TEST(TunedConfigPath, BesideTheConfigUnlessToldOtherwise) {
  EXPECT_EQ(TunedConfigPath("", "/data/pipes/image.json", "image_train"), "/data/pipes/image.tuned.json");
  EXPECT_EQ(TunedConfigPath("", "", "image_train"), "image_train.tuned.json");
  EXPECT_EQ(TunedConfigPath("out/t.json", "/data/pipes/image.json", "image_train"), "out/t.json");
}

TEST_F(WorkflowTest, TracedRunRecordsTheConfigSoTuneWritesBesideIt) {
  const std::string trace = RunTraced(Write("under.json", kUnderTuned), 1.0);
  ASSERT_TRUE(fs::exists(trace));

  TuneRequest request;
  request.traces = {trace};
  request.diff = true;
  StatusOr<TuneResult> result = Tune(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_TRUE(result->config.has_value());
  EXPECT_EQ(fs::path(result->config->path), fs::path(Path("under.tuned.json")));
  // The tuned config loads again, and the diff shows the raised parallelism.
  StatusOr<models::PipelineConfig> tuned = models::LoadConfig(result->config->path);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_GT(tuned->stages[*tuned->FindStage("work")].parallelism, 1);
  ASSERT_TRUE(result->config->diff.has_value());
  EXPECT_TRUE(HasAddedLineWith(*result->config->diff, "\"parallelism\"")) << *result->config->diff;
  Json json = TuneResultToJson(*result);
  EXPECT_EQ(json["config_path"], result->config->path);
  EXPECT_TRUE(json.contains("diff"));
  EXPECT_GT(json["predicted_throughput"].get<double>(), 0);
}

TEST_F(WorkflowTest, RelativePathsStillNameTheSameFilesWhenWrittenElsewhere) {
  fs::create_directories(dir_ / "data");
  for (int i = 0; i < 4; ++i) Write("data/f" + std::to_string(i) + ".bin", std::string(1000, 'x'));
  std::string config = Write("files.json", R"({"name": "files", "resources": {"cores": 2, "memory": "64MiB"},
    "stages": [
      {"name": "files", "op": "list_files", "args": {"pattern": "data/*.bin"}},
      {"name": "read", "op": "read_file"},
      {"name": "again", "op": "repeat"}]})");
  const std::string trace = RunTraced(config, 0.8);
  fs::create_directories(dir_ / "elsewhere");
  TuneRequest request;
  request.traces = {trace};
  request.output = Path("elsewhere/files.tuned.json");
  StatusOr<TuneResult> result = Tune(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  StatusOr<models::PipelineConfig> tuned = models::LoadConfig(request.output);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_EQ(tuned->stages[0].args["pattern"], "../data/*.bin");
}

TEST_F(WorkflowTest, AConfigWhereATraceBelongsIsRefusedWithAHint) {
  std::string config = Write("under.json", kUnderTuned);
  StatusOr<TracedRun> profile = CollectProfile({config});
  ASSERT_FALSE(profile.ok());
  EXPECT_EQ(ExitCodeFor(profile.status()), 2);
  EXPECT_NE(profile.status().message().find("is a pipeline config, not a trace"), std::string::npos);
  EXPECT_NE(profile.status().message().find("--verify"), std::string::npos);
}

TEST_F(WorkflowTest, AMissingTraceIsNamed) {
  StatusOr<TracedRun> profile = CollectProfile({Path("nothing.ptrace")});
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(profile.status().message().find("nothing.ptrace"), std::string::npos);
}

TEST_F(WorkflowTest, BadBudgetsNameTheFlag) {
  StatusOr<tuner::BudgetFlags> budgets = ParseBudgets(std::nullopt, "lots", std::nullopt, "");
  ASSERT_FALSE(budgets.ok());
  EXPECT_NE(budgets.status().message().find("--memory"), std::string::npos);
  EXPECT_FALSE(ParseBudgets(std::nullopt, "0", std::nullopt, "").ok());
  StatusOr<tuner::BudgetFlags> ok = ParseBudgets(2.0, "1GiB", 8, "");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok->memory_bytes, 1ull << 30);
}

// Decode then random-resized crop of files on disk: `tune` prices the fusion
// of the two with the decode's split measured on the pipeline's own files
// (this CPU, these files), and the report says which it used. Without the
// files (a trace read elsewhere) the split is assumed, and said so. The take
// after the repeat keeps every cache out (an epoch then has no fixed
// content), so that the fusion is what the plan chooses.
constexpr const char* kDecodeCrop = R"({"name": "decode_crop", "resources": {"cores": 2, "memory": "1GiB"},
  "stages": [
    {"name": "files", "op": "list_files", "args": {"pattern": "images/*.jpg"}},
    {"name": "repeat", "op": "repeat"},
    {"name": "limit", "op": "take", "args": {"count": 100000000}},
    {"name": "read", "op": "read_file", "parallelism": 1},
    {"name": "decode", "op": "map", "fn": "jpeg_decode", "parallelism": 1},
    {"name": "augment", "op": "map", "fn": "random_crop_flip", "args": {"size": 64}, "parallelism": 1,
     "random": true},
    {"name": "batch", "op": "batch", "args": {"size": 4}}]})";

TEST_F(WorkflowTest, FusionIsPricedWithTheDecodeSplitMeasuredOnThePipelinesFiles) {
  fs::create_directories(dir_ / "images");
  for (uint32_t i = 0; i < 5; ++i) {
    jpeg_files::WriteJpegFile(Path("images/" + std::to_string(i) + ".jpg"), 240, 180,
                              jpeg_files::NoisePixels(i));
  }
  const std::string trace = RunTraced(Write("decode_crop.json", kDecodeCrop), 1.0);

  StatusOr<TracedRun> traced = CollectProfile({trace});
  ASSERT_TRUE(traced.ok()) << traced.status().message();
  ASSERT_TRUE(traced->input.profile.jpeg_entropy.has_value());
  EXPECT_EQ(traced->input.profile.jpeg_entropy->files, 5);
  EXPECT_GT(traced->input.profile.jpeg_entropy->share, 0.0);
  EXPECT_LE(traced->input.profile.jpeg_entropy->share, 1.0);
  TuneRequest tune;
  tune.traces = {trace};
  tune.output = Path("decode_crop.tuned.json");
  tune.handoff_ns = 8000;  // decode and augment are adjacent maps: not the probe's figure of the day
  StatusOr<TuneResult> tuned = Tune(tune);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  ASSERT_EQ(tuned->plan.rewrites.size(), 1u);  // noise-filled images: decoding is nearly all the CPU
  bool said = false;
  for (const std::string& note : tuned->plan.notes)
    said |= note.find("measured on 5 of the pipeline's files") != std::string::npos;
  EXPECT_TRUE(said) << "the plan's notes do not say how the fused stage was priced";
  ReportRequest report;
  report.traces = {trace};
  StatusOr<ReportResult> measured = Report(report);
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  EXPECT_NE(measured->text.find("the decode's split measured on this host"), std::string::npos)
      << measured->text;

  fs::remove_all(dir_ / "images");
  traced = CollectProfile({trace});
  ASSERT_TRUE(traced.ok()) << traced.status().message();
  EXPECT_FALSE(traced->input.profile.jpeg_entropy.has_value());
  StatusOr<ReportResult> assumed = Report(report);
  ASSERT_TRUE(assumed.ok()) << assumed.status().message();
  EXPECT_NE(assumed->text.find("the decode's split assumed"), std::string::npos) << assumed->text;
}

}  // namespace
}  // namespace pipetune::workflow

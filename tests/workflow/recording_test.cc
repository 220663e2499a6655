// One path for every trace (workflow/recording.h, tune.h): a DataLoader's
// trace and a config's go through the same calls, and what a user gets
// back (the plan, what was written, its JSON) comes out of those calls, so
// no caller has to ask which kind of trace it holds.
#include "pipetune/workflow/recording.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "pipetune/base/files.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kDataLoaderTrace =
    std::string(PIPETUNE_SOURCE_DIR) + "/tests/analyzer/dataloader_golden/map_workers0/trace";
const std::string kConfigTrace = std::string(PIPETUNE_SOURCE_DIR) + "/tests/cli/golden/two_stage_cpu.trace";

TEST(RecordingTest, TheKindIsReadFromTheFirstTracesHeader) {
  EXPECT_EQ(OpenRecording({kDataLoaderTrace}).kind(), "dataloader");
  EXPECT_EQ(OpenRecording({kConfigTrace}).kind(), "config");
  // No traces (the gate runs the config itself), or one that cannot be read
  // (the reader refuses it by name later): a pipeline's.
  EXPECT_EQ(OpenRecording({}).kind(), "config");
  EXPECT_EQ(OpenRecording({"/nonexistent/run.trace"}).kind(), "config");
}

TEST(RecordingTest, TuneTakesADataLoadersTraceAndWritesItsKeywordArguments) {
  const fs::path dir = fs::temp_directory_path() / ("pipetune_recording_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  TuneRequest request;
  request.traces = {kDataLoaderTrace};
  request.budgets.cores = 2;
  request.budgets.memory_bytes = uint64_t{1} << 30;
  request.output = (dir / "kwargs.json").string();
  StatusOr<TuneResult> result = Tune(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_TRUE(result->dataloader.has_value());
  EXPECT_FALSE(result->config.has_value());
  EXPECT_GT(result->plan.predicted_throughput, 0);

  // The JSON `tune --format json` prints names the file written and holds
  // what it holds, in the order the DataLoader's signature has them.
  Json printed = TuneResultToJson(*result);
  StatusOr<std::string> written = ReadFile(request.output);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(printed["output"], request.output);
  EXPECT_EQ(printed["dataloader_kwargs"], Json::parse(*written));
  EXPECT_EQ(printed["dataloader_kwargs"].begin().key(), "num_workers");
  EXPECT_THAT(printed["code_change"].get<std::string>(), HasSubstr("DataLoader("));
  EXPECT_THAT(FormatTuneResult(*result), HasSubstr("DataLoader keyword arguments: " + request.output));

  // A DataLoader's run is tuned alone, whatever comes after it.
  request.traces = {kDataLoaderTrace, kConfigTrace};
  StatusOr<TuneResult> two = Tune(request);
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(two.status().message(), HasSubstr(kDataLoaderTrace + ": a DataLoader's trace is tuned alone"));
  fs::remove_all(dir);
}

TEST(RecordingTest, AMissingFileIsNotFoundWhereverItIsRead) {
  StatusOr<std::string> missing = ReadFile("/nonexistent/base.json", "the baseline");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/base.json: cannot read the baseline: "));
}

}  // namespace
}  // namespace pipetune::workflow

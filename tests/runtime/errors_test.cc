// Failing element functions and bad configs: counted and skipped, or the run
// stops promptly with an error naming stage and element; never a hang.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace pipetune::runtime::test {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

BuildOptions ErrorsOptions() {
  BuildOptions options;
  options.registry = &TestRegistry();
  return options;
}

class OnErrorTest : public ::testing::TestWithParam<int> {};

TEST_P(OnErrorTest, SkipCountsFailuresAndDeliversTheRest) {
  auto config = RangeThen(1000, fmt::format(R"(
      {{"name": "flaky", "op": "map", "fn": "fail", "args": {{"every": 10, "at": 3}},
        "parallelism": {}, "on_error": "skip"}},
      {{"name": "batch", "op": "batch", "args": {{"size": 9}}}})",
                                            GetParam()));
  Outputs out = Drain(config, ErrorsOptions());
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  auto histogram = Histogram(out.elements);
  EXPECT_EQ(histogram.size(), 900u);
  for (const auto& [leaf, n] : histogram) {
    EXPECT_NE(leaf.second % 10, 3u);
    EXPECT_EQ(n, 1);
  }
  EXPECT_EQ(out.stages[1].failed, 100u);
  EXPECT_EQ(out.stages[1].consumed, 1000u);
  EXPECT_EQ(out.stages[1].elements, 900u);
}

TEST_P(OnErrorTest, StopReturnsFailedNamingStageAndElement) {
  auto config = RangeThen(1000, fmt::format(R"(
      {{"name": "flaky", "op": "map", "fn": "fail", "args": {{"every": 1000, "at": 417}},
        "parallelism": {}}})",
                                            GetParam()));
  Outputs out = Drain(config, ErrorsOptions());
  ASSERT_FALSE(out.status.ok());
  EXPECT_EQ(out.status.code(), StatusCode::kFailed);
  EXPECT_THAT(out.status.message(), HasSubstr("stage \"flaky\""));
  EXPECT_THAT(out.status.message(), HasSubstr("element 417"));
  EXPECT_THAT(out.status.message(), HasSubstr("injected failure"));
}

TEST_P(OnErrorTest, StopWithFullBuffersAndSlowConsumerIsPrompt) {
  // An endless source, every buffer full (the consumer is slow), and the
  // failure deep in the stream: RunPipeline returns soon after it happens.
  auto config = Config(fmt::format(R"({{"name": "t", "stages": [
      {{"name": "src", "op": "range"}},
      {{"name": "work", "op": "map", "fn": "cpu_work", "args": {{"us": 1}}, "parallelism": {0}}},
      {{"name": "flaky", "op": "map", "fn": "fail", "args": {{"every": 1000000, "at": 1500}}, "parallelism": {0}}},
      {{"name": "prefetch", "op": "prefetch", "buffer": 50}}],
      "consumer": {{"step_time_ms": 0.5}}}})",
                                   GetParam()));
  RunOptions options;
  options.registry = &TestRegistry();
  options.max_seconds = 60;
  auto summary = RunPipeline(config, options);
  auto returned = Clock::now().time_since_epoch().count();
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kFailed);
  EXPECT_THAT(summary.status().message(), HasSubstr("element 1500"));
  EXPECT_LT(returned - LastFailureNs().load(), int64_t{1'000'000'000}) << "took more than 1 s to stop";
}

INSTANTIATE_TEST_SUITE_P(Parallelism, OnErrorTest, ::testing::Values(1, 2, 8, 32));

TEST(OnErrorTest, FilterFailuresFollowOnError) {
  auto skip = RangeThen(100, R"({"name": "f", "op": "filter", "fn": "fail_filter",
                                 "args": {"every": 4, "at": 0}, "on_error": "skip"})");
  Outputs out = Drain(skip, ErrorsOptions());
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(out.elements.size(), 75u);
  EXPECT_EQ(out.stages[1].failed, 25u);

  auto stop = RangeThen(100, R"({"name": "f", "op": "filter", "fn": "fail_filter",
                                 "args": {"every": 100, "at": 50}})");
  Outputs stopped = Drain(stop, ErrorsOptions());
  EXPECT_EQ(stopped.status.code(), StatusCode::kFailed);
  EXPECT_THAT(stopped.status.message(), HasSubstr("element 50"));
}

TEST(OnErrorTest, AFunctionThatThrowsFailsItsElementNotTheProcess) {
  auto config = RangeThen(100, R"({"name": "thrower", "op": "map", "fn": "throw",
                                   "args": {"every": 10, "at": 1}, "parallelism": 4, "on_error": "skip"})");
  Outputs out = Drain(config, ErrorsOptions());
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.elements.size(), 90u);
  EXPECT_EQ(out.stages[1].failed, 10u);

  config.stages[1].on_error = models::OnError::kStop;
  Outputs stopped = Drain(config, ErrorsOptions());
  EXPECT_EQ(stopped.status.code(), StatusCode::kFailed);
  EXPECT_THAT(stopped.status.message(), HasSubstr("thrown on purpose"));
}

TEST(OnErrorTest, MissingFileIsAnElementFailureNamingThePath) {
  std::string dir = TempDir("data");
  for (int i = 0; i < 10; ++i) std::ofstream(fmt::format("{}/f{}.bin", dir, i)) << i;
  auto config = Config(fmt::format(R"({{"name": "t", "stages": [
      {{"name": "files", "op": "list_files", "args": {{"pattern": "{}/*.bin"}}}},
      {{"name": "read", "op": "read_file", "parallelism": 2, "on_error": "skip"}}]}})",
                                   dir));
  auto pipeline = Pipeline::Create(config);
  ASSERT_TRUE(pipeline.ok());
  std::filesystem::remove(dir + "/f3.bin");  // listed, then gone
  std::vector<Element> outputs;
  Element element;
  while (*(*pipeline)->Next(&element)) outputs.push_back(element);
  EXPECT_EQ(outputs.size(), 9u);
  EXPECT_EQ((*pipeline)->FailedElements(), 1u);
  ASSERT_EQ((*pipeline)->Errors().size(), 1u);
  EXPECT_THAT((*pipeline)->Errors()[0], HasSubstr("f3.bin"));
  EXPECT_THAT((*pipeline)->Errors()[0], HasSubstr("stage \"read\""));
}

TEST(ConfigErrorTest, UnknownFunctionListsTheKnownOnes) {
  auto config = RangeThen(10, R"({"name": "decode", "op": "map", "fn": "jpeg_decoder"})");
  auto pipeline = Pipeline::Create(config);
  ASSERT_FALSE(pipeline.ok());
  EXPECT_EQ(pipeline.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(pipeline.status().message(), HasSubstr("stage \"decode\""));
  EXPECT_THAT(pipeline.status().message(), HasSubstr("key \"fn\""));
  EXPECT_THAT(pipeline.status().message(), HasSubstr("cpu_work"));
  EXPECT_THAT(pipeline.status().message(), HasSubstr("jpeg_decode"));
}

TEST(ConfigErrorTest, FilterFunctionUsedAsMapSaysSo) {
  auto pipeline =
      Pipeline::Create(RangeThen(10, R"({"name": "m", "op": "map", "fn": "keep_every", "args": {"n": 2}})"));
  ASSERT_FALSE(pipeline.ok());
  EXPECT_THAT(pipeline.status().message(), HasSubstr("filter function"));
}

TEST(ConfigErrorTest, BadFunctionArgsNameStageAndKey) {
  auto missing = Pipeline::Create(RangeThen(10, R"({"name": "burn", "op": "map", "fn": "cpu_work"})"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("stage \"burn\""));
  EXPECT_THAT(missing.status().message(), HasSubstr("args.us"));

  auto wrong = Pipeline::Create(
      RangeThen(10, R"({"name": "wait", "op": "map", "fn": "io_wait", "args": {"ms": "slow"}})"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("args.ms"));

  auto jitter = Pipeline::Create(
      RangeThen(10, R"({"name": "burn", "op": "map", "fn": "cpu_work", "args": {"us": 1, "jitter": 3}})"));
  ASSERT_FALSE(jitter.ok());
  EXPECT_THAT(jitter.status().message(), HasSubstr("args.jitter"));
}

TEST(ConfigErrorTest, FunctionBuildErrorsNameTheConfigSource) {
  auto config = models::ParseConfig(R"({"name": "t", "stages": [
      {"name": "src", "op": "range", "args": {"count": 10}},
      {"name": "burn", "op": "map", "fn": "cpu_work", "args": {"us": -1}}]})",
                                    "dir/pipeline.json");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->source, "dir/pipeline.json");
  auto pipeline = Pipeline::Create(*config);
  ASSERT_FALSE(pipeline.ok());
  EXPECT_THAT(pipeline.status().message(),
              HasSubstr("dir/pipeline.json: stage \"burn\" (#2): key \"args.us\": expected a number >= 0"));
}

TEST(ConfigErrorTest, AbsurdParallelismIsRejected) {
  auto config = RangeThen(10, R"({"name": "m", "op": "map", "fn": "cpu_work", "args": {"us": 1}})");
  config.stages[1].parallelism = 100000;  // as a program might set it
  auto pipeline = Pipeline::Create(config);
  ASSERT_FALSE(pipeline.ok());
  EXPECT_THAT(pipeline.status().message(), HasSubstr("key \"parallelism\""));
}

TEST(ConfigErrorTest, StructurallyInvalidConfigIsRejectedBeforeRunning) {
  models::PipelineConfig config =
      RangeThen(10, R"({"name": "m", "op": "map", "fn": "cpu_work", "args": {"us": 1}})");
  config.stages[1].parallelism = 0;
  auto summary = RunPipeline(config);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(summary.status().message(), HasSubstr("parallelism"));
}

}  // namespace
}  // namespace pipetune::runtime::test

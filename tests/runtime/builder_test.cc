// PipelineBuilder: the config it builds equals its JSON twin; custom callables
// run; errors name the stage and key.
#include "pipetune/runtime/builder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace pipetune::runtime {
namespace {

using models::PipelineConfig;

// Typed equality: what the tracer, analyzer and tuner read.
void ExpectSameConfig(const PipelineConfig& a, const PipelineConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.resources.cores, b.resources.cores);
  EXPECT_EQ(a.resources.memory_bytes, b.resources.memory_bytes);
  EXPECT_EQ(a.resources.storage_bytes_per_second, b.resources.storage_bytes_per_second);
  EXPECT_EQ(a.consumer.step_time_ms, b.consumer.step_time_ms);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t i = 0; i < a.stages.size(); ++i) {
    const models::StageConfig& x = a.stages[i];
    const models::StageConfig& y = b.stages[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.fn, y.fn);
    EXPECT_EQ(x.args, y.args);
    EXPECT_EQ(x.parallelism, y.parallelism);
    EXPECT_EQ(x.buffer, y.buffer);
    EXPECT_EQ(x.location, y.location);
    EXPECT_EQ(x.random, y.random);
    EXPECT_EQ(x.on_error, y.on_error);
  }
}

TEST(BuilderTest, ImagePipelineEqualsItsJsonTwin) {
  PipelineBuilder b("image_train");
  b.Cores(2).Memory("4GiB").StepTimeMs(20);
  b.ListFiles("files", "data/*.jpg").Arg("shuffle_seed", 7);
  b.Repeat("repeat");
  b.ReadFile("read").Parallelism(1);
  b.Map("decode", "jpeg_decode").Parallelism(1);
  b.Map("augment", "random_crop_flip").Arg("size", 224).Parallelism(1).Random();
  b.Map("normalize", "normalize").Parallelism(1);
  b.Batch("batch", 64);
  b.Prefetch("prefetch").Buffer(1);
  StatusOr<PipelineConfig> built = b.Config();
  ASSERT_TRUE(built.ok()) << built.status().message();
  StatusOr<PipelineConfig> twin = models::LoadConfig(PIPETUNE_SOURCE_DIR "/examples/image/image_train.json");
  ASSERT_TRUE(twin.ok()) << twin.status().message();
  ExpectSameConfig(*built, *twin);
}

TEST(BuilderTest, EveryKnobAndOpAsJson) {
  PipelineBuilder b("all");
  b.Range("source", 100);
  b.Map("work", "cpu_work").Arg("us", 10).Parallelism(3).OnError(models::OnError::kSkip);
  b.Filter("keep", "keep_every").Arg("n", 2);
  b.Cache("cache").Location("memory");
  b.Shuffle("shuffle", 8);
  b.Repeat("repeat", 2);
  b.Take("take", 50);
  b.Batch("batch", 4);
  b.Prefetch("prefetch").Buffer(3);
  StatusOr<std::string> json = b.ToJson();
  ASSERT_TRUE(json.ok()) << json.status().message();
  StatusOr<PipelineConfig> reparsed = models::ParseConfig(*json);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message();
  StatusOr<PipelineConfig> built = b.Config();
  ASSERT_TRUE(built.ok());
  ExpectSameConfig(*built, *reparsed);
  EXPECT_EQ(built->stages[1].parallelism, 3);
  EXPECT_EQ(built->stages[1].on_error, models::OnError::kSkip);
  EXPECT_EQ(built->stages[8].buffer, 3);
  EXPECT_EQ(built->stages[3].location, models::CacheLocation::Memory());
  EXPECT_NE(json->find("\"parallelism\": 3"), std::string::npos) << *json;
}

TEST(BuilderTest, CustomLambdaAndFunctionObjectRun) {
  std::atomic<int> calls{0};
  struct KeepEven {
    bool operator()(const Element& e, const FnContext&) const { return e.id % 2 == 0; }
  };
  PipelineBuilder b("custom");
  b.Range("source", 40);
  b.Map("count", [&calls](Element& e, const FnContext&) {
     ++calls;
     e.path = "seen";
     return Status::Ok();
   }).Parallelism(2);
  b.Filter("even", KeepEven{});
  b.Batch("batch", 4);
  StatusOr<PipelineConfig> config = b.Config();
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->stages[1].fn, "count");  // a custom function is named after its stage
  EXPECT_EQ(config->stages[2].fn, "even");
  uint64_t examples = 0;
  bool all_seen = true;
  RunOptions options;
  options.on_output = [&](const Element& batch) {
    for (const Element& e : batch.items) {
      all_seen = all_seen && e.path == "seen" && e.id % 2 == 0;
      ++examples;
    }
  };
  StatusOr<RunSummary> summary = b.Run(options);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(calls.load(), 40);
  EXPECT_EQ(examples, 20u);
  EXPECT_TRUE(all_seen);
  // The pull API gets the custom functions too.
  StatusOr<std::unique_ptr<Pipeline>> pipeline = b.Build();
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().message();
  Element out;
  StatusOr<bool> next = (*pipeline)->Next(&out);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(*next);
}

TEST(BuilderTest, CustomFunctionErrorNamesTheStage) {
  PipelineBuilder b("failing");
  b.Range("source", 10);
  b.Map("explode", "explode_fn", [](Element&, const FnContext&) { return InvalidInput("boom"); });
  StatusOr<RunSummary> summary = b.Run();
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("explode"), std::string::npos) << summary.status().message();
  EXPECT_NE(summary.status().message().find("boom"), std::string::npos) << summary.status().message();
}

TEST(BuilderTest, ErrorsNameTheStageAndKey) {
  {
    // A name from a Latin-1 source file: refused, never thrown.
    PipelineBuilder b("latin1");
    b.Range("source", 10);
    b.Map(
        "d\xe9"
        "code",
        "cpu_work");
    StatusOr<PipelineConfig> config = b.Config();
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(config.status().message().find("stage #2's name, function or a string argument: not UTF-8"),
              std::string::npos)
        << config.status().message();
    EXPECT_NE(config.status().message().find("invalid UTF-8 byte at index 2"), std::string::npos)
        << config.status().message();
    PipelineBuilder named("caf\xe9");
    named.Range("source", 10);
    EXPECT_NE(named.Config().status().message().find("the builder's pipeline name: not UTF-8"),
              std::string::npos);
  }
  {
    PipelineBuilder b("bad_parallelism");
    b.Range("source", 10);
    b.Map("decode", "cpu_work").Parallelism(0);
    StatusOr<PipelineConfig> config = b.Config();
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("stage \"decode\" (#2)"), std::string::npos)
        << config.status().message();
    EXPECT_NE(config.status().message().find("parallelism"), std::string::npos) << config.status().message();
  }
  {
    PipelineBuilder b("unknown_fn");
    b.Range("source", 10);
    b.Map("decode", "no_such_function");
    StatusOr<RunSummary> run = b.Run();
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.status().message().find("decode"), std::string::npos) << run.status().message();
    EXPECT_NE(run.status().message().find("no_such_function"), std::string::npos) << run.status().message();
  }
  {
    PipelineBuilder b("shadow");
    b.Range("source", 10);
    b.Map("decode", "cpu_work", [](Element&, const FnContext&) { return Status::Ok(); });
    StatusOr<PipelineConfig> config = b.Config();
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("stage \"decode\""), std::string::npos)
        << config.status().message();
    EXPECT_NE(config.status().message().find("built-in"), std::string::npos) << config.status().message();
  }
  {
    PipelineBuilder b("duplicate");
    b.Range("source", 10);
    b.Map("a", "same", [](Element&, const FnContext&) { return Status::Ok(); });
    b.Map("b", "same", [](Element&, const FnContext&) { return Status::Ok(); });
    StatusOr<PipelineConfig> config = b.Config();
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("stage \"b\""), std::string::npos) << config.status().message();
  }
  {
    PipelineBuilder b("bad_location");
    b.Range("source", 10);
    b.Map("decode", "cpu_work").Location("memory");
    StatusOr<PipelineConfig> config = b.Config();
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("stage \"decode\""), std::string::npos)
        << config.status().message();
  }
}

// The examples' programs print the config they build: it equals their JSON
// twins (examples/builder/*.json), which the rewrite tests also hold
// `pipetune-rewrite extract` against.
TEST(BuilderTest, ExamplesEqualTheirJsonTwins) {
  for (const char* example : {"image_builder", "synthetic_builder"}) {
    SCOPED_TRACE(example);
    std::string program = std::string(PIPETUNE_BINARY_DIR "/examples/builder/") + example;
    if (!std::filesystem::exists(program))
      GTEST_SKIP() << program << " not built (PIPETUNE_BUILD_EXAMPLES=OFF)";
    std::string command = program + " --print-config";
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string text;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, n);
    ASSERT_EQ(::pclose(pipe), 0) << text;
    StatusOr<PipelineConfig> printed = models::ParseConfig(text);
    ASSERT_TRUE(printed.ok()) << printed.status().message();
    StatusOr<PipelineConfig> twin =
        models::LoadConfig(std::string(PIPETUNE_SOURCE_DIR "/examples/builder/") + example + ".json");
    ASSERT_TRUE(twin.ok()) << twin.status().message();
    ExpectSameConfig(*printed, *twin);
  }
}

}  // namespace
}  // namespace pipetune::runtime

#include "pipetune/models/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace pipetune::models {
namespace {

using ::testing::HasSubstr;

constexpr const char* kImageConfig = R"({
  "name": "image_train",
  "owner": "vision-team",
  "resources": { "cores": 2, "memory": "4GiB" },
  "stages": [
    { "name": "files",   "op": "list_files", "args": { "pattern": "data/*.jpg", "shuffle_seed": 7 } },
    { "name": "read",    "op": "read_file",  "parallelism": 1 },
    { "name": "decode",  "op": "map", "fn": "jpeg_decode", "parallelism": 1, "note": "keep me" },
    { "name": "augment", "op": "map", "fn": "random_crop_flip", "args": { "size": 224 },
                         "parallelism": 1, "random": true },
    { "name": "batch",   "op": "batch", "args": { "size": 64 } },
    { "name": "prefetch","op": "prefetch", "buffer": 1 }
  ],
  "consumer": { "step_time_ms": 20 }
})";

// Replaces the first occurrence of `from` in the image config.
std::string ImageConfigWith(const std::string& from, const std::string& to) {
  std::string text = kImageConfig;
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

// The error a user sees for `text`; fails the test when the config loads.
std::string ErrorFor(const std::string& text) {
  StatusOr<PipelineConfig> config = ParseConfig(text, "pipeline.json");
  EXPECT_FALSE(config.ok()) << "expected an error for:\n" << text;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidInput);
  return config.status().message();
}

TEST(Config, LoadsTheDesignExample) {
  StatusOr<PipelineConfig> config = ParseConfig(kImageConfig, "pipeline.json");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->name, "image_train");
  ASSERT_EQ(config->stages.size(), 6u);
  EXPECT_EQ(config->stages[2].op, Op::kMap);
  EXPECT_EQ(config->stages[2].fn, "jpeg_decode");
  EXPECT_EQ(config->stages[3].args["size"], 224);
  EXPECT_TRUE(config->stages[3].random);
  EXPECT_EQ(config->stages[5].buffer, 1);
  EXPECT_EQ(config->resources.cores, 2.0);
  EXPECT_EQ(config->resources.memory_bytes, 4ull << 30);
  EXPECT_EQ(config->consumer.step_time_ms, 20.0);
  EXPECT_EQ(config->FirstRandomStage(), 3u);
  EXPECT_EQ(config->FindStage("batch"), 4u);
}

TEST(Config, SavingKeepsUnknownKeysAndKeyOrder) {
  StatusOr<PipelineConfig> config = ParseConfig(kImageConfig);
  ASSERT_TRUE(config.ok());
  Json original = Json::parse(kImageConfig);
  EXPECT_EQ(ToJson(*config), original);
  EXPECT_EQ(ToJson(*config).dump(), original.dump());  // order, not just content
}

TEST(Config, SavingWritesChangedKnobsInPlaceAndInsertedStagesWhole) {
  StatusOr<PipelineConfig> config = ParseConfig(kImageConfig);
  ASSERT_TRUE(config.ok());
  config->stages[2].parallelism = 4;
  config->stages[5].buffer = 8;
  StageConfig cache;
  cache.name = "cache";
  cache.op = Op::kCache;
  cache.location = CacheLocation::Memory();
  config->stages.insert(config->stages.begin() + 3, cache);
  Json saved = ToJson(*config);
  EXPECT_EQ(saved["owner"], "vision-team");
  EXPECT_EQ(saved["stages"][2]["parallelism"], 4);
  EXPECT_EQ(saved["stages"][2]["note"], "keep me");
  EXPECT_EQ(saved["stages"][2].begin().key(), "name");  // edited in place, order kept
  EXPECT_EQ(saved["stages"][3]["op"], "cache");
  EXPECT_EQ(saved["stages"][3]["location"], "memory");
  EXPECT_EQ(saved["stages"][6]["buffer"], 8);
  StatusOr<PipelineConfig> reloaded = ParseConfig(saved.dump());
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().message();
  EXPECT_EQ(reloaded->stages[2].parallelism, 4);
}

TEST(Config, SaveIsAtomicAndRefusesInvalidConfigs) {
  auto dir = std::filesystem::temp_directory_path() / ("pipetune_config_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "tuned.json").string();
  StatusOr<PipelineConfig> config = ParseConfig(kImageConfig);
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(SaveConfig(*config, path).ok());
  std::string before = Serialize(*config);

  config->stages[1].parallelism = 0;  // invalid: the file on disk must stay as it was
  Status status = SaveConfig(*config, path);
  EXPECT_FALSE(status.ok());
  std::ifstream in(path);
  std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, before);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "tuned.json") << "left a temporary file behind";
  }
  std::filesystem::remove_all(dir);
}

TEST(Config, SaveToAMissingDirectoryIsAnIoError) {
  StatusOr<PipelineConfig> config = ParseConfig(kImageConfig);
  ASSERT_TRUE(config.ok());
  Status status = SaveConfig(*config, "/nonexistent-dir/tuned.json");
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent-dir/tuned.json"));
}

TEST(ConfigErrors, NotJsonGivesLineAndColumn) {
  std::string message = ErrorFor("{\n  \"stages\": [\n    { \"name\": oops }\n  ]\n}");
  EXPECT_THAT(message, HasSubstr("pipeline.json: not valid JSON at line 3, column 15"));
}

TEST(ConfigErrors, UnknownOpNamesStageKeyAndChoices) {
  std::string message = ErrorFor(ImageConfigWith("\"op\": \"batch\"", "\"op\": \"bacth\""));
  EXPECT_THAT(message, HasSubstr("stage \"batch\" (#5): key \"op\": expected one of range, list_files"));
  EXPECT_THAT(message, HasSubstr("got \"bacth\""));
}

TEST(ConfigErrors, ParallelismZeroNegativeOrNotAnInteger) {
  for (const char* bad : {"0", "-2", "1.5", "\"4\"", "true"}) {
    std::string message =
        ErrorFor(ImageConfigWith("\"fn\": \"jpeg_decode\", \"parallelism\": 1",
                                 std::string("\"fn\": \"jpeg_decode\", \"parallelism\": ") + bad));
    EXPECT_THAT(message,
                HasSubstr("stage \"decode\" (#3): key \"parallelism\": expected an integer from 1 to 4096"));
    EXPECT_THAT(message, HasSubstr(std::string("got ") + bad));
  }
}

TEST(ConfigErrors, MapWithoutFunction) {
  std::string message = ErrorFor(ImageConfigWith("\"fn\": \"jpeg_decode\", ", ""));
  EXPECT_THAT(message, HasSubstr("stage \"decode\" (#3): key \"fn\": missing"));
}

TEST(ConfigErrors, CacheAtOrAfterARandomStage) {
  std::string message = ErrorFor(ImageConfigWith(
      "{ \"name\": \"batch\"", "{ \"name\": \"cache\", \"op\": \"cache\" },\n    { \"name\": \"batch\""));
  EXPECT_THAT(message, HasSubstr("stage \"cache\" (#5)"));
  EXPECT_THAT(message, HasSubstr("after random stage \"augment\""));
}

TEST(ConfigErrors, CacheAfterAnEndlessSource) {
  std::string message = ErrorFor(R"({"stages": [
      {"name": "numbers", "op": "range"},
      {"name": "cache", "op": "cache", "location": "memory"}]})");
  EXPECT_THAT(message, HasSubstr("stage \"cache\" (#2)"));
  EXPECT_THAT(message, HasSubstr("never finish an epoch"));
}

TEST(ConfigErrors, BatchSizeZeroOrMissing) {
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"size\": 64", "\"size\": 0")),
              HasSubstr("stage \"batch\" (#5): key \"args.size\": expected an integer >= 1, got 0"));
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"args\": { \"size\": 64 }", "\"args\": {}")),
              HasSubstr("stage \"batch\" (#5): key \"args.size\": missing"));
}

TEST(ConfigErrors, MalformedSizes) {
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"4GiB\"", "\"4 gigs\"")),
              HasSubstr("resources: key \"memory\": malformed size \"4 gigs\""));
  EXPECT_THAT(
      ErrorFor(R"({"stages": [{"name": "n", "op": "range", "args": {"count": 3, "bytes": "12QB"}}]})"),
      HasSubstr("stage \"n\" (#1): key \"args.bytes\": malformed size \"12QB\""));
}

TEST(ConfigErrors, EmptyOrMissingStages) {
  EXPECT_THAT(ErrorFor(R"({"name": "x", "stages": []})"), HasSubstr("key \"stages\": empty"));
  EXPECT_THAT(ErrorFor(R"({"name": "x"})"), HasSubstr("key \"stages\": missing"));
  EXPECT_THAT(ErrorFor("[1, 2]"), HasSubstr("expected a JSON object"));
}

TEST(ConfigErrors, DuplicateStageNames) {
  std::string message = ErrorFor(ImageConfigWith("\"name\": \"augment\"", "\"name\": \"decode\""));
  EXPECT_THAT(message, HasSubstr("stage \"decode\" (#4): key \"name\": duplicate"));
}

TEST(ConfigErrors, MisspeltKnobIsAnErrorNotASilentDefault) {
  std::string message = ErrorFor(ImageConfigWith("\"fn\": \"jpeg_decode\", \"parallelism\": 1",
                                                 "\"fn\": \"jpeg_decode\", \"paralellism\": 4"));
  EXPECT_THAT(message, HasSubstr("key \"paralellism\": unknown key; did you mean \"parallelism\"?"));
}

TEST(ConfigErrors, KnobsOnTheWrongOp) {
  EXPECT_THAT(
      ErrorFor(ImageConfigWith("\"op\": \"batch\",", "\"op\": \"batch\", \"parallelism\": 2,")),
      HasSubstr("stage \"batch\" (#5): key \"parallelism\": only map and read_file stages have workers"));
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"op\": \"batch\",", "\"op\": \"batch\", \"buffer\": 2,")),
              HasSubstr("key \"buffer\": only prefetch stages"));
  EXPECT_THAT(
      ErrorFor(ImageConfigWith("\"op\": \"prefetch\", \"buffer\": 1", "\"op\": \"prefetch\", \"buffer\": 0")),
      HasSubstr("stage \"prefetch\" (#6): key \"buffer\": expected an integer >= 1, got 0"));
}

TEST(ConfigErrors, SourcesOnlyFirst) {
  EXPECT_THAT(ErrorFor(R"({"stages": [{"name": "b", "op": "batch", "args": {"size": 2}}]})"),
              HasSubstr("the first stage must be a source"));
  EXPECT_THAT(ErrorFor(R"({"stages": [{"name": "a", "op": "range"}, {"name": "b", "op": "range"}]})"),
              HasSubstr("stage \"b\" (#2): key \"op\": range is a source"));
  EXPECT_THAT(ErrorFor(R"({"stages": [{"name": "a", "op": "range"}, {"name": "r", "op": "read_file"}]})"),
              HasSubstr("read_file reads the paths a list_files source yields"));
}

TEST(ConfigErrors, ConsumerAndResourceValues) {
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"step_time_ms\": 20", "\"step_time_ms\": \"fast\"")),
              HasSubstr("consumer: key \"step_time_ms\": expected a number >= 0, got \"fast\""));
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"step_time_ms\": 20", "\"epoch_start_ms\": -1")),
              HasSubstr("consumer: key \"epoch_start_ms\": expected a number >= 0, got -1"));
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"step_time_ms\": 20", "\"epoch_iterator_ms\": \"soon\"")),
              HasSubstr("consumer: key \"epoch_iterator_ms\": expected a number >= 0, got \"soon\""));
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"cores\": 2", "\"cores\": 0")),
              HasSubstr("resources: key \"cores\": expected a number > 0, got 0"));
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"random\": true", "\"random\": \"yes\"")),
              HasSubstr("stage \"augment\" (#4): key \"random\": expected true or false"));
  EXPECT_THAT(ErrorFor(ImageConfigWith("\"op\": \"batch\",", "\"op\": \"batch\", \"on_error\": \"ignore\",")),
              HasSubstr("key \"on_error\": expected \"stop\" or \"skip\""));
}

TEST(ConfigErrors, MissingFileIsNotFound) {
  StatusOr<PipelineConfig> config = LoadConfig("/no/such/pipeline.json");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("/no/such/pipeline.json"));
}

TEST(ConfigArgs, TypedAccessNamesStageAndKey) {
  StatusOr<PipelineConfig> config = ParseConfig(kImageConfig);
  ASSERT_TRUE(config.ok());
  const StageConfig& augment = config->stages[3];
  EXPECT_EQ(ArgInt(augment, "size", 1)->value(), 224);
  EXPECT_FALSE(ArgInt(augment, "absent", 1)->has_value());
  StatusOr<std::optional<std::string>> wrong = ArgString(augment, "size");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "stage \"augment\" (#4): key \"args.size\": expected a string, got 224");
}

TEST(ConfigPaths, RebasedConfigNamesTheSameFilesFromItsNewDirectory) {
  StatusOr<PipelineConfig> config = ParseConfig(R"({"name": "p", "stages": [
    {"name": "files", "op": "list_files", "args": {"pattern": "data/*.jpg"}},
    {"name": "read", "op": "read_file"},
    {"name": "disk", "op": "cache", "location": "cache/dir"},
    {"name": "mem", "op": "cache", "location": "memory"}]})");
  ASSERT_TRUE(config.ok()) << config.status().message();
  PipelineConfig moved = *config;
  RebaseRelativePaths(moved, "/work/pipes/image", "/work/out");
  EXPECT_EQ(moved.stages[0].args["pattern"], "../pipes/image/data/*.jpg");
  EXPECT_EQ(moved.stages[2].location->directory, "../pipes/image/cache/dir");
  EXPECT_TRUE(moved.stages[3].location->in_memory());
  EXPECT_THAT(Serialize(moved), HasSubstr("\"../pipes/image/data/*.jpg\""));

  PipelineConfig same = *config;
  RebaseRelativePaths(same, "/work/pipes/image/", "/work/pipes/image");
  EXPECT_EQ(same.stages[0].args["pattern"], "data/*.jpg");

  PipelineConfig absolute = *config;
  absolute.stages[0].args["pattern"] = "/data/*.jpg";
  RebaseRelativePaths(absolute, "/a", "/b");
  EXPECT_EQ(absolute.stages[0].args["pattern"], "/data/*.jpg");
}

}  // namespace
}  // namespace pipetune::models

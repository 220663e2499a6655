// Caches: later epochs and later runs replay without running the stages
// before the cache; an incomplete cache is never replayed.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace pipetune::runtime::test {
namespace {

namespace fs = std::filesystem;

models::PipelineConfig DiskCached(uint64_t count, const std::string& dir, const std::string& after = "") {
  return RangeThen(count, fmt::format(R"(
      {{"name": "upstream", "op": "map", "fn": "count", "parallelism": 2}},
      {{"name": "cached", "op": "cache", "location": "{}"}}{})",
                                      dir, after));
}

BuildOptions Options() {
  BuildOptions options;
  options.registry = &TestRegistry();
  return options;
}

void ExpectIds(const Outputs& out, uint64_t count) {
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  auto histogram = Histogram(out.elements);
  ASSERT_EQ(histogram.size(), count);
  for (const auto& [leaf, n] : histogram) EXPECT_EQ(n, 1);
}

TEST(CacheTest, MemoryCacheRunsUpstreamOnceAndCountsItsBytes) {
  CallCount() = 0;
  auto config = RangeThen(100, R"(
      {"name": "upstream", "op": "map", "fn": "count"},
      {"name": "cached", "op": "cache", "location": "memory"},
      {"name": "repeat", "op": "repeat", "args": {"count": 4}})");
  config.stages[0].args["bytes"] = uint64_t{1000};
  Outputs out = Drain(config, Options());
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(Histogram(out.elements).size(), 400u);
  EXPECT_EQ(CallCount(), 100u);
  EXPECT_EQ(out.cache_bytes, 100u * 1000u);
  EXPECT_EQ(out.stages[2].cache_bytes, 100u * 1000u);
  for (const Element& e : out.elements) {
    ASSERT_TRUE(e.data);
    EXPECT_EQ(e.data->size(), 1000u);
  }
}

TEST(CacheTest, DiskCacheSurvivesAndIsReusedByTheNextRun) {
  std::string dir = TempDir("cache");
  CallCount() = 0;
  ExpectIds(Drain(DiskCached(300, dir), Options()), 300);
  EXPECT_EQ(CallCount(), 300u);
  EXPECT_TRUE(fs::exists(dir + "/cached.ptcache"));

  CallCount() = 0;
  Outputs again = Drain(DiskCached(300, dir), Options());
  ExpectIds(again, 300);
  EXPECT_EQ(CallCount(), 0u) << "the second run ran the stages before the cache";
}

TEST(CacheTest, DiskCacheReplaysPayloadsAndBatches) {
  std::string dir = TempDir("cache");
  auto config = RangeThen(50, fmt::format(R"(
      {{"name": "batch", "op": "batch", "args": {{"size": 8}}}},
      {{"name": "cached", "op": "cache", "location": "{}"}},
      {{"name": "repeat", "op": "repeat", "args": {{"count": 2}}}})",
                                          dir));
  config.stages[0].args["bytes"] = uint64_t{64};
  Outputs out = Drain(config);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  ASSERT_EQ(out.elements.size(), 14u);
  for (size_t i = 0; i < 7; ++i) {
    const Element& first = out.elements[i];
    const Element& replayed = out.elements[i + 7];
    EXPECT_EQ(replayed.epoch, 1u);
    ASSERT_EQ(first.items.size(), replayed.items.size());
    for (size_t k = 0; k < first.items.size(); ++k) {
      EXPECT_EQ(first.items[k].id, replayed.items[k].id);
      ASSERT_TRUE(replayed.items[k].data);
      EXPECT_EQ(*first.items[k].data, *replayed.items[k].data);
    }
  }
}

TEST(CacheTest, IncompleteDiskCacheIsRebuilt) {
  std::string dir = TempDir("cache");
  ExpectIds(Drain(DiskCached(200, dir), Options()), 200);
  // A killed writer leaves a temporary file; a damaged file has no footer.
  std::string path = dir + "/cached.ptcache";
  fs::resize_file(path, fs::file_size(path) - 10);
  std::ofstream(path + ".tmp.12345") << "partial";

  CallCount() = 0;
  ExpectIds(Drain(DiskCached(200, dir), Options()), 200);
  EXPECT_EQ(CallCount(), 200u) << "a damaged cache was replayed";
  EXPECT_FALSE(fs::exists(path + ".tmp.12345"));

  CallCount() = 0;
  ExpectIds(Drain(DiskCached(200, dir), Options()), 200);
  EXPECT_EQ(CallCount(), 0u) << "the rebuilt cache was not reused";
}

TEST(CacheTest, StoppedFillLeavesNoCompleteCache) {
  // Far more elements than the buffers after the cache hold, so the pass
  // cannot have reached the cache's end when the consumer walks away.
  std::string dir = TempDir("cache");
  constexpr uint64_t kMany = 100000;
  {
    auto pipeline = Pipeline::Create(DiskCached(kMany, dir), Options());
    ASSERT_TRUE(pipeline.ok());
    Element element;
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(*(*pipeline)->Next(&element));
  }  // destroyed mid-pass
  EXPECT_FALSE(fs::exists(dir + "/cached.ptcache"));
  CallCount() = 0;
  ExpectIds(Drain(DiskCached(kMany, dir), Options()), kMany);
  EXPECT_EQ(CallCount(), kMany);
}

TEST(CacheTest, CacheOfAnotherPipelineIsNotReplayed) {
  std::string dir = TempDir("cache");
  ExpectIds(Drain(DiskCached(100, dir), Options()), 100);
  CallCount() = 0;
  ExpectIds(Drain(DiskCached(120, dir), Options()), 120);  // a different range count
  EXPECT_EQ(CallCount(), 120u);
}

TEST(CacheTest, TakeAfterCacheNeverCompletesAPartialCache) {
  CallCount() = 0;
  auto config = RangeThen(100, R"(
      {"name": "upstream", "op": "map", "fn": "count"},
      {"name": "cached", "op": "cache"},
      {"name": "take", "op": "take", "args": {"count": 10}},
      {"name": "repeat", "op": "repeat", "args": {"count": 3}})");
  Outputs out = Drain(config, Options());
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  auto leaves = Leaves(out.elements);
  ASSERT_EQ(leaves.size(), 30u);
  for (size_t i = 0; i < leaves.size(); ++i) {
    EXPECT_EQ(leaves[i], std::make_pair(static_cast<uint32_t>(i / 10), uint64_t{i % 10}));
  }
  EXPECT_GE(CallCount(), 30u);
}

TEST(CacheTest, UnusableDirectoryIsAConfigError) {
  std::string dir = TempDir("cache");
  std::ofstream(dir + "/file") << "x";
  auto pipeline = Pipeline::Create(DiskCached(10, dir + "/file"), Options());
  ASSERT_FALSE(pipeline.ok());
  EXPECT_EQ(pipeline.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(pipeline.status().message(), ::testing::HasSubstr("key \"location\""));
}

}  // namespace
}  // namespace pipetune::runtime::test

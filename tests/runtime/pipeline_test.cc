// What a user of the engine notices: every element arrives exactly once, in
// order when asked, with the ops composed in the ways real pipelines do.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "test_util.h"

namespace pipetune::runtime::test {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kCount = 1000;

// Every (epoch, id) for epochs [0, epochs) and ids [0, count) exactly once.
void ExpectEach(const Outputs& out, uint32_t epochs, uint64_t count) {
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  auto histogram = Histogram(out.elements);
  EXPECT_EQ(histogram.size(), epochs * count);
  uint64_t checksum = 0, expected = 0;
  for (const auto& [leaf, n] : histogram) {
    EXPECT_EQ(n, 1) << "epoch " << leaf.first << " id " << leaf.second;
    EXPECT_LT(leaf.first, epochs);
    EXPECT_LT(leaf.second, count);
    checksum += (leaf.first + 1) * 1000003 + leaf.second;
  }
  for (uint32_t e = 0; e < epochs; ++e) {
    for (uint64_t id = 0; id < count; ++id) expected += (e + 1) * 1000003 + id;
  }
  EXPECT_EQ(checksum, expected);
  EXPECT_EQ(Leaves(out.elements).size(), epochs * count) << "duplicates";
}

struct Variant {
  std::string name;
  std::string stages;  // {p}: parallelism, {dir}: a temporary directory
  std::function<void(const Outputs&)> check;
};

std::vector<Variant> Variants() {
  const std::string map =
      R"({{"name": "work", "op": "map", "fn": "cpu_work", "args": {{"us": 2, "jitter": 1}}, "parallelism": {p}}})";
  return {
      {"map", map, [](const Outputs& o) { ExpectEach(o, 1, kCount); }},
      {"two_maps", map + R"(, {{"name": "count", "op": "map", "fn": "count", "parallelism": {p}}})",
       [](const Outputs& o) { ExpectEach(o, 1, kCount); }},
      {"shuffle", map + R"(, {{"name": "shuffle", "op": "shuffle", "args": {{"buffer": 64, "seed": 3}}}})",
       [](const Outputs& o) { ExpectEach(o, 1, kCount); }},
      {"batch", map + R"(, {{"name": "batch", "op": "batch", "args": {{"size": 7}}}})",
       [](const Outputs& o) {
         ExpectEach(o, 1, kCount);
         ASSERT_EQ(o.elements.size(), (kCount + 6) / 7);
         for (size_t i = 0; i + 1 < o.elements.size(); ++i) EXPECT_EQ(o.elements[i].items.size(), 7u);
         EXPECT_EQ(o.elements.back().items.size(), kCount % 7);
       }},
      {"batch_drop_remainder",
       map + R"(, {{"name": "batch", "op": "batch", "args": {{"size": 7, "drop_remainder": true}}}})",
       [](const Outputs& o) {
         ASSERT_TRUE(o.status.ok());
         ASSERT_EQ(o.elements.size(), kCount / 7);
         for (const Element& b : o.elements) EXPECT_EQ(b.items.size(), 7u);
         auto h = Histogram(o.elements);
         EXPECT_EQ(h.size(), kCount / 7 * 7);  // distinct
       }},
      {"repeat", map + R"(, {{"name": "repeat", "op": "repeat", "args": {{"count": 3}}}})",
       [](const Outputs& o) { ExpectEach(o, 3, kCount); }},
      {"cache_memory",
       map +
           R"(, {{"name": "cache", "op": "cache"}}, {{"name": "repeat", "op": "repeat", "args": {{"count": 3}}}})",
       [](const Outputs& o) { ExpectEach(o, 3, kCount); }},
      {"cache_disk",
       map +
           R"(, {{"name": "cache", "op": "cache", "location": "{dir}"}}, {{"name": "repeat", "op": "repeat", "args": {{"count": 3}}}})",
       [](const Outputs& o) { ExpectEach(o, 3, kCount); }},
      {"take", map + R"(, {{"name": "take", "op": "take", "args": {{"count": 100}}}})",
       [](const Outputs& o) {
         ASSERT_TRUE(o.status.ok());
         EXPECT_EQ(o.elements.size(), 100u);
         EXPECT_EQ(Histogram(o.elements).size(), 100u);
       }},
      {"filter", map + R"(, {{"name": "keep", "op": "filter", "fn": "keep_every", "args": {{"n": 3}}}})",
       [](const Outputs& o) {
         ASSERT_TRUE(o.status.ok());
         auto h = Histogram(o.elements);
         EXPECT_EQ(h.size(), (kCount + 2) / 3);
         for (const auto& [leaf, n] : h) {
           EXPECT_EQ(leaf.second % 3, 0u);
           EXPECT_EQ(n, 1);
         }
       }},
      {"everything", map + R"(, {{"name": "shuffle", "op": "shuffle", "args": {{"buffer": 100, "seed": 1}}}},
                {{"name": "cache", "op": "cache"}},
                {{"name": "repeat", "op": "repeat", "args": {{"count": 2}}}},
                {{"name": "count", "op": "map", "fn": "count", "parallelism": {p}}},
                {{"name": "batch", "op": "batch", "args": {{"size": 16}}}},
                {{"name": "prefetch", "op": "prefetch", "buffer": 3}})",
       [](const Outputs& o) { ExpectEach(o, 2, kCount); }},
  };
}

class ExactlyOnceTest : public ::testing::TestWithParam<std::tuple<size_t, int>> {};

TEST_P(ExactlyOnceTest, EveryElementArrivesOnce) {
  const Variant variant = Variants()[std::get<0>(GetParam())];
  int parallelism = std::get<1>(GetParam());
  std::string dir = TempDir("cache");
  std::string stages =
      fmt::format(fmt::runtime(variant.stages), fmt::arg("p", parallelism), fmt::arg("dir", dir));
  BuildOptions options;
  options.registry = &TestRegistry();
  variant.check(Drain(RangeThen(kCount, stages), options));
}

INSTANTIATE_TEST_SUITE_P(Variants, ExactlyOnceTest,
                         ::testing::Combine(::testing::Range<size_t>(0, Variants().size()),
                                            ::testing::Values(1, 2, 8, 32)),
                         [](const auto& info) {
                           return fmt::format("{}_p{}", Variants()[std::get<0>(info.param)].name,
                                              std::get<1>(info.param));
                         });

std::vector<uint64_t> Ids(const std::vector<Element>& elements) {
  std::vector<uint64_t> ids;
  for (const auto& [epoch, id] : Leaves(elements)) ids.push_back(id);
  return ids;
}

std::vector<uint64_t> Iota(uint64_t n) {
  std::vector<uint64_t> ids(n);
  for (uint64_t i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

TEST(OrderTest, DeterministicOptionKeepsInputOrderThroughParallelStages) {
  auto config = RangeThen(400, R"(
      {"name": "a", "op": "map", "fn": "cpu_work", "args": {"us": 5, "jitter": 1}, "parallelism": 8},
      {"name": "b", "op": "map", "fn": "count", "parallelism": 4},
      {"name": "batch", "op": "batch", "args": {"size": 10}})");
  BuildOptions options;
  options.registry = &TestRegistry();
  options.deterministic = true;
  Outputs out = Drain(config, options);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(Ids(out.elements), Iota(400));
  for (size_t i = 0; i < out.elements.size(); ++i) EXPECT_EQ(out.elements[i].id, i);
}

TEST(OrderTest, DeterministicStageArgKeepsOrder) {
  auto config = RangeThen(300, R"(
      {"name": "a", "op": "map", "fn": "io_wait", "args": {"ms": 0.2, "jitter": 1, "deterministic": true}, "parallelism": 16},
      {"name": "repeat", "op": "repeat", "args": {"count": 2}})");
  Outputs out = Drain(config);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  std::vector<uint64_t> expected = Iota(300);
  expected.insert(expected.end(), expected.begin(), expected.end());
  EXPECT_EQ(Ids(out.elements), expected);
}

TEST(OrderTest, SequentialPipelineKeepsOrderWithoutBeingAsked) {
  Outputs out = Drain(RangeThen(500, R"({"name": "a", "op": "map", "fn": "cpu_work", "args": {"us": 0}})"));
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(Ids(out.elements), Iota(500));
}

// A batch sleeps until its last members are there (one wake-up per several
// elements), but the buffer before it holds only 8 of these elements (4 MiB):
// it must wake when that buffer is half full, or the map would block on it
// forever and the run would never end.
TEST(BatchTest, BatchesLargerThanTheirInputBufferComplete) {
  auto config = RangeThen(200, R"(
      {"name": "a", "op": "map", "fn": "cpu_work", "args": {"us": 0, "bytes": 524288}, "parallelism": 2},
      {"name": "batch", "op": "batch", "args": {"size": 64}})");
  Outputs out = Drain(config);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  ASSERT_EQ(out.elements.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out.elements[i].items.size(), 64u);
  EXPECT_EQ(out.elements.back().items.size(), 8u);
  EXPECT_EQ(Histogram(out.elements).size(), 200u);
}

TEST(ShuffleTest, SameSeedSameOrderNewOrderEachEpoch) {
  auto config = RangeThen(200, R"(
      {"name": "shuffle", "op": "shuffle", "args": {"buffer": 50, "seed": 7}},
      {"name": "repeat", "op": "repeat", "args": {"count": 2}})");
  Outputs first = Drain(config);
  Outputs second = Drain(config);
  ExpectEach(first, 2, 200);
  EXPECT_EQ(Ids(first.elements), Ids(second.elements));
  std::vector<uint64_t> ids = Ids(first.elements);
  std::vector<uint64_t> epoch0(ids.begin(), ids.begin() + 200), epoch1(ids.begin() + 200, ids.end());
  EXPECT_NE(epoch0, Iota(200));
  EXPECT_NE(epoch0, epoch1);
}

TEST(RepeatTakeTest, TakeBeforeRepeatTakesTheFirstOfEachEpoch) {
  Outputs out = Drain(RangeThen(10, R"(
      {"name": "take", "op": "take", "args": {"count": 3}},
      {"name": "repeat", "op": "repeat", "args": {"count": 4}})"));
  ExpectEach(out, 4, 3);
}

TEST(RepeatTakeTest, TakeAfterEndlessRepeatEnds) {
  Outputs out = Drain(RangeThen(10, R"(
      {"name": "repeat", "op": "repeat"},
      {"name": "take", "op": "take", "args": {"count": 25}})"));
  ASSERT_TRUE(out.status.ok());
  auto leaves = Leaves(out.elements);
  ASSERT_EQ(leaves.size(), 25u);
  EXPECT_EQ(leaves[24], std::make_pair(2u, uint64_t{4}));
}

TEST(RepeatTakeTest, TakeFromEndlessSourceThroughParallelMapEnds) {
  auto config = Config(R"({"name": "t", "stages": [
      {"name": "src", "op": "range"},
      {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 1}, "parallelism": 4},
      {"name": "take", "op": "take", "args": {"count": 50}}]})");
  Outputs out = Drain(config);
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(out.elements.size(), 50u);
  EXPECT_EQ(Histogram(out.elements).size(), 50u);
}

TEST(RepeatTakeTest, NestedRepeatsNumberEpochsBySourcePass) {
  Outputs out = Drain(RangeThen(5, R"(
      {"name": "inner", "op": "repeat", "args": {"count": 2}},
      {"name": "batch", "op": "batch", "args": {"size": 3}},
      {"name": "outer", "op": "repeat", "args": {"count": 2}})"));
  ExpectEach(out, 4, 5);
  std::vector<size_t> sizes;
  for (const Element& b : out.elements) sizes.push_back(b.items.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 3, 1, 3, 3, 3, 1}));
}

TEST(RepeatTakeTest, RepeatOfAnEmptyPassEnds) {
  Outputs out = Drain(RangeThen(0, R"({"name": "repeat", "op": "repeat"})"));
  ASSERT_TRUE(out.status.ok());
  EXPECT_TRUE(out.elements.empty());
}

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("data");
    std::filesystem::create_directories(dir_ + "/files");
    for (int i = 0; i < 20; ++i) {
      std::ofstream(fmt::format("{}/files/f{:02}.txt", dir_, i)) << "file-" << i;
    }
    std::ofstream(dir_ + "/files/other.dat") << "not matched";
  }
  std::string dir_;
};

TEST_F(FilesTest, ListsRelativeToBaseDirAndReadsEveryFile) {
  auto config = Config(R"({"name": "t", "stages": [
      {"name": "files", "op": "list_files", "args": {"pattern": "files/*.txt"}},
      {"name": "read", "op": "read_file", "parallelism": 4}]})");
  BuildOptions options;
  options.base_dir = dir_;
  Outputs out = Drain(config, options);
  ExpectEach(out, 1, 20);
  for (const Element& e : out.elements) {
    ASSERT_TRUE(e.data);
    EXPECT_EQ(std::string(e.data->begin(), e.data->end()), fmt::format("file-{}", e.id));
    EXPECT_EQ(e.path, fmt::format("{}/files/f{:02}.txt", dir_, e.id));
    EXPECT_EQ(e.dtype, DType::kBytes);
  }
}

TEST_F(FilesTest, ShuffleSeedGivesAReproducibleOrderPerEpoch) {
  auto config = Config(fmt::format(R"({{"name": "t", "stages": [
      {{"name": "files", "op": "list_files", "args": {{"pattern": "{}/files/*.txt", "shuffle_seed": 5}}}},
      {{"name": "repeat", "op": "repeat", "args": {{"count": 2}}}}]}})",
                                   dir_));
  Outputs first = Drain(config);
  Outputs second = Drain(config);
  ExpectEach(first, 2, 20);
  std::vector<uint64_t> ids = Ids(first.elements);
  EXPECT_EQ(ids, Ids(second.elements));
  std::vector<uint64_t> epoch0(ids.begin(), ids.begin() + 20), epoch1(ids.begin() + 20, ids.end());
  EXPECT_NE(epoch0, Iota(20));
  EXPECT_NE(epoch0, epoch1);
}

TEST_F(FilesTest, PatternMatchingNothingIsAConfigError) {
  auto config = Config(R"({"name": "t", "stages": [
      {"name": "files", "op": "list_files", "args": {"pattern": "nothing/*.jpg"}}]})");
  BuildOptions options;
  options.base_dir = dir_;
  auto pipeline = Pipeline::Create(config, options);
  ASSERT_FALSE(pipeline.ok());
  EXPECT_EQ(pipeline.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(pipeline.status().message(), HasSubstr("stage \"files\""));
  EXPECT_THAT(pipeline.status().message(), HasSubstr("args.pattern"));
}

TEST(PullApiTest, StopFromAnotherThreadEndsABlockedNext) {
  auto config = Config(R"({"name": "t", "stages": [
      {"name": "src", "op": "range"},
      {"name": "slow", "op": "map", "fn": "io_wait", "args": {"ms": 200}}]})");
  auto pipeline = Pipeline::Create(config);
  ASSERT_TRUE(pipeline.ok());
  auto begin = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*pipeline)->Stop();
  });
  Element element;
  StatusOr<bool> next = (*pipeline)->Next(&element);
  stopper.join();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(*next);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(1000));
  auto again = (*pipeline)->Next(&element);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST(PullApiTest, DestroyingAnUnfinishedPipelineJoinsItsThreads) {
  auto config = Config(R"({"name": "t", "stages": [
      {"name": "src", "op": "range", "args": {"bytes": 100}},
      {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 1}, "parallelism": 8},
      {"name": "prefetch", "op": "prefetch", "buffer": 10}]})");
  for (int i = 0; i < 5; ++i) {
    auto pipeline = Pipeline::Create(config);
    ASSERT_TRUE(pipeline.ok());
    Element element;
    for (int j = 0; j < 100; ++j) ASSERT_TRUE(*(*pipeline)->Next(&element));
  }
}

// The bundled synthetic examples are valid configs that run.
TEST(ExamplesTest, SyntheticExamplesBuildAndRun) {
  std::filesystem::path dir = std::filesystem::path(PIPETUNE_SOURCE_DIR) / "examples" / "synthetic";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++seen;
    auto config = models::LoadConfig(entry.path().string());
    ASSERT_TRUE(config.ok()) << config.status().message();
    RunOptions options;
    options.max_seconds = 0.3;
    auto summary = RunPipeline(*config, options);
    ASSERT_TRUE(summary.ok()) << entry.path() << ": " << summary.status().message();
    // Some have costly first outputs (a batch of 32 × 2 ms): look inside.
    EXPECT_GT(summary->stages[1].elements, 0u) << entry.path();
  }
  EXPECT_GE(seen, 5);
}

}  // namespace
}  // namespace pipetune::runtime::test

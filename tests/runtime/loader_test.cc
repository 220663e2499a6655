// What pipetune.Loader needs of the engine: ImageFolder labels carried
// through stages, a disk cache and batches; a pipeline run epoch by epoch;
// disjoint shards that cover each epoch; collated batches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "test_util.h"

namespace pipetune::runtime::test {
namespace {

namespace fs = std::filesystem;

// ROOT/<class>/...: "b" has 2 files (one nested), "a" 3, "c" 1 and a file
// whose extension is not an image's.
std::string MakeFolder() {
  std::string root = TempDir("image_folder");
  for (const auto& [name, count] : std::vector<std::pair<std::string, int>>{{"b", 2}, {"a", 3}, {"c", 1}}) {
    for (int i = 0; i < count; ++i) {
      fs::path dir = fs::path(root) / name / (i == 1 ? "nested" : "");
      fs::create_directories(dir);
      std::ofstream(dir / (std::to_string(i) + (i == 2 ? ".JPEG" : ".jpg"))) << name << i;
    }
  }
  std::ofstream(fs::path(root) / "c" / "readme.txt") << "skip me";
  return root;
}

std::string FolderConfig(const std::string& root, const std::string& after) {
  return R"({"name": "t", "stages": [{"name": "files", "op": "list_files", "args": {"image_folder": ")" +
         root + R"(", "shuffle_seed": 5}}, {"name": "read", "op": "read_file"})" + after + "]}";
}

TEST(LoaderEngineTest, ImageFolderLabelsAreTorchvisionsAndSurviveCacheAndBatch) {
  std::string root = MakeFolder();
  std::string cache = TempDir("label_cache");
  auto config = Config(FolderConfig(
      root, R"(, {"name": "cached", "op": "cache", "location": ")" + cache +
                R"("}, {"name": "batch", "op": "batch", "args": {"size": 4, "drop_last": false}})"));
  for (int run = 0; run < 2; ++run) {  // the second run replays the disk cache
    Outputs out = Drain(config);
    ASSERT_TRUE(out.status.ok()) << out.status.message();
    std::map<std::string, int64_t> labels;
    for (const Element& batch : out.elements) {
      for (const Element& item : batch.items) labels[item.path.substr(root.size() + 1)] = item.label;
    }
    EXPECT_THAT(labels,
                ::testing::ElementsAre(::testing::Pair("a/0.jpg", 0), ::testing::Pair("a/2.JPEG", 0),
                                       ::testing::Pair("a/nested/1.jpg", 0), ::testing::Pair("b/0.jpg", 1),
                                       ::testing::Pair("b/nested/1.jpg", 1), ::testing::Pair("c/0.jpg", 2)))
        << "run " << run;
  }
}

TEST(LoaderEngineTest, EmptyClassFolderIsAConfigErrorNamingIt) {
  std::string root = MakeFolder();
  fs::create_directories(fs::path(root) / "d");
  auto made = Pipeline::Create(Config(FolderConfig(root, "")));
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), ::testing::HasSubstr("key \"args.image_folder\": class folder \"d\""));
}

TEST(LoaderEngineTest, EpochByEpochShardsAreDisjointAndCoverEveryEpoch) {
  auto config = Config(FolderConfig(MakeFolder(), ""));
  std::vector<std::unique_ptr<Pipeline>> ranks;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    BuildOptions options;
    options.shard_index = rank;
    options.shard_count = 2;
    auto made = Pipeline::Create(config, options);
    ASSERT_TRUE(made.ok()) << made.status().message();
    EXPECT_EQ((*made)->SourceElementsPerPass(), 3u);
    ranks.push_back(std::move(*made));
  }
  std::vector<std::vector<uint64_t>> orders;
  for (uint32_t epoch = 0; epoch < 3; ++epoch) {
    std::multiset<uint64_t> seen;
    std::vector<uint64_t> order;
    for (auto& pipeline : ranks) {
      pipeline->StartEpoch(epoch);
      Element element;
      while (true) {
        auto next = pipeline->Next(&element);
        ASSERT_TRUE(next.ok());
        if (!*next) break;
        EXPECT_EQ(element.epoch, epoch);
        seen.insert(element.id);
        order.push_back(element.id);
      }
    }
    EXPECT_EQ(seen, (std::multiset<uint64_t>{0, 1, 2, 3, 4, 5})) << "epoch " << epoch;
    orders.push_back(order);
  }
  EXPECT_NE(orders[0], orders[1]);  // reshuffled every epoch
}

TEST(LoaderEngineTest, CollatingElementsWithoutImagesStopsNamingTheBatchStage) {
  BuildOptions options;
  options.collate_batches = true;
  Outputs out = Drain(RangeThen(5, R"({"name": "batch", "op": "batch", "args": {"size": 2}})"), options);
  ASSERT_FALSE(out.status.ok());  // range elements have no image payload
  EXPECT_THAT(out.status.message(), ::testing::HasSubstr("stage \"batch\""));
}

}  // namespace
}  // namespace pipetune::runtime::test

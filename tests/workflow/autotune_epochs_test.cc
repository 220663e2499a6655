// `pipetune autotune -- python3 train.py`'s decider as the job meets it when
// a decision cannot be made: the job is told to keep its settings, why, and
// the settings it keeps are written; nothing throws out of it. (The
// decisions themselves, over real DataLoader jobs: tests/python/
// test_autotune.py.)
#include "pipetune/workflow/autotune_epochs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_dir.h"

namespace pipetune::workflow {
namespace {

using ::testing::HasSubstr;

class EpochDeciderTest : public test_support::TestDir {};

const Json kTwoWorkers = {
    {"num_workers", 2}, {"prefetch_factor", 2}, {"persistent_workers", false}, {"pin_memory", false}};

TEST_F(EpochDeciderTest, ASegmentThatCannotBePlannedOnKeepsTheSettingsAndSaysWhy) {
  std::string output = Path("train.dataloader.json");
  EpochDecider decider({{}, {}, output});
  std::string segment = Write("train-retune-1.trace", "not a trace");
  Json answer = decider.Decide({{"segment", segment}, {"epoch", 3}, {"knobs", kTwoWorkers}});
  EXPECT_EQ(answer["state"], "stopped");
  EXPECT_TRUE(answer["apply"].is_null());
  ASSERT_EQ(answer["lines"].size(), 1u);
  std::string line = answer["lines"][0];
  EXPECT_THAT(line, HasSubstr("epoch 3: no decision ("));
  EXPECT_THAT(line, HasSubstr("train-retune-1.trace"));
  EXPECT_THAT(line, HasSubstr("the job goes on with num_workers=2, prefetch_factor=2"));
  EXPECT_EQ(Json::parse(std::ifstream(output)), kTwoWorkers) << "the settings kept are not written";
  // Once stopped, later boundaries keep the settings without a word.
  Json later = decider.Decide({{"segment", segment}, {"epoch", 4}});
  EXPECT_TRUE(later["apply"].is_null());
  EXPECT_TRUE(later["lines"].empty());
}

TEST_F(EpochDeciderTest, ARequestWithoutItsFieldsIsAnsweredNotThrown) {
  EpochDecider decider({{}, {}, ""});
  Json no_segment = decider.Decide({{"epoch", 2}, {"knobs", kTwoWorkers}});
  EXPECT_EQ(no_segment["state"], "stopped");
  EXPECT_THAT(no_segment["lines"][0].get<std::string>(), HasSubstr("names no segment"));
  EpochDecider first({{}, {}, ""});
  Json no_knobs = first.Decide({{"segment", Path("t.trace")}, {"epoch", 2}});
  EXPECT_THAT(no_knobs["lines"][0].get<std::string>(), HasSubstr("holds no knobs"));
}

TEST(NormalizedKwargsTest, SettingsWithoutWorkersAreOneSettingWhateverTheirPrefetch) {
  Json a = NormalizedKwargs({{"num_workers", 0}, {"prefetch_factor", 2}, {"persistent_workers", true}});
  Json b = NormalizedKwargs({{"num_workers", 0}, {"prefetch_factor", nullptr}, {"pin_memory", false}});
  EXPECT_EQ(DumpJson(a), DumpJson(b));
  EXPECT_TRUE(a["prefetch_factor"].is_null());
  EXPECT_FALSE(a["persistent_workers"].get<bool>());
}

}  // namespace
}  // namespace pipetune::workflow

// The retuning rules every driver shares (engine online, pipetune.Loader, a
// DataLoader between epochs), as a user of any of them meets them: a lucky
// window does not keep a change, the tries stop at the cap, and what runs
// at the end is the best measured setting.
#include "pipetune/workflow/retune_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pipetune::workflow {
namespace {

using ::testing::HasSubstr;

TEST(RetuneLoopTest, AChangeIsKeptOnlyWhenItBeatsTheWindowsNoise) {
  RetuneLoop loop({/*min_gain=*/0.03, /*max_tries=*/3});
  EXPECT_EQ(loop.Measured("w=1", {100, 0.10}).verdict, RetuneLoop::Verdict::kFirst);
  ASSERT_EQ(loop.Consider("w=4", 300, 0).action, RetuneLoop::Action::kTry);
  // 20% more, but the two windows each move by 10%: 2 x 14% = 28% is the bar.
  RetuneLoop::Judged judged = loop.Measured("w=4", {120, 0.10});
  EXPECT_EQ(judged.verdict, RetuneLoop::Verdict::kNotBetter);
  EXPECT_NEAR(judged.margin, 2 * std::hypot(0.10, 0.10), 1e-9);
  EXPECT_EQ(loop.best(), "w=1");

  // Quiet windows: the same 20% is a gain, and the change becomes the best.
  RetuneLoop quiet({0.03, 3});
  quiet.Measured("w=1", {100, 0.01});
  ASSERT_EQ(quiet.Consider("w=4", 300, 0).action, RetuneLoop::Action::kTry);
  EXPECT_EQ(quiet.Measured("w=4", {120, 0.01}).verdict, RetuneLoop::Verdict::kBetter);
  EXPECT_EQ(quiet.best(), "w=4");
  EXPECT_DOUBLE_EQ(quiet.best_rate(), 120);
}

TEST(RetuneLoopTest, APlanPredictingLessThanTheMinimumGainIsNotTried) {
  RetuneLoop loop({0.05, 3});
  loop.Measured("w=1", {100, 0.20});
  // A noisy window does not raise the bar for trying: the window after the
  // change must beat the noise, not the prediction.
  EXPECT_EQ(loop.Consider("w=2", 108, 0).action, RetuneLoop::Action::kTry);
  loop.Measured("w=2", {110, 0.20});
  RetuneLoop::Next next = loop.Consider("w=3", 104, 0);  // under 5% over the best, still w=1's 100
  EXPECT_EQ(next.action, RetuneLoop::Action::kSettle);
  EXPECT_THAT(next.reason, HasSubstr("not 5% over the best measured"));
  EXPECT_TRUE(loop.settled());
  EXPECT_EQ(loop.best(), "w=1");
}

TEST(RetuneLoopTest, TriesStopAtTheCapAndSettleOnTheBestMeasured) {
  RetuneLoop loop({0.03, 2});
  loop.Measured("w=1", {100, 0});
  ASSERT_EQ(loop.Consider("w=2", 200, 0).action, RetuneLoop::Action::kTry);
  EXPECT_EQ(loop.Measured("w=2", {150, 0}).verdict, RetuneLoop::Verdict::kBetter);
  ASSERT_EQ(loop.Consider("w=6", 400, 0).action, RetuneLoop::Action::kTry);
  EXPECT_EQ(loop.Measured("w=6", {140, 0}).verdict, RetuneLoop::Verdict::kNotBetter);
  // A third plan, however promising: 2 tries were allowed.
  RetuneLoop::Next next = loop.Consider("w=9", 900, 0);
  EXPECT_EQ(next.action, RetuneLoop::Action::kSettle);
  EXPECT_THAT(next.reason, HasSubstr("2 changes tried"));
  EXPECT_EQ(loop.best(), "w=2");  // what runs from now on: measured, not predicted
  EXPECT_EQ(loop.tries(), 2);
}

TEST(RetuneLoopTest, APlanGainingOnlyTheModelsGapIsNotTried) {
  RetuneLoop loop({0.03, 3});
  loop.Measured("decode=14", {86, 0.05});
  // The model says 14 workers could do 230/s and 52 would do 236/s: 3% by
  // its own account, whatever the measured 86/s.
  RetuneLoop::Next next = loop.Consider("decode=52", 236, 230);
  EXPECT_EQ(next.action, RetuneLoop::Action::kSettle);
  EXPECT_THAT(next.reason, HasSubstr("only the gap between model and measurement"));
  // A plan the model itself prices higher is tried.
  RetuneLoop fewer({0.03, 3});
  fewer.Measured("w=9", {63, 0.05});
  EXPECT_EQ(fewer.Consider("w=5", 81, 66).action, RetuneLoop::Action::kTry);
}

TEST(RetuneLoopTest, NoSettingIsTriedTwice) {
  RetuneLoop loop({0.03, 5});
  loop.Measured("w=1", {100, 0});
  ASSERT_EQ(loop.Consider("w=4", 300, 0).action, RetuneLoop::Action::kTry);
  loop.Measured("w=4", {90, 0});  // worse: not kept
  RetuneLoop::Next next = loop.Consider("w=4", 300, 0);
  EXPECT_EQ(next.action, RetuneLoop::Action::kSettle);
  EXPECT_THAT(next.reason, HasSubstr("measured already"));
  EXPECT_EQ(loop.best(), "w=1");
  // The plan that is the best setting itself settles too.
  RetuneLoop again({0.03, 5});
  again.Measured("w=1", {100, 0});
  EXPECT_THAT(again.Consider("w=1", 500, 0).reason, HasSubstr("is the best measured setting"));
}

TEST(RetuneLoopTest, TheNoiseIsJudgedAgainstTheOriginalAndTheHighestOfTheRestWins) {
  // A DataLoader's first plan overshoots (10 workers from an epoch without
  // any); the correction to 5 measures 19% more than the 10, within the two
  // epochs' noise, but far beyond the original's: it is the best now, and
  // what runs on, whatever the refit plans next.
  RetuneLoop loop({0.03, 3});
  loop.Measured("w=0", {30, 0.05});
  ASSERT_EQ(loop.Consider("w=10", 190, 0).action, RetuneLoop::Action::kTry);
  EXPECT_EQ(loop.Measured("w=10", {61, 0.05}).verdict, RetuneLoop::Verdict::kBetter);
  ASSERT_EQ(loop.Consider("w=5", 79, 0).action, RetuneLoop::Action::kTry);
  RetuneLoop::Judged judged = loop.Measured("w=5", {72.8, 0.2});
  EXPECT_EQ(judged.verdict, RetuneLoop::Verdict::kBetter);
  EXPECT_DOUBLE_EQ(judged.original_rate, 30);
  EXPECT_EQ(loop.Consider("w=4", 74, 73).action, RetuneLoop::Action::kSettle);
  EXPECT_EQ(loop.best(), "w=5");

  // Measured lower than the best, though beyond the original's noise: the
  // best stays, and says why.
  RetuneLoop lower({0.03, 3});
  lower.Measured("w=0", {30, 0.05});
  ASSERT_EQ(lower.Consider("w=9", 190, 0).action, RetuneLoop::Action::kTry);
  lower.Measured("w=9", {63, 0.1});
  ASSERT_EQ(lower.Consider("w=5", 81, 0).action, RetuneLoop::Action::kTry);
  judged = lower.Measured("w=5", {57, 0.1});
  EXPECT_EQ(judged.verdict, RetuneLoop::Verdict::kNotBetter);
  EXPECT_THAT(judged.WhyNotKept(57), HasSubstr("not over the best measured 63/s"));
  lower.Consider("w=5", 81, 0);
  EXPECT_EQ(lower.best(), "w=9");

  // Above the original but within its noise: the user's setting stays.
  RetuneLoop user({0.03, 3});
  user.Measured("w=2", {100, 0.1});
  ASSERT_EQ(user.Consider("w=5", 150, 0).action, RetuneLoop::Action::kTry);
  judged = user.Measured("w=5", {125, 0.1});
  EXPECT_EQ(judged.verdict, RetuneLoop::Verdict::kNotBetter);
  EXPECT_THAT(judged.WhyNotKept(125), HasSubstr("over the first setting's 100/s"));
  EXPECT_EQ(user.best(), "w=2");
}

TEST(RetuneLoopTest, WithinTheNoiseOfTheHighestTheCheaperSettingWins) {
  // One burst of load made 8, 4 and 3 workers measure alike; the grid then
  // measured 8 at half of 4's rate. What runs on is the cheapest of the tie.
  RetuneLoop loop({0.03, 3});
  loop.Measured("w=0", {11.4, 0.02, 0});
  ASSERT_EQ(loop.Consider("w=8", 84, 0).action, RetuneLoop::Action::kTry);
  EXPECT_EQ(loop.Measured("w=8", {28.5, 0.1, 8}).verdict, RetuneLoop::Verdict::kBetter);
  ASSERT_EQ(loop.Consider("w=4", 34, 0).action, RetuneLoop::Action::kTry);
  RetuneLoop::Judged judged = loop.Measured("w=4", {27.1, 0.1, 4});
  EXPECT_EQ(judged.verdict, RetuneLoop::Verdict::kBetter);
  EXPECT_TRUE(judged.cheaper_tie);
  EXPECT_EQ(loop.best(), "w=4");
  // A cheaper one far below the highest is no tie: the best stays.
  ASSERT_EQ(loop.Consider("w=1", 40, 0).action, RetuneLoop::Action::kTry);
  EXPECT_EQ(loop.Measured("w=1", {15, 0.1, 1}).verdict, RetuneLoop::Verdict::kNotBetter);
  EXPECT_EQ(loop.best(), "w=4");
  // Without costs nothing is cheaper: the highest stays.
  RetuneLoop costless({0.03, 3});
  costless.Measured("w=0", {11.4, 0.02});
  ASSERT_EQ(costless.Consider("w=8", 84, 0).action, RetuneLoop::Action::kTry);
  costless.Measured("w=8", {28.5, 0.1});
  ASSERT_EQ(costless.Consider("w=4", 34, 0).action, RetuneLoop::Action::kTry);
  EXPECT_EQ(costless.Measured("w=4", {27.1, 0.1}).verdict, RetuneLoop::Verdict::kNotBetter);
  EXPECT_EQ(costless.best(), "w=8");
}

TEST(RetuneLoopTest, TheBestMeasuredAgainIsJudgedByItsNewerWindow) {
  RetuneLoop loop({0.03, 3});
  loop.Measured("w=1", {100, 0});
  EXPECT_EQ(loop.Measured("w=1", {80, 0}).verdict, RetuneLoop::Verdict::kAgain);  // the machine got busier
  EXPECT_DOUBLE_EQ(loop.best_rate(), 80);
}

// Steps per snapshot, as a trace records them cumulatively.
analyzer::CollectedTrace Steps(const std::vector<uint64_t>& per_interval) {
  analyzer::CollectedTrace trace;
  uint64_t total = 0;
  trace.frames.push_back({});
  for (uint64_t n : per_interval) {
    total += n;
    trace.frames.push_back({});
    trace.frames.back().steps = total;
  }
  return trace;
}

TEST(RetuneLoopTest, TheRateErrorIsTheSpreadOfStepsPerBlockOfSnapshots) {
  // A pool of workers' bursts (18 batches, then 2) average out within
  // blocks of 4 snapshots: the window's rate is steady.
  std::vector<uint64_t> bursty;
  for (int i = 0; i < 20; ++i) bursty.push_back(i % 2 == 0 ? 18 : 2);
  EXPECT_DOUBLE_EQ(RateRelativeError(Steps(bursty), 0, 20), 0);
  // The machine's load drifting (5 a snapshot, then 15): blocks of 20, 20,
  // 60, 60, 60 around 44 show it.
  std::vector<uint64_t> drifting(8, 5);
  drifting.insert(drifting.end(), 12, 15);
  double sd = std::sqrt((2 * 24 * 24 + 3 * 16 * 16) / 4.0);
  EXPECT_NEAR(RateRelativeError(Steps(drifting), 0, 20), sd / (44 * std::sqrt(5.0)), 1e-9);
  // A short window: one snapshot a block, and 2 intervals are too few to tell.
  EXPECT_GT(RateRelativeError(Steps({2, 18, 2, 18}), 0, 4), 0.3);
  EXPECT_EQ(RateRelativeError(Steps({2, 18}), 0, 2), 0);
}

}  // namespace
}  // namespace pipetune::workflow

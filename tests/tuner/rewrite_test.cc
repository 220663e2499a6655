// Plan -> tuned config: knobs changed, stages inserted, everything else kept.
#include "pipetune/tuner/rewrite.h"

#include <gtest/gtest.h>

#include "pipetune/tuner/solver.h"
#include "test_profiles.h"

namespace pipetune::tuner {
namespace {

using testing::Budget;
using testing::MakeInput;

// Unknown keys at every level, in an order ToJson would not choose.
const char* kUserConfig = R"({
  "comment": "owned by the data team",
  "name": "user",
  "stages": [
    {"op": "range", "name": "src", "args": {"count": 500}, "x-owner": "alice"},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 3000}, "parallelism": 1, "note": "slow"},
    {"name": "rep", "op": "repeat"},
    {"name": "augment", "op": "map", "fn": "cpu_work", "args": {"us": 300}, "random": true}
  ],
  "consumer": {"step_time_ms": 1, "device": "gpu0"},
  "resources": {"cores": 4, "memory": "1GiB"},
  "trailer": [1, 2, 3]
})";

Plan TunedPlan(const TuneInput& input, double cores = 4) {
  StatusOr<Plan> plan = Solve(input, Budget(cores, 1e9), Objective::kMax);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? *plan : Plan{};
}

TEST(ApplyPlan, ChangesKnobsInsertsStagesAndKeepsEverythingElse) {
  TuneInput input = MakeInput(kUserConfig, {{"decode", {3.0, 3.0, 1e4}}, {"augment", {0.3, 0.3, 1e4}}}, 4);
  Plan plan = TunedPlan(input);
  StatusOr<models::PipelineConfig> tuned = ApplyPlan(*input.config, plan);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  ASSERT_TRUE(models::Validate(*tuned).ok());

  Json json = models::ToJson(*tuned);
  std::vector<std::string> keys;
  for (auto& [key, value] : json.items()) keys.push_back(key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"comment", "name", "stages", "consumer", "resources", "trailer"}));
  EXPECT_EQ(json["comment"], "owned by the data team");
  EXPECT_EQ(json["consumer"]["device"], "gpu0");
  EXPECT_EQ(json["trailer"], Json::parse("[1,2,3]"));

  const Json& stages = json["stages"];
  EXPECT_EQ(stages[0]["x-owner"], "alice");
  EXPECT_EQ(stages[0].begin().key(), "op");  // the user's key order inside a stage
  EXPECT_EQ(stages[1]["note"], "slow");
  EXPECT_EQ(stages[1]["args"]["us"], 3000);  // args are never touched
  // A cache after decode (before the random augment) and a prefetch at the end.
  EXPECT_EQ(stages[2]["op"], "cache");
  EXPECT_EQ(stages[2]["location"], "memory");
  EXPECT_EQ(stages.back()["op"], "prefetch");
  EXPECT_GE(stages.back()["buffer"].get<int>(), 2);
  EXPECT_EQ(json["stages"].size(), 6u);
  // The knob values are the plan's.
  EXPECT_EQ(stages[4].value("parallelism", 1), testing::ParallelismOf(plan, "augment"));
}

TEST(ApplyPlan, RoundTripsThroughSaveAndLoad) {
  TuneInput input = MakeInput(kUserConfig, {{"decode", {3.0, 3.0, 1e4}}, {"augment", {0.3, 0.3, 1e4}}}, 4);
  Plan plan = TunedPlan(input);
  StatusOr<models::PipelineConfig> tuned = ApplyPlan(*input.config, plan);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  std::string text = models::Serialize(*tuned);
  StatusOr<models::PipelineConfig> reparsed = models::ParseConfig(text, "tuned.json");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message();
  EXPECT_EQ(models::Serialize(*reparsed), text);
  // Tuning the tuned config's own profile again keeps the stages it inserted.
  EXPECT_TRUE(reparsed->FindStage(plan.stages.back().name));
}

TEST(ApplyPlan, RefusesAPlanOfAnotherPipeline) {
  TuneInput input = MakeInput(kUserConfig, {{"decode", {3.0, 3.0, 1e4}}}, 4);
  Plan plan = TunedPlan(input);
  models::PipelineConfig other = testing::ParseOrDie(R"({"name": "other", "stages": [
    {"name": "src", "op": "range"}, {"name": "x", "op": "map", "fn": "cpu_work", "args": {"us": 1}}]})");
  StatusOr<models::PipelineConfig> tuned = ApplyPlan(other, plan);
  ASSERT_FALSE(tuned.ok());
  EXPECT_NE(tuned.status().message().find("another pipeline"), std::string::npos) << tuned.status().message();
}

TEST(ApplyPlan, MovesAnExistingCacheWhoseUpstreamWasMeasured) {
  const char* config = R"({"name": "moved", "stages": [
    {"name": "src", "op": "range", "args": {"count": 500}},
    {"name": "cheap", "op": "map", "fn": "cpu_work", "args": {"us": 10}},
    {"name": "early_cache", "op": "cache"},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 3000}},
    {"name": "rep", "op": "repeat"}]})";
  TuneInput input = MakeInput(config, {{"cheap", {0.01, 0.01, 1e4}}, {"decode", {3.0, 3.0, 1e4}}}, 2);
  Plan plan = TunedPlan(input, 2);
  ASSERT_EQ(plan.removed_stages, std::vector<std::string>{"early_cache"});
  StatusOr<models::PipelineConfig> tuned = ApplyPlan(*input.config, plan);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_FALSE(tuned->FindStage("early_cache"));
  std::optional<size_t> decode = tuned->FindStage("decode");
  ASSERT_TRUE(decode);
  EXPECT_EQ(tuned->stages[*decode + 1].op, models::Op::kCache);
}

TEST(UnifiedDiff, ShowsOnlyTheChangedLinesWithContext) {
  std::string before = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
  std::string after = "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\nk\n";
  std::string diff = UnifiedDiff(before, after, "old.json", "new.json", 1);
  EXPECT_EQ(diff,
            "--- old.json\n+++ new.json\n"
            "@@ -4,3 +4,3 @@\n d\n-e\n+E\n f\n"
            "@@ -10,1 +10,2 @@\n j\n+k\n");
  EXPECT_EQ(UnifiedDiff(before, before, "a", "b"), "");
}

}  // namespace
}  // namespace pipetune::tuner

// The one crossing between a configuration and the names users set knobs
// by: a DataLoader's kwargs file, its CI baseline and a what-if all go
// through it, so a wrong field here is a wrong num_workers in each.
#include "pipetune/models/knob_values.h"

#include <gtest/gtest.h>

namespace pipetune::models {
namespace {

// A DataLoader-shaped profile: a worker group over load and collate, then a
// pin_memory stage that may be switched.
Profile LoaderShaped() {
  Profile profile;
  for (const char* name : {"load", "collate", "pin_memory"}) {
    StageProfile stage;
    stage.name = name;
    profile.stages.push_back(stage);
  }
  profile.stages[0].group = 0;
  profile.stages[1].group = 0;
  profile.stages[2].switchable = true;
  profile.stages[2].enabled = true;
  profile.stages[2].switch_knob = "pin_memory";
  WorkerGroup group;
  group.name = "workers";
  group.last_stage = 1;
  group.workers = 3;
  group.buffer_per_worker = 4;
  group.may_run_on_consumer = true;
  group.workers_knob = "num_workers";
  group.buffer_knob = "prefetch_factor";
  group.persistent_knob = "persistent_workers";
  profile.groups.push_back(group);
  return profile;
}

TEST(KnobValues, NamesTheTracedSettingsInTheProfilesOrder) {
  Profile profile = LoaderShaped();
  Json values = KnobValues(profile, ObservedConfiguration(profile));
  EXPECT_EQ(values.dump(),
            R"({"num_workers":3,"prefetch_factor":4,"persistent_workers":false,"pin_memory":true})");
}

TEST(KnobValues, SetsWhatItNamesAndLeavesTheRest) {
  Profile profile = LoaderShaped();
  Json wanted{{"num_workers", 0}, {"pin_memory", false}, {"prefetch_factor", "many"}, {"cache", 1}};
  Configuration config = WithKnobValues(profile, ObservedConfiguration(profile), wanted);
  EXPECT_EQ(config.group_workers.at(0), 0);
  EXPECT_FALSE(config.stage_enabled.at(2));
  EXPECT_EQ(config.group_buffer.at(0), 4);  // a value of the wrong type is not taken
  EXPECT_TRUE(config.stage_enabled.at(0));
}

TEST(KnobValues, ReadsBackWhatItSet) {
  Profile profile = LoaderShaped();
  Json values{
      {"num_workers", 7}, {"prefetch_factor", 1}, {"persistent_workers", true}, {"pin_memory", false}};
  EXPECT_EQ(KnobValues(profile, WithKnobValues(profile, ObservedConfiguration(profile), values)), values);
}

TEST(KnobValues, APipelineWithoutNamedKnobsHasNone) {
  Profile profile;
  StageProfile stage;
  stage.name = "decode";
  stage.parallel = true;
  profile.stages.push_back(stage);
  EXPECT_TRUE(KnobValues(profile, ObservedConfiguration(profile)).empty());
}

}  // namespace
}  // namespace pipetune::models

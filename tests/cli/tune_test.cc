// `pipetune tune`: a traced synthetic pipeline in, a valid tuned config and a
// plan out; bad input is exit 2 with a message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_test_util.h"
#include "pipetune/base/json.h"

namespace pipetune::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A CPU-bound map at parallelism 1 with a bigger budget than it uses, an
// unknown key the rewrite must keep, and no prefetch at the end.
constexpr const char* kMisconfigured = R"({
  "name": "tune_me",
  "owner": "data-team",
  "resources": {"cores": 2, "memory": "256MiB"},
  "stages": [
    {"name": "numbers", "op": "range", "args": {"bytes": 1000}},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 400}, "parallelism": 1},
    {"name": "batch", "op": "batch", "args": {"size": 4}}
  ]
})";

class CliTune : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("cli_tune");
    WriteFile(*dir_ / "p.json", kMisconfigured);
    CommandResult run =
        RunPipetune("run " + (*dir_ / "p.json") + " --seconds 2 --trace " + (*dir_ / "run.ptrace"));
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Path(const std::string& name) { return *dir_ / name; }
  static TempDir* dir_;
};

TempDir* CliTune::dir_ = nullptr;

TEST_F(CliTune, WritesAValidTunedConfigAndPrintsThePlan) {
  CommandResult result = RunPipetune("tune " + Path("run.ptrace") + " -o " + Path("tuned.json") + " --diff");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("work.parallelism"));
  EXPECT_THAT(result.out, HasSubstr("tuned config: " + Path("tuned.json")));
  EXPECT_THAT(result.out, HasSubstr("+++ b/"));  // the diff
  Json tuned = Json::parse(ReadFile(Path("tuned.json")));
  EXPECT_EQ(tuned["owner"], "data-team");
  EXPECT_EQ(tuned.begin().key(), "name");
  ASSERT_EQ(tuned["stages"].size(), 4u);
  EXPECT_EQ(tuned["stages"][3]["op"], "prefetch");
  EXPECT_EQ(tuned["stages"][1]["args"]["us"], 400);
  EXPECT_GE(tuned["stages"][1]["parallelism"].get<int>(), 2);  // 2 cores for a CPU-bound map
  // The tuned config runs.
  CommandResult rerun = RunPipetune("run " + Path("tuned.json") + " --seconds 0.5");
  EXPECT_EQ(rerun.exit_code, 0) << rerun.err;
}

TEST_F(CliTune, JsonPlanHasThePredictedThroughput) {
  CommandResult result = RunPipetune("tune " + Path("run.ptrace") + " --format json -o " +
                                     Path("tuned2.json") + " --cores 1 --memory 64MiB");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  Json plan = Json::parse(result.out);
  EXPECT_GT(plan["predicted_throughput"].get<double>(), 0);
  EXPECT_GT(plan["measured_throughput"].get<double>(), 0);
  EXPECT_EQ(plan["budgets"]["cores"], 1.0);
  EXPECT_EQ(plan["budgets"]["memory_bytes"], 64u << 20);
  EXPECT_LE(plan["memory"]["total_bytes"].get<double>(), 64u << 20);
  EXPECT_EQ(plan["config_path"], Path("tuned2.json"));
  EXPECT_FALSE(plan["knobs"].empty());
}

TEST_F(CliTune, BadInputIsExitTwoWithAMessage) {
  CommandResult missing = RunPipetune("tune " + Path("nope.ptrace"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("nope.ptrace"));

  CommandResult config = RunPipetune("tune " + Path("p.json"));
  EXPECT_EQ(config.exit_code, 2);
  EXPECT_THAT(config.err, HasSubstr("--verify"));

  CommandResult memory = RunPipetune("tune " + Path("run.ptrace") + " --memory lots");
  EXPECT_EQ(memory.exit_code, 2);
  EXPECT_THAT(memory.err, HasSubstr("--memory"));

  CommandResult objective = RunPipetune("tune " + Path("run.ptrace") + " --objective fastest");
  EXPECT_EQ(objective.exit_code, 2);

  CommandResult tiny = RunPipetune("tune " + Path("run.ptrace") + " --memory 1KiB -o " + Path("never.json"));
  EXPECT_EQ(tiny.exit_code, 2);
  EXPECT_THAT(tiny.err, HasSubstr("no configuration fits"));
  EXPECT_FALSE(std::filesystem::exists(Path("never.json")));
}

// --engine takes a DataLoader's trace that records its dataset; anything
// else is exit 2 saying what to give, and nothing is written.
TEST_F(CliTune, EngineNeedsADataLoadersTraceWithItsDataset) {
  CommandResult config = RunPipetune("tune " + Path("run.ptrace") + " --engine -o " + Path("engine.json"));
  EXPECT_EQ(config.exit_code, 2);
  EXPECT_THAT(config.err, HasSubstr(Path("run.ptrace") + ": --engine takes one DataLoader's trace"));

  const std::string old_trace =
      std::string(PIPETUNE_SOURCE_DIR) + "/tests/analyzer/dataloader_golden/map_workers0/trace";
  CommandResult old = RunPipetune("tune " + old_trace + " --engine -o " + Path("engine.json"));
  EXPECT_EQ(old.exit_code, 2);
  EXPECT_THAT(old.err, HasSubstr("the trace does not record the DataLoader's dataset and transforms"));

  CommandResult both = RunPipetune("tune " + old_trace + " --engine --verify");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("--engine and --verify"));
  EXPECT_FALSE(std::filesystem::exists(Path("engine.json")));
}

// A config reading files by a relative glob, traced where it lives and tuned
// into another directory: the tuned config still reads the same files.
TEST_F(CliTune, TunedConfigElsewhereKeepsReadingTheSameFiles) {
  std::filesystem::create_directories(Path("pipe/data"));
  std::filesystem::create_directories(Path("elsewhere"));
  for (int i = 0; i < 3; ++i) WriteFile(Path("pipe/data/f" + std::to_string(i) + ".txt"), "payload");
  WriteFile(Path("pipe/files.json"), R"({"name": "files", "stages": [
    {"name": "list", "op": "list_files", "args": {"pattern": "data/*.txt"}},
    {"name": "read", "op": "read_file"},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 200}},
    {"name": "again", "op": "repeat"}]})");
  CommandResult run =
      RunPipetune("run " + Path("pipe/files.json") + " --seconds 1 --trace " + Path("files.ptrace"));
  ASSERT_EQ(run.exit_code, 0) << run.err;

  CommandResult beside = RunPipetune("tune " + Path("files.ptrace") + " --cores 2");
  ASSERT_EQ(beside.exit_code, 0) << beside.err;
  EXPECT_THAT(beside.out, HasSubstr("tuned config: " + Path("pipe/files.tuned.json")));
  Json same_dir = Json::parse(ReadFile(Path("pipe/files.tuned.json")));
  EXPECT_EQ(same_dir["stages"][0]["args"]["pattern"], "data/*.txt");

  CommandResult moved =
      RunPipetune("tune " + Path("files.ptrace") + " --cores 2 -o " + Path("elsewhere/t.json"));
  ASSERT_EQ(moved.exit_code, 0) << moved.err;
  Json tuned = Json::parse(ReadFile(Path("elsewhere/t.json")));
  EXPECT_EQ(tuned["stages"][0]["args"]["pattern"], "../pipe/data/*.txt");
  Json once = Json::array();  // without the repeat: one pass of the 3 files
  for (const Json& stage : tuned["stages"])
    if (stage["op"] != "repeat") once.push_back(stage);
  tuned["stages"] = once;
  WriteFile(Path("elsewhere/once.json"), tuned.dump());
  std::string summary = Path("elsewhere/summary.json");
  CommandResult rerun = RunPipetune("run " + Path("elsewhere/once.json") + " --summary " + summary);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_EQ(Json::parse(ReadFile(summary))["elements"], 3);
}

// Files listed under a repeat right after the source (the image example's
// layout): the trace says how many files an epoch has, so the tuner prices a
// cache after the expensive stage, moves the repeat after it, and keeps the
// per-epoch order with a shuffle of the whole epoch.
// Two cheap maps one after the other: whether fusing them pays turns on what
// a hand-off between stages costs. `--handoff-ns` gives that figure in place
// of the host's probe: the plan follows it (no fusion when a hand-off is
// free, the fusion when it costs more than the maps' work), says it was
// given, and is the same on every run.
constexpr const char* kAdjacentMaps = R"({"name": "two_maps", "resources": {"cores": 2, "memory": "256MiB"},
  "stages": [
    {"name": "numbers", "op": "range", "args": {"bytes": 64}},
    {"name": "first", "op": "map", "fn": "cpu_work", "args": {"us": 20}, "parallelism": 1},
    {"name": "second", "op": "map", "fn": "cpu_work", "args": {"us": 20}, "parallelism": 1}]})";

TEST_F(CliTune, HandoffNsDecidesTheFusionInPlaceOfTheProbeAndTheSamePlanEachRun) {
  WriteFile(Path("maps.json"), kAdjacentMaps);
  CommandResult run = RunPipetune("run " + Path("maps.json") + " --seconds 1 --trace " + Path("maps.ptrace"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto plan = [&](const std::string& ns) {
    CommandResult tune = RunPipetune("tune " + Path("maps.ptrace") + " --format json --handoff-ns " + ns +
                                     " -o " + Path("maps." + ns + ".json"));
    EXPECT_EQ(tune.exit_code, 0) << tune.err;
    return tune.out;
  };
  const std::string costly = plan("100000");
  Json fused = Json::parse(costly);
  ASSERT_TRUE(fused.contains("rewrites")) << costly;
  EXPECT_EQ(fused["rewrites"][0]["kind"], "fuse_maps");
  EXPECT_THAT(costly, HasSubstr("100.0 us of CPU per element (given with --handoff-ns)"));
  EXPECT_THAT(costly, Not(HasSubstr("measured on this host")));
  EXPECT_EQ(plan("100000"), costly) << "the same trace and hand-off gave another plan";

  Json free_handoff = Json::parse(plan("0"));
  EXPECT_FALSE(free_handoff.contains("rewrites")) << free_handoff.dump(2);
  // Where no fusion is priced (one map), the flag changes nothing.
  CommandResult one_map = RunPipetune("tune " + Path("run.ptrace") + " --format json --handoff-ns 5000 -o " +
                                      Path("one_map.json"));
  ASSERT_EQ(one_map.exit_code, 0) << one_map.err;
  EXPECT_THAT(one_map.out, Not(HasSubstr("hand-off")));
}

TEST_F(CliTune, FindsTheCacheUnderARepeatRightAfterAFileSource) {
  std::filesystem::create_directories(Path("epochs/data"));
  for (int i = 0; i < 20; ++i) WriteFile(Path("epochs/data/f" + std::to_string(i) + ".txt"), "payload");
  WriteFile(Path("epochs/p.json"), R"({"name": "epochs", "resources": {"cores": 2, "memory": "1GiB"},
    "stages": [
    {"name": "list", "op": "list_files", "args": {"pattern": "data/*.txt", "shuffle_seed": 5}},
    {"name": "again", "op": "repeat"},
    {"name": "read", "op": "read_file"},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 300}},
    {"name": "batch", "op": "batch", "args": {"size": 4}}]})");
  CommandResult run =
      RunPipetune("run " + Path("epochs/p.json") + " --seconds 2 --trace " + Path("epochs.ptrace"));
  ASSERT_EQ(run.exit_code, 0) << run.err;

  CommandResult tune = RunPipetune("tune " + Path("epochs.ptrace") + " -o " + Path("epochs/tuned.json"));
  ASSERT_EQ(tune.exit_code, 0) << tune.err;
  EXPECT_THAT(tune.out, HasSubstr("\"again\" moved after \"work\""));
  EXPECT_THAT(tune.out, HasSubstr("* \"again\" after \"work\": memory cache after \"work\""));
  EXPECT_THAT(tune.out, ::testing::Not(HasSubstr("the epoch's size is unknown")));
  Json tuned = Json::parse(ReadFile(Path("epochs/tuned.json")));
  std::vector<std::string> ops;
  for (const Json& stage : tuned["stages"]) ops.push_back(stage["op"]);
  EXPECT_THAT(ops, ::testing::ElementsAre("list_files", "read_file", "map", "cache", "shuffle", "repeat",
                                          "batch", "prefetch"));
  EXPECT_EQ(tuned["stages"][4]["args"]["buffer"], 20);
  EXPECT_EQ(tuned["stages"][4]["args"]["seed"], 5);

  // --no-cache: the same trace planned without one, and the plan says why.
  CommandResult uncached =
      RunPipetune("tune " + Path("epochs.ptrace") + " --no-cache -o " + Path("epochs/nc.json"));
  ASSERT_EQ(uncached.exit_code, 0) << uncached.err;
  EXPECT_THAT(uncached.out, HasSubstr("caches are off (--no-cache)"));
  EXPECT_THAT(ReadFile(Path("epochs/nc.json")), ::testing::Not(HasSubstr("\"cache\"")));

  // The tuned config runs, and after the first epoch the cache replays it.
  std::string summary = Path("epochs/summary.json");
  CommandResult rerun = RunPipetune("run " + Path("epochs/tuned.json") + " --seconds 1 --summary " + summary);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  Json stages = Json::parse(ReadFile(summary))["stages"];
  EXPECT_EQ(stages[2]["elements"], 20) << "the work ran once, for the first epoch";
  EXPECT_GT(stages[3]["elements"].get<int>(), 40) << "the cache replayed later epochs";
}

TEST_F(CliTune, VerifyRunsThePlanAndKeepsTheBestMeasured) {
  CommandResult result =
      RunPipetune("tune " + Path("p.json") + " --verify --seconds 1 --rounds 1 -o " + Path("verified.json"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("meas/pred"));
  EXPECT_THAT(result.out, HasSubstr("best: round"));
  Json tuned = Json::parse(ReadFile(Path("verified.json")));
  EXPECT_EQ(tuned["name"], "tune_me");
  EXPECT_EQ(result.err, "") << "no progress output when stderr is not a terminal";
}

}  // namespace
}  // namespace pipetune::testing

// tf.data's adapter (workflow/tfdata.h): a solved config becomes a plan keyed
// by the script's call sites and the lines a user would write, and a plan
// file given to --apply is checked before the program starts. The recorder
// itself runs in tests/python/test_tfdata.py, on TensorFlow.
#include "pipetune/workflow/tfdata.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_dir.h"

namespace pipetune::workflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What the recorder writes for: list_files, map(process_path) (made parallel
// by TF), map(augment) (random), batch(32) fused into it, the prefetch TF
// added, an interleave of its own, and the script's epochs.
constexpr const char* kTraced = R"json({
  "name": "train_tf.py",
  "stages": [
    {"name": "train_tf.py:31 list_files('d/*.jpg')", "op": "range", "args": {"count": 64},
     "call_site": "/w/train_tf.py:31 list_files"},
    {"name": "train_tf.py:32 map(process_path)", "op": "map", "fn": "process_path", "parallelism": 2,
     "call_site": "/w/train_tf.py:32 map"},
    {"name": "train_tf.py:33 interleave(read)", "op": "map", "fn": "read", "parallelism": 1,
     "call_site": "/w/train_tf.py:33 interleave"},
    {"name": "train_tf.py:34 map(augment)", "op": "map", "fn": "augment", "random": true,
     "call_site": "/w/train_tf.py:34 map"},
    {"name": "train_tf.py:35 batch(32)", "op": "batch", "args": {"size": 32},
     "call_site": "/w/train_tf.py:35 batch"},
    {"name": "train_tf.py:35 Prefetch (added by TensorFlow)", "op": "prefetch", "buffer": 1,
     "call_site": "/w/train_tf.py:35 batch"},
    {"name": "epochs (the script's loop)", "op": "repeat", "args": {"count": 3}, "tfdata_epochs": true}
  ],
  "tfdata": {"ops": [
    {"stage": "train_tf.py:31 list_files('d/*.jpg')", "file": "train_tf.py", "line": 31, "method": "list_files",
     "code": "ds = tf.data.Dataset.list_files(pattern)", "args": {}},
    {"stage": "train_tf.py:32 map(process_path)", "file": "train_tf.py", "line": 32, "method": "map",
     "fn": "process_path", "code": "ds = ds.map(process_path)", "args": {}},
    {"stage": "train_tf.py:33 interleave(read)", "file": "train_tf.py", "line": 33, "method": "interleave",
     "fn": "read", "code": "ds = ds.interleave(read, cycle_length=2)", "args": {"cycle_length": 2}},
    {"stage": "train_tf.py:34 map(augment)", "file": "train_tf.py", "line": 34, "method": "map",
     "fn": "augment", "code": "ds = ds.map(augment, num_parallel_calls=2)", "args": {"num_parallel_calls": 2}},
    {"stage": "train_tf.py:35 batch(32)", "file": "train_tf.py", "line": 35, "method": "batch",
     "code": "images = ds.batch(32)", "args": {"batch_size": 32}},
    {"stage": "train_tf.py:35 Prefetch (added by TensorFlow)", "file": "train_tf.py", "line": 35,
     "method": "prefetch", "added_by_tensorflow": true, "args": {}}
  ]}
})json";

models::PipelineConfig Traced() {
  StatusOr<models::PipelineConfig> config = models::ParseConfig(kTraced, "traced");
  EXPECT_TRUE(config.ok()) << config.status().message();
  return *config;
}

// The solver's answer: parallelism set, a cache after the decoding map, the
// added prefetch deepened.
models::PipelineConfig Tuned(const models::CacheLocation& location) {
  models::PipelineConfig tuned = Traced();
  tuned.stages[1].parallelism = 3;
  tuned.stages[2].parallelism = 4;
  tuned.stages[3].parallelism = 2;
  tuned.stages[5].buffer = 4;
  models::StageConfig cache;
  cache.name = "cache";
  cache.op = models::Op::kCache;
  cache.location = location;
  tuned.stages.insert(tuned.stages.begin() + 2, cache);
  return tuned;
}

TEST(TfDataPlanTest, KnobsAndAddedStagesGoToTheCallsTheyFollow) {
  StatusOr<TfDataPlan> plan = TfDataPlanFrom(Traced(), Tuned(models::CacheLocation::Memory()));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const Json& sites = plan->sites;
  EXPECT_EQ(sites["/w/train_tf.py:32 map"]["num_parallel_calls"], 3);
  EXPECT_EQ(sites["/w/train_tf.py:32 map"]["cache_after"], "memory");
  // An interleave's cycle is at least its parallel calls.
  EXPECT_EQ(sites["/w/train_tf.py:33 interleave"]["num_parallel_calls"], 4);
  EXPECT_EQ(sites["/w/train_tf.py:33 interleave"]["cycle_length"], 4);
  // TF's own prefetch is sized by a prefetch added after the last call.
  EXPECT_EQ(sites["/w/train_tf.py:35 batch"]["prefetch_after"], 4);
  // The source has no knob; the script's loop is no call.
  EXPECT_FALSE(sites.contains("/w/train_tf.py:31 list_files"));
  // A call already as the plan has it is no change to make.
  EXPECT_THAT(plan->code_change,
              ElementsAre("train_tf.py:32  ds.map(process_path, num_parallel_calls=3).cache()",
                          "train_tf.py:33  ds.interleave(read, cycle_length=4, num_parallel_calls=4)",
                          "train_tf.py:35  ds.batch(32).prefetch(4)"));
}

TEST(TfDataPlanTest, ADiskCacheIsAFileInTheCacheDirectoryNamedByItsLine) {
  StatusOr<TfDataPlan> plan = TfDataPlanFrom(Traced(), Tuned(models::CacheLocation::Disk("/scratch/c")));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->sites["/w/train_tf.py:32 map"]["cache_after"], "/scratch/c/tfdata_cache_train_tf_32");
  EXPECT_THAT(plan->code_change[0], HasSubstr(".cache(\"/scratch/c/tfdata_cache_train_tf_32\")"));
}

// The record's ops as the recorder writes them: each with its call site
// (TF's added prefetch with the call it follows).
models::PipelineConfig TracedWithCallSites() {
  models::PipelineConfig traced = Traced();
  for (Json& op : traced.raw["tfdata"]["ops"]) {
    for (const models::StageConfig& stage : traced.stages) {
      if (stage.name == op["stage"]) op["call_site"] = stage.raw["call_site"];
    }
  }
  return traced;
}

// Where the plan sets every knob TensorFlow would tune, it turns the
// autotuner off and says the line to write; where one is left to it (an
// argument written AUTOTUNE the plan keeps), it leaves it on.
TEST(TfDataPlanTest, TheAutotunerIsTurnedOffOnlyWhereThePlanSetsEveryKnob) {
  StatusOr<TfDataPlan> plan = TfDataPlanFrom(TracedWithCallSites(), Tuned(models::CacheLocation::Memory()));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->autotune_off);
  EXPECT_EQ(TfDataPlanToJson(*plan)["tfdata_plan"]["options"], Json({{"autotune", false}}));
  // On the pipeline's last line, named as that line names it.
  EXPECT_EQ(plan->code_change.back(),
            "train_tf.py:35  and after it: options = tf.data.Options(); options.autotune.enabled = False; "
            "images = images.with_options(options)  # every knob is set: TensorFlow's autotuner has nothing "
            "to tune");

  models::PipelineConfig traced = TracedWithCallSites();
  traced.raw["tfdata"]["ops"][4]["args"]["num_parallel_calls"] =
      -1;  // batch(32, num_parallel_calls=AUTOTUNE)
  plan = TfDataPlanFrom(traced, Tuned(models::CacheLocation::Memory()));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->autotune_off);
  EXPECT_FALSE(TfDataPlanToJson(*plan)["tfdata_plan"].contains("options"));
  EXPECT_THAT(plan->code_change.back(), ::testing::Not(HasSubstr("autotune")));

  // TF's own prefetch left unsized: the autotuner still has it.
  models::PipelineConfig kept = Tuned(models::CacheLocation::Memory());
  kept.stages[6].buffer.reset();
  plan = TfDataPlanFrom(TracedWithCallSites(), kept);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->autotune_off);
  // A record without call sites (an op not tied to a call): left on.
  plan = TfDataPlanFrom(Traced(), Tuned(models::CacheLocation::Memory()));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->autotune_off);
}

class TfDataPlanFileTest : public test_support::TestDir {};

TEST_F(TfDataPlanFileTest, APlanWrittenIsReadBack) {
  StatusOr<TfDataPlan> plan = TfDataPlanFrom(Traced(), Tuned(models::CacheLocation::Memory()));
  ASSERT_TRUE(plan.ok());
  std::string path = Write("plan.json", DumpJson(TfDataPlanToJson(*plan), 2));
  EXPECT_TRUE(IsTfDataPlanFile(path));
  EXPECT_TRUE(ReadTfDataPlan(path).ok());
  EXPECT_FALSE(IsTfDataPlanFile(Write("kwargs.json", R"({"num_workers": 2})")));
  EXPECT_EQ(TfDataPlanPath("", "/runs/run.ptrace"), "/runs/run.tfdata.json");
}

TEST_F(TfDataPlanFileTest, ABadPlanIsRefusedNamingTheSiteAndTheKey) {
  auto error = [&](const std::string& sites) {
    StatusOr<Json> read = ReadTfDataPlan(Write("bad.json", R"({"tfdata_plan": {"sites": )" + sites + "}}"));
    EXPECT_FALSE(read.ok());
    return read.ok() ? std::string() : read.status().message();
  };
  EXPECT_THAT(
      error(R"({"/w/t.py:32 map": {"num_parallel_calls": 0}})"),
      HasSubstr("site \"/w/t.py:32 map\": key \"num_parallel_calls\": expected an integer >= 1, got 0"));
  EXPECT_THAT(error(R"({"/w/t.py:32 map": {"num_parallel": 2}})"), HasSubstr("unknown key \"num_parallel\""));
  EXPECT_THAT(error(R"({"/w/t.py map": {}})"), HasSubstr("expected \"PATH:LINE METHOD\""));
  EXPECT_THAT(error(R"({"/w/t.py:3 map": {"cache_after": ""}})"), HasSubstr("key \"cache_after\""));
  EXPECT_THAT(error(R"([])"), HasSubstr("expected an object of call sites"));
  EXPECT_THAT(error(R"({}, "options": {"autotune": "off"})"),
              HasSubstr("key \"tfdata_plan.options.autotune\": expected true or false, got \"off\""));
  EXPECT_THAT(error(R"({}, "options": {"threads": 2})"),
              HasSubstr("key \"tfdata_plan.options\": unknown key \"threads\""));
  EXPECT_THAT(error(R"({}, "options": [])"), HasSubstr("key \"tfdata_plan.options\": expected an object"));
  // The Nth call of a method on one line is "METHOD#N", N >= 2.
  for (const char* site : {"/w/t.py:5 map#1", "/w/t.py:5 map#0", "/w/t.py:5 map#02", "/w/t.py:5 map#",
                           "/w/t.py:5 map#x", "/w/t.py:5 Map", "/w/t.py:x5 map", ":5 map"}) {
    EXPECT_THAT(error(fmt::format(R"({{"{}": {{}}}})", site)),
                HasSubstr(fmt::format("site \"{}\": expected \"PATH:LINE METHOD\"", site)))
        << site;
  }
}

// Two maps on one line are two sites: a plan sets each its own, and a plan
// written before ordinals (no "#N") still reads, naming the first call.
TEST_F(TfDataPlanFileTest, TwoCallsOnOneLineAreTwoSites) {
  StatusOr<Json> plan = ReadTfDataPlan(Write("two.json", R"({"tfdata_plan": {"sites": {
      "/w/t.py:5 map": {"num_parallel_calls": 3}, "/w/t.py:5 map#2": {"num_parallel_calls": 1},
      "/w/t.py:5 map#12": {"cache_after": "memory"}}}})"));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ((*plan)["tfdata_plan"]["sites"].size(), 3u);
}

// Every input tests/workflow/regressions/ keeps (what the plan fuzzer,
// fuzz/tfdata_plan_fuzz.cc, found, and hand-made lies) is read or refused
// naming the file, and a plan read is read again unchanged once written.
TEST(TfDataPlanRegressions, EveryKeptInputIsReadOrRefusedNamingTheFile) {
  std::filesystem::path dir = std::filesystem::path(PIPETUNE_SOURCE_DIR) / "tests/workflow/regressions";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string name = entry.path().filename().string();
    StatusOr<Json> plan = ParseTfDataPlan(text, name);
    ++files;
    if (!plan.ok()) {
      EXPECT_THAT(plan.status().message(), ::testing::StartsWith(name + ": ")) << name;
      continue;
    }
    std::string saved = DumpJson(*plan);
    StatusOr<Json> again = ParseTfDataPlan(saved, name);
    ASSERT_TRUE(again.ok()) << name << ": " << again.status().message();
    EXPECT_EQ(DumpJson(*again), saved) << name;
  }
  EXPECT_GT(files, 0);
}

// What a user reads for the kept lies: the file, the place, the reason.
TEST(TfDataPlanRegressions, MessagesNameThePlaceAndTheReason) {
  auto message = [](const std::string& text) {
    StatusOr<Json> plan = ParseTfDataPlan(text, "p.json");
    return plan.ok() ? std::string("(read)") : plan.status().message();
  };
  EXPECT_EQ(message(R"({"tfdata_plan": {"sites": {"/w/t.py:5 map": {"num_parallel_calls": 1e400}}}})"),
            "p.json: not valid JSON at line 1, column 68 (byte 67): number overflow parsing '1e400'");
  EXPECT_THAT(
      message(
          R"({"tfdata_plan": {"sites": {"/w/t.py:5 map": {"num_parallel_calls": 18446744073709551615}}}})"),
      HasSubstr("key \"num_parallel_calls\": expected an integer >= 1, got 18446744073709551615"));
  EXPECT_THAT(message(R"({"tfdata_plan": {"sites": {"/w/t.py:5 map": {"num_parallel_calls": 2.0}}}})"),
              HasSubstr("expected an integer >= 1, got 2.0"));
  EXPECT_THAT(
      message("{\"tfdata_plan\": " + std::string(100000, '[')),
      HasSubstr("p.json: not valid JSON at line 1, column 80 (byte 79): nested deeper than 64 levels"));
}

}  // namespace
}  // namespace pipetune::workflow

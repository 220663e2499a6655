// tf.data as the third kind of run (workflow/src/tfdata_adapter.cc): a
// trace whose config carries the recorder's "tfdata" record goes through the
// same commands as every trace, and each answers in tf.data's terms: tune
// writes a plan keyed by call site and the code change (never a tuned
// config), the gate records a "tfdata" baseline and judges the script's ops,
// and `profile --apply` tells a plan from DataLoader keyword arguments. The
// trace here is the engine's run of such a config, so no TensorFlow is
// needed; tests/python/test_tfdata.py runs the recorder itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "pipetune/base/files.h"
#include "pipetune/workflow/baseline.h"
#include "pipetune/workflow/check.h"
#include "pipetune/workflow/python_bootstrap.h"
#include "pipetune/workflow/recording.h"
#include "pipetune/workflow/run.h"
#include "pipetune/workflow/tfdata.h"
#include "pipetune/workflow/tune.h"
#include "test_dir.h"

namespace pipetune::workflow {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

// What the recorder writes for `ds = ds.map(work)` behind a source, batched:
// the ops as stages named by their lines, each with its call site, and the
// record of the calls as written. The map's work is the engine's cpu_work,
// so the engine can run it; one worker on two cores leaves it the
// bottleneck, which the plan must raise.
constexpr const char* kScript = R"json({
  "name": "train_tf.py", "resources": {"cores": 2, "memory": "256MiB"},
  "stages": [
    {"name": "train_tf.py:10 range()", "op": "range", "call_site": "/w/train_tf.py:10 range"},
    {"name": "train_tf.py:11 map(work)", "op": "map", "fn": "cpu_work", "args": {"us": 300},
     "parallelism": 1, "call_site": "/w/train_tf.py:11 map"},
    {"name": "train_tf.py:12 batch(8)", "op": "batch", "args": {"size": 8},
     "call_site": "/w/train_tf.py:12 batch"}
  ],
  "tfdata": {"ops": [
    {"stage": "train_tf.py:10 range()", "file": "train_tf.py", "line": 10, "method": "range",
     "code": "ds = tf.data.Dataset.range(10**9)", "args": {}},
    {"stage": "train_tf.py:11 map(work)", "file": "train_tf.py", "line": 11, "method": "map", "fn": "work",
     "code": "ds = ds.map(work)", "args": {}},
    {"stage": "train_tf.py:12 batch(8)", "file": "train_tf.py", "line": 12, "method": "batch",
     "code": "ds = ds.batch(8)", "args": {"batch_size": 8}}
  ]}
})json";

class TfDataAdapterTest : public test_support::TestDir {
 protected:
  // The script's trace, recorded once for the whole suite (a second of runs
  // on a loaded host is the test's main cost).
  // Its own folder per process: CTest runs each test of the suite as a
  // process of its own, side by side, and one's teardown must not remove
  // another's trace.
  static std::string Dir() {
    return ::testing::TempDir() + "pipetune_tfdata_adapter." + std::to_string(::getpid());
  }
  static void SetUpTestSuite() {
    const std::string dir = Dir();
    std::filesystem::create_directories(dir);
    const std::string config = dir + "/train_tf.json";
    ASSERT_TRUE(WriteFileAtomically(config, kScript).ok());
    trace_ = new std::string(dir + "/train_tf.ptrace");
    StatusOr<runtime::RunSummary> ran = RunConfigFile(config, TracedRunOptions(1.0, *trace_));
    ASSERT_TRUE(ran.ok()) << ran.status().message();
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(Dir());
    delete trace_;
  }
  static std::string* trace_;
};
std::string* TfDataAdapterTest::trace_ = nullptr;

TEST_F(TfDataAdapterTest, TheTraceIsTfDatasKind) { EXPECT_EQ(OpenRecording({*trace_}).kind(), "tfdata"); }

TEST_F(TfDataAdapterTest, TuneWritesAPlanByCallSiteAndTheCodeChangeNotAConfig) {
  TuneRequest request;
  request.traces = {*trace_};
  request.budgets.cores = 2;
  request.output = Path("plan.tfdata.json");
  StatusOr<TuneResult> result = Tune(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_FALSE(result->config.has_value()) << "a tf.data script gets no tuned config";
  ASSERT_TRUE(result->tfdata.has_value());

  // The file --apply reads: the map's call site with more parallel calls.
  StatusOr<Json> plan = ReadTfDataPlan(request.output);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const Json& site = (*plan)[kTfDataPlanKey]["sites"]["/w/train_tf.py:11 map"];
  ASSERT_TRUE(site.contains("num_parallel_calls")) << plan->dump();
  EXPECT_GE(site["num_parallel_calls"].get<int>(), 2);

  // What is printed: the JSON names the plan and holds it; the text ends
  // with the line a user would write.
  Json printed = TuneResultToJson(*result);
  EXPECT_EQ(printed["output"], request.output);
  EXPECT_EQ(printed[kTfDataPlanKey]["sites"], (*plan)[kTfDataPlanKey]["sites"]);
  EXPECT_FALSE(printed.contains("config_path"));
  EXPECT_THAT(FormatTuneResult(*result), HasSubstr("train_tf.py:11  ds.map(work, num_parallel_calls="));

  // A C++ source takes a config's knobs, not a script's.
  request.source = Path("pipeline.cc");
  StatusOr<TuneResult> with_source = Tune(request);
  ASSERT_FALSE(with_source.ok());
  EXPECT_EQ(with_source.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(with_source.status().message(), HasSubstr("tf.data script's trace"));
}

TEST_F(TfDataAdapterTest, TheGateRecordsATfDataBaselineAndJudgesTheScriptsOps) {
  BaselineRequest request;
  request.traces = {*trace_};
  StatusOr<Baseline> baseline = RecordBaseline(request);
  ASSERT_TRUE(baseline.ok()) << baseline.status().message();
  EXPECT_EQ(baseline->kind, kTfDataBaseline);
  const std::string path = Path("base.json");
  ASSERT_TRUE(SaveBaseline(*baseline, path).ok());
  StatusOr<Baseline> read = LoadBaseline(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->kind, kTfDataBaseline);

  // The same run checked against it: the script's ops judged, by line.
  CheckRequest check;
  check.baseline_path = path;
  check.traces = {*trace_};
  StatusOr<CheckReport> report = Check(check);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->verdict, Verdict::kPass);
  bool judged_map = false;
  for (const StageCheck& stage : report->stages) judged_map |= stage.name == "train_tf.py:11 map(work)";
  EXPECT_TRUE(judged_map);

  // A config is not how a script's baseline is checked.
  check.traces.clear();
  check.config_path = Write("other.json", kScript);
  StatusOr<CheckReport> refused = Check(check);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(refused.status().message(), HasSubstr("a tf.data script's baseline"));
}

TEST_F(TfDataAdapterTest, ApplyTellsAPlanFromKeywordArguments) {
  ::setenv("PIPETUNE_PYTHON_DIR", (std::string(PIPETUNE_SOURCE_DIR) + "/python").c_str(), 1);
  const std::string plan = Write(
      "p.tfdata.json", R"({"tfdata_plan": {"sites": {"/w/train_tf.py:11 map": {"num_parallel_calls": 2}}}})");
  const std::string kwargs = Write("k.json", R"({"num_workers": 2})");

  StatusOr<PythonEnvironment> tfdata = PythonBootstrapEnvironment(plan);
  ASSERT_TRUE(tfdata.ok()) << tfdata.status().message();
  EXPECT_THAT(tfdata->variables, Contains(Pair("PIPETUNE_TFDATA_APPLY", plan)));
  StatusOr<PythonEnvironment> dataloader = PythonBootstrapEnvironment(kwargs);
  ASSERT_TRUE(dataloader.ok()) << dataloader.status().message();
  EXPECT_THAT(dataloader->variables, Contains(Pair("PIPETUNE_DATALOADER_APPLY", kwargs)));

  // A bad plan is refused before the program starts, naming the site's key.
  const std::string bad =
      Write("bad.tfdata.json", R"({"tfdata_plan": {"sites": {"/w/train_tf.py:11 map": {"workers": 2}}}})");
  StatusOr<PythonEnvironment> refused = PythonBootstrapEnvironment(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(refused.status().message(), HasSubstr("unknown key \"workers\""));
  ::unsetenv("PIPETUNE_PYTHON_DIR");
}

}  // namespace
}  // namespace pipetune::workflow

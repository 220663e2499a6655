// `pipetune baseline` and `pipetune check` as a CI job calls them: exit codes
// 0 / 1 / 2, what the job log shows, and the files it publishes.
#include <gtest/gtest.h>

#include <chrono>

#include "cli_test_util.h"
#include "pipetune/base/json.h"

namespace pipetune::testing {
namespace {

std::string Pipeline(int parallelism) {
  return R"({"name": "cli_gate", "stages": [
    {"name": "source", "op": "range", "args": {"count": 100000}},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 300}, "parallelism": )" +
         std::to_string(parallelism) + R"(},
    {"name": "batch", "op": "batch", "args": {"size": 8}}]})";
}

TEST(CheckCommandTest, LoweredParallelismFailsFromTheConfigAloneInUnderASecond) {
  TempDir dir("pipetune_check");
  WriteFile(dir / "p2.json", Pipeline(2));
  WriteFile(dir / "p1.json", Pipeline(1));
  CommandResult recorded =
      RunPipetune("baseline " + (dir / "p2.json") + " --runs 2 --seconds 0.4 --trace-dir " + (dir / "tr") +
                  " -o " + (dir / "base.json"));
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  EXPECT_NE(ReadFile(dir / "base.json").find("\"pipetune_baseline\": 1"), std::string::npos);

  auto start = std::chrono::steady_clock::now();
  CommandResult checked = RunPipetune("check " + (dir / "p1.json") + " --baseline " + (dir / "base.json") +
                                      " --runs 0 --format json --junit " + (dir / "junit.xml") +
                                      " --markdown " + (dir / "summary.md"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(checked.exit_code, 1) << checked.out << checked.err;
  EXPECT_LT(seconds, 1.0);
  Json report = Json::parse(checked.out);
  EXPECT_EQ(report["verdict"], "regression");
  ASSERT_EQ(report["knobs"].size(), 1u);
  EXPECT_EQ(report["knobs"][0]["stage"], "decode");
  EXPECT_EQ(report["knobs"][0]["baseline"], "2");
  EXPECT_EQ(report["knobs"][0]["now"], "1");
  EXPECT_LT(report["knobs"][0]["predicted_change"].get<double>(), -0.1);
  EXPECT_NE(ReadFile(dir / "junit.xml").find("name=\"config\"><failure"), std::string::npos);
  EXPECT_NE(ReadFile(dir / "summary.md").find("| `decode` | parallelism | 2 | 1 |"), std::string::npos);

  // The same config as the baseline's, config only: passes.
  CommandResult same =
      RunPipetune("check " + (dir / "p2.json") + " --baseline " + (dir / "base.json") + " --runs 0");
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("PASS"), std::string::npos);

  // The baseline's own traces judged against it: nothing moved.
  CommandResult traces =
      RunPipetune("check --baseline " + (dir / "base.json") + " " + (dir / "tr/run-0.trace") + " " +
                  (dir / "tr/run-1.trace") + " --format json");
  EXPECT_EQ(traces.exit_code, 0) << traces.out << traces.err;
  Json same_runs = Json::parse(traces.out);
  EXPECT_EQ(same_runs["verdict"], "pass");
  EXPECT_DOUBLE_EQ(same_runs["stages"][1]["cpu_per_element"]["change"].get<double>(), 0.0);
}

TEST(CheckCommandTest, UnreadableOrMalformedBaselineIsBadInput) {
  TempDir dir("pipetune_check");
  std::string config = SourcePath("examples/synthetic/two_stage_cpu.json");
  CommandResult missing = RunPipetune("check " + config + " --baseline " + (dir / "nope.json") + " --runs 0");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.json: cannot read the baseline"), std::string::npos) << missing.err;

  WriteFile(dir / "bad.json", "{\"pipetune_baseline\": 1,, }");
  CommandResult bad = RunPipetune("check " + config + " --baseline " + (dir / "bad.json") + " --runs 0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad.json: not a JSON baseline: byte offset 25"), std::string::npos) << bad.err;
}

TEST(CheckCommandTest, BaselineOfAnotherPipelineIsRefusedNotCompared) {
  CommandResult other =
      RunPipetune("check " + SourcePath("examples/synthetic/per_batch.json") + " --baseline " +
                  SourcePath("examples/ci/baselines/two_stage_cpu.baseline.json") + " --runs 0");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("a baseline of another pipeline (two_stage_cpu), not compared"), std::string::npos)
      << other.err;
  EXPECT_EQ(other.out, "");
}

TEST(CheckCommandTest, AProgramThatFailsIsReportedNotJudgedAndNothingIsWritten) {
  TempDir dir("pipetune_check");
  CommandResult failed =
      RunPipetuneBinary("baseline --runs 2 -o " + (dir / "base.json") + " -- /bin/sh -c 'exit 3'");
  EXPECT_EQ(failed.exit_code, 2);
  EXPECT_NE(failed.err.find("run 1 of 2: `/bin/sh -c exit 3` exited with status 3; no verdict"),
            std::string::npos)
      << failed.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "base.json"));

  CommandResult check = RunPipetuneBinary("check --baseline " +
                                          SourcePath("examples/ci/baselines/two_stage_cpu.baseline.json") +
                                          " --runs 1 -- /bin/sh -c 'exit 0'");
  EXPECT_EQ(check.exit_code, 2);
  EXPECT_NE(check.err.find("not of a DataLoader"), std::string::npos) << check.err;
}

}  // namespace
}  // namespace pipetune::testing

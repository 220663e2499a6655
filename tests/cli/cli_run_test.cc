// `pipetune run`: what a user sees for good and bad configs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "cli_test_util.h"
#include "pipetune/base/json.h"

namespace pipetune::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSmallPipeline = R"({
  "name": "small",
  "stages": [
    {"name": "numbers", "op": "range", "args": {"count": 1000, "bytes": 100}},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 5}, "parallelism": 2},
    {"name": "batch", "op": "batch", "args": {"size": 10}},
    {"name": "prefetch", "op": "prefetch", "buffer": 2}
  ]
})";

TEST(CliUsage, NoCommandIsAUsageError) {
  CommandResult result = RunPipetuneBinary("");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err + result.out, HasSubstr("run"));
}

TEST(CliUsage, HelpListsTheCommands) {
  CommandResult result = RunPipetuneBinary("--help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("run"));
  EXPECT_THAT(result.out, HasSubstr("profile"));
}

TEST(CliUsage, UnknownFlagIsAUsageError) {
  TempDir dir("cli");
  WriteFile(dir / "p.json", kSmallPipeline);
  EXPECT_EQ(RunPipetune("run " + (dir / "p.json") + " --sekonds 3").exit_code, 2);
  EXPECT_EQ(RunPipetune("run " + (dir / "p.json") + " --seconds -1").exit_code, 2);
}

// Every numeric flag of every command, given a value it refuses: a sentence
// naming the flag and what it counts, never CLI11's "not in range 0.000000
// to 1797693134862315708...". The inputs need not exist: flags are checked first.
TEST(CliUsage, EveryNumericFlagRefusesBadValuesWithASentence) {
  struct Case {
    std::string command;  // the command and its input
    std::string flag;
    std::string expected;  // what the message says the flag takes
    std::vector<std::string> bad;
  };
  const std::vector<std::string> never_numbers = {"abc", "nan", "inf", "1e999", "''"};
  std::vector<Case> cases = {
      {"tune t.trace", "--cores", "a positive number of cores", {"0", "-2"}},
      {"tune t.trace", "--max-threads", "a whole number of threads, 1 or more", {"0", "2.5", "99999999999"}},
      {"tune t.trace", "--handoff-ns", "a number of nanoseconds, 0 or more", {"-1", "-0.5"}},
      {"tune p.json --verify", "--seconds", "a positive number of seconds", {"0", "-1"}},
      {"tune p.json --verify", "--rounds", "a whole number of rounds, 0 or more", {"-1", "1.5"}},
      {"check p.json --baseline b.json", "--runs", "a whole number of runs, 0 or more", {"-1", "0.5"}},
      {"check p.json --baseline b.json", "--seconds", "a positive number of seconds", {"0"}},
      {"check p.json --baseline b.json", "--tolerance", "a number of percent from 0 to 99", {"-1", "150"}},
      {"baseline p.json -o b.json", "--runs", "a whole number of runs, 1 or more", {"0", "2.5"}},
      {"baseline p.json -o b.json", "--seconds", "a positive number of seconds", {"0"}},
      {"run p.json", "--seconds", "a number of seconds, 0 or more", {"-1"}},
      {"export t.trace -o t.json", "--max-events", "a whole number of events, 1 or more", {"0", "1.5"}},
      {"profile", "--interval-ms", "a whole number of milliseconds from 1 to 60000", {"0", "60001", "0.5"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> values = c.bad;
    values.insert(values.end(), never_numbers.begin(), never_numbers.end());
    for (const std::string& value : values) {
      std::string args = c.command + " " + c.flag + " " + value + (c.command == "profile" ? " -- true" : "");
      SCOPED_TRACE(args);
      CommandResult result = RunPipetune(args);
      EXPECT_EQ(result.exit_code, 2);
      std::string shown = value == "''" ? "nothing" : value;
      EXPECT_THAT(result.err, HasSubstr(c.flag + ": expected " + c.expected + ", got " + shown));
      EXPECT_THAT(result.err, Not(HasSubstr("not in range")));
    }
  }
  // What the issue met: --cores 0.
  CommandResult cores = RunPipetune("tune t.trace --cores 0");
  EXPECT_THAT(cores.err, HasSubstr("--cores: expected a positive number of cores, got 0"));
}

// Run bare, the commands whose input can be several things say what it may
// be and show a use, not CLI11's "input is required".
TEST(CliUsage, BareTuneCheckAndBaselineSayWhatTheInputIs) {
  CommandResult tune = RunPipetune("tune");
  EXPECT_EQ(tune.exit_code, 2);
  EXPECT_THAT(tune.err, HasSubstr("tune: expected an input: a trace"));
  EXPECT_THAT(tune.err, HasSubstr("a pipeline config with --verify"));
  EXPECT_THAT(tune.err, HasSubstr("-- PROGRAM"));
  EXPECT_THAT(tune.err, HasSubstr("e.g. pipetune tune run.trace"));

  CommandResult check = RunPipetune("check");
  EXPECT_EQ(check.exit_code, 2);
  EXPECT_THAT(check.err,
              HasSubstr("check: expected an input: a pipeline config, traces of its runs, or -- PROGRAM"));
  EXPECT_THAT(check.err, HasSubstr("e.g. pipetune check pipeline.json --baseline baseline.json"));
  // With an input but no baseline: the baseline is named, not the input.
  CommandResult no_baseline = RunPipetune("check p.json");
  EXPECT_EQ(no_baseline.exit_code, 2);
  EXPECT_THAT(no_baseline.err, HasSubstr("check: --baseline is required"));

  CommandResult baseline = RunPipetune("baseline");
  EXPECT_EQ(baseline.exit_code, 2);
  EXPECT_THAT(baseline.err, HasSubstr("baseline: expected an input: a pipeline config"));
  EXPECT_THAT(RunPipetune("baseline p.json").err, HasSubstr("baseline: -o is required"));
  for (const CommandResult& r : {tune, check, baseline})
    EXPECT_THAT(r.err, Not(HasSubstr("input is required")));
}

TEST(CliRun, SmallPipelineWritesASummaryWithTheCounts) {
  TempDir dir("cli");
  WriteFile(dir / "p.json", kSmallPipeline);
  CommandResult result = RunPipetune("run " + (dir / "p.json") + " --summary " + (dir / "summary.json"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("small: 100 outputs (1000 examples)"));
  EXPECT_THAT(result.out, HasSubstr("work"));
  EXPECT_EQ(result.err, "") << "no progress output when stderr is not a terminal";
  auto summary = Json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["elements"], 100);
  EXPECT_GT(summary["throughput"].get<double>(), 0);
  EXPECT_GT(summary["examples_per_second"].get<double>(), summary["throughput"].get<double>());
  EXPECT_GE(summary["stall_fraction"].get<double>(), 0);
  EXPECT_LE(summary["stall_fraction"].get<double>(), 1);
  EXPECT_GT(summary["seconds"].get<double>(), 0);
  ASSERT_EQ(summary["stages"].size(), 4u);
  EXPECT_EQ(summary["stages"][1]["name"], "work");
  EXPECT_EQ(summary["stages"][1]["parallelism"], 2);
  EXPECT_EQ(summary["stages"][1]["elements"], 1000);
}

TEST(CliRun, SecondsStopsAnEndlessPipeline) {
  TempDir dir("cli");
  WriteFile(dir / "endless.json", R"({"stages": [
      {"name": "numbers", "op": "range"},
      {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 20}}]})");
  CommandResult result =
      RunPipetune("run " + (dir / "endless.json") + " --seconds 0.5 --summary " + (dir / "s.json"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto summary = Json::parse(ReadFile(dir / "s.json"));
  EXPECT_LT(summary["seconds"].get<double>(), 5.0);
  EXPECT_GT(summary["elements"].get<uint64_t>(), 0u);
}

// Ctrl-C stops the run as its time limit would: the summary and the trace
// cover what ran, and the exit code says a signal ended it.
TEST(CliRun, InterruptWritesTheSummaryAndTheTrace) {
  TempDir dir("cli");
  WriteFile(dir / "endless.json", R"({"stages": [
      {"name": "numbers", "op": "range"},
      {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 20}}]})");
  std::string config = dir / "endless.json", summary = dir / "s.json", trace = dir / "t.ptrace";
  // Once the trace exists the run has started (handlers are installed before
  // that); let it run a little, then Ctrl-C.
  int status = InterruptOnceStarted({"run", config, "--summary", summary, "--trace", trace}, trace, 300);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  auto written = Json::parse(ReadFile(summary));
  EXPECT_EQ(written["interrupted"], true);
  EXPECT_EQ(written["stopped_early"], true);
  EXPECT_GT(written["elements"].get<uint64_t>(), 0u);
  CommandResult info = RunPipetune("trace-info " + trace);
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, Not(HasSubstr("warning"))) << "the run closed its trace";
}

TEST(CliRun, BadConfigExitsTwoNamingFileStageAndKey) {
  TempDir dir("cli");
  std::string text = kSmallPipeline;
  text.replace(text.find("\"parallelism\": 2"), 16, "\"parallelism\": 0");
  WriteFile(dir / "bad.json", text);
  CommandResult result = RunPipetune("run " + (dir / "bad.json") + " --summary " + (dir / "s.json"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("bad.json: stage \"work\" (#2): key \"parallelism\""));
  EXPECT_FALSE(std::filesystem::exists(dir / "s.json")) << "no summary for a run that never started";
}

TEST(CliRun, UnknownFunctionListsTheKnownOnes) {
  TempDir dir("cli");
  std::string text = kSmallPipeline;
  text.replace(text.find("cpu_work"), 8, "cpu_wrok");
  WriteFile(dir / "bad.json", text);
  CommandResult result = RunPipetune("run " + (dir / "bad.json"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("stage \"work\" (#2)"));
  EXPECT_THAT(result.err, HasSubstr("cpu_wrok"));
  EXPECT_THAT(result.err, HasSubstr("cpu_work"));
}

TEST(CliRun, ElementFunctionErrorsNameTheConfigFile) {
  // Errors found while building a stage's element function (its args, an
  // unknown fn) name the file like every other config error.
  TempDir dir("cli");
  std::string text = kSmallPipeline;
  text.replace(text.find("\"us\": 5"), 7, "\"us\": -3");
  WriteFile(dir / "bad_args.json", text);
  CommandResult args = RunPipetune("run " + (dir / "bad_args.json"));
  EXPECT_EQ(args.exit_code, 2);
  EXPECT_THAT(args.err,
              HasSubstr("bad_args.json: stage \"work\" (#2): key \"args.us\": expected a number >= 0"));

  text = kSmallPipeline;
  text.replace(text.find("cpu_work"), 8, "no_such_fn");
  WriteFile(dir / "bad_fn.json", text);
  CommandResult fn = RunPipetune("run " + (dir / "bad_fn.json"));
  EXPECT_EQ(fn.exit_code, 2);
  EXPECT_THAT(fn.err, HasSubstr("bad_fn.json: stage \"work\" (#2): key \"fn\""));
  EXPECT_THAT(fn.err, HasSubstr("no_such_fn"));
}

TEST(CliRun, MissingConfigFileExitsTwo) {
  CommandResult result = RunPipetune("run /no/such/pipeline.json");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("/no/such/pipeline.json"));
}

TEST(CliRun, NotJsonExitsTwoWithLineAndColumn) {
  TempDir dir("cli");
  WriteFile(dir / "broken.json", "{\n  \"stages\": [\n    {\"name\": \"x\",}\n  ]\n}\n");
  CommandResult result = RunPipetune("run " + (dir / "broken.json"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("broken.json: not valid JSON at line 3"));
}

// Elements that a function cannot process: "stop" ends the run with exit 2
// naming stage and element; "skip" counts them and finishes.
TEST(CliRun, FailingElementsStopOrAreCountedAsTheConfigSays) {
  TempDir dir("cli");
  std::string config = R"({"stages": [
      {"name": "numbers", "op": "range", "args": {"count": 50, "bytes": 64}},
      {"name": "decode", "op": "map", "fn": "jpeg_decode", "parallelism": 4, "on_error": "ON_ERROR"}]})";
  std::string stop = config;
  stop.replace(stop.find("ON_ERROR"), 8, "stop");
  WriteFile(dir / "stop.json", stop);
  CommandResult stopped = RunPipetune("run " + (dir / "stop.json"));
  EXPECT_EQ(stopped.exit_code, 2);
  EXPECT_THAT(stopped.err, HasSubstr("decode"));

  std::string skip = config;
  skip.replace(skip.find("ON_ERROR"), 8, "skip");
  WriteFile(dir / "skip.json", skip);
  CommandResult skipped = RunPipetune("run " + (dir / "skip.json") + " --summary " + (dir / "s.json"));
  ASSERT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_THAT(skipped.out, HasSubstr("50 elements failed"));
  auto summary = Json::parse(ReadFile(dir / "s.json"));
  EXPECT_EQ(summary["failed_elements"], 50);
  EXPECT_EQ(summary["elements"], 0);
}

TEST(CliRun, SummaryIsNotWrittenIntoAMissingDirectory) {
  TempDir dir("cli");
  WriteFile(dir / "p.json", kSmallPipeline);
  CommandResult result = RunPipetune("run " + (dir / "p.json") + " --summary /no/such/dir/s.json");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("/no/such/dir/s.json"));
}

// Without a GPU (as in CI) a program that links no tracer still gets a
// trace, which says why there is no GPU activity.
TEST(CliProfile, ProgramWithoutTheTracerGetsATraceSayingWhyNoGpu) {
  TempDir dir("cli");
  CommandResult result = RunPipetune("profile --trace " + (dir / "t.trace") + " -- true");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr("recorded no pipeline"));
  CommandResult info = RunPipetune("trace-info " + (dir / "t.trace"));
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("gpu: "));
}

TEST(CliProfile, MissingProgramIsAUsageError) {
  CommandResult result = RunPipetuneBinary("profile -- /no/such/program");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("cannot run /no/such/program"));
}

}  // namespace
}  // namespace pipetune::testing

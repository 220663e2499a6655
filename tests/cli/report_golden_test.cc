// `pipetune report`: golden outputs for small checked-in traces, and what a
// user sees for bad input. Each case runs
//
//   cd SOURCE_DIR && pipetune report tests/cli/golden/<trace> --format F ARGS
//
// and diffs stdout with tests/cli/golden/<case>.<F>.expected. After an
// intended change of the report, regenerate with
//
//   PIPETUNE_UPDATE_GOLDEN=1 ./cli_test --gtest_filter='ReportGolden*'
//
// and review the diff. tests/cli/golden/README.md says how the traces were made.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "pipetune/base/json.h"

namespace pipetune::testing {
namespace {

using ::testing::HasSubstr;

struct GoldenCase {
  std::string name;
  std::string trace;  // under tests/cli/golden/
  std::string args;   // extra arguments
  std::vector<std::string> formats;
};

const std::vector<GoldenCase>& Cases() {
  static const std::vector<GoldenCase> cases = {
      {"two_stage_cpu", "two_stage_cpu.trace", "", {"text", "json", "markdown"}},
      {"two_stage_cpu_what_if",
       "two_stage_cpu.trace",
       "--what-if decode.parallelism=2 --what-if cores=+2 --what-if cache=decode "
       "--what-if decode.parallelism=2,augment.parallelism=2,cores=4",
       {"text", "json"}},
      {"slow_consumer", "slow_consumer.trace", "", {"text", "json", "markdown"}},
      {"remote_storage", "remote_storage.trace", "", {"text", "json", "markdown"}},
      {"cache_fits", "cache_fits.trace", "", {"text", "json"}},
      {"truncated", "truncated.trace", "", {"text", "json"}},
  };
  return cases;
}

// Runs `pipetune ARGS` from the source directory, so that trace names in the
// reports are the relative paths given.
CommandResult RunInSourceDir(const std::string& args) { return RunPipetune(args, PIPETUNE_SOURCE_DIR); }

class ReportTest : public ::testing::Test {};

using ReportGolden = ReportTest;
using ReportHtml = ReportTest;
using ReportOutput = ReportTest;
using ReportErrors = ReportTest;

bool UpdateGoldens() {
  const char* update = std::getenv("PIPETUNE_UPDATE_GOLDEN");
  return update != nullptr && std::string(update) == "1";
}

// The first line where two texts differ, for a readable failure.
std::string FirstDifference(const std::string& expected, const std::string& actual) {
  std::istringstream a(expected), b(actual);
  std::string line_a, line_b;
  for (int line = 1;; ++line) {
    bool more_a = static_cast<bool>(std::getline(a, line_a));
    bool more_b = static_cast<bool>(std::getline(b, line_b));
    if (!more_a && !more_b) return "identical";
    if (line_a != line_b || more_a != more_b) {
      return "line " + std::to_string(line) + ":\n  expected: " + (more_a ? line_a : "<end>") +
             "\n  actual:   " + (more_b ? line_b : "<end>");
    }
  }
}

TEST_F(ReportGolden, OutputsMatchTheExpectedFiles) {
  for (const GoldenCase& c : Cases()) {
    for (const std::string& format : c.formats) {
      SCOPED_TRACE(c.name + " " + format);
      CommandResult result =
          RunInSourceDir("report tests/cli/golden/" + c.trace + " --format " + format + " " + c.args);
      ASSERT_EQ(result.exit_code, 0) << result.err;
      std::string expected_path = SourcePath("tests/cli/golden/" + c.name + "." + format + ".expected");
      if (UpdateGoldens()) {
        WriteFile(expected_path, result.out);
        continue;
      }
      std::string expected = ReadFile(expected_path);
      ASSERT_FALSE(expected.empty()) << expected_path << " is missing: run with PIPETUNE_UPDATE_GOLDEN=1";
      // Not EXPECT_EQ: the first differing line says more than two whole reports.
      EXPECT_TRUE(expected == result.out)
          << expected_path << " differs at " << FirstDifference(expected, result.out);
    }
  }
}

TEST_F(ReportGolden, JsonGoldensFollowTheDocumentedSchema) {
  for (const GoldenCase& c : Cases()) {
    CommandResult result = RunInSourceDir("report tests/cli/golden/" + c.trace + " --format json " + c.args);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    auto j = Json::parse(result.out);
    EXPECT_EQ(j["schema_version"], 1);
    for (const char* key : {"throughput", "predicted_throughput", "bottleneck", "stall_fraction", "stages",
                            "bound", "window", "assumptions", "drops", "summary"}) {
      EXPECT_TRUE(j.contains(key)) << c.name << ": " << key;
    }
    for (const auto& stage : j["stages"]) {
      for (const char* key : {"name", "parallelism", "cores_used", "rate_per_core", "max_throughput"}) {
        EXPECT_TRUE(stage.contains(key)) << c.name << ": stages[]." << key;
      }
    }
  }
}

TEST_F(ReportHtml, IsOneSelfContainedPageWithTheCharts) {
  TempDir dir("report_html");
  CommandResult result =
      RunInSourceDir("report tests/cli/golden/two_stage_cpu.trace --format html -o " + (dir / "r.html"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "");
  std::string html = ReadFile(dir / "r.html");
  EXPECT_THAT(html, ::testing::StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("</html>"));
  for (const char* part : {"Throughput over time", "Consumer stall over time", "Predicted against measured",
                           "Per-stage utilisation", "<table>", "(bottleneck)", "two_stage_cpu"}) {
    EXPECT_THAT(html, HasSubstr(part));
  }
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
}

TEST_F(ReportOutput, DashOAndStdoutAgree) {
  TempDir dir("report_o");
  CommandResult to_file =
      RunInSourceDir("report tests/cli/golden/slow_consumer.trace --format markdown -o " + (dir / "r.md"));
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  CommandResult to_stdout = RunInSourceDir("report tests/cli/golden/slow_consumer.trace --format markdown");
  EXPECT_EQ(ReadFile(dir / "r.md"), to_stdout.out);
}

TEST_F(ReportErrors, ATraceThatIsNotOneIsExit2NamingTheFileAndOffset) {
  TempDir dir("report_bad");
  WriteFile(dir / "bad.trace", "this is not a pipetune trace, just text that goes on for a while\n");
  CommandResult result = RunPipetune("report " + (dir / "bad.trace"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("bad.trace"));
  EXPECT_THAT(result.err, HasSubstr("byte"));
  EXPECT_EQ(result.out, "");
}

TEST_F(ReportErrors, MissingTraceAndBadFlagsAreExit2) {
  CommandResult missing = RunPipetuneBinary("report /nonexistent/x.trace");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/x.trace"));
  std::string trace = SourcePath("tests/cli/golden/slow_consumer.trace");
  EXPECT_EQ(RunPipetune("report " + trace + " --format pdf").exit_code, 2);
  CommandResult what_if = RunPipetune("report " + trace + " --what-if nosuch.parallelism=2");
  EXPECT_EQ(what_if.exit_code, 2);
  EXPECT_THAT(what_if.err, HasSubstr("no stage \"nosuch\""));
  EXPECT_EQ(RunPipetune("report " + trace + " --what-if cores=abc").exit_code, 2);
}

TEST_F(ReportErrors, TruncatedTraceIsReportedWithAWarning) {
  CommandResult result = RunInSourceDir("report tests/cli/golden/truncated.trace");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("WARNING"));
  EXPECT_THAT(result.err, HasSubstr("truncated"));
}

}  // namespace
}  // namespace pipetune::testing

// `pipetune autotune CONFIG` from the command line: the decisions and the
// settled config on stdout, the file written, exit codes for mistakes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "cli_test_util.h"

namespace pipetune::testing {
namespace {

using ::testing::HasSubstr;

TEST(AutotuneCli, PrintsEachDecisionAndWritesTheSettledConfig) {
  TempDir dir("pipetune_autotune_cli");
  WriteFile(dir / "p.json", R"({"name": "p", "stages": [
    {"name": "source", "op": "range"},
    {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 4}, "parallelism": 1},
    {"name": "prefetch", "op": "prefetch", "buffer": 1}]})");
  CommandResult result = RunPipetune("autotune " + (dir / "p.json") + " --seconds 2.5 --refit-every 0.8 -o " +
                                     (dir / "out.json"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("change       fetch parallelism 1 -> "));
  EXPECT_THAT(result.out, HasSubstr("refits,"));
  EXPECT_THAT(result.out, HasSubstr("settled config: " + (dir / "out.json")));
  EXPECT_THAT(ReadFile(dir / "out.json"), HasSubstr("\"name\": \"fetch\""));
  EXPECT_TRUE(std::filesystem::exists(dir / "out.json.ptrace"));
}

// Ctrl-C ends the run as its time limit would: the settled config is still
// written, and the exit code says a signal ended it.
TEST(AutotuneCli, InterruptStillWritesTheSettledConfig) {
  TempDir dir("pipetune_autotune_cli");
  WriteFile(dir / "p.json", R"({"name": "p", "stages": [
    {"name": "source", "op": "range"},
    {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 4}}]})");
  std::string config = dir / "p.json", out = dir / "out.json";
  std::string trace = out + ".ptrace";
  int status = InterruptOnceStarted({"autotune", config, "--seconds", "60", "-o", out}, trace, 500);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  EXPECT_THAT(ReadFile(out), HasSubstr("\"name\": \"fetch\""));
}

TEST(AutotuneCli, MistakesExitTwoNamingWhatIsWrong) {
  struct Mistake {
    const char* args;
    const char* said;
  };
  const Mistake mistakes[] = {
      {"autotune", "pipetune autotune pipeline.json"},
      {"autotune /nonexistent/p.json --seconds 1", "/nonexistent/p.json"},
      {"autotune p.json --seconds 0", "--seconds"},
      // One command, two forms: a flag of the other form is refused before
      // anything runs (the program here would fail with its own status, 1).
      {"autotune --seconds 5 -- touch /nonexistent-dir/started", "--seconds applies to a config"},
      {"autotune p.json --interval-ms 50", "--interval-ms applies to a program"},
  };
  for (const Mistake& m : mistakes) {
    CommandResult r = RunPipetune(m.args);
    EXPECT_EQ(r.exit_code, 2) << m.args;
    EXPECT_THAT(r.err, HasSubstr(m.said)) << m.args;
  }
}

}  // namespace
}  // namespace pipetune::testing

// `pipetune autotune CONFIG` from the command line: the decisions and the
// settled config on stdout, the file written, exit codes for mistakes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(AutotuneCli, MistakesExitTwoNamingWhatIsWrong) {
  CommandResult bare = RunPipetune("autotune");
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_THAT(bare.err, HasSubstr("pipetune autotune pipeline.json"));
  CommandResult missing = RunPipetune("autotune /nonexistent/p.json --seconds 1");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/p.json"));
  CommandResult zero = RunPipetune("autotune p.json --seconds 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_THAT(zero.err, HasSubstr("--seconds"));
}

}  // namespace
}  // namespace pipetune::testing

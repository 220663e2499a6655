// `pipetune autotune CONFIG` as a user meets it: a latency-bound stage left
// at one worker gets the workers it needs while the pipeline runs, within
// the thread budget; each decision is reported as it is made; the settled
// config is written; mistakes are named.
#include "pipetune/workflow/autotune.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "pipetune/analyzer/collector.h"
#include "pipetune/models/config.h"
#include "pipetune/workflow/run.h"
#include "test_dir.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class AutotuneTest : public test_support::TestDir {};

// 4 ms of waiting per element at one worker: 250 elements/s, where a few
// dozen workers (next to no CPU) give thousands.
constexpr const char* kLatencyBound = R"({
  "name": "remote",
  "stages": [
    { "name": "source", "op": "range" },
    { "name": "fetch", "op": "map", "fn": "io_wait", "args": { "ms": 4 }, "parallelism": 1 },
    { "name": "parse", "op": "map", "fn": "cpu_work", "args": { "us": 20 }, "parallelism": 1 },
    { "name": "prefetch", "op": "prefetch", "buffer": 1 }
  ]
})";

TEST_F(AutotuneTest, ALatencyBoundStageGetsWorkersWhileItRunsWithinTheThreadBudget) {
  AutotuneRequest request;
  request.config_path = Write("remote.json", kLatencyBound);
  request.seconds = 4;
  request.refit_every_seconds = 1;
  request.budgets.max_threads = 12;
  std::vector<AutotuneDecision> seen;
  request.on_decision = [&](const AutotuneDecision& d) { seen.push_back(d); };
  StatusOr<AutotuneResult> result = Autotune(request);
  ASSERT_TRUE(result.ok()) << result.status().message();

  // The first change raises fetch's workers, and is reported as it happens.
  auto change = std::find_if(seen.begin(), seen.end(), [](const AutotuneDecision& d) {
    return d.kind == AutotuneDecision::Kind::kChange;
  });
  ASSERT_NE(change, seen.end()) << "no change was made";
  EXPECT_EQ(seen.size(), result->decisions.size());
  EXPECT_GT(change->predicted, change->measured_before * 1.5);
  EXPECT_THAT(FormatDecision(*change), HasSubstr("fetch parallelism 1 -> "));
  EXPECT_GT(result->refits, 0);
  EXPECT_GT(result->refit_ms_max, 0);

  // The settled config has the workers; the threads stay within the budget
  // (one per stage that is not map, fetch's and parse's workers).
  StatusOr<models::PipelineConfig> written = models::LoadConfig(result->written.path);
  ASSERT_TRUE(written.ok()) << written.status().message();
  const models::StageConfig& fetch = written->stages[*written->FindStage("fetch")];
  const models::StageConfig& parse = written->stages[*written->FindStage("parse")];
  EXPECT_GT(fetch.parallelism, 3);
  EXPECT_LE(fetch.parallelism + parse.parallelism + 2, 12);
  EXPECT_EQ(result->written.path, (dir_ / "remote.autotuned.json").string());
  EXPECT_TRUE(fs::exists(result->trace_path));
  // The run sped up while it ran: the last stretch beat one worker's 250/s.
  EXPECT_GT(result->summary.throughput, 300);
}

// What a refit reads: a trace still being written, each time only what was
// appended since, collected as the whole file would be (no record twice).
TEST_F(AutotuneTest, ARefitReadsTheTraceOnFromWhereTheLastStopped) {
  RunConfigOptions run;
  run.seconds = 1;
  run.trace_path = (dir_ / "whole.ptrace").string();
  ASSERT_TRUE(RunConfigFile(Write("remote.json", kLatencyBound), run).ok());
  std::ifstream in(run.trace_path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string live_path = (dir_ / "live.ptrace").string();
  std::ofstream(live_path, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 5);  // inside a chunk

  analyzer::LiveTraceCollector live(live_path);
  StatusOr<analyzer::CollectedTrace> part = live.Read();
  ASSERT_TRUE(part.ok()) << part.status().message();
  std::ofstream(live_path, std::ios::binary) << bytes;
  StatusOr<analyzer::CollectedTrace> grown = live.Read();
  ASSERT_TRUE(grown.ok()) << grown.status().message();
  StatusOr<analyzer::CollectedTrace> whole = analyzer::CollectTrace(run.trace_path);
  ASSERT_TRUE(whole.ok());

  EXPECT_LT(part->frames.size(), whole->frames.size());
  EXPECT_EQ(grown->records, whole->records);
  EXPECT_EQ(grown->frames.size(), whole->frames.size());
  EXPECT_EQ(grown->frames.back().steps, whole->frames.back().steps);
  EXPECT_EQ(grown->stages.size(), whole->stages.size());
  EXPECT_TRUE(grown->has_end);
}

TEST_F(AutotuneTest, MistakesAreNamed) {
  AutotuneRequest request;
  request.config_path = (dir_ / "missing.json").string();
  StatusOr<AutotuneResult> missing = Autotune(request);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.json"));

  request.config_path = Write("remote.json", kLatencyBound);
  request.seconds = 0;
  StatusOr<AutotuneResult> no_time = Autotune(request);
  ASSERT_FALSE(no_time.ok());
  EXPECT_THAT(no_time.status().message(), HasSubstr("--seconds: must be > 0"));
}

}  // namespace
}  // namespace pipetune::workflow

// A job of several DataLoader processes (dataloader_job.h): ranks made from
// the golden traces (tests/analyzer/dataloader_golden/) with known changes,
// so that which rank binds is known. tests/python/test_distributed.py runs
// real DDP jobs.
#include "pipetune/analyzer/dataloader_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/analyzer/report.h"
#include "pipetune/base/json.h"

namespace pipetune::analyzer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string GoldenMainTrace(const std::string& name) {
  return std::string(PIPETUNE_SOURCE_DIR) + "/tests/analyzer/dataloader_golden/" + name + "/trace";
}

// Rank `rank` of a 2-rank job: the golden run with 2 forked workers (its
// input binds: 4 samples of 4.5 ms a batch on 2 workers against a 4 ms
// step), its samples `cost` times as dear, its step `step_factor` times as
// long (a rank waiting for the straggler at the all-reduce).
DataLoaderJobProcess GoldenRank(int rank, double cost, double step_factor) {
  StatusOr<DataLoaderProfile> golden = ReadDataLoaderProfile(GoldenMainTrace("map_workers2_fork"));
  EXPECT_TRUE(golden.ok()) << golden.status().message();
  DataLoaderJobProcess process;
  process.profile = golden.ok() ? *golden : DataLoaderProfile{};
  DataLoaderProfile& p = process.profile;
  p.rank = rank;
  p.local_rank = rank;
  p.world_size = 2;
  p.pid = 100 + rank;
  p.trace_path = rank == 0 ? "job.trace" : "job.trace.main." + std::to_string(p.pid);
  for (DataLoaderStage& s : p.sample_stages) {
    s.seconds_each *= cost;
    s.per_batch *= cost;
    s.cpu_seconds_each *= cost;
  }
  p.worker_cpu_seconds *= cost;
  p.worker_session_cpu_seconds *= cost;
  p.step.seconds_each *= step_factor;
  p.step.per_batch *= step_factor;
  p.step_seconds *= step_factor;
  return process;
}

Diagnosis DiagnoseJob(const DataLoaderJob& job) {
  StatusOr<Diagnosis> d = DiagnoseDataLoaderJob(job);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : Diagnosis{};
}

TEST(DataLoaderJob, TheStragglerIsTheRankWhoseInputBindsNotTheOneThatWaits) {
  // Rank 1's samples cost twice rank 0's; rank 0's step is three times as
  // long as rank 1's, its wait at the all-reduce included.
  DataLoaderJob job;
  job.processes = {GoldenRank(0, 1.0, 3.0), GoldenRank(1, 2.0, 1.0)};
  Diagnosis d = DiagnoseJob(job);
  ASSERT_TRUE(d.job.has_value());
  EXPECT_EQ(d.job->straggler, 1);
  ASSERT_EQ(d.job->ranks.size(), 2u);
  const RankRow& slow = d.job->ranks[1];
  EXPECT_EQ(slow.bottleneck, std::optional<std::string>("load"));
  EXPECT_GT(d.job->ranks[0].input_throughput, 1.6 * slow.input_throughput);
  // The headline is the straggler's own diagnosis.
  ASSERT_TRUE(d.dataloader.has_value());
  EXPECT_EQ(d.dataloader->rank, 1);
  EXPECT_EQ(d.bottleneck, std::optional<std::string>("load"));
  EXPECT_THAT(d.summary, HasSubstr("Rank 1 is the straggler"));
  // The job's step is the fastest rank's, not the waiting rank's.
  EXPECT_NEAR(d.job->step_seconds, job.processes[1].profile.step.seconds_each, 1e-12);
  EXPECT_GT(d.job->ranks[0].step_ms, 2.9 * d.job->ranks[1].step_ms);
  // Rank 0 steps at the job's rate, the straggler's, however fast its own
  // input: its predicted rate is the job's, as its measured rate is.
  EXPECT_GT(slow.predicted_throughput, 0);
  EXPECT_DOUBLE_EQ(d.job->ranks[0].predicted_throughput, slow.predicted_throughput);
  EXPECT_DOUBLE_EQ(d.predicted_throughput, slow.predicted_throughput);
}

TEST(DataLoaderJob, NoRankIsTheStragglerWhenEveryInputKeepsUp) {
  // A 0.5 s step: the workers deliver far faster on every rank.
  DataLoaderJob job;
  job.processes = {GoldenRank(0, 1.0, 125.0), GoldenRank(1, 1.5, 125.0)};
  Diagnosis d = DiagnoseJob(job);
  ASSERT_TRUE(d.job.has_value());
  EXPECT_FALSE(d.job->straggler.has_value());
  EXPECT_FALSE(d.job->straggler_row.has_value());
  EXPECT_THAT(d.summary, HasSubstr("No rank's input side binds"));
}

TEST(DataLoaderJob, EveryRankEndsItsOwnWayInTheTableAndTheJson) {
  DataLoaderJob job;
  job.processes = {GoldenRank(0, 1.0, 3.0), GoldenRank(1, 2.0, 1.0)};
  job.processes[0].profile.exit_status = 1;
  job.processes[0].profile.exit_exception = "RuntimeError: Connection closed by peer";
  job.processes[1].profile.ended_cleanly = false;
  job.processes[1].end_seconds = 2.5;
  DataLoaderJobProcess empty = GoldenRank(2, 1.0, 1.0);
  empty.profile.rank = std::nullopt;
  empty.error = "job.trace.main.102: stage \"dataloader\": the program took no batch from a DataLoader";
  job.processes.push_back(empty);
  Diagnosis d = DiagnoseJob(job);
  ASSERT_TRUE(d.job.has_value());
  EXPECT_EQ(d.job->straggler, 1);

  Json j = Json::parse(RenderReport(d, ReportFormat::kJson));
  EXPECT_EQ(j["straggler"], 1);
  ASSERT_EQ(j["ranks"].size(), 3u);
  EXPECT_EQ(j["ranks"][0]["rank"], 0);
  EXPECT_EQ(j["ranks"][0]["ended"], "failed");
  EXPECT_EQ(j["ranks"][0]["exit_status"], 1);
  EXPECT_EQ(j["ranks"][1]["ended"], "killed");
  EXPECT_EQ(j["ranks"][1]["bottleneck"], "load");
  EXPECT_EQ(j["ranks"][1]["end_seconds"], 2.5);
  EXPECT_TRUE(j["ranks"][2]["rank"].is_null());
  EXPECT_THAT(j["ranks"][2]["error"].get<std::string>(), HasSubstr("took no batch"));
  EXPECT_TRUE(j["ranks"][2]["throughput"].is_null());
  EXPECT_EQ(j["job"]["world_size"], 2);

  std::string text = RenderReport(d, ReportFormat::kText);
  EXPECT_THAT(text, HasSubstr("> marks the straggler, rank 1"));
  EXPECT_THAT(text, HasSubstr("RuntimeError"));
  EXPECT_THAT(text, HasSubstr("killed at 2.5 s"));
  EXPECT_THAT(RenderReport(d, ReportFormat::kMarkdown), HasSubstr("(straggler)"));
  EXPECT_THAT(RenderReport(d, ReportFormat::kHtml), HasSubstr("<h2>Ranks</h2>"));
}

TEST(DataLoaderJob, AJobOfOneProcessIsThatProcesssReport) {
  DataLoaderJob job;
  job.processes = {GoldenRank(0, 1.0, 1.0)};
  Diagnosis d = DiagnoseJob(job);
  EXPECT_FALSE(d.job.has_value());
  EXPECT_EQ(d.bottleneck, std::optional<std::string>("load"));
}

// The node's cores go to what runs: rank 1's samples cost twice rank 0's,
// and rank 0's step, three times as long, is mostly its wait for rank 1 at
// the all-reduce, off the CPU. The plan's budget for rank 1 (tune's
// "budgets" line) is more than half the node, and the wait buys rank 0 none.
TEST(DataLoaderJob, ARankWaitingAtTheAllReduceHoldsNoCoreOfTheNode) {
  const DataLoaderProfile waits = GoldenRank(0, 1.0, 3.0).profile;
  const DataLoaderProfile straggler = GoldenRank(1, 2.0, 1.0).profile;
  const double share = NodeCoreShare(straggler, {waits}, 2);
  EXPECT_GT(share, 0.6);
  EXPECT_LT(share, 1.0);
  EXPECT_NEAR(NodeCoreShare(waits, {straggler}, 2), 1.0 - share, 1e-9);
  EXPECT_NEAR(NodeCoreShare(straggler, {GoldenRank(0, 1.0, 1.0).profile}, 2), share, 1e-9);
  // Equal ranks split the node evenly; a rank the node ran whose trace is
  // not among those read counts as the planned rank does.
  EXPECT_NEAR(NodeCoreShare(straggler, {GoldenRank(0, 2.0, 3.0).profile}, 2), 0.5, 1e-9);
  EXPECT_NEAR(NodeCoreShare(straggler, {}, 4), 0.25, 1e-9);
  EXPECT_NEAR(NodeCoreShare(straggler, {waits}, 3), share / (1 + share), 1e-9);
  EXPECT_EQ(NodeCoreShare(straggler, {}, 1), 1.0);
  // A peer whose CPU was not measured (it took no batch): the even split.
  EXPECT_NEAR(NodeCoreShare(straggler, {DataLoaderProfile{}}, 2), 0.5, 1e-9);

  DataLoaderJob job;
  job.processes = {GoldenRank(0, 1.0, 3.0), GoldenRank(1, 2.0, 1.0)};
  StatusOr<JobTuning> tuning = JobTuningRun(job);
  ASSERT_TRUE(tuning.ok()) << tuning.status().message();
  EXPECT_EQ(tuning->rank, 1);
  EXPECT_NEAR(tuning->node_core_share, share, 1e-9);
}

class DataLoaderJobFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipetune_job_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Copies a golden run (its main trace and its workers') to dir_/name.
  std::string Copy(const std::string& golden, const std::string& name) {
    std::string main = GoldenMainTrace(golden);
    for (const std::string& path : DataLoaderTracePaths(main)) {
      fs::copy_file(path, dir_ / (name + path.substr(main.size())));
    }
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(DataLoaderJobFiles, ReadsTheMainTracesBesideTAsOneJob) {
  std::string t = Copy("map_workers2_fork", "job.trace");
  Copy("iterable_workers0", "job.trace.main.4242");  // rank 1 of 2
  EXPECT_EQ(JobTracePaths(t).size(), 2u);            // not the workers' job.trace.<pid>
  EXPECT_TRUE(IsDataLoaderJob({t}));
  StatusOr<DataLoaderJob> job = ReadDataLoaderJob({t, t});  // given twice, read once
  ASSERT_TRUE(job.ok()) << job.status().message();
  ASSERT_EQ(job->processes.size(), 2u);
  EXPECT_EQ(job->processes[0].profile.rank, 1);  // ranked processes first
  EXPECT_FALSE(job->processes[1].profile.rank.has_value());
  EXPECT_EQ(job->processes[1].profile.worker_traces, 2);
  EXPECT_EQ(job->hosts, 1);
  EXPECT_EQ(job->clock, "CLOCK_MONOTONIC");
  for (const DataLoaderJobProcess& p : job->processes) EXPECT_GE(p.end_seconds, p.start_seconds);
}

TEST_F(DataLoaderJobFiles, TwoTracesOfOneRankAreTwoRunsGivenTogether) {
  std::string a = Copy("iterable_workers0", "node0.trace");
  std::string b = Copy("iterable_workers0", "node1.trace");
  StatusOr<DataLoaderJob> job = ReadDataLoaderJob({a, b});
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(job.status().message(), HasSubstr("are both rank 1"));
  EXPECT_THAT(job.status().message(), HasSubstr("node0.trace"));
}

TEST_F(DataLoaderJobFiles, AWorkersTraceGivenAsANodesIsTheUsersMistake) {
  std::string t = Copy("map_workers2_fork", "job.trace");
  std::string worker = DataLoaderTracePaths(t)[1];
  StatusOr<DataLoaderJob> job = ReadDataLoaderJob({t, worker});
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("is a DataLoader worker's trace"));
}

// Rank 1 of a 2-rank job read alone (rank 0's trace not copied): the report
// says the job had 2 ranks, which was recorded and which is missing, in text
// and JSON, and judges the rank that is there.
TEST_F(DataLoaderJobFiles, AMissingRanksTraceIsNamedAndTheVerdictsAreTheRecordedRanks) {
  std::string t = Copy("iterable_workers0", "node1.trace");  // rank 1 of 2
  StatusOr<DataLoaderJob> job = ReadDataLoaderJob({t});
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->world_size, 2);
  EXPECT_EQ(job->missing_ranks, std::vector<int>{0});
  Diagnosis d = DiagnoseJob(*job);
  ASSERT_TRUE(d.job.has_value());
  ASSERT_EQ(d.job->ranks.size(), 1u);
  EXPECT_THAT(d.summary, HasSubstr("The job had 2 ranks (its world size); 1 was recorded (rank 1); rank 0 is "
                                   "missing"));
  EXPECT_THAT(d.summary, HasSubstr("These verdicts are the recorded ranks' only"));
  EXPECT_THAT(d.summary, HasSubstr("no straggler can be named"));  // one rank has no one to wait for
  EXPECT_FALSE(d.job->straggler.has_value());
  std::string text = RenderReport(d, ReportFormat::kText);
  EXPECT_THAT(text, HasSubstr("rank 0 is missing"));
  EXPECT_THAT(text, HasSubstr("1 of 2 ranks missing"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("straggler, rank")));
  Json json = Json::parse(RenderReport(d, ReportFormat::kJson));
  EXPECT_EQ(json["job"]["world_size"], 2);
  EXPECT_EQ(json["job"]["recorded_ranks"], Json::array({1}));
  EXPECT_EQ(json["job"]["missing_ranks"], Json::array({0}));
  EXPECT_EQ(json["job"]["missing"], 1);
  EXPECT_EQ(json["ranks"].size(), 1u);
}

TEST_F(DataLoaderJobFiles, AProcessThatTookNoBatchIsARowOfTheJob) {
  std::string t = Copy("map_workers2_fork", "job.trace");
  Copy("no_batch", "job.trace.main.77");
  StatusOr<DataLoaderJob> job = ReadDataLoaderJob({t});
  ASSERT_TRUE(job.ok()) << job.status().message();
  ASSERT_EQ(job->processes.size(), 2u);
  int errors = 0;
  for (const DataLoaderJobProcess& p : job->processes) errors += !p.error.empty();
  EXPECT_EQ(errors, 1);
}

}  // namespace
}  // namespace pipetune::analyzer

// A traced run killed with SIGKILL leaves a trace that reads back up to its
// last whole chunk: chunks are appended and handed to the kernel as the run
// goes, never buffered in the process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "pipetune/tracer/tracer.h"
#include "test_util.h"

namespace pipetune::tracer {
namespace {

TEST(Kill, SigkilledRunLeavesAReadableTrace) {
  const std::string path = testing::TempTracePath("killed");
  StageId stage = RegisterStage({"killed_stage", "map", 1});
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child traces until it is killed; it never returns to gtest.
    SessionOptions options;
    options.path = path;
    options.pipeline_name = "killed";
    options.snapshot_interval_ms = 10;
    if (!Start(options).ok()) _exit(3);
    Worker* w = AttachWorker(stage);
    for (uint64_t i = 0;; ++i) {
      uint64_t t = NowNs();
      w->Work(t, t + 100, i);
      w->Produced(1, 8);
      if (i % 1000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  // Wait for a few snapshots to be written, then kill without warning.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (testing::ReadFileBytes(path).size() < 4000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);

  StatusOr<Trace> trace = LoadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_FALSE(trace->report.ended_cleanly);
  EXPECT_FALSE(trace->has_end);
  EXPECT_EQ(trace->header.pipeline.name, "killed");
  ASSERT_NE(trace->LastSnapshot(stage), nullptr);
  EXPECT_GT(trace->LastSnapshot(stage)->produced, 0u);
  EXPECT_GE(trace->consumer_totals.size(), 2u);
  RetireStage(stage);
}

}  // namespace
}  // namespace pipetune::tracer

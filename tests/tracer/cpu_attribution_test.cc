// CPU attribution: a stage's CPU time is its workers' thread CPU clocks, read
// by the sampler while they run and folded in when they detach. A worker that
// burns CPU gets about that CPU; one that sleeps or blocks gets about none.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "pipetune/base/clock.h"
#include "pipetune/tracer/tracer.h"
#include "test_util.h"

namespace pipetune::tracer {
namespace {

constexpr uint64_t kMs = 1000000;

TEST(CpuAttribution, BurningWorkerGetsItsCpuAndSleepingWorkerNone) {
  const std::string path = testing::TempTracePath("cpu");
  StageId burn = RegisterStage({"burn", "map", 1});
  StageId sleep = RegisterStage({"sleep", "map", 1});
  StageId blocked = RegisterStage({"blocked", "map", 1});
  SessionOptions options;
  options.path = path;
  options.snapshot_interval_ms = 25;
  ASSERT_TRUE(Start(options).ok());

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread burner([&] {
    ScopedWorker w(burn);
    uint64_t begin = NowNs();
    testing::BurnThreadCpu(300);
    w->Work(begin, NowNs(), 0);
  });
  std::thread sleeper([&] {
    ScopedWorker w(sleep);
    uint64_t begin = NowNs();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    w->Work(begin, NowNs(), 0);
  });
  std::thread waiter([&] {
    ScopedWorker w(blocked);
    uint64_t begin = NowNs();
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    w->WaitInput(NowNs() - begin);
  });
  burner.join();
  sleeper.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  waiter.join();
  ASSERT_TRUE(Stop().ok());

  Trace trace = testing::LoadOrFail(path);
  const StageSnapshot* b = trace.LastSnapshot(burn);
  const StageSnapshot* s = trace.LastSnapshot(sleep);
  const StageSnapshot* k = trace.LastSnapshot(blocked);
  ASSERT_TRUE(b && s && k);
  EXPECT_GE(b->cpu_ns, 290 * kMs);
  EXPECT_LE(b->cpu_ns, 450 * kMs);
  EXPECT_LT(s->cpu_ns, 20 * kMs);
  EXPECT_LT(k->cpu_ns, 20 * kMs);
  EXPECT_GE(s->work_ns, 290 * kMs);  // its wall time is all its own work
  EXPECT_GE(k->wait_input_ns, 290 * kMs);

  // While the burner ran, the sampler read its live clock: CPU rose across
  // snapshots before it detached.
  uint64_t partial = 0;
  for (const StageSnapshot& snap : trace.snapshots) {
    if (snap.stage == burn && snap.live_workers == 1 && snap.cpu_ns > 0 && snap.cpu_ns < b->cpu_ns) {
      partial = snap.cpu_ns;
    }
  }
  EXPECT_GT(partial, 0u);
  for (StageId id : {burn, sleep, blocked}) RetireStage(id);
}

// One thread running two stages in turn (a Python process's main thread
// runs load, transforms and collate): by its clock each stage would get the
// thread's whole CPU; reported per element (WorkCpu), each gets its own.
TEST(CpuAttribution, ReportedCpuSplitsOneThreadBetweenItsStages) {
  const std::string path = testing::TempTracePath("cpu_reported");
  StageId big = RegisterStage({"big", "map", 1});
  StageId small = RegisterStage({"small", "map", 1});
  SessionOptions options;
  options.path = path;
  options.snapshot_interval_ms = 25;
  ASSERT_TRUE(Start(options).ok());
  std::thread runner([&] {
    ScopedWorker b(big);
    ScopedWorker s(small);
    for (int i = 0; i < 4; ++i) {
      uint64_t begin = NowNs(), cpu = ThreadCpuNs();
      testing::BurnThreadCpu(60);
      b->WorkCpu(ThreadCpuNs() - cpu);
      b->Work(begin, NowNs(), i);
      begin = NowNs(), cpu = ThreadCpuNs();
      testing::BurnThreadCpu(15);
      s->WorkCpu(ThreadCpuNs() - cpu);
      s->Work(begin, NowNs(), i);
    }
  });
  runner.join();
  ASSERT_TRUE(Stop().ok());

  Trace trace = testing::LoadOrFail(path);
  const StageSnapshot* b = trace.LastSnapshot(big);
  const StageSnapshot* s = trace.LastSnapshot(small);
  ASSERT_TRUE(b && s);
  EXPECT_GE(b->cpu_ns, 240 * kMs);
  EXPECT_LE(b->cpu_ns, 270 * kMs);
  EXPECT_GE(s->cpu_ns, 60 * kMs);
  EXPECT_LE(s->cpu_ns, 75 * kMs);  // not the thread's 300 ms
  for (StageId id : {big, small}) RetireStage(id);
}

}  // namespace
}  // namespace pipetune::tracer

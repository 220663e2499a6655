// Recording: what a pipeline reports comes back from the trace exactly, the
// budgets hold, nothing is lost silently, and the file does not grow with the
// number of elements.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/tracer.h"
#include "test_util.h"

namespace pipetune::tracer {
namespace {

using testing::LoadOrFail;
using testing::TempTracePath;

SessionOptions Options(const std::string& path, uint32_t interval_ms = 20) {
  SessionOptions o;
  o.path = path;
  o.pipeline_name = "test";
  o.config_json = "{}";
  o.snapshot_interval_ms = interval_ms;
  return o;
}

TEST(Recording, CountsFromManyThreadsComeBackExactly) {
  const std::string path = TempTracePath("round_trip");
  StageId source = RegisterStage({"source", "range", 1});  // before Start: written at Start
  ASSERT_TRUE(Start(Options(path)).ok());
  EXPECT_TRUE(Enabled());
  StageId map = RegisterStage({"decode", "map", 1});  // during the session
  SetParallelism(map, 4);
  SetBufferOccupancy(map, 3, 300);

  constexpr int kThreads = 4, kElements = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ScopedWorker w(map);
      uint64_t begin = NowNs();
      for (int i = 0; i < kElements; ++i) {
        w->WaitInput(5);
        w->Consumed(1);
        uint64_t end = NowNs();
        w->Work(begin, end, static_cast<uint64_t>(t * kElements + i));
        w->Produced(1, 100);
        w->WaitOutput(7);
        begin = end;
      }
    });
  }
  threads.emplace_back([&] {
    ScopedWorker w(source);
    for (int i = 0; i < kThreads * kElements; ++i) w->Produced(1, 10);
  });
  threads.emplace_back([] {
    for (int i = 0; i < 500; ++i) ConsumerStep(1000, 2000, NowNs());
  });
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(Stop().ok());
  EXPECT_FALSE(Enabled());

  Trace trace = LoadOrFail(path);
  EXPECT_FALSE(trace.report.truncated()) << trace.report.warning;
  EXPECT_TRUE(trace.report.ended_cleanly);
  EXPECT_TRUE(trace.has_end);
  EXPECT_EQ(trace.header.pipeline.name, "test");
  EXPECT_EQ(trace.header.format_version, kTraceFormatVersion);
  EXPECT_GT(trace.header.host.cores_allowed, 0u);
  ASSERT_NE(trace.FindStage(source), nullptr);
  ASSERT_NE(trace.FindStage(map), nullptr);
  EXPECT_EQ(trace.FindStage(map)->name, "decode");

  const StageSnapshot* m = trace.LastSnapshot(map);
  ASSERT_NE(m, nullptr);
  const uint64_t n = kThreads * kElements;
  EXPECT_EQ(m->produced, n);
  EXPECT_EQ(m->consumed, n);
  EXPECT_EQ(m->bytes_produced, n * 100);
  EXPECT_EQ(m->wait_input_ns, n * 5);
  EXPECT_EQ(m->wait_output_ns, n * 7);
  EXPECT_EQ(m->parallelism, 4u);
  EXPECT_EQ(m->occupancy_elements, 3);
  EXPECT_EQ(m->occupancy_bytes, 300);
  EXPECT_EQ(m->live_workers, 0u);
  EXPECT_GT(m->work_ns, 0u);
  EXPECT_EQ(trace.LastSnapshot(source)->produced, n);
  EXPECT_EQ(trace.LastSnapshot(source)->bytes_produced, n * 10);

  int map_workers = 0;
  for (const WorkerDef& w : trace.workers) map_workers += w.stage == map;
  EXPECT_EQ(map_workers, kThreads);
  for (const SpanRecord& s : trace.spans) {
    EXPECT_LE(s.begin_ns, s.end_ns);
    if (s.stage == map) {
      EXPECT_LT(s.element_id, n);
    }
  }
  EXPECT_EQ(m->spans_recorded,
            static_cast<uint64_t>(std::count_if(trace.spans.begin(), trace.spans.end(),
                                                [&](const SpanRecord& s) { return s.stage == map; })));

  ASSERT_FALSE(trace.consumer_totals.empty());
  const ConsumerTotals& c = trace.consumer_totals.back();
  EXPECT_EQ(c.steps, 500u);
  EXPECT_EQ(c.wait_ns, 500u * 1000);
  EXPECT_EQ(c.step_ns, 500u * 2000);
  EXPECT_EQ(c.steps_recorded, trace.consumer_steps.size());
  EXPECT_EQ(trace.drops.Total(), 0u);
  ASSERT_FALSE(trace.process_samples.empty());
  EXPECT_GT(trace.process_samples.back().rss_bytes, 0u);
  EXPECT_GE(trace.process_samples.back().main_thread_run_delay_ns, 0);  // /proc/self/schedstat read
  // The recorder's own CPU: none before its sampler started, then its
  // thread's clock, never going back.
  EXPECT_EQ(trace.process_samples.front().recorder_cpu_ns, 0);
  for (size_t i = 1; i < trace.process_samples.size(); ++i)
    EXPECT_GE(trace.process_samples[i].recorder_cpu_ns, trace.process_samples[i - 1].recorder_cpu_ns);
  EXPECT_GT(trace.process_samples.back().recorder_cpu_ns, 0);
  RetireStage(source);
  RetireStage(map);
}

TEST(Recording, CountersStartFromZeroInEachSession) {
  StageId stage = RegisterStage({"twice", "map", 1});
  Worker* w = AttachWorker(stage);
  w->Produced(5, 5);  // tracing off: not counted
  for (int session = 0; session < 2; ++session) {
    const std::string path = TempTracePath("session" + std::to_string(session));
    ASSERT_TRUE(Start(Options(path)).ok());
    w->Produced(7, 70);
    ASSERT_TRUE(Stop().ok());
    w->Produced(100, 100);  // after Stop: not counted
    Trace trace = LoadOrFail(path);
    ASSERT_NE(trace.LastSnapshot(stage), nullptr);
    EXPECT_EQ(trace.LastSnapshot(stage)->produced, 7u);
    EXPECT_EQ(trace.LastSnapshot(stage)->bytes_produced, 70u);
    EXPECT_EQ(trace.LastSnapshot(stage)->live_workers, 1u);
  }
  DetachWorker(w);
  RetireStage(stage);
}

TEST(Recording, SpanBudgetPerStagePerSecondHolds) {
  const std::string path = TempTracePath("span_budget");
  StageId stage = RegisterStage({"busy", "map", 4});
  SessionOptions options = Options(path);
  options.spans_per_stage_per_second = 50;
  ASSERT_TRUE(Start(options).ok());
  uint64_t start = NowNs();
  std::atomic<uint64_t> elements{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      ScopedWorker w(stage);
      uint64_t begin = NowNs();
      while (begin - start < 400'000'000) {
        uint64_t end = NowNs();
        w->Work(begin, end, elements.fetch_add(1, std::memory_order_relaxed));
        begin = end;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  double seconds = static_cast<double>(NowNs() - start) / 1e9;
  ASSERT_TRUE(Stop().ok());
  Trace trace = LoadOrFail(path);
  size_t spans = std::count_if(trace.spans.begin(), trace.spans.end(),
                               [&](const SpanRecord& s) { return s.stage == stage; });
  // 50 per second, plus the burst tolerance (0.1 s worth) and one.
  EXPECT_LE(static_cast<double>(spans), 50 * seconds + 5 + 1);
  EXPECT_GE(static_cast<double>(spans), 50 * 0.4 * 0.8);
  EXPECT_GT(elements.load(), 100 * spans);  // it sampled, it did not record all
  EXPECT_EQ(trace.drops.spans, 0u);
  RetireStage(stage);
}

TEST(Recording, ConsumerStepsAreSampledButAlwaysCounted) {
  const std::string path = TempTracePath("step_budget");
  SessionOptions options = Options(path);
  options.consumer_steps_per_second = 100;
  ASSERT_TRUE(Start(options).ok());
  uint64_t start = NowNs();
  uint64_t steps = 0;
  while (NowNs() - start < 200'000'000) {
    ConsumerStep(10, 20, NowNs());
    ++steps;
  }
  double seconds = static_cast<double>(NowNs() - start) / 1e9;
  ASSERT_TRUE(Stop().ok());
  Trace trace = LoadOrFail(path);
  const ConsumerTotals& c = trace.consumer_totals.back();
  EXPECT_EQ(c.steps, steps);
  EXPECT_EQ(c.wait_ns, steps * 10);
  EXPECT_LE(static_cast<double>(trace.consumer_steps.size()), 100 * seconds + 10 + 1);
  EXPECT_GE(trace.consumer_steps.size(), 10u);
  EXPECT_EQ(c.steps_recorded, trace.consumer_steps.size());
  EXPECT_EQ(c.steps_dropped, 0u);
}

TEST(Recording, EventsThatCannotBeStoredAreCountedAsDrops) {
  const std::string path = TempTracePath("drops");
  StageId stage = RegisterStage({"flood", "map", 1});
  SessionOptions options = Options(path, /*interval_ms=*/60000);  // no tick drains the rings
  options.spans_per_stage_per_second = 1000000000;
  options.consumer_steps_per_second = 1000000000;
  ASSERT_TRUE(Start(options).ok());
  std::thread([&] {
    ScopedWorker w(stage);
    for (uint64_t i = 0; i < 5000; ++i) {
      uint64_t t = NowNs();
      w->Work(t, t + 1, i);
    }
  }).join();
  std::thread([] {
    for (int i = 0; i < 5000; ++i) ConsumerStep(1, 1, NowNs());
  }).join();
  GpuActivity a;
  a.name = std::string(2000, 'k');  // cut to 512 bytes
  for (int i = 0; i < 70000; ++i) RecordGpuActivity(a);
  RecordGpuDrops(7);
  ASSERT_TRUE(Stop().ok());

  Trace trace = LoadOrFail(path);
  const StageSnapshot* s = trace.LastSnapshot(stage);
  ASSERT_NE(s, nullptr);
  // Each thread's ring holds 512 spans / 1024 steps; the rest were dropped.
  EXPECT_EQ(s->spans_recorded, 512u);
  EXPECT_EQ(s->spans_dropped, 5000u - 512u);
  EXPECT_EQ(trace.drops.spans, 5000u - 512u);
  EXPECT_EQ(trace.consumer_steps.size(), 1024u);
  EXPECT_EQ(trace.drops.consumer_steps, 5000u - 1024u);
  EXPECT_EQ(trace.consumer_totals.back().steps, 5000u);
  EXPECT_EQ(trace.gpu_activity.size(), 65536u);
  EXPECT_EQ(trace.gpu_activity.front().name.size(), 512u);
  EXPECT_EQ(trace.drops.gpu_records, 70000u - 65536u);
  EXPECT_EQ(trace.drops.gpu_records_at_source, 7u);
  RetireStage(stage);
}

TEST(Recording, GpuActivityRoundTrips) {
  const std::string path = TempTracePath("gpu");
  ASSERT_TRUE(Start(Options(path)).ok());
  GpuActivity a;
  a.kind = GpuActivityKind::kMemcpy;
  a.device = 1;
  a.stream = 7;
  a.start_ns = 100;
  a.end_ns = 250;
  a.bytes = 1 << 20;
  a.correlation_id = 42;
  a.name = "HtoD";
  RecordGpuActivity(a);
  ASSERT_TRUE(Stop().ok());
  Trace trace = LoadOrFail(path);
  ASSERT_EQ(trace.gpu_activity.size(), 1u);
  const GpuActivity& b = trace.gpu_activity[0];
  EXPECT_EQ(b.kind, GpuActivityKind::kMemcpy);
  EXPECT_EQ(b.device, 1u);
  EXPECT_EQ(b.stream, 7u);
  EXPECT_EQ(b.start_ns, 100u);
  EXPECT_EQ(b.end_ns, 250u);
  EXPECT_EQ(b.bytes, 1u << 20);
  EXPECT_EQ(b.correlation_id, 42u);
  EXPECT_EQ(b.name, "HtoD");
}

// Runs one stage for `ms` with elements spaced `gap_us` apart (0: flat out)
// and returns {trace bytes, elements}.
std::pair<uint64_t, uint64_t> TimedRun(const std::string& name, int ms, int gap_us) {
  const std::string path = TempTracePath(name);
  StageId stage = RegisterStage({"size", "map", 1});
  EXPECT_TRUE(Start(Options(path, 50)).ok());
  uint64_t elements = 0;
  std::thread([&] {
    ScopedWorker w(stage);
    uint64_t start = NowNs(), begin = start;
    while (begin - start < static_cast<uint64_t>(ms) * 1000000) {
      if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
      uint64_t end = NowNs();
      w->Work(begin, end, elements);
      w->Produced(1, 100);
      ++elements;
      begin = end;
    }
  }).join();
  EXPECT_TRUE(Stop().ok());
  RetireStage(stage);
  return {testing::ReadFileBytes(path).size(), elements};
}

TEST(Recording, TraceSizeDoesNotGrowWithElementCount) {
  auto [slow_bytes, slow_elements] = TimedRun("size_slow", 300, 1000);
  auto [fast_bytes, fast_elements] = TimedRun("size_fast", 300, 0);
  EXPECT_GT(fast_elements, 50 * slow_elements);
  // Same duration, same snapshots and span budget: about the same size.
  EXPECT_LT(fast_bytes, slow_bytes * 3 / 2 + 4096) << fast_elements << " vs " << slow_elements;
}

TEST(Recording, StopWithoutStartIsOkAndStartTwiceFails) {
  EXPECT_TRUE(Stop().ok());
  const std::string path = TempTracePath("twice");
  ASSERT_TRUE(Start(Options(path)).ok());
  Status again = Start(Options(TempTracePath("twice2")));
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find(path), std::string::npos) << again.message();
  EXPECT_TRUE(Stop().ok());
  EXPECT_TRUE(Stop().ok());
}

TEST(Recording, UnwritablePathIsAnErrorNamingIt) {
  Status s = Start(Options("/nonexistent-dir/x.trace"));
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("/nonexistent-dir/x.trace"), std::string::npos);
  EXPECT_FALSE(Enabled());
  SessionOptions bad = Options(TempTracePath("bad_interval"));
  bad.snapshot_interval_ms = 0;
  EXPECT_EQ(Start(bad).code(), StatusCode::kInvalidInput);
}

TEST(Recording, RetiredStagesLeaveLaterSnapshots) {
  const std::string path = TempTracePath("retire");
  StageId early = RegisterStage({"early", "map", 1});
  ASSERT_TRUE(Start(Options(path, 10)).ok());
  std::thread([&] {
    ScopedWorker w(early);
    w->Produced(3, 3);
  }).join();
  RetireStage(early);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  ASSERT_TRUE(Stop().ok());
  Trace trace = LoadOrFail(path);
  ASSERT_NE(trace.LastSnapshot(early), nullptr);
  EXPECT_EQ(trace.LastSnapshot(early)->produced, 3u);         // its final counts are in
  uint64_t last_time = trace.consumer_totals.back().time_ns;  // one per snapshot
  EXPECT_LT(trace.LastSnapshot(early)->time_ns, last_time);   // and then it is gone
}

TEST(Recording, InvalidStageIsHarmless) {
  Worker* w = AttachWorker(kInvalidStage);
  ASSERT_NE(w, nullptr);
  w->Produced(1, 1);
  w->Work(1, 2, 3);
  SetBufferOccupancy(kInvalidStage, 1, 1);
  SetParallelism(kInvalidStage, 2);
  RetireStage(kInvalidStage);
  DetachWorker(w);
  DetachWorker(nullptr);
}

TEST(Recording, EnvironmentVariableStartsTracingAndExplicitStartReplacesIt) {
  const std::string env_path = TempTracePath("env");
  const std::string explicit_path = TempTracePath("explicit");
  setenv("PIPETUNE_TRACE", env_path.c_str(), 1);
  SessionOptions defaults;
  defaults.pipeline_name = "from_env";
  ASSERT_TRUE(StartFromEnvironment(defaults).ok());
  EXPECT_TRUE(Enabled());
  // Called again once the program knows its config: recorded, not restarted.
  SessionOptions described;
  described.pipeline_name = "described";
  described.config_json = R"({"stages":[]})";
  ASSERT_TRUE(StartFromEnvironment(described).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_TRUE(Start(Options(explicit_path)).ok());  // replaces the environment's session
  ASSERT_TRUE(Stop().ok());
  unsetenv("PIPETUNE_TRACE");

  Trace env_trace = LoadOrFail(env_path);
  EXPECT_TRUE(env_trace.has_end);
  EXPECT_EQ(env_trace.header.pipeline.name, "described");
  EXPECT_EQ(env_trace.header.pipeline.config_json, R"({"stages":[]})");
  Trace explicit_trace = LoadOrFail(explicit_path);
  EXPECT_EQ(explicit_trace.header.pipeline.name, "test");
}

TEST(Recording, HostFactsAreRead) {
  HostFacts facts = CollectHostFacts();
  EXPECT_GT(facts.cores_online, 0u);
  EXPECT_GT(facts.cores_allowed, 0u);
  EXPECT_LE(facts.cores_allowed, facts.cores_online);
  EXPECT_GT(facts.memory_total_bytes, 0);
  EXPECT_GT(facts.UsableCores(), 0.0);
  EXPECT_FALSE(facts.hostname.empty());
}

}  // namespace
}  // namespace pipetune::tracer

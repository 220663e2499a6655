// Cost per hot-path event of the recording API, tracing on and off.
//
// Each benchmark names what one iteration does. "Sampled" benchmarks record
// every event one by one (budget 10^9/s) in batches that fit the per-thread
// ring, with a pause for the sampler to drain it between batches; the pause is
// not timed (manual time), so they measure the recording path itself. The
// others run at the default budgets, where nearly every event is only
// counted, as in a real pipeline.
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "pipetune/tracer/tracer.h"

namespace pt = pipetune::tracer;

namespace {

constexpr int kBatch = 256;  // fits both rings (512 spans, 1024 steps)

std::string TracePath() { return "/tmp/pipetune_tracer_bench_" + std::to_string(getpid()) + ".trace"; }

// Sessions are started and stopped by Setup/Teardown, which run once per
// benchmark run, outside the timed threads.
void StartSession(uint32_t budget, uint32_t interval_ms) {
  pt::SessionOptions o;
  o.path = TracePath();
  o.snapshot_interval_ms = interval_ms;
  if (budget != 0) {
    o.spans_per_stage_per_second = budget;
    o.consumer_steps_per_second = budget;
  }
  if (!pt::Start(o).ok()) std::abort();
}
// Arg 0: tracing off; 1: on, default budgets.
void SetupByArg(const benchmark::State& state) {
  if (state.range(0) != 0) StartSession(0, 100);
}
// Every event recorded one by one; the sampler drains every millisecond.
void SetupRecordAll(const benchmark::State&) { StartSession(1000000000, 1); }
void Teardown(const benchmark::State&) {
  (void)pt::Stop();
  unlink(TracePath().c_str());
}

pt::StageId Stage() {
  static pt::StageId stage = pt::RegisterStage({"bench", "map", 1});
  return stage;
}

void BM_NowNs(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(pt::NowNs());
}
BENCHMARK(BM_NowNs);

// Produced(1, bytes): one element with its size.
void BM_Produced(benchmark::State& state) {
  pt::ScopedWorker w(Stage());
  for (auto _ : state) w->Produced(1, 4096);
}
BENCHMARK(BM_Produced)->ArgName("tracing")->Arg(0)->Arg(1)->Setup(SetupByArg)->Teardown(Teardown);
BENCHMARK(BM_Produced)->ArgName("tracing")->Arg(1)->Threads(2)->Setup(SetupByArg)->Teardown(Teardown);

// Work() with caller-made timestamps, default span budget: counted, the
// sampling gate says no. The work loop's own NowNs is not included.
void BM_Work(benchmark::State& state) {
  pt::ScopedWorker w(Stage());
  uint64_t t = pt::NowNs();
  uint64_t id = 0;
  for (auto _ : state) {
    w->Work(t, t + 100, id++);
    t += 100;
  }
}
BENCHMARK(BM_Work)->ArgName("tracing")->Arg(0)->Arg(1)->Setup(SetupByArg)->Teardown(Teardown);

// What a stage pays per element, clock included: read the clock once, then
// Consumed + Work + Produced, chaining the timestamp.
void BM_ElementWithClock(benchmark::State& state) {
  pt::ScopedWorker w(Stage());
  uint64_t begin = pt::NowNs();
  uint64_t id = 0;
  for (auto _ : state) {
    uint64_t end = pt::NowNs();
    w->Consumed(1);
    w->Work(begin, end, id++);
    w->Produced(1, 4096);
    begin = end;
  }
}
BENCHMARK(BM_ElementWithClock)->ArgName("tracing")->Arg(0)->Arg(1)->Setup(SetupByArg)->Teardown(Teardown);

// Work() where every call records a span: the sampling gate's CAS and the
// ring store. Reported time is per span.
void BM_WorkSampledSpan(benchmark::State& state) {
  pt::ScopedWorker w(Stage());
  uint64_t id = 0;
  for (auto _ : state) {
    uint64_t t = pt::NowNs();
    uint64_t start = pt::NowNs();
    for (int i = 0; i < kBatch; ++i) {
      w->Work(t, t + 100, id++);
      t += 100;
    }
    uint64_t elapsed = pt::NowNs() - start;
    state.SetIterationTime(static_cast<double>(elapsed) / 1e9 / kBatch);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the sampler drains
  }
}
BENCHMARK(BM_WorkSampledSpan)->UseManualTime()->Iterations(300)->Setup(SetupRecordAll)->Teardown(Teardown);

// ConsumerStep at the default budget (1000/s): counted, rarely recorded.
void BM_ConsumerStep(benchmark::State& state) {
  uint64_t t = pt::NowNs();
  for (auto _ : state) {
    pt::ConsumerStep(1000, 20000, t);
    t += 21000;
  }
}
BENCHMARK(BM_ConsumerStep)->ArgName("tracing")->Arg(0)->Arg(1)->Setup(SetupByArg)->Teardown(Teardown);

// ConsumerStep where every step is recorded. Reported time is per step.
void BM_ConsumerStepRecorded(benchmark::State& state) {
  for (auto _ : state) {
    uint64_t t = pt::NowNs();
    uint64_t start = pt::NowNs();
    for (int i = 0; i < kBatch; ++i) {
      pt::ConsumerStep(1000, 20000, t);
      t += 21000;
    }
    uint64_t elapsed = pt::NowNs() - start;
    state.SetIterationTime(static_cast<double>(elapsed) / 1e9 / kBatch);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
}
BENCHMARK(BM_ConsumerStepRecorded)
    ->UseManualTime()
    ->Iterations(300)
    ->Setup(SetupRecordAll)
    ->Teardown(Teardown);

// Trace size against run length: two stages producing flat out (one thread
// each) and a consumer, at the default budgets, for range(0) milliseconds.
// The size must follow the run length, not the element count.
void BM_TraceSize(benchmark::State& state) {
  const uint64_t run_ns = static_cast<uint64_t>(state.range(0)) * 1000000;
  uint64_t elements = 0;
  for (auto _ : state) {
    pt::StageId stages[2] = {pt::RegisterStage({"size_a", "map", 1}),
                             pt::RegisterStage({"size_b", "map", 1})};
    StartSession(0, 100);
    std::atomic<uint64_t> produced{0};
    auto stage = [&](pt::StageId id) {
      pt::ScopedWorker w(id);
      uint64_t start = pt::NowNs(), begin = start, n = 0;
      while (begin - start < run_ns) {
        uint64_t end = pt::NowNs();
        w->Work(begin, end, n++);
        w->Produced(1, 1024);
        if (n % 64 == 0) pt::ConsumerStep(100, 100, end);
        begin = end;
      }
      produced += n;
    };
    std::thread a(stage, stages[0]), b(stage, stages[1]);
    a.join();
    b.join();
    (void)pt::Stop();
    for (pt::StageId id : stages) pt::RetireStage(id);
    elements = produced.load();
  }
  struct stat st {};
  stat(TracePath().c_str(), &st);
  unlink(TracePath().c_str());
  double bytes = static_cast<double>(st.st_size);
  state.counters["trace_KB"] = bytes / 1e3;
  state.counters["Melements"] = static_cast<double>(elements) / 1e6;
  state.counters["KB_per_Melement"] = bytes / 1e3 / (static_cast<double>(elements) / 1e6);
  state.counters["KB_per_s"] = bytes / 1e3 / (static_cast<double>(run_ns) / 1e9);
}
BENCHMARK(BM_TraceSize)
    ->ArgName("ms")
    ->Arg(500)
    ->Arg(1000)
    ->Arg(2000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

// Runtime overhead, measured as what a user of the engine would see:
//
//  BM_CpuBoundPipeline: range -> cpu_work 500 us (p=2) -> cpu_work 500 us
//    (p=2) -> consumer. Its known costs allow cores / 1 ms elements per
//    second; `ratio` = achieved / that capacity (target >= 0.90).
//  BM_NoOpPipeline: range -> map(no-op) at parallelism P -> consumer: how
//    many elements per second the engine itself moves (target >= 1e6 at P=1).
//  BM_TracedOverUntraced: what the tracer integration costs on 10 us elements
//    (target >= 0.98); BM_TracedOverUntracedImage: on the image example
//    (target >= 0.995; needs examples/image/data from pipetune_make_images).
//
// Each prints its ratio (or rate) as the last counter. Run on an otherwise
// idle machine; docs/benchmarks-runtime.md has the figures and the command.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sched.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "pipetune/base/clock.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/tracer/tracer.h"

namespace pipetune::runtime {
namespace {

int CoresAllowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

const FunctionRegistry& BenchRegistry() {
  static const FunctionRegistry registry = [] {
    FunctionRegistry r;
    RegisterSyntheticFunctions(r);
    r.RegisterMap("noop", [](const models::StageConfig&) -> StatusOr<std::unique_ptr<MapFunction>> {
      struct NoOp : MapFunction {
        Status Apply(Element&, const FnContext&) const override { return Status::Ok(); }
      };
      return std::unique_ptr<MapFunction>(new NoOp());
    });
    return r;
  }();
  return registry;
}

models::PipelineConfig Parse(const std::string& json) {
  auto config = models::ParseConfig(json, "bench");
  if (!config.ok()) {
    fmt::print(stderr, "{}\n", config.status().message());
    std::abort();
  }
  return std::move(config).value();
}

RunSummary Run(const models::PipelineConfig& config, benchmark::State& state, RunOptions options = {}) {
  if (options.registry == nullptr) options.registry = &BenchRegistry();
  auto summary = RunPipeline(config, options);
  if (!summary.ok()) {
    state.SkipWithError(summary.status().message().c_str());
    return {};
  }
  return std::move(summary).value();
}

// The benchmark's iterations, summed: wall seconds of the consumer loops,
// outputs delivered and the process CPU seconds they took.
struct Totals {
  double seconds = 0, outputs = 0, cpu = 0;
};

Totals RunIterations(const models::PipelineConfig& config, benchmark::State& state) {
  Totals totals;
  for (auto _ : state) {
    double cpu_begin = ProcessCpuSeconds();
    RunSummary summary = Run(config, state);
    totals.cpu += ProcessCpuSeconds() - cpu_begin;
    totals.seconds += summary.seconds;
    totals.outputs += static_cast<double>(summary.outputs);
    state.SetIterationTime(summary.seconds);
  }
  return totals;
}

void BM_CpuBoundPipeline(benchmark::State& state) {
  const int parallelism = static_cast<int>(state.range(0));
  const int64_t elements = state.range(1);
  const double us_per_stage = 500;
  auto config = Parse(fmt::format(R"({{"name": "two_stage_cpu", "stages": [
      {{"name": "src", "op": "range", "args": {{"count": {0}}}}},
      {{"name": "a", "op": "map", "fn": "cpu_work", "args": {{"us": {1}}}, "parallelism": {2}}},
      {{"name": "b", "op": "map", "fn": "cpu_work", "args": {{"us": {1}}}, "parallelism": {2}}}]}})",
                                  elements, us_per_stage, parallelism));
  // What the known costs allow: every stage's CPU on the cores we may use,
  // and no stage faster than its workers can go.
  const double cores = CoresAllowed();
  const double cpu_bound = cores / (2 * us_per_stage * 1e-6);
  const double worker_bound = parallelism / (us_per_stage * 1e-6);
  const double capacity = std::min(cpu_bound, worker_bound);
  const Totals totals = RunIterations(config, state);
  const double seconds = totals.seconds, outputs = totals.outputs, cpu = totals.cpu;
  double achieved = seconds > 0 ? outputs / seconds : 0;
  state.counters["achieved_per_s"] = achieved;
  state.counters["capacity_per_s"] = capacity;
  state.counters["cores"] = cores;
  // The element functions' CPU over all the CPU the process used: what the
  // engine costs, whatever else runs on the machine.
  state.counters["cpu_efficiency"] = cpu > 0 ? outputs * 2 * us_per_stage * 1e-6 / cpu : 0;
  // Cores the process actually got while it ran (below `cores` on a busy host).
  state.counters["cores_used"] = seconds > 0 ? cpu / seconds : 0;
  state.counters["ratio"] = achieved / capacity;
}
BENCHMARK(BM_CpuBoundPipeline)
    ->Args({2, 4000})
    ->Args({1, 4000})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

void BM_NoOpPipeline(benchmark::State& state) {
  const int parallelism = static_cast<int>(state.range(0));
  const int64_t elements = state.range(1);
  auto config = Parse(fmt::format(R"({{"name": "noop", "stages": [
      {{"name": "src", "op": "range", "args": {{"count": {}}}}},
      {{"name": "noop", "op": "map", "fn": "noop", "parallelism": {}}}]}})",
                                  elements, parallelism));
  const Totals totals = RunIterations(config, state);
  const double seconds = totals.seconds, outputs = totals.outputs, cpu = totals.cpu;
  state.counters["cores_used"] = seconds > 0 ? cpu / seconds : 0;
  state.counters["cpu_ns_per_element"] = outputs > 0 ? cpu * 1e9 / outputs : 0;
  state.counters["elements_per_s"] = seconds > 0 ? outputs / seconds : 0;
}
BENCHMARK(BM_NoOpPipeline)
    ->Args({1, 5'000'000})
    ->Args({2, 5'000'000})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The same no-op chain with a batch and a prefetch: what the cheap
// sequential ops cost per element.
void BM_NoOpBatchPrefetch(benchmark::State& state) {
  auto config = Parse(R"({"name": "noop_batch", "stages": [
      {"name": "src", "op": "range", "args": {"count": 5000000}},
      {"name": "noop", "op": "map", "fn": "noop"},
      {"name": "batch", "op": "batch", "args": {"size": 64}},
      {"name": "prefetch", "op": "prefetch", "buffer": 4}]})");
  double seconds = 0, examples = 0;
  for (auto _ : state) {
    RunSummary summary = Run(config, state);
    seconds += summary.seconds;
    examples += static_cast<double>(summary.source_elements);
    state.SetIterationTime(summary.seconds);
  }
  state.counters["elements_per_s"] = seconds > 0 ? examples / seconds : 0;
}
BENCHMARK(BM_NoOpBatchPrefetch)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

// Runs `config` with and without a trace session, alternated within one
// run so that drift falls on both sides alike (and both share one process,
// one cpu_work calibration and one page cache); `ratio` = traced / untraced
// examples per second. With `control` the "traced" side starts no session:
// an A/A run whose ratio is the harness's own noise floor.
void TracedOverUntraced(benchmark::State& state, const models::PipelineConfig& config,
                        const RunOptions& options, bool control = false) {
  std::string path = "/tmp/pipetune_runtime_bench.trace";
  double traced_s = 0, untraced_s = 0, traced_n = 0, untraced_n = 0, traced_cpu = 0, untraced_cpu = 0;
  bool traced_first = false;
  for (auto _ : state) {
    double iteration_s = 0;
    for (int half = 0; half < 2; ++half) {
      bool traced = (half == 0) == traced_first;
      if (traced && !control) {
        tracer::SessionOptions session;
        session.path = path;
        session.pipeline_name = config.name;
        if (!tracer::Start(session).ok()) {
          state.SkipWithError("cannot start a trace session");
          return;
        }
      }
      double cpu_begin = ProcessCpuSeconds();
      RunSummary summary = Run(config, state, options);
      if (traced && !control) (void)tracer::Stop();
      (traced ? traced_cpu : untraced_cpu) += ProcessCpuSeconds() - cpu_begin;
      (traced ? traced_s : untraced_s) += summary.seconds;
      (traced ? traced_n : untraced_n) += static_cast<double>(summary.source_elements);
      iteration_s += summary.seconds;
    }
    traced_first = !traced_first;
    state.SetIterationTime(iteration_s);
  }
  std::remove(path.c_str());
  double untraced = untraced_s > 0 ? untraced_n / untraced_s : 0;
  double traced = traced_s > 0 ? traced_n / traced_s : 0;
  state.counters["untraced_per_s"] = untraced;
  state.counters["traced_per_s"] = traced;
  // CPU per element, untraced over traced: what tracing adds to the work
  // itself, less disturbed by scheduling than the wall-clock rates (it
  // includes the sampler thread and the trace's writes).
  double untraced_cpu_per = untraced_n > 0 ? untraced_cpu / untraced_n : 0;
  double traced_cpu_per = traced_n > 0 ? traced_cpu / traced_n : 0;
  state.counters["cpu_us_per_element"] = untraced_cpu_per * 1e6;
  state.counters["cpu_ratio"] = traced_cpu_per > 0 ? untraced_cpu_per / traced_cpu_per : 0;
  state.counters["ratio"] = untraced > 0 ? traced / untraced : 0;
}

// The tracer's worst case: 10 us cpu_work elements (target >= 0.98).
void BM_TracedOverUntraced(benchmark::State& state) {
  auto config = Parse(R"({"name": "traced_10us", "stages": [
      {"name": "src", "op": "range", "args": {"count": 40000}},
      {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 10}},
      {"name": "batch", "op": "batch", "args": {"size": 32}},
      {"name": "prefetch", "op": "prefetch", "buffer": 2}]})");
  TracedOverUntraced(state, config, RunOptions{});
}
BENCHMARK(BM_TracedOverUntraced)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);

// The image example (examples/image/image_train_tuned.json over the files
// pipetune_make_images wrote), 3 s a side (target >= 0.995).
void BM_TracedOverUntracedImage(benchmark::State& state) {
  const std::string dir = std::string(PIPETUNE_SOURCE_DIR) + "/examples/image";
  auto config = models::LoadConfig(dir + "/image_train_tuned.json");
  if (!config.ok()) {
    state.SkipWithError(config.status().message().c_str());
    return;
  }
  RunOptions options;
  options.registry = &FunctionRegistry::Builtins();
  options.base_dir = dir;
  options.max_seconds = 3;
  TracedOverUntraced(state, *config, options, /*control=*/state.range(0) == 1);
}
// Arg 0: traced over untraced; arg 1: the A/A control (untraced over untraced).
BENCHMARK(BM_TracedOverUntracedImage)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(6);

// The image pipeline made endless (a repeat after the file list; batches of
// 8 so that a window holds ~180 outputs) and run once for 64 s, with tracing
// switched on and off every 2 s inside that one run: no restart, no new page
// cache, no new calibration between the two sides, only the tracer. Windows
// alternate traced / untraced after 4 s of warm-up; `ratio` = traced / untraced images per second over all
// windows, `pair_sd` the spread of the per-pair ratios (its standard error is pair_sd / sqrt(pairs)).
void BM_TracedWindowsImage(benchmark::State& state) {
  const std::string dir = std::string(PIPETUNE_SOURCE_DIR) + "/examples/image";
  auto config = Parse(R"({"name": "image_windows", "stages": [
      {"name": "files", "op": "list_files", "args": {"pattern": "data/*.jpg", "shuffle_seed": 7}},
      {"name": "again", "op": "repeat"},
      {"name": "read", "op": "read_file"},
      {"name": "decode", "op": "map", "fn": "jpeg_decode", "parallelism": 2},
      {"name": "augment", "op": "map", "fn": "random_crop_flip", "args": {"size": 224}, "random": true},
      {"name": "normalize", "op": "map", "fn": "normalize"},
      {"name": "batch", "op": "batch", "args": {"size": 8}},
      {"name": "prefetch", "op": "prefetch", "buffer": 32}]})");
  const std::string path = "/tmp/pipetune_runtime_bench_windows.trace";
  constexpr double kWarmup = 4, kSeconds = 64, kWindow = 2;
  double traced_s = 0, untraced_s = 0, traced_n = 0, untraced_n = 0;
  std::vector<double> rates[2];  // [untraced, traced] per window
  for (auto _ : state) {
    double last_s = 0, last_n = 0;
    bool tracing = false;
    RunOptions options;
    options.registry = &FunctionRegistry::Builtins();
    options.base_dir = dir;
    options.max_seconds = kSeconds;
    options.progress_interval_s = kWindow;
    options.on_progress = [&](const Progress& p) {
      double n = static_cast<double>(p.source_elements), dt = p.seconds - last_s;
      if (last_s >= kWarmup && dt > 0) {
        (tracing ? traced_s : untraced_s) += dt;
        (tracing ? traced_n : untraced_n) += n - last_n;
        rates[tracing].push_back((n - last_n) / dt);
      }
      last_s = p.seconds;
      last_n = n;
      if (p.seconds < kWarmup - kWindow) return;
      if (tracing) {
        (void)tracer::Stop();
      } else {
        tracer::SessionOptions session;
        session.path = path;
        session.pipeline_name = "image_windows";
        (void)tracer::Start(session);
      }
      tracing = !tracing;
    };
    RunSummary summary = Run(config, state, options);
    (void)tracer::Stop();
    state.SetIterationTime(summary.seconds);
  }
  std::remove(path.c_str());
  size_t pairs = std::min(rates[0].size(), rates[1].size());
  double mean = 0, square = 0;
  for (size_t i = 0; i < pairs; ++i) {
    double r = rates[1][i] / rates[0][i];
    mean += r;
    square += r * r;
  }
  if (pairs > 1) {
    mean /= static_cast<double>(pairs);
    state.counters["pair_sd"] = std::sqrt(std::max(0.0, square / static_cast<double>(pairs) - mean * mean));
  }
  state.counters["pairs"] = static_cast<double>(pairs);
  double untraced = untraced_s > 0 ? untraced_n / untraced_s : 0;
  double traced = traced_s > 0 ? traced_n / traced_s : 0;
  state.counters["untraced_per_s"] = untraced;
  state.counters["traced_per_s"] = traced;
  state.counters["ratio"] = untraced > 0 ? traced / untraced : 0;
}
BENCHMARK(BM_TracedWindowsImage)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace pipetune::runtime

BENCHMARK_MAIN();

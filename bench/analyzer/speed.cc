// analyzer_speed: how fast the analyzer reads a trace, and that its memory
// does not grow with the trace's length.
//
//   analyzer_speed make --elements 10000000 --out big.trace
//       writes a trace in which every one of N elements of 4 stages is
//       recorded as a span (the worst case: no sampling), with snapshots every
//       1 ms, through the tracer's own recording API;
//   analyzer_speed analyze big.trace
//       collects and diagnoses it on one thread; prints records, seconds,
//       records per second and the process's peak RSS.
//
// bench/analyzer/speed.sh runs both at two sizes and prints the ratios.
#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <thread>

#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/clock.h"
#include "pipetune/tracer/tracer.h"

namespace {

using namespace pipetune;

constexpr int kStages = 4;
// Spans a worker's ring holds between two snapshots; staying under it
// keeps every element recorded (nothing dropped).
constexpr uint64_t kBurst = 480;

int Make(uint64_t elements, const std::string& path) {
  tracer::SessionOptions session;
  session.path = path;
  session.pipeline_name = "speed";
  session.snapshot_interval_ms = 1;
  session.spans_per_stage_per_second = 1'000'000'000;  // record every element
  const char* names[kStages] = {"source", "decode", "augment", "batch"};
  const char* ops[kStages] = {"range", "map", "map", "map"};
  tracer::StageId ids[kStages];
  for (int s = 0; s < kStages; ++s) ids[s] = tracer::RegisterStage({names[s], ops[s], 1});
  Status started = tracer::Start(session);
  if (!started.ok()) {
    fmt::print(stderr, "error: {}\n", started.message());
    return 2;
  }
  // One thread per stage, each recording its share of elements in bursts
  // that the sampler drains every interval.
  uint64_t per_stage = elements / kStages;
  std::vector<std::thread> threads;
  for (int s = 0; s < kStages; ++s) {
    threads.emplace_back([&, s] {
      tracer::ScopedWorker worker(ids[s]);
      uint64_t t = tracer::NowNs();
      for (uint64_t done = 0; done < per_stage;) {
        uint64_t burst = std::min(kBurst, per_stage - done);
        for (uint64_t i = 0; i < burst; ++i, ++done) {
          worker->Consumed(1);
          worker->Work(t, t + 1000, done);
          worker->Produced(1, 64);
          t += 1000;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(1500));
        t = std::max(t, tracer::NowNs());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  Status stopped = tracer::Stop();
  if (!stopped.ok()) {
    fmt::print(stderr, "error: {}\n", stopped.message());
    return 2;
  }
  fmt::print("wrote {} ({} elements' events)\n", path, per_stage * kStages);
  return 0;
}

int Analyze(const std::string& path) {
  auto start = std::chrono::steady_clock::now();
  StatusOr<analyzer::CollectedTrace> trace = analyzer::CollectTrace(path);
  if (!trace.ok()) {
    fmt::print(stderr, "error: {}\n", trace.status().message());
    return 2;
  }
  StatusOr<analyzer::Diagnosis> diagnosis = analyzer::Diagnose(*trace, path);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!diagnosis.ok()) {
    fmt::print(stderr, "error: {}\n", diagnosis.status().message());
    return 2;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  double mib = static_cast<double>(trace->read_report.file_bytes) / (1 << 20);
  fmt::print("trace {}: {:.0f} MiB, {} records ({} spans, {} frames kept), dropped {}\n", path, mib,
             trace->records, trace->spans, trace->frames.size(), trace->drops.Total());
  // CPU time as well as wall time: on a shared host the wall clock also
  // counts the time other programs held the core.
  double cpu = ProcessCpuSeconds();
  fmt::print(
      "analysed in {:.2f} s wall, {:.2f} s CPU: {:.1f} M records/s wall, {:.1f} M records per CPU-second, "
      "{:.0f} MiB/s; peak RSS {:.1f} MiB\n",
      seconds, cpu, static_cast<double>(trace->records) / seconds / 1e6,
      static_cast<double>(trace->records) / cpu / 1e6, mib / seconds,
      static_cast<double>(usage.ru_maxrss) / 1024.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Analyzer speed and memory on large traces"};
  app.require_subcommand(1);
  uint64_t elements = 10'000'000;
  std::string out, in;
  CLI::App* make = app.add_subcommand("make", "write a large trace");
  make->add_option("--elements", elements);
  make->add_option("--out", out)->required();
  CLI::App* analyze = app.add_subcommand("analyze", "analyse a trace, timed");
  analyze->add_option("trace", in)->required();
  CLI11_PARSE(app, argc, argv);
  if (*make) return Make(elements, out);
  return Analyze(in);
}

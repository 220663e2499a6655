#include "synthetic_trace.h"

#include <algorithm>
#include <cmath>

namespace pipetune::analyzer::testing {

CollectedTrace Collect(const SyntheticRun& run, const tracer::ReadReport& report) {
  TraceCollector collector;
  tracer::TraceHeader header;
  header.format_version = 1;
  header.clock.start_ns = 1'000'000'000;  // any origin: the analyzer works relative to it
  header.host.cores_allowed = static_cast<uint32_t>(run.cores);
  header.pipeline.name = run.name;
  header.pipeline.config_json = run.config_json;
  header.snapshot_interval_ms = run.snapshot_interval_ms;
  collector.OnHeader(header);
  for (size_t i = 0; i < run.stages.size(); ++i) {
    tracer::StageDef def;
    def.id = static_cast<tracer::StageId>(i + 10);
    def.name = run.stages[i].name;
    def.op = run.stages[i].op;
    def.parallelism = run.stages[i].parallelism;
    collector.OnStage(def);
  }
  auto ns = [&](double seconds) { return header.clock.start_ns + static_cast<uint64_t>(seconds * 1e9); };
  double interval = run.snapshot_interval_ms / 1e3;
  int snapshots = static_cast<int>(std::round(run.seconds / interval));
  double step = run.step_seconds > 0 ? run.step_seconds : 0.0;
  double per_output = 1.0 / run.throughput;
  // The first step: its wait began when the pipeline started flowing.
  collector.OnConsumerStep({0, static_cast<uint64_t>(per_output * 1e9), static_cast<uint64_t>(step * 1e9),
                            ns(run.start_seconds + per_output)});
  for (int k = 1; k <= snapshots; ++k) {
    double t = k * interval;
    double flowing = std::max(0.0, t - run.start_seconds);
    double consuming = run.consumer_stop_seconds >= 0
                           ? std::min(flowing, std::max(0.0, run.consumer_stop_seconds - run.start_seconds))
                           : flowing;
    double outputs = std::floor(consuming * run.throughput);
    double stage_cpu = 0;
    for (size_t i = 0; i < run.stages.size(); ++i) {
      const SyntheticStage& s = run.stages[i];
      double active = s.stop_seconds >= 0
                          ? std::min(flowing, std::max(0.0, s.stop_seconds - run.start_seconds))
                          : flowing;
      double produced = std::floor(active * run.throughput * s.visit_ratio);
      double busy = produced * s.wall_seconds;
      tracer::StageSnapshot snap;
      snap.time_ns = ns(t);
      snap.stage = static_cast<tracer::StageId>(i + 10);
      snap.parallelism = s.parallelism;
      snap.live_workers = s.parallelism;
      snap.produced = static_cast<uint64_t>(produced);
      snap.consumed = static_cast<uint64_t>(produced * s.consumed_per_element);
      snap.bytes_produced = static_cast<uint64_t>(produced * s.bytes);
      snap.cpu_ns = static_cast<uint64_t>(produced * s.cpu_seconds * 1e9);
      snap.work_ns = static_cast<uint64_t>(busy * 1e9);
      snap.wait_input_ns = static_cast<uint64_t>(std::max(0.0, t * s.parallelism - busy) * 0.5e9);
      snap.occupancy_bytes = static_cast<int64_t>(4 * s.bytes);
      snap.spans_dropped = i == 0 ? run.dropped_spans : 0;
      stage_cpu += produced * s.cpu_seconds;
      collector.OnSnapshot(snap);
    }
    tracer::ConsumerTotals totals;
    totals.time_ns = ns(t);
    totals.steps = static_cast<uint64_t>(outputs);
    totals.step_ns = static_cast<uint64_t>(outputs * step * 1e9);
    totals.wait_ns = static_cast<uint64_t>(std::max(0.0, t - outputs * step) * 1e9);
    collector.OnConsumerTotals(totals);
    tracer::ProcessSample sample;
    sample.time_ns = ns(t);
    sample.cpu_ns = static_cast<uint64_t>((stage_cpu + run.other_cpu_cores * t) * 1e9);
    sample.rss_bytes = 50u << 20;
    collector.OnProcessSample(sample);
    tracer::DropCounts drops;
    drops.time_ns = ns(t);
    drops.spans = run.dropped_spans;
    collector.OnDrops(drops);
  }
  collector.OnEnd({ns(run.seconds)});
  tracer::ReadReport finished = report;
  if (finished.path.empty()) finished.path = "synthetic.trace";
  finished.ended_cleanly = true;
  return collector.Finish(finished);
}

}  // namespace pipetune::analyzer::testing

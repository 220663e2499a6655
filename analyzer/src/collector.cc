// Folding a trace's record stream into a bounded CollectedTrace.
#include "pipetune/analyzer/collector.h"

#include <algorithm>
#include <cmath>

namespace pipetune::analyzer {
namespace {

// Histogram buckets: 1 us * 2^(i/4), i = 0..127 covers 1 us to ~4 hours.
constexpr double kFirstBucketNs = 1000.0;
constexpr double kBucketsPerDoubling = 4.0;

}  // namespace

void LatencyHistogram::Add(uint64_t ns) {
  int bucket = 0;
  if (static_cast<double>(ns) > kFirstBucketNs) {
    bucket = static_cast<int>(std::log2(static_cast<double>(ns) / kFirstBucketNs) * kBucketsPerDoubling) + 1;
  }
  counts[static_cast<size_t>(std::clamp(bucket, 0, kBuckets - 1))]++;
  total++;
}

double LatencyHistogram::Quantile(double q) const {
  if (total == 0) return 0.0;
  uint64_t rank = static_cast<uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(total)));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts[static_cast<size_t>(i)];
    if (seen >= rank) {
      // The geometric middle of the bucket [2^((i-1)/4), 2^(i/4)) us.
      double upper = kFirstBucketNs * std::exp2(i / kBucketsPerDoubling);
      double lower = i == 0 ? 0.0 : kFirstBucketNs * std::exp2((i - 1) / kBucketsPerDoubling);
      double middle = i == 0 ? upper / 2 : std::sqrt(lower * upper);
      return middle / 1e9;
    }
  }
  return 0.0;
}

std::optional<size_t> CollectedTrace::FindStage(const std::string& name) const {
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].def.name == name) return i;
  }
  return std::nullopt;
}

double CollectedTrace::DurationSeconds() const {
  return frames.empty() ? 0.0 : static_cast<double>(frames.back().time_ns) / 1e9;
}

uint64_t TraceCollector::Relative(uint64_t time_ns) const {
  uint64_t start = trace_.header.clock.start_ns;
  return time_ns > start ? time_ns - start : 0;
}

void TraceCollector::OnHeader(const tracer::TraceHeader& header) {
  trace_.records++;
  trace_.header = header;
  trace_.pipeline = header.pipeline;
}

void TraceCollector::OnPipelineInfo(const tracer::PipelineInfo& info) {
  trace_.records++;
  trace_.pipeline = info;
}

void TraceCollector::OnStage(const tracer::StageDef& stage) {
  trace_.records++;
  auto known = std::find(stage_ids_.begin(), stage_ids_.end(), stage.id);
  if (known != stage_ids_.end()) return;  // a definition repeated by a later chunk
  stage_ids_.push_back(stage.id);
  CollectedStage collected;
  collected.def = stage;
  trace_.stages.push_back(collected);
  StageCounters counters;
  counters.parallelism = stage.parallelism;
  current_.stages.push_back(counters);
}

void TraceCollector::OnWorker(const tracer::WorkerDef& worker) {
  trace_.records++;
  auto it = std::find(stage_ids_.begin(), stage_ids_.end(), worker.stage);
  if (it != stage_ids_.end()) trace_.stages[static_cast<size_t>(it - stage_ids_.begin())].workers_attached++;
}

StageCounters& TraceCollector::CurrentStage(tracer::StageId id) {
  auto it = std::find(stage_ids_.begin(), stage_ids_.end(), id);
  if (it == stage_ids_.end()) {
    // A snapshot of a stage whose definition was lost: keep it, unnamed.
    tracer::StageDef def;
    def.id = id;
    def.name = "stage" + std::to_string(id);
    def.op = "unknown";
    OnStage(def);
    trace_.records--;
    it = stage_ids_.end() - 1;
  }
  return current_.stages[static_cast<size_t>(it - stage_ids_.begin())];
}

void TraceCollector::AdvanceTo(uint64_t time_ns) {
  uint64_t relative = Relative(time_ns);
  if (!current_dirty_) {
    current_.time_ns = relative;
    current_dirty_ = true;
    return;
  }
  if (relative <= current_.time_ns) return;  // same snapshot (or out of order: fold in)
  Commit();
  current_.time_ns = relative;
  current_dirty_ = true;
}

void TraceCollector::Commit() {
  if (!current_dirty_) return;
  // Integrate the buffer gauges over the time since the previous snapshot
  // (trapezoids: the gauge moved somehow between the two readings).
  double dt = static_cast<double>(current_.time_ns - std::min(current_.time_ns, previous_time_ns_)) / 1e9;
  previous_occupancy_.resize(current_.stages.size(), 0);
  for (size_t i = 0; i < current_.stages.size(); ++i) {
    StageCounters& stage = current_.stages[i];
    double now = static_cast<double>(std::max<int64_t>(0, stage.occupancy_bytes));
    stage.occupancy_byte_seconds += 0.5 * (previous_occupancy_[i] + now) * dt;
    previous_occupancy_[i] = now;
  }
  previous_time_ns_ = current_.time_ns;
  trace_.peak_rss_bytes = std::max(trace_.peak_rss_bytes, current_.rss_bytes);
  current_dirty_ = false;

  if (++snapshots_since_kept_ < trace_.frame_stride && !trace_.frames.empty()) return;
  snapshots_since_kept_ = 0;
  trace_.frames.push_back(current_);
  if (trace_.frames.size() >= kMaxFrames) {
    // Keep frames 0, 2, 4, ... and the last: half the resolution, the same
    // cumulative sums, and the latest totals.
    std::vector<Frame> kept;
    kept.reserve(kMaxFrames / 2 + 1);
    size_t last = trace_.frames.size() - 1;
    for (size_t i = 0; i < trace_.frames.size(); ++i) {
      if (i % 2 == 0 || i == last) kept.push_back(std::move(trace_.frames[i]));
    }
    trace_.frames = std::move(kept);
    trace_.frame_stride *= 2;
  }
}

void TraceCollector::OnSnapshot(const tracer::StageSnapshot& snapshot) {
  trace_.records++;
  AdvanceTo(snapshot.time_ns);
  StageCounters& stage = CurrentStage(snapshot.stage);
  stage.seen = true;
  stage.parallelism = snapshot.parallelism;
  stage.live_workers = snapshot.live_workers;
  static_cast<tracer::StageCounts&>(stage) = snapshot;
  stage.cpu_ns = snapshot.cpu_ns;
  stage.occupancy_bytes = snapshot.occupancy_bytes;
  stage.spans_dropped = snapshot.spans_dropped;
  stage.epoch_elements = snapshot.epoch_elements;
  auto index = static_cast<size_t>(std::find(stage_ids_.begin(), stage_ids_.end(), snapshot.stage) -
                                   stage_ids_.begin());
  trace_.stages[index].last_snapshot_ns = Relative(snapshot.time_ns);
}

void TraceCollector::OnSpan(const tracer::SpanRecord& span) {
  trace_.records++;
  trace_.spans++;
  auto it = std::find(stage_ids_.begin(), stage_ids_.end(), span.stage);
  if (it == stage_ids_.end()) return;
  uint64_t ns = span.end_ns > span.begin_ns ? span.end_ns - span.begin_ns : 0;
  trace_.stages[static_cast<size_t>(it - stage_ids_.begin())].span_latency.Add(ns);
}

void TraceCollector::OnConsumerStep(const tracer::ConsumerStepRecord& step) {
  trace_.records++;
  trace_.consumer_step_records++;
  uint64_t end = Relative(step.end_ns);
  uint64_t start = end - std::min(end, step.wait_ns + step.step_ns);
  if (!trace_.first_step_start_ns || start < *trace_.first_step_start_ns) trace_.first_step_start_ns = start;
  if (step.wait_ns > 0) {
    if (trace_.consumer_waits.size() < kMaxGpuIntervals) {
      trace_.consumer_waits.emplace_back(start, start + std::min(step.wait_ns, end - start));
    } else {
      trace_.gpu_intervals_not_kept++;
    }
  }
}

void TraceCollector::OnConsumerTotals(const tracer::ConsumerTotals& totals) {
  trace_.records++;
  AdvanceTo(totals.time_ns);
  current_.steps = totals.steps;
  current_.step_wait_ns = totals.wait_ns;
  current_.step_busy_ns = totals.step_ns;
}

void TraceCollector::OnProcessSample(const tracer::ProcessSample& sample) {
  trace_.records++;
  AdvanceTo(sample.time_ns);
  current_.has_process = true;
  current_.process_cpu_ns = sample.cpu_ns;
  current_.rss_bytes = sample.rss_bytes;
  current_.read_bytes = sample.read_bytes;
}

void TraceCollector::OnGpuActivity(const tracer::GpuActivity& activity) {
  trace_.records++;
  trace_.gpu_records++;
  if (activity.kind == tracer::GpuActivityKind::kKernel && activity.end_ns > activity.start_ns) {
    current_.gpu_busy_ns += activity.end_ns - activity.start_ns;
  }
  // Host waits on the GPU are not GPU work.
  if (activity.kind == tracer::GpuActivityKind::kSync || activity.end_ns <= activity.start_ns) return;
  if (trace_.gpu_work.size() >= kMaxGpuIntervals) {
    trace_.gpu_intervals_not_kept++;
    return;
  }
  GpuInterval w;
  w.device = activity.device;
  w.start_ns = Relative(activity.start_ns);
  w.end_ns = Relative(activity.end_ns);
  // Records of older writers have no copy kind, only its name.
  w.host_to_device = activity.kind == tracer::GpuActivityKind::kMemcpy &&
                     (activity.copy_kind == tracer::GpuCopyKind::kHostToDevice ||
                      (activity.copy_kind == tracer::GpuCopyKind::kNone && activity.name == "HtoD"));
  trace_.gpu_work.push_back(w);
}

void TraceCollector::OnGpuStatus(const tracer::GpuStatus& status) {
  trace_.records++;
  trace_.gpu_status = status;
}

void TraceCollector::OnDrops(const tracer::DropCounts& drops) {
  trace_.records++;
  trace_.drops = drops;
}

void TraceCollector::OnEnd(const tracer::TraceEnd& end) {
  trace_.records++;
  trace_.has_end = true;
  trace_.end_ns = Relative(end.time_ns);
}

CollectedTrace TraceCollector::Finish(const tracer::ReadReport& report) {
  bool pending = current_dirty_;
  if (pending) {
    // The last snapshot is always kept: it holds the totals.
    snapshots_since_kept_ = trace_.frame_stride;
    Commit();
  }
  trace_.read_report = report;
  return std::move(trace_);
}

StatusOr<CollectedTrace> CollectTrace(const std::string& path) {
  TraceCollector collector;
  StatusOr<tracer::ReadReport> report = tracer::ReadTrace(path, collector);
  if (!report.ok()) return report.status();
  return collector.Finish(*report);
}

StatusOr<CollectedTrace> LiveTraceCollector::Read() {
  PIPETUNE_ASSIGN_OR_RETURN(tracer::ReadReport report, tail_.ReadMore(collector_));
  // Finish commits the frame still open; the copy leaves it open in the
  // collector for the snapshots that come next.
  TraceCollector copy = collector_;
  return copy.Finish(report);
}

StatusOr<TraceSet> ReadTraceSet(const std::vector<std::string>& paths) {
  if (paths.empty()) return InvalidInput("no trace given");
  TraceSet set;
  set.main_path = paths[0];
  PIPETUNE_ASSIGN_OR_RETURN(set.main, CollectTrace(paths[0]));
  for (size_t i = 1; i < paths.size(); ++i) {
    PIPETUNE_ASSIGN_OR_RETURN(CollectedTrace other, CollectTrace(paths[i]));
    set.extra.push_back(std::move(other));
  }
  return set;
}

const StageCounters& CountersAt(const Frame& frame, size_t stage) {
  static const StageCounters kNoCounters{};
  return stage < frame.stages.size() ? frame.stages[stage] : kNoCounters;
}

}  // namespace pipetune::analyzer

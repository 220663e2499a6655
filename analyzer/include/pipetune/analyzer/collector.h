// Trace -> bounded summary. TraceCollector is a TraceVisitor that folds a
// trace's records, as they stream past, into a CollectedTrace whose size does
// not grow with the trace's length: a timeline of at most kMaxFrames frames of
// cumulative counters (halved by dropping every other frame when full; the
// counters are cumulative, so only resolution is lost), per-stage latency
// histograms of the sampled spans, and totals.
//
// Tests feed records to a TraceCollector directly; CollectTrace reads a file.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipetune/analyzer/gpu.h"
#include "pipetune/base/status.h"
#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/records.h"

namespace pipetune::analyzer {

// One stage's cumulative counters at one frame: the counts its last
// snapshot carried, and what the collector derives.
struct StageCounters : tracer::StageCounts {
  bool seen = false;  // a snapshot of the stage has arrived by this frame
  uint32_t parallelism = 1;
  uint32_t live_workers = 0;
  uint64_t cpu_ns = 0;
  int64_t occupancy_bytes = 0;        // gauge
  double occupancy_byte_seconds = 0;  // its integral since the trace started
  uint64_t spans_dropped = 0;
  uint64_t epoch_elements = 0;  // per pass, when the stage knew it (0: unknown)
};

// Everything cumulative at one snapshot time.
struct Frame {
  uint64_t time_ns = 0;               // since the session started
  std::vector<StageCounters> stages;  // by stage index (registration order)
  uint64_t steps = 0;                 // consumer steps
  uint64_t step_wait_ns = 0;
  uint64_t step_busy_ns = 0;
  uint64_t process_cpu_ns = 0;
  bool has_process = false;
  uint64_t rss_bytes = 0;    // gauge
  int64_t read_bytes = -1;   // storage reads; -1 unknown
  uint64_t gpu_busy_ns = 0;  // sum of GPU kernel durations so far
};

// A stage's counters at `frame`; all zero for a stage registered after it.
const StageCounters& CountersAt(const Frame& frame, size_t stage);

// A log-scale histogram of span durations: buckets of 2^(1/4) from 1 us.
struct LatencyHistogram {
  static constexpr int kBuckets = 128;
  std::array<uint64_t, kBuckets> counts{};
  uint64_t total = 0;
  void Add(uint64_t ns);
  // The q-quantile (0..1) in seconds; 0 when empty.
  double Quantile(double q) const;
};

struct CollectedStage {
  tracer::StageDef def;
  uint32_t workers_attached = 0;
  LatencyHistogram span_latency;
  uint64_t last_snapshot_ns = 0;
};

struct CollectedTrace {
  tracer::TraceHeader header;
  tracer::PipelineInfo pipeline;                // the latest
  std::vector<CollectedStage> stages;           // registration order
  std::vector<Frame> frames;                    // time order; the first and last are kept
  uint64_t frame_stride = 1;                    // snapshots per kept frame (a power of 2)
  std::optional<uint64_t> first_step_start_ns;  // when the first consumer step's wait began
  tracer::DropCounts drops;                     // the last, cumulative
  uint64_t spans = 0;
  uint64_t consumer_step_records = 0;
  uint64_t gpu_records = 0;
  // GPU work and the consumer's waits, for the GPU analysis (gpu.h): times
  // relative to the session's start, at most kMaxGpuIntervals of each (the
  // rest are counted in gpu_intervals_not_kept).
  std::vector<GpuInterval> gpu_work;
  std::vector<std::pair<uint64_t, uint64_t>> consumer_waits;
  uint64_t gpu_intervals_not_kept = 0;
  std::optional<tracer::GpuStatus> gpu_status;  // the last one
  uint64_t records = 0;                         // every record visited
  uint64_t peak_rss_bytes = 0;
  bool has_end = false;
  uint64_t end_ns = 0;
  tracer::ReadReport read_report;

  // The stage's index, or nullopt.
  std::optional<size_t> FindStage(const std::string& name) const;
  // Seconds from the session's start to the last frame.
  double DurationSeconds() const;
};

class TraceCollector : public tracer::TraceVisitor {
 public:
  static constexpr size_t kMaxFrames = 1024;
  static constexpr size_t kMaxGpuIntervals = size_t{1} << 20;

  void OnHeader(const tracer::TraceHeader& header) override;
  void OnPipelineInfo(const tracer::PipelineInfo& info) override;
  void OnStage(const tracer::StageDef& stage) override;
  void OnWorker(const tracer::WorkerDef& worker) override;
  void OnSnapshot(const tracer::StageSnapshot& snapshot) override;
  void OnSpan(const tracer::SpanRecord& span) override;
  void OnConsumerStep(const tracer::ConsumerStepRecord& step) override;
  void OnConsumerTotals(const tracer::ConsumerTotals& totals) override;
  void OnProcessSample(const tracer::ProcessSample& sample) override;
  void OnGpuActivity(const tracer::GpuActivity& activity) override;
  void OnGpuStatus(const tracer::GpuStatus& status) override;
  void OnDrops(const tracer::DropCounts& drops) override;
  void OnEnd(const tracer::TraceEnd& end) override;

  // Commits the last frame and returns the summary; call once, after reading.
  CollectedTrace Finish(const tracer::ReadReport& report);

 private:
  // Moves `current_` into the frames when a record of a later time arrives.
  void AdvanceTo(uint64_t time_ns);
  void Commit();
  uint64_t Relative(uint64_t time_ns) const;
  StageCounters& CurrentStage(tracer::StageId id);

  CollectedTrace trace_;
  Frame current_;
  bool current_dirty_ = false;
  uint64_t snapshots_since_kept_ = 0;
  std::vector<tracer::StageId> stage_ids_;  // index -> id
  uint64_t previous_time_ns_ = 0;           // of the last committed snapshot time
  std::vector<double> previous_occupancy_;  // per stage, at that snapshot
};

// Reads the trace at `path` through a TraceCollector. Errors: the reader's
// (file, byte offset); a truncated trace is not an error, its warning is in
// read_report.
StatusOr<CollectedTrace> CollectTrace(const std::string& path);

// A trace still being written, collected as it grows: each Read folds only
// the chunks appended since the last Read into one TraceCollector
// (tracer::TraceTail) and returns the whole so far, as CollectTrace of the
// file as it stands would. What `pipetune autotune`'s refits read: a refit
// parses the seconds since the one before, not the whole run again.
class LiveTraceCollector {
 public:
  explicit LiveTraceCollector(std::string path) : tail_(std::move(path)) {}
  StatusOr<CollectedTrace> Read();

 private:
  tracer::TraceTail tail_;
  TraceCollector collector_;
};

// Traces of one pipeline read together: the first is the one measured (and
// diagnosed); the others, runs at other parallelism levels, only add scaling
// points to its profile.
struct TraceSet {
  std::string main_path;
  CollectedTrace main;
  std::vector<CollectedTrace> extra;
};

// Reads every path (none: kInvalidInput). Errors name the file and offset.
StatusOr<TraceSet> ReadTraceSet(const std::vector<std::string>& paths);

}  // namespace pipetune::analyzer

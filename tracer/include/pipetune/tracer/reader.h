// Reading a trace file: a streaming visitor, so that memory stays bounded for
// traces of any length, and LoadTrace, which keeps everything in memory.
//
// Errors (a Status) are for files that cannot be read at all: missing, not a
// trace (wrong magic), a newer format version than this reader, an unreadable
// header. A trace that is truncated (a killed run) or corrupt part-way is read
// up to its last whole valid chunk, and the ReadReport says what was lost.
// Hostile input never crashes the reader nor makes it allocate more than a
// small multiple of the input's size. Messages name the file and byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/tracer/records.h"

namespace pipetune::tracer {

// The trace format version this library writes and the newest it reads.
inline constexpr uint32_t kTraceFormatVersion = 1;

struct TraceHeader {
  uint32_t format_version = 0;
  std::string tracer_version;  // "pipetune 0.1.0"
  uint32_t pid = 0;
  ClockInfo clock;
  HostFacts host;
  PipelineInfo pipeline;  // as given to Start()
  uint32_t snapshot_interval_ms = 0;
  uint32_t spans_per_stage_per_second = 0;
  uint32_t consumer_steps_per_second = 0;
};

// The clean end of a session (Stop()); absent when the run was killed.
struct TraceEnd {
  uint64_t time_ns = 0;
};

// What reading covered. When not everything could be read, `warning` is a
// sentence for the user and the numbers say how much was lost.
struct ReadReport {
  std::string path;  // or the name given for an in-memory trace
  uint64_t file_bytes = 0;
  uint64_t header_bytes = 0;
  uint64_t chunks_read = 0;
  uint64_t chunks_skipped = 0;  // valid chunks of types newer than this reader
  uint64_t bytes_read = 0;      // offset just past the last whole valid chunk
  uint64_t bytes_not_read = 0;  // file_bytes - bytes_read
  bool ended_cleanly = false;   // an end record was read (the session was stopped)
  std::string stop_reason;      // why reading stopped early; empty when it did not
  std::string warning;          // "trace truncated at byte N: M bytes (K%) ..."

  bool truncated() const { return bytes_not_read > 0; }
};

// Receives a trace's records in file order. OnHeader comes first; stage and
// worker definitions come before the records that name them. Snapshot-time
// records (stage snapshots, consumer totals, process sample, drops) of one
// snapshot share a time_ns. Override what you need.
class TraceVisitor {
 public:
  virtual ~TraceVisitor() = default;
  virtual void OnHeader(const TraceHeader&) {}
  virtual void OnPipelineInfo(const PipelineInfo&) {}
  virtual void OnStage(const StageDef&) {}
  virtual void OnWorker(const WorkerDef&) {}
  virtual void OnSnapshot(const StageSnapshot&) {}
  virtual void OnSpan(const SpanRecord&) {}
  virtual void OnConsumerStep(const ConsumerStepRecord&) {}
  virtual void OnConsumerTotals(const ConsumerTotals&) {}
  virtual void OnProcessSample(const ProcessSample&) {}
  virtual void OnGpuActivity(const GpuActivity&) {}
  virtual void OnGpuStatus(const GpuStatus&) {}
  virtual void OnDrops(const DropCounts&) {}
  virtual void OnEnd(const TraceEnd&) {}
};

// Streams the trace at `path` through `visitor`, reading one chunk at a time.
StatusOr<ReadReport> ReadTrace(const std::string& path, TraceVisitor& visitor);

// The same over bytes already in memory; `name` stands for the path in messages.
StatusOr<ReadReport> ReadTraceFromMemory(std::string_view bytes, TraceVisitor& visitor,
                                         const std::string& name = "<memory>");

// A trace still being written, read as it grows (`pipetune autotune` refits
// on its run's own trace every few seconds): each ReadMore streams only the
// whole chunks appended since the last call through `visitor`, which must be
// the same one every time (OnHeader comes once, on the first call). A chunk
// not yet wholly written is left for the next call. The report covers the
// file so far, as ReadTrace's would. Errors: ReadTrace's.
class TraceTail {
 public:
  explicit TraceTail(std::string path) : path_(std::move(path)) {}
  StatusOr<ReadReport> ReadMore(TraceVisitor& visitor);

 private:
  std::string path_;
  uint64_t offset_ = 0;  // past the last whole chunk read; 0: the header is not read yet
  ReadReport report_;
};

// Only the header, without reading the chunks.
StatusOr<TraceHeader> ReadTraceHeader(const std::string& path);

// A whole trace in memory. header.pipeline holds the latest PipelineInfo.
// `stages` is in registration order; look a stage up with FindStage.
struct Trace {
  TraceHeader header;
  std::vector<StageDef> stages;
  std::vector<WorkerDef> workers;
  std::vector<StageSnapshot> snapshots;
  std::vector<SpanRecord> spans;
  std::vector<ConsumerStepRecord> consumer_steps;
  std::vector<ConsumerTotals> consumer_totals;
  std::vector<ProcessSample> process_samples;
  std::vector<GpuActivity> gpu_activity;
  bool has_gpu_status = false;  // a GPU activity source was asked for
  GpuStatus gpu_status;         // the last one
  DropCounts drops;             // the last (cumulative) drop counts
  bool has_end = false;
  TraceEnd end;
  ReadReport report;

  const StageDef* FindStage(StageId id) const;
  // The stage's last snapshot (its totals), or null when it has none.
  const StageSnapshot* LastSnapshot(StageId id) const;
  // Last snapshot time minus the session's start, in nanoseconds.
  uint64_t DurationNs() const;
};

StatusOr<Trace> LoadTrace(const std::string& path);
StatusOr<Trace> LoadTraceFromMemory(std::string_view bytes, const std::string& name = "<memory>");

// A few lines saying what a trace holds: format version, duration, host,
// stages with their element counts, record counts, drops, and the truncation
// warning if any. What `pipetune trace-info` prints.
StatusOr<std::string> DescribeTrace(const std::string& path);

}  // namespace pipetune::tracer

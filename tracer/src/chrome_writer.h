// The pieces of the Chrome trace event JSON writer that the one-trace export
// (chrome_export.cc) and the timeline of several traces (chrome_timeline.cc)
// share: the document with its event budget, and a visitor that turns one
// trace's records into the events of one Chrome process.
// Format reference: "Trace Event Format" (Google, 2016), the JSON flavour
// ui.perfetto.dev imports.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipetune/tracer/chrome_export.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::tracer::internal {

// Appends `s` as a JSON string literal. Invalid UTF-8 becomes U+FFFD so that
// a stage or kernel name can never make the whole file unreadable.
void AppendJsonString(std::string& out, std::string_view s);

// Microseconds with nanosecond precision, "-" before a negative one.
std::string FormatMicros(bool negative, uint64_t magnitude_ns);

// The JSON document: its opening, the events up to the budget, and its end
// with what was left out.
class ChromeSink {
 public:
  ChromeSink(std::ostream& out, uint64_t max_events) : out_(out), max_events_(max_events) {}

  void Begin() { out_ << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"; }
  // Writes `event` unless the budget is spent (then counts it); `force`
  // writes it anyway (the final marker).
  void Write(const std::string& event, bool force = false);
  // The marker of what was left out (when anything was), on `marker_pid` at
  // `marker_ts`; then the closing, with `warning` and `more_other_data`
  // (",\"key\":value..." or empty) in "otherData".
  void End(int64_t marker_pid, const std::string& marker_ts, std::string_view warning,
           const std::string& more_other_data);

  uint64_t written() const { return written_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t max_events() const { return max_events_; }

 private:
  std::ostream& out_;
  uint64_t max_events_;
  uint64_t written_ = 0;
  uint64_t dropped_ = 0;
};

// Where one trace's events go on the timeline.
struct ProcessPlacement {
  int64_t pid = 1;
  int64_t gpu_pid = 2;
  std::string process_name;  // empty: "pipeline NAME" from the header
  std::string gpu_process_name = "GPU";
  // The trace's time t is written as t - start_ns + offset_ns, start_ns
  // being its session start (the header's), offset_ns how much later that
  // start is than the timeline's zero.
  uint64_t offset_ns = 0;
  // The one-trace export: the document begins at the header, so that a file
  // that is not a trace leaves the output empty.
  bool begins_document = false;
};

// One trace as one Chrome process: a thread track per stage worker
// (sampled elements as "X" slices), a "consumer" track per consumer thread,
// per-stage counters (buffer occupancy, throughput between snapshots), and
// a GPU process with a track per device stream.
class ProcessWriter : public TraceVisitor {
 public:
  ProcessWriter(ChromeSink& sink, const ChromeExportOptions& options, ProcessPlacement placement)
      : sink_(sink), options_(options), placement_(std::move(placement)) {}

  // Keeps the (timeline ns, produced) of every snapshot of `stage`.
  void Watch(const std::string& stage) { watched_[stage]; }
  const std::vector<std::pair<int64_t, uint64_t>>& Watched(const std::string& stage) {
    return watched_[stage];
  }

  // The latest time of any record read, in the trace's and the timeline's time.
  uint64_t last_ns() const { return last_ns_; }
  int64_t LastTimelineNs() const { return TimelineNs(last_ns_); }
  std::string Ts(uint64_t ns) const;

  void OnHeader(const TraceHeader& h) override;
  void OnStage(const StageDef& d) override { stage_names_[d.id] = d.name; }
  void OnWorker(const WorkerDef& d) override {
    if (options_.spans) NameWorker(d.worker, d.stage);
  }
  void OnSnapshot(const StageSnapshot& s) override;
  void OnSpan(const SpanRecord& s) override;
  void OnConsumerStep(const ConsumerStepRecord& s) override;
  void OnGpuActivity(const GpuActivity& a) override;

 private:
  // t - start_ns + offset_ns, as a sign and a magnitude (a step's wait may
  // begin before the session started), and saturated into an int64.
  std::pair<bool, uint64_t> Shift(uint64_t ns) const;
  int64_t TimelineNs(uint64_t ns) const;
  static std::string Dur(uint64_t begin, uint64_t end);
  void Seen(uint64_t ns) { last_ns_ = std::max(last_ns_, ns); }
  const std::string& StageName(StageId id);
  void NameProcess(int64_t pid, const std::string& name);
  void NameThread(int64_t pid, uint64_t tid, const std::string& name, int64_t sort_index);
  void NameWorker(uint32_t worker, StageId stage);
  void Counter(const std::string& name, uint64_t ns, const char* series, double value);
  void Slice(const char* name, const char* cat, uint64_t begin, uint64_t end, uint64_t tid, int64_t pid);

  ChromeSink& sink_;
  const ChromeExportOptions& options_;
  ProcessPlacement placement_;
  uint64_t start_ns_ = 0;
  uint64_t last_ns_ = 0;
  std::map<StageId, std::string> stage_names_;
  std::set<uint32_t> named_workers_;
  std::map<StageId, uint32_t> workers_per_stage_;
  std::set<uint32_t> named_consumers_;
  std::map<StageId, std::pair<uint64_t, uint64_t>> last_snapshot_;  // time, produced
  static constexpr uint32_t kSyncTrack = 0xffffffffu;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> gpu_tracks_;
  std::map<std::string, std::vector<std::pair<int64_t, uint64_t>>> watched_;
};

}  // namespace pipetune::tracer::internal

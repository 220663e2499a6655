// Chrome trace event JSON, written while the trace streams through a
// visitor (chrome_writer.h): the writer's pieces and the one-trace export.
#include "pipetune/tracer/chrome_export.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <utility>

#include "chrome_writer.h"

namespace pipetune::tracer {
namespace internal {
namespace {

constexpr uint64_t kConsumerTidBase = 1000000;  // worker tids are their indexes

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // Length of the sequence from its lead byte; then check continuations.
      size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
      bool valid = n != 0 && i + n <= s.size() && c != 0xC0 && c != 0xC1 && c <= 0xF4;
      for (size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (valid) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += "\xEF\xBF\xBD";
        ++i;
      }
    }
  }
  out += '"';
}

std::string FormatMicros(bool negative, uint64_t magnitude_ns) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s%" PRIu64 ".%03" PRIu64, negative ? "-" : "", magnitude_ns / 1000,
                magnitude_ns % 1000);
  return buf;
}

void ChromeSink::Write(const std::string& event, bool force) {
  if (!force && written_ >= max_events_) {
    ++dropped_;
    return;
  }
  if (written_ > 0) out_ << ",\n";
  out_ << event;
  ++written_;
}

void ChromeSink::End(int64_t marker_pid, const std::string& marker_ts, std::string_view warning,
                     const std::string& more_other_data) {
  if (dropped_ > 0) {
    std::string e = "{\"name\":";
    AppendJsonString(e, "pipetune: " + std::to_string(dropped_) +
                            " events not exported (max_events=" + std::to_string(max_events_) + ")");
    e += ",\"ph\":\"i\",\"s\":\"g\",\"pid\":" + std::to_string(marker_pid) +
         ",\"tid\":0,\"ts\":" + marker_ts + "}";
    Write(e, /*force=*/true);
  }
  out_ << "\n],\"otherData\":{\"exporter\":\"pipetune\",\"events_dropped\":" << dropped_
       << ",\"max_events\":" << max_events_ << ",\"trace_warning\":";
  std::string w;
  AppendJsonString(w, warning);
  out_ << w << more_other_data << "}}\n";
}

void ProcessWriter::OnHeader(const TraceHeader& h) {
  if (placement_.begins_document) sink_.Begin();
  start_ns_ = h.clock.start_ns;
  NameProcess(placement_.pid,
              !placement_.process_name.empty()
                  ? placement_.process_name
                  : "pipeline " + (h.pipeline.name.empty() ? std::string("(unnamed)") : h.pipeline.name));
}

void ProcessWriter::OnSnapshot(const StageSnapshot& s) {
  Seen(s.time_ns);
  const std::string& stage = StageName(s.stage);
  if (auto w = watched_.find(stage); w != watched_.end())
    w->second.emplace_back(TimelineNs(s.time_ns), s.produced);
  if (!options_.counters) return;
  Counter(stage + " buffer", s.time_ns, "elements", static_cast<double>(s.occupancy_elements));
  auto prev = last_snapshot_.find(s.stage);
  if (prev != last_snapshot_.end() && s.time_ns > prev->second.first) {
    double seconds = static_cast<double>(s.time_ns - prev->second.first) / 1e9;
    double produced = static_cast<double>(s.produced - std::min(s.produced, prev->second.second));
    // The rate holds over [previous, this] snapshot: stamp it at the start.
    Counter(stage + " throughput", prev->second.first, "elements/s", produced / seconds);
  }
  last_snapshot_[s.stage] = {s.time_ns, s.produced};
}

void ProcessWriter::OnSpan(const SpanRecord& s) {
  Seen(s.end_ns);
  if (!options_.spans) return;
  if (!named_workers_.count(s.worker)) NameWorker(s.worker, s.stage);
  std::string e = "{\"name\":";
  AppendJsonString(e, StageName(s.stage));
  e += ",\"cat\":\"element\",\"ph\":\"X\",\"ts\":" + Ts(s.begin_ns) +
       ",\"dur\":" + Dur(s.begin_ns, s.end_ns) + ",\"pid\":" + std::to_string(placement_.pid) +
       ",\"tid\":" + std::to_string(s.worker) + ",\"args\":{\"element\":" + std::to_string(s.element_id) +
       "}}";
  sink_.Write(e);
}

void ProcessWriter::OnConsumerStep(const ConsumerStepRecord& s) {
  Seen(s.end_ns);
  if (!options_.consumer_steps) return;
  uint64_t tid = kConsumerTidBase + s.consumer;
  if (named_consumers_.insert(s.consumer).second) {
    // Named in order of appearance: "consumer", "consumer 2", ...
    size_t n = named_consumers_.size();
    NameThread(placement_.pid, tid, n == 1 ? "consumer" : "consumer " + std::to_string(n),
               static_cast<int64_t>(tid));
  }
  uint64_t step_begin = s.end_ns >= s.step_ns ? s.end_ns - s.step_ns : 0;
  uint64_t wait_begin = step_begin >= s.wait_ns ? step_begin - s.wait_ns : 0;
  if (s.wait_ns > 0) Slice("wait for input", "stall", wait_begin, step_begin, tid, placement_.pid);
  Slice("step", "step", step_begin, s.end_ns, tid, placement_.pid);
}

void ProcessWriter::OnGpuActivity(const GpuActivity& a) {
  Seen(a.end_ns);
  if (!options_.gpu) return;
  // One track per device and stream; the host's waits on a device
  // (synchronization records) get a track of their own, since they overlap
  // the work they wait for.
  const bool sync = a.kind == GpuActivityKind::kSync;
  auto key = std::make_pair(a.device, sync ? kSyncTrack : a.stream);
  auto it = gpu_tracks_.find(key);
  if (it == gpu_tracks_.end()) {
    if (gpu_tracks_.empty()) NameProcess(placement_.gpu_pid, placement_.gpu_process_name);
    it = gpu_tracks_.emplace(key, gpu_tracks_.size() + 1).first;
    NameThread(placement_.gpu_pid, it->second,
               "GPU " + std::to_string(a.device) +
                   (sync ? std::string(" host waits") : " stream " + std::to_string(a.stream)),
               static_cast<int64_t>(it->second));
  }
  std::string e = "{\"name\":";
  AppendJsonString(e, a.name.empty() ? GpuActivityKindName(a.kind) : a.name);
  e += ",\"cat\":\"" + std::string(GpuActivityKindName(a.kind)) + "\",\"ph\":\"X\",\"ts\":" + Ts(a.start_ns) +
       ",\"dur\":" + Dur(a.start_ns, a.end_ns) + ",\"pid\":" + std::to_string(placement_.gpu_pid) +
       ",\"tid\":" + std::to_string(it->second) + ",\"args\":{\"device\":" + std::to_string(a.device) +
       ",\"stream\":" + std::to_string(a.stream) + ",\"context\":" + std::to_string(a.context) +
       ",\"bytes\":" + std::to_string(a.bytes) + ",\"correlation\":" + std::to_string(a.correlation_id) +
       (a.copy_kind != GpuCopyKind::kNone ? ",\"copy\":\"" + std::string(GpuCopyKindName(a.copy_kind)) + "\""
                                          : std::string()) +
       "}}";
  sink_.Write(e);
}

std::pair<bool, uint64_t> ProcessWriter::Shift(uint64_t ns) const {
  const uint64_t offset = placement_.offset_ns;
  if (ns >= start_ns_) return {false, ns - start_ns_ + offset};
  const uint64_t before = start_ns_ - ns;
  return before <= offset ? std::make_pair(false, offset - before) : std::make_pair(true, before - offset);
}

int64_t ProcessWriter::TimelineNs(uint64_t ns) const {
  auto [negative, magnitude] = Shift(ns);
  const auto max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  const int64_t m = static_cast<int64_t>(std::min(magnitude, max));
  return negative ? -m : m;
}

// Microseconds since the timeline's zero (the session's start, for one
// trace), with nanosecond precision; times before it are negative.
std::string ProcessWriter::Ts(uint64_t ns) const {
  auto [negative, magnitude] = Shift(ns);
  return FormatMicros(negative, magnitude);
}

std::string ProcessWriter::Dur(uint64_t begin, uint64_t end) {
  return FormatMicros(false, end > begin ? end - begin : 0);
}

const std::string& ProcessWriter::StageName(StageId id) {
  auto it = stage_names_.find(id);
  if (it == stage_names_.end()) it = stage_names_.emplace(id, "stage " + std::to_string(id)).first;
  return it->second;
}

void ProcessWriter::NameProcess(int64_t pid, const std::string& name) {
  std::string e =
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"args\":{\"name\":";
  AppendJsonString(e, name);
  sink_.Write(e + "}}");
}

void ProcessWriter::NameThread(int64_t pid, uint64_t tid, const std::string& name, int64_t sort_index) {
  std::string e = "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                  ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
  AppendJsonString(e, name);
  sink_.Write(e + "}}");
  sink_.Write("{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":" +
              std::to_string(tid) + ",\"args\":{\"sort_index\":" + std::to_string(sort_index) + "}}");
}

// A track per worker, named "<stage> #k" (k counts the stage's workers),
// ordered by stage and then worker.
void ProcessWriter::NameWorker(uint32_t worker, StageId stage) {
  if (!named_workers_.insert(worker).second) return;
  uint32_t k = workers_per_stage_[stage]++;
  NameThread(placement_.pid, worker, StageName(stage) + " #" + std::to_string(k),
             static_cast<int64_t>(stage) * 10000 + k);
}

void ProcessWriter::Counter(const std::string& name, uint64_t ns, const char* series, double value) {
  std::string e = "{\"name\":";
  AppendJsonString(e, name);
  char v[64];
  std::snprintf(v, sizeof(v), "%.6g", value);
  e += ",\"ph\":\"C\",\"pid\":" + std::to_string(placement_.pid) + ",\"ts\":" + Ts(ns) + ",\"args\":{\"" +
       series + "\":" + v + "}}";
  sink_.Write(e);
}

void ProcessWriter::Slice(const char* name, const char* cat, uint64_t begin, uint64_t end, uint64_t tid,
                          int64_t pid) {
  sink_.Write(std::string("{\"name\":\"") + name + "\",\"cat\":\"" + cat +
              "\",\"ph\":\"X\",\"ts\":" + Ts(begin) + ",\"dur\":" + Dur(begin, end) +
              ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + "}");
}

}  // namespace internal

namespace {

template <typename ReadFn>
Status Export(ReadFn read, std::ostream& out, const ChromeExportOptions& options, ChromeExportStats* stats) {
  internal::ChromeSink sink(out, options.max_events);
  internal::ProcessPlacement placement;
  placement.begins_document = true;
  internal::ProcessWriter writer(sink, options, placement);
  StatusOr<ReadReport> report = read(writer);
  if (!report.ok()) return report.status();
  sink.End(placement.pid, writer.Ts(writer.last_ns()), report->warning, "");
  out.flush();
  if (stats != nullptr) *stats = ChromeExportStats{sink.written(), sink.dropped(), *report};
  if (!out.good()) return IoError("cannot write the Chrome trace JSON");
  return Status::Ok();
}

}  // namespace

Status ExportChrome(const std::string& trace_path, std::ostream& out, const ChromeExportOptions& options,
                    ChromeExportStats* stats) {
  return Export([&](TraceVisitor& v) { return ReadTrace(trace_path, v); }, out, options, stats);
}

Status ExportChromeFromMemory(std::string_view trace_bytes, std::ostream& out,
                              const ChromeExportOptions& options, ChromeExportStats* stats) {
  return Export([&](TraceVisitor& v) { return ReadTraceFromMemory(trace_bytes, v); }, out, options, stats);
}

}  // namespace pipetune::tracer

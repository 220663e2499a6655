// Chrome trace event JSON, written while the trace streams through a
// visitor. Format reference: "Trace Event Format" (Google, 2016), the JSON
// flavour ui.perfetto.dev imports.
#include "pipetune/tracer/chrome_export.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <utility>

namespace pipetune::tracer {
namespace {

constexpr int kPipelinePid = 1;
constexpr int kGpuPid = 2;
constexpr uint64_t kConsumerTidBase = 1000000;  // worker tids are their indexes

// Appends `s` as a JSON string literal. Invalid UTF-8 becomes U+FFFD so that
// a stage or kernel name can never make the whole file unreadable.
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

class ChromeWriter : public TraceVisitor {
 public:
  ChromeWriter(std::ostream& out, const ChromeExportOptions& options) : out_(out), options_(options) {}

  // Closes the event array and writes what the export left out. Returns
  // the number of events dropped.
  void End(const ReadReport& report) {
    if (dropped_ > 0) {
      std::string e = "{\"name\":";
      AppendJsonString(e, "pipetune: " + std::to_string(dropped_) + " events not exported (max_events=" +
                              std::to_string(options_.max_events) + ")");
      e += ",\"ph\":\"i\",\"s\":\"g\",\"pid\":" + std::to_string(kPipelinePid) +
           ",\"tid\":0,\"ts\":" + Ts(last_ns_) + "}";
      Write(e, /*force=*/true);
    }
    out_ << "\n],\"otherData\":{\"exporter\":\"pipetune\",\"events_dropped\":" << dropped_
         << ",\"max_events\":" << options_.max_events << ",\"trace_warning\":";
    std::string warning;
    AppendJsonString(warning, report.warning);
    out_ << warning << "}}\n";
  }

  uint64_t written() const { return written_; }
  uint64_t dropped() const { return dropped_; }

  // Nothing is written before the header has been read, so that a file that
  // is not a trace leaves `out` empty.
  void OnHeader(const TraceHeader& h) override {
    out_ << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
    start_ns_ = h.clock.start_ns;
    NameProcess(kPipelinePid,
                "pipeline " + (h.pipeline.name.empty() ? std::string("(unnamed)") : h.pipeline.name));
  }

  void OnStage(const StageDef& d) override { stage_names_[d.id] = d.name; }

  void OnWorker(const WorkerDef& d) override {
    if (!options_.spans) return;
    NameWorker(d.worker, d.stage);
  }

  void OnSnapshot(const StageSnapshot& s) override {
    Seen(s.time_ns);
    if (!options_.counters) return;
    const std::string& stage = StageName(s.stage);
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

  void OnSpan(const SpanRecord& s) override {
    Seen(s.end_ns);
    if (!options_.spans) return;
    if (!named_workers_.count(s.worker)) NameWorker(s.worker, s.stage);
    std::string e = "{\"name\":";
    AppendJsonString(e, StageName(s.stage));
    e += ",\"cat\":\"element\",\"ph\":\"X\",\"ts\":" + Ts(s.begin_ns) +
         ",\"dur\":" + Dur(s.begin_ns, s.end_ns) + ",\"pid\":1,\"tid\":" + std::to_string(s.worker) +
         ",\"args\":{\"element\":" + std::to_string(s.element_id) + "}}";
    Write(e);
  }

  void OnConsumerStep(const ConsumerStepRecord& s) override {
    Seen(s.end_ns);
    if (!options_.consumer_steps) return;
    uint64_t tid = kConsumerTidBase + s.consumer;
    if (!named_consumers_.count(s.consumer)) {
      // Named in order of appearance: "consumer", "consumer 2", ...
      size_t n = named_consumers_.size() + 1;
      named_consumers_[s.consumer] = true;
      NameThread(kPipelinePid, tid, n == 1 ? "consumer" : "consumer " + std::to_string(n),
                 static_cast<int64_t>(tid));
    }
    uint64_t step_begin = s.end_ns >= s.step_ns ? s.end_ns - s.step_ns : 0;
    uint64_t wait_begin = step_begin >= s.wait_ns ? step_begin - s.wait_ns : 0;
    if (s.wait_ns > 0) Slice("wait for input", "stall", wait_begin, step_begin, tid, kPipelinePid);
    Slice("step", "step", step_begin, s.end_ns, tid, kPipelinePid);
  }

  void OnGpuActivity(const GpuActivity& a) override {
    Seen(a.end_ns);
    if (!options_.gpu) return;
    // One track per device and stream; the host's waits on a device
    // (synchronization records) get a track of their own, since they overlap
    // the work they wait for.
    const bool sync = a.kind == GpuActivityKind::kSync;
    auto key = std::make_pair(a.device, sync ? kSyncTrack : a.stream);
    auto it = gpu_tracks_.find(key);
    if (it == gpu_tracks_.end()) {
      if (gpu_tracks_.empty()) NameProcess(kGpuPid, "GPU");
      it = gpu_tracks_.emplace(key, gpu_tracks_.size() + 1).first;
      NameThread(kGpuPid, it->second,
                 "GPU " + std::to_string(a.device) +
                     (sync ? std::string(" host waits") : " stream " + std::to_string(a.stream)),
                 static_cast<int64_t>(it->second));
    }
    std::string e = "{\"name\":";
    AppendJsonString(e, a.name.empty() ? GpuActivityKindName(a.kind) : a.name);
    e +=
        ",\"cat\":\"" + std::string(GpuActivityKindName(a.kind)) +
        "\",\"ph\":\"X\",\"ts\":" + Ts(a.start_ns) + ",\"dur\":" + Dur(a.start_ns, a.end_ns) +
        ",\"pid\":2,\"tid\":" + std::to_string(it->second) +
        ",\"args\":{\"device\":" + std::to_string(a.device) + ",\"stream\":" + std::to_string(a.stream) +
        ",\"context\":" + std::to_string(a.context) + ",\"bytes\":" + std::to_string(a.bytes) +
        ",\"correlation\":" + std::to_string(a.correlation_id) +
        (a.copy_kind != GpuCopyKind::kNone ? ",\"copy\":\"" + std::string(GpuCopyKindName(a.copy_kind)) + "\""
                                           : std::string()) +
        "}}";
    Write(e);
  }

 private:
  // Microseconds since the session started, with nanosecond precision.
  // Times before the start (a step's wait that began earlier) are negative.
  std::string Ts(uint64_t ns) const {
    char buf[40];
    bool before = ns < start_ns_;
    uint64_t magnitude = before ? start_ns_ - ns : ns - start_ns_;
    std::snprintf(buf, sizeof(buf), "%s%" PRIu64 ".%03" PRIu64, before ? "-" : "", magnitude / 1000,
                  magnitude % 1000);
    return buf;
  }
  static std::string Dur(uint64_t begin, uint64_t end) {
    uint64_t d = end > begin ? end - begin : 0;
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%" PRIu64 ".%03" PRIu64, d / 1000, d % 1000);
    return buf;
  }
  void Seen(uint64_t ns) { last_ns_ = std::max(last_ns_, ns); }

  const std::string& StageName(StageId id) {
    auto it = stage_names_.find(id);
    if (it == stage_names_.end()) it = stage_names_.emplace(id, "stage " + std::to_string(id)).first;
    return it->second;
  }

  void Write(const std::string& event, bool force = false) {
    if (!force && written_ >= options_.max_events) {
      ++dropped_;
      return;
    }
    if (written_ > 0) out_ << ",\n";
    out_ << event;
    ++written_;
  }

  void NameProcess(int pid, const std::string& name) {
    std::string e =
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"args\":{\"name\":";
    AppendJsonString(e, name);
    Write(e + "}}");
  }

  void NameThread(int pid, uint64_t tid, const std::string& name, int64_t sort_index) {
    std::string e = "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                    ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
    AppendJsonString(e, name);
    Write(e + "}}");
    Write("{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":" +
          std::to_string(tid) + ",\"args\":{\"sort_index\":" + std::to_string(sort_index) + "}}");
  }

  // A track per worker, named "<stage> #k" (k counts the stage's workers),
  // ordered by stage and then worker.
  void NameWorker(uint32_t worker, StageId stage) {
    if (named_workers_.count(worker)) return;
    uint32_t k = workers_per_stage_[stage]++;
    named_workers_[worker] = true;
    NameThread(kPipelinePid, worker, StageName(stage) + " #" + std::to_string(k),
               static_cast<int64_t>(stage) * 10000 + k);
  }

  void Counter(const std::string& name, uint64_t ns, const char* series, double value) {
    std::string e = "{\"name\":";
    AppendJsonString(e, name);
    char v[64];
    std::snprintf(v, sizeof(v), "%.6g", value);
    e += ",\"ph\":\"C\",\"pid\":1,\"ts\":" + Ts(ns) + ",\"args\":{\"" + series + "\":" + v + "}}";
    Write(e);
  }

  void Slice(const char* name, const char* cat, uint64_t begin, uint64_t end, uint64_t tid, int pid) {
    Write(std::string("{\"name\":\"") + name + "\",\"cat\":\"" + cat + "\",\"ph\":\"X\",\"ts\":" + Ts(begin) +
          ",\"dur\":" + Dur(begin, end) + ",\"pid\":" + std::to_string(pid) +
          ",\"tid\":" + std::to_string(tid) + "}");
  }

  std::ostream& out_;
  const ChromeExportOptions& options_;
  uint64_t start_ns_ = 0;
  uint64_t last_ns_ = 0;
  uint64_t written_ = 0;
  uint64_t dropped_ = 0;
  std::map<StageId, std::string> stage_names_;
  std::map<uint32_t, bool> named_workers_;
  std::map<StageId, uint32_t> workers_per_stage_;
  std::map<uint32_t, bool> named_consumers_;
  std::map<StageId, std::pair<uint64_t, uint64_t>> last_snapshot_;  // time, produced
  static constexpr uint32_t kSyncTrack = 0xffffffffu;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> gpu_tracks_;
};

template <typename ReadFn>
Status Export(ReadFn read, std::ostream& out, const ChromeExportOptions& options, ChromeExportStats* stats) {
  ChromeWriter writer(out, options);
  StatusOr<ReadReport> report = read(writer);
  if (!report.ok()) return report.status();
  writer.End(*report);
  out.flush();
  if (stats != nullptr) *stats = ChromeExportStats{writer.written(), writer.dropped(), *report};
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

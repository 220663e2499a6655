// One Chrome timeline from several traces (chrome_export.h says what it
// shows and how the clocks are put together): headers first, for the time
// base and the pids; then each trace streamed as one process; then the
// queues, from the snapshots kept on the way.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "chrome_writer.h"
#include "pipetune/tracer/chrome_export.h"

namespace pipetune::tracer {
namespace {

// Linux's pid_max is at most 2^22: pids from here on are never a process's.
constexpr int64_t kSyntheticPidBase = int64_t{1} << 22;

// How the traces' clocks meet: one host's CLOCK_MONOTONIC, else CLOCK_REALTIME.
struct TimeBase {
  bool realtime = false;
  std::vector<uint64_t> offset_ns;  // per trace: its start after the timeline's zero
};

TimeBase ChooseTimeBase(const std::vector<std::optional<TraceHeader>>& headers) {
  TimeBase base;
  const TraceHeader* first = nullptr;
  for (const auto& h : headers) {
    if (!h) continue;
    if (first == nullptr) first = &*h;
    if (h->host.hostname != first->host.hostname || h->clock.clock_id != first->clock.clock_id)
      base.realtime = true;
  }
  // The start of each on the chosen clock; the earliest is the zero.
  auto start = [&](const TraceHeader& h) {
    return base.realtime ? static_cast<int64_t>(h.clock.start_unix_ns)
                         : static_cast<int64_t>(h.clock.start_ns);
  };
  int64_t zero = std::numeric_limits<int64_t>::max();
  for (const auto& h : headers) {
    if (h) zero = std::min(zero, start(*h));
  }
  for (const auto& h : headers) {
    // Computed unsigned: the difference of two int64 may not fit in one.
    base.offset_ns.push_back(h ? static_cast<uint64_t>(start(*h)) - static_cast<uint64_t>(zero) : 0);
  }
  return base;
}

// The Chrome pids of each trace's process and of its GPU tracks.
std::vector<std::pair<int64_t, int64_t>> ChoosePids(const std::vector<std::optional<TraceHeader>>& headers) {
  std::vector<std::pair<int64_t, int64_t>> pids;
  std::vector<int64_t> used;
  int64_t next_synthetic = kSyntheticPidBase;
  for (const auto& h : headers) {
    int64_t pid = h ? static_cast<int64_t>(h->pid) : 0;
    if (pid <= 0 || pid >= kSyntheticPidBase || std::find(used.begin(), used.end(), pid) != used.end())
      pid = next_synthetic++;
    used.push_back(pid);
    pids.emplace_back(pid, next_synthetic++);
  }
  return pids;
}

// Several processes' cumulative counts, each a step function known at its
// own snapshots, summed with a sign at every time any of them changes.
void WriteQueue(internal::ChromeSink& sink, const ChromeTimelineQueue& queue, int64_t pid,
                const std::vector<std::pair<const std::vector<std::pair<int64_t, uint64_t>>*, int>>& series) {
  struct Point {
    int64_t ns;
    size_t series;
    uint64_t count;
  };
  std::vector<Point> points;
  for (size_t i = 0; i < series.size(); ++i) {
    for (const auto& [ns, count] : *series[i].first) points.push_back({ns, i, count});
  }
  std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.ns < b.ns; });
  std::vector<uint64_t> now(series.size(), 0);
  for (size_t i = 0; i < points.size(); ++i) {
    now[points[i].series] = points[i].count;
    if (i + 1 < points.size() && points[i + 1].ns == points[i].ns) continue;  // one value per time
    int64_t value = 0;
    for (size_t k = 0; k < series.size(); ++k) value += series[k].second * static_cast<int64_t>(now[k]);
    std::string e = "{\"name\":";
    internal::AppendJsonString(e, queue.name);
    e += ",\"ph\":\"C\",\"pid\":" + std::to_string(pid) + ",\"ts\":" +
         internal::FormatMicros(points[i].ns < 0, points[i].ns < 0 ? 0 - static_cast<uint64_t>(points[i].ns)
                                                                   : static_cast<uint64_t>(points[i].ns)) +
         ",\"args\":{";
    internal::AppendJsonString(e, queue.unit);
    e += ":" + std::to_string(std::max<int64_t>(value, 0)) + "}}";
    sink.Write(e);
  }
}

}  // namespace

Status ExportChromeTimeline(const std::vector<ChromeTimelineTrace>& traces,
                            const std::vector<ChromeTimelineQueue>& queues, std::ostream& out,
                            const ChromeExportOptions& options, ChromeTimelineStats* stats) {
  if (traces.empty()) return InvalidInput("no trace to export");
  ChromeTimelineStats result;
  std::vector<std::optional<TraceHeader>> headers;
  for (size_t i = 0; i < traces.size(); ++i) {
    StatusOr<TraceHeader> header = ReadTraceHeader(traces[i].path);
    if (!header.ok()) {
      if (i == 0) return header.status();
      result.warnings.push_back("left out " + traces[i].path + ": " + header.status().message());
      headers.emplace_back();
      continue;
    }
    headers.emplace_back(std::move(*header));
  }
  const TimeBase base = ChooseTimeBase(headers);
  const auto pids = ChoosePids(headers);

  internal::ChromeSink sink(out, options.max_events);
  sink.Begin();
  std::vector<std::unique_ptr<internal::ProcessWriter>> writers(traces.size());
  int64_t last_ns = 0;
  for (size_t i = 0; i < traces.size(); ++i) {
    result.events_per_trace.push_back(0);
    if (!headers[i]) continue;
    internal::ProcessPlacement placement;
    placement.pid = pids[i].first;
    placement.gpu_pid = pids[i].second;
    const std::string label = !traces[i].label.empty()            ? traces[i].label
                              : headers[i]->pipeline.name.empty() ? "pipeline (unnamed)"
                                                                  : "pipeline " + headers[i]->pipeline.name;
    placement.process_name = label + " (pid " + std::to_string(headers[i]->pid) + ")";
    placement.gpu_process_name = "GPU of " + placement.process_name;
    placement.offset_ns = base.offset_ns[i];
    writers[i] = std::make_unique<internal::ProcessWriter>(sink, options, placement);
    for (const ChromeTimelineQueue& q : queues) {
      for (const ChromeStageRef& p : q.producers) {
        if (p.trace == i) writers[i]->Watch(p.stage);
      }
      if (q.consumer.trace == i) writers[i]->Watch(q.consumer.stage);
    }
    const uint64_t before = sink.written();
    StatusOr<ReadReport> report = ReadTrace(traces[i].path, *writers[i]);
    result.events_per_trace.back() = sink.written() - before;
    if (!report.ok()) {
      result.warnings.push_back("left out the rest of " + traces[i].path + ": " + report.status().message());
    } else if (!report->warning.empty()) {
      result.warnings.push_back(report->warning);
    }
    last_ns = std::max(last_ns, writers[i]->LastTimelineNs());
  }

  for (const ChromeTimelineQueue& q : queues) {
    if (q.consumer.trace >= traces.size() || !writers[q.consumer.trace]) continue;
    std::vector<std::pair<const std::vector<std::pair<int64_t, uint64_t>>*, int>> series;
    for (const ChromeStageRef& p : q.producers) {
      if (p.trace < traces.size() && writers[p.trace])
        series.emplace_back(&writers[p.trace]->Watched(p.stage), 1);
    }
    if (series.empty()) continue;
    series.emplace_back(&writers[q.consumer.trace]->Watched(q.consumer.stage), -1);
    WriteQueue(sink, q, pids[q.consumer.trace].first, series);
  }

  std::string warning;
  for (const std::string& w : result.warnings) warning += (warning.empty() ? "" : "; ") + w;
  sink.End(pids[0].first, internal::FormatMicros(false, static_cast<uint64_t>(std::max<int64_t>(last_ns, 0))),
           warning,
           std::string(",\"traces\":") + std::to_string(traces.size()) + ",\"clock\":\"" +
               (base.realtime ? "CLOCK_REALTIME" : "CLOCK_MONOTONIC") + "\"");
  out.flush();
  result.events_written = sink.written();
  result.events_dropped = sink.dropped();
  if (stats != nullptr) *stats = std::move(result);
  if (!out.good()) return IoError("cannot write the Chrome trace JSON");
  return Status::Ok();
}

}  // namespace pipetune::tracer

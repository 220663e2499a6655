// DescribeTrace: what `pipetune trace-info` prints. Streams the trace and
// keeps only per-stage totals, so it works on traces of any size.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <sstream>

#include "pipetune/tracer/reader.h"

namespace pipetune::tracer {
namespace {

constexpr size_t kMaxStagesListed = 24;

std::string Format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  return Format(unit == 0 ? "%.0f" : "%.1f", bytes) + " " + units[unit];
}

class Summary : public TraceVisitor {
 public:
  void OnHeader(const TraceHeader& h) override { header = h; }
  void OnPipelineInfo(const PipelineInfo& p) override { header.pipeline = p; }
  void OnStage(const StageDef& d) override {
    if (!last.count(d.id)) order.push_back(d.id);
    stages[d.id] = d;
    last[d.id];
  }
  void OnWorker(const WorkerDef& d) override { ++workers[d.stage]; }
  void OnSnapshot(const StageSnapshot& s) override {
    if (!last.count(s.stage)) order.push_back(s.stage);
    last[s.stage] = s;
    last_time = std::max(last_time, s.time_ns);
  }
  void OnSpan(const SpanRecord&) override { ++spans; }
  void OnConsumerStep(const ConsumerStepRecord&) override { ++steps_recorded; }
  void OnConsumerTotals(const ConsumerTotals& c) override {
    consumer = c;
    ++snapshots;
    last_time = std::max(last_time, c.time_ns);
  }
  void OnProcessSample(const ProcessSample& p) override { max_rss = std::max(max_rss, p.rss_bytes); }
  void OnGpuActivity(const GpuActivity&) override { ++gpu; }
  void OnGpuStatus(const GpuStatus& s) override {
    has_gpu_status = true;
    gpu_status = s;
  }
  void OnDrops(const DropCounts& d) override { drops = d; }
  void OnEnd(const TraceEnd& e) override { last_time = std::max(last_time, e.time_ns); }

  TraceHeader header;
  std::map<StageId, StageDef> stages;
  std::map<StageId, uint64_t> workers;
  std::map<StageId, StageSnapshot> last;
  std::vector<StageId> order;
  uint64_t last_time = 0, spans = 0, steps_recorded = 0, snapshots = 0, gpu = 0, max_rss = 0;
  ConsumerTotals consumer;
  DropCounts drops;
  bool has_gpu_status = false;
  GpuStatus gpu_status;
};

std::string HostLine(const TraceHeader& h) {
  std::ostringstream out;
  out << "host: " << (h.host.hostname.empty() ? "?" : h.host.hostname) << ", " << h.host.cores_allowed
      << " of " << h.host.cores_online << " cores allowed";
  if (h.host.CpuQuotaCores() > 0) out << ", CPU quota " << Format("%.2f", h.host.CpuQuotaCores()) << " cores";
  if (h.host.memory_limit_bytes >= 0) {
    out << ", memory limit " << HumanBytes(static_cast<double>(h.host.memory_limit_bytes));
  }
  if (h.host.memory_available_bytes >= 0) {
    out << ", " << HumanBytes(static_cast<double>(h.host.memory_available_bytes)) << " available";
  }
  return out.str();
}

std::string StageLine(const Summary& s, StageId id) {
  std::ostringstream out;
  auto def = s.stages.find(id);
  out << "  " << (def != s.stages.end() ? def->second.name : "stage " + std::to_string(id));
  if (def != s.stages.end() && !def->second.op.empty()) out << " (" << def->second.op << ")";
  const StageSnapshot& snap = s.last.at(id);
  out << ": " << snap.produced << " elements";
  if (snap.bytes_produced > 0) out << ", " << HumanBytes(static_cast<double>(snap.bytes_produced));
  out << ", " << Format("%.2f", static_cast<double>(snap.cpu_ns) / 1e9) << " CPU-s, parallelism "
      << snap.parallelism;
  auto w = s.workers.find(id);
  if (w != s.workers.end()) out << ", " << w->second << (w->second == 1 ? " worker" : " workers");
  return out.str();
}

}  // namespace

StatusOr<std::string> DescribeTrace(const std::string& path) {
  Summary s;
  PIPETUNE_ASSIGN_OR_RETURN(ReadReport report, ReadTrace(path, s));
  const TraceHeader& h = s.header;
  double seconds =
      s.last_time > h.clock.start_ns ? static_cast<double>(s.last_time - h.clock.start_ns) / 1e9 : 0.0;

  std::ostringstream out;
  out << "trace: " << path << ", " << HumanBytes(static_cast<double>(report.file_bytes))
      << ", format version " << h.format_version << " (" << h.tracer_version << ")\n";
  out << "pipeline: " << (h.pipeline.name.empty() ? "(unnamed)" : h.pipeline.name) << ", "
      << Format("%.2f", seconds) << " s traced, pid " << h.pid << ", snapshot every "
      << h.snapshot_interval_ms << " ms\n";
  if (!h.pipeline.config_path.empty()) out << "config: " << h.pipeline.config_path << "\n";
  out << HostLine(h) << "\n";
  out << "stages (" << s.order.size() << "):" << (s.order.empty() ? " none" : "") << "\n";
  for (size_t i = 0; i < s.order.size() && i < kMaxStagesListed; ++i) out << StageLine(s, s.order[i]) << "\n";
  if (s.order.size() > kMaxStagesListed)
    out << "  ... and " << s.order.size() - kMaxStagesListed << " more\n";
  out << "records: " << s.snapshots << " snapshots, " << s.spans << " sampled spans, " << s.steps_recorded
      << " of " << s.consumer.steps << " consumer steps, " << s.gpu << " GPU activities; peak RSS "
      << HumanBytes(static_cast<double>(s.max_rss)) << "\n";
  if (s.has_gpu_status) {
    out << "gpu: " << GpuStateName(s.gpu_status.state)
        << (s.gpu_status.message.empty() ? "" : ": " + s.gpu_status.message) << "\n";
  }
  if (s.drops.Total() == 0) {
    out << "drops: none\n";
  } else {
    out << "drops: " << s.drops.spans << " spans, " << s.drops.consumer_steps << " consumer steps, "
        << s.drops.gpu_records << " GPU records (+" << s.drops.gpu_records_at_source
        << " lost at the source)\n";
  }
  if (!report.warning.empty()) out << "warning: " << report.warning << "\n";
  if (!report.ended_cleanly) {
    out << "warning: the trace has no end record: the run did not stop tracing (killed or crashed); "
           "up to one snapshot interval at the end is missing\n";
  }
  return out.str();
}

}  // namespace pipetune::tracer

// The JSON report: the schema of docs/report-json.md. Keys are only added
// within a schema version, never renamed or removed. Numbers are rounded to
// six significant figures so that the output does not change with the last
// bits of a floating-point sum.
#include <fmt/format.h>

#include <cmath>

#include "format_util.h"
#include "pipetune/base/json.h"
#include "writers.h"

namespace pipetune::analyzer::internal {
namespace {

// The time the throughput is measured over: the window's length, but for a
// DataLoader its loop's waits and steps, which leave out making each
// epoch's iterator (a GPU-only trace has no profile: its window's length).
double MeasuredSeconds(const Diagnosis& d) {
  return d.profile.window_seconds > 0 ? d.profile.window_seconds
                                      : d.window_end_seconds - d.window_begin_seconds;
}

Json GpuJson(const GpuSummary& g) {
  const GpuAnalysis& a = g.analysis;
  Json devices = Json::array();
  for (const GpuDeviceUsage& u : a.devices) {
    devices.push_back(Json{{"device", u.device},
                           {"busy_fraction", Number(u.busy_fraction)},
                           {"idle_seconds", Number(u.idle_seconds)},
                           {"input_stall_seconds", Number(u.input_stall_seconds)}});
  }
  return Json{{"activities", g.activities},
              {"busy_fraction", Number(g.busy_fraction)},
              {"devices", devices},
              {"idle_seconds", Number(a.idle_seconds)},
              {"input_stall_seconds", Number(a.input_stall_seconds)},
              {"other_idle_seconds", Number(a.other_idle_seconds)},
              {"input_stall_share", Number(a.input_stall_share)},
              {"gaps", a.gaps},
              {"input_stall_gaps", a.input_stall_gaps},
              {"input_stall_inferred", a.inferred},
              {"verdict", GpuVerdictName(a.verdict)},
              {"tuning_input_can_help", a.verdict == GpuVerdict::kInputStalled},
              {"summary", g.verdict},
              {"status", g.status.empty() ? Json(nullptr) : Json(g.status)},
              {"status_message", g.status_message.empty() ? Json(nullptr) : Json(g.status_message)}};
}

Json StageJson(const StageDiagnosis& s) {
  Json stage{
      {"name", s.name},
      {"op", s.op},
      {"fn", s.fn.empty() ? Json(nullptr) : Json(s.fn)},
      {"parallelism", s.parallelism},
      {"elements", Number(s.elements)},
      {"elements_per_second", Number(s.elements_per_second)},
      {"visit_ratio", Number(s.visit_ratio)},
      {"cores_used", Number(s.cores_used)},
      {"rate_per_core", Number(s.rate_per_core)},
      {"max_throughput", Number(s.max_throughput)},
      {"cpu_ms_per_element", Number(s.cpu_ms_per_element)},
      {"latency_ms_per_element", Number(s.latency_ms_per_element)},
      {"span_p50_ms", Number(s.span_p50_ms)},
      {"span_p99_ms", Number(s.span_p99_ms)},
      {"bytes_per_element", Number(s.bytes_per_element)},
      {"buffer_bytes", Number(s.buffer_bytes)},
      {"busy_fraction", Number(s.busy_fraction)},
      {"wait_input_fraction", Number(s.wait_input_fraction)},
      {"wait_output_fraction", Number(s.wait_output_fraction)},
      {"limited_by", StageLimitName(s.limited_by)},
      {"scaling", s.scaling},
      {"bottleneck", s.bottleneck},
      {"spans_dropped", s.spans_dropped},
  };
  if (!s.runs_on.empty()) stage["runs_on"] = s.runs_on;
  return stage;
}

Json WhatIfJson(const WhatIfOutcome& w) {
  return Json{
      {"question", w.question},
      {"allowed", w.allowed},
      {"note", w.note.empty() ? Json(nullptr) : Json(w.note)},
      {"throughput", w.allowed ? Number(w.throughput) : Json(nullptr)},
      {"speedup", w.allowed ? Number(w.speedup) : Json(nullptr)},
      {"bound", w.allowed ? Json(models::BoundKindName(w.bound)) : Json(nullptr)},
      {"bottleneck", Optional(w.bottleneck)},
      {"cache_bytes", w.cache_bytes ? Number(*w.cache_bytes) : Json(nullptr)},
  };
}

class JsonWriter : public ReportWriter {
 public:
  std::string Render(const Diagnosis& d) const override {
    Json stages = Json::array();
    for (const StageDiagnosis& s : d.stages) stages.push_back(StageJson(s));
    Json what_ifs = Json::array();
    for (const WhatIfOutcome& w : d.what_ifs) what_ifs.push_back(WhatIfJson(w));
    Json report{
        {"schema_version", kReportSchemaVersion},
        {"trace", d.trace_name},
        {"pipeline", d.pipeline_name},
        {"trace_seconds", Number(d.trace_seconds)},
        {"window", Json{{"begin_seconds", Number(d.window_begin_seconds)},
                        {"end_seconds", Number(d.window_end_seconds)},
                        {"seconds", Number(MeasuredSeconds(d))},
                        {"reason", d.window_reason}}},
        {"throughput", Number(d.measured_throughput)},
        {"predicted_throughput", Number(d.predicted_throughput)},
        {"prediction_ratio", Number(d.prediction_ratio)},
        {"prediction_judged", d.prediction_judged},
        {"bound", models::BoundKindName(d.bound)},
        {"bottleneck", Optional(d.bottleneck)},
        {"next_limit", d.next_limit
                           ? Json{{"stage", *d.next_limit}, {"throughput", Number(d.next_limit_throughput)}}
                           : Json(nullptr)},
        {"stall_fraction", Number(d.stall_fraction)},
        {"demand_throughput", d.demand_throughput ? Number(*d.demand_throughput) : Json(nullptr)},
        {"cores", Number(d.cores)},
        {"cores_used", d.cores_used >= 0 ? Number(d.cores_used) : Json(nullptr)},
        {"cpu_contention", Number(d.cpu_contention)},
        {"memory", Json{{"peak_rss_bytes", d.peak_rss_bytes},
                        {"mean_rss_bytes", Number(d.mean_rss_bytes)},
                        {"buffer_bytes", Number(d.buffer_bytes)}}},
        {"gpu", d.gpu ? GpuJson(*d.gpu) : Json(nullptr)},
        {"summary", d.summary},
        {"stages", stages},
        {"drops",
         Json{{"spans", std::max(d.drops.spans, d.spans_dropped)},
              {"consumer_steps", d.drops.consumer_steps},
              {"gpu_records", d.drops.gpu_records},
              {"gpu_records_at_source", d.drops.gpu_records_at_source},
              {"total", d.drops.Total() - d.drops.spans + std::max(d.drops.spans, d.spans_dropped)}}},
        {"truncated", !d.truncation_warning.empty()},
        {"warning", d.truncation_warning.empty() ? Json(nullptr) : Json(d.truncation_warning)},
        {"ended_cleanly", d.ended_cleanly},
        {"assumptions", d.assumptions},
        {"what_if", what_ifs},
    };
    if (d.kind_report) {
      for (const auto& [key, value] : d.kind_report->json) report[key] = value;
    }
    return DumpJson(report, 2) + "\n";
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeJsonWriter() { return std::make_unique<JsonWriter>(); }

}  // namespace pipetune::analyzer::internal

#include "gpu_diagnosis.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <string_view>

#include "pipetune/base/json.h"
#include "pipetune/tracer/reader.h"
#include "recording.h"

namespace pipetune::analyzer::internal {

GpuSummary SummarizeGpu(const CollectedTrace& trace, uint64_t begin_ns, uint64_t end_ns) {
  GpuSummary gpu;
  gpu.activities = trace.gpu_records;
  GpuAnalysisInput input;
  input.work = trace.gpu_work;
  input.consumer_waits = trace.consumer_waits;
  input.consumer_recorded = trace.consumer_step_records > 0;
  input.begin_ns = begin_ns;
  input.end_ns = end_ns;
  gpu.analysis = AnalyzeGpu(input);
  gpu.busy_fraction = gpu.analysis.busy_fraction;
  if (trace.gpu_status) {
    gpu.status = tracer::GpuStateName(trace.gpu_status->state);
    gpu.status_message = trace.gpu_status->message;
  }
  if (gpu.analysis.verdict != GpuVerdict::kNoActivity) {
    gpu.verdict = GpuVerdictSentence(gpu.analysis);
  } else if (trace.gpu_status && ((trace.gpu_status->state != tracer::GpuState::kRecording &&
                                   trace.gpu_status->state != tracer::GpuState::kStopped) ||
                                  (!trace.gpu_status->message.empty() && trace.gpu_records == 0))) {
    // GPU tracing did not run (no GPU, no CUPTI), or ran and recorded nothing
    // but said why: the message is the reason.
    gpu.verdict = "no GPU activity recorded: " + trace.gpu_status->message;
  } else {
    gpu.verdict = "no GPU work in the window";
  }
  return gpu;
}

Diagnosis DiagnoseGpuOnly(const CollectedTrace& trace, const std::string& trace_name) {
  Diagnosis d;
  d.trace_name = trace_name;
  d.pipeline_name = !trace.pipeline.name.empty() ? trace.pipeline.name : trace.header.pipeline.name;
  // The whole trace: from its start to the last thing it recorded.
  uint64_t end = std::max<uint64_t>(trace.end_ns, trace.frames.empty() ? 0 : trace.frames.back().time_ns);
  for (const GpuInterval& w : trace.gpu_work) end = std::max(end, w.end_ns);
  d.trace_seconds = static_cast<double>(end) / 1e9;
  d.window_end_seconds = d.trace_seconds;
  d.window_reason = "the whole trace: it records no pipeline, only the GPU";
  d.cores = trace.header.host.UsableCores();
  d.cores_used = -1;
  d.peak_rss_bytes = trace.peak_rss_bytes;
  d.gpu = SummarizeGpu(trace, 0, end);
  d.drops = trace.drops;
  if (trace.read_report.truncated()) d.truncation_warning = trace.read_report.warning;
  d.ended_cleanly = trace.read_report.ended_cleanly || trace.has_end;
  // A recorder that ran but saw no pipeline run says why in its notes (a
  // tf.data script that never iterated, docs/tfdata.md): that is the reason.
  std::vector<std::string> notes =
      RecordingNotes(Json::parse(trace.pipeline.config_json, nullptr, /*allow_exceptions=*/false));
  std::string why = notes.empty() ? "the program does not link pipetune's tracer" : notes.front();
  d.summary = "No input pipeline recorded (" + why + "). GPU: " + d.gpu->verdict + ".";
  d.assumptions.push_back(
      "only GPU activity is recorded: input stalls are inferred from the GPU's own timeline");
  return d;
}

std::optional<GpuSummary> DataLoaderGpu(const std::string& main_trace, int pid, double loop_begin_s,
                                        double loop_end_s, std::string& warning) {
  // The injection writes RUN.gpu.<pid> for every process of the run, where
  // RUN is the run's trace: MAIN itself, or for another rank of a job (MAIN
  // = RUN.main.<pid>, docs/distributed.md) the path before ".main.". Looked
  // for first: most runs have none, and MAIN is read again only for one.
  std::string gpu_path = fmt::format("{}.gpu.{}", main_trace, pid);
  const std::string rank_suffix = fmt::format(".main.{}", pid);
  if (main_trace.size() > rank_suffix.size() &&
      main_trace.compare(main_trace.size() - rank_suffix.size(), rank_suffix.size(), rank_suffix) == 0) {
    gpu_path = fmt::format("{}.gpu.{}", main_trace.substr(0, main_trace.size() - rank_suffix.size()), pid);
  }
  struct stat info {};
  if (::stat(gpu_path.c_str(), &info) != 0) return std::nullopt;
  StatusOr<tracer::Trace> main = tracer::LoadTrace(main_trace);
  if (!main.ok()) return std::nullopt;  // the DataLoader reader has said why
  StatusOr<CollectedTrace> gpu = CollectTrace(gpu_path);
  if (!gpu.ok()) {
    warning = fmt::format("{}: the GPU activity cannot be read: {}", gpu_path, gpu.status().message());
    return std::nullopt;
  }
  if (!gpu->read_report.warning.empty()) warning = gpu->read_report.warning;
  // GPU times are since the GPU session's start; put them on MAIN's.
  const int64_t shift =
      static_cast<int64_t>(gpu->header.clock.start_ns) - static_cast<int64_t>(main->header.clock.start_ns);
  auto on_main = [shift](uint64_t t) {
    int64_t moved = static_cast<int64_t>(t) + shift;
    return moved > 0 ? static_cast<uint64_t>(moved) : uint64_t{0};
  };
  CollectedTrace shifted = std::move(*gpu);
  for (GpuInterval& w : shifted.gpu_work) {
    w.start_ns = on_main(w.start_ns);
    w.end_ns = on_main(w.end_ns);
  }
  // The loop's waits: every `*/next` call recorded as a span, when the
  // spans cover all of them (the last snapshot's count says how many ran).
  uint64_t calls = 0, spans = 0;
  std::vector<tracer::StageId> next_stages;
  for (const tracer::StageDef& stage : main->stages) {
    std::string_view name = stage.name;
    if (name.size() < 5 || name.substr(name.size() - 5) != "/next") continue;
    next_stages.push_back(stage.id);
    if (const tracer::StageSnapshot* last = main->LastSnapshot(stage.id)) calls += last->produced;
  }
  shifted.consumer_waits.clear();
  for (const tracer::SpanRecord& span : main->spans) {
    if (std::find(next_stages.begin(), next_stages.end(), span.stage) == next_stages.end()) continue;
    ++spans;
    shifted.consumer_waits.emplace_back(span.begin_ns - std::min(span.begin_ns, main->header.clock.start_ns),
                                        span.end_ns - std::min(span.end_ns, main->header.clock.start_ns));
  }
  shifted.consumer_step_records = spans > 0 && spans >= calls ? spans : 0;
  if (shifted.consumer_step_records == 0) shifted.consumer_waits.clear();  // inferred instead
  return SummarizeGpu(shifted, static_cast<uint64_t>(std::max(0.0, loop_begin_s) * 1e9),
                      static_cast<uint64_t>(std::max(0.0, loop_end_s) * 1e9));
}

}  // namespace pipetune::analyzer::internal

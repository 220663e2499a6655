#include "gpu_diagnosis.h"

#include <algorithm>

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
  d.summary =
      "No input pipeline recorded (the program does not link pipetune's tracer). GPU: " + d.gpu->verdict +
      ".";
  d.assumptions.push_back(
      "only GPU activity is recorded: input stalls are inferred from the GPU's own timeline");
  return d;
}

}  // namespace pipetune::analyzer::internal

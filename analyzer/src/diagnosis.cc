// Trace -> profile -> prediction -> Diagnosis.
#include "pipetune/analyzer/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "explain.h"
#include "gpu_diagnosis.h"
#include "pipetune/models/decode_crop.h"
#include "recording.h"
#include "timeline.h"

namespace pipetune::analyzer {
const char* StageLimitName(StageLimit limit) {
  switch (limit) {
    case StageLimit::kCpu:
      return "cpu";
    case StageLimit::kLatency:
      return "latency";
    case StageLimit::kLight:
      return "light";
    case StageLimit::kIdle:
      return "idle";
  }
  return "cpu";
}

namespace {

// Below this busy share a stage is "light": neither its CPU nor its latency matters.
constexpr double kLightBusyFraction = 0.05;

const StageCounters kNone{};
const StageCounters& At(const Frame& frame, size_t stage) {
  return stage < frame.stages.size() ? frame.stages[stage] : kNone;
}

StatusOr<std::optional<models::PipelineConfig>> ConfigOf(const CollectedTrace& trace) {
  if (trace.pipeline.config_json.empty()) return std::optional<models::PipelineConfig>();
  StatusOr<models::PipelineConfig> config =
      models::ParseConfig(trace.pipeline.config_json, trace.read_report.path + " (the config in its header)");
  if (!config.ok()) return config.status();
  return std::optional<models::PipelineConfig>(std::move(*config));
}

// Adds each parallel stage's latency in the other traces as a scaling point.
Status AddScalingPoints(const std::vector<CollectedTrace>& extra, const std::string& pipeline_name,
                        models::WindowMeasurement& measurement) {
  for (const CollectedTrace& other : extra) {
    PIPETUNE_ASSIGN_OR_RETURN(ProfiledRun run, ProfileCollected(other));
    if (run.profile.pipeline_name != pipeline_name) {
      return InvalidInput(
          fmt::format("{}: a trace of pipeline \"{}\", not \"{}\": traces given together must "
                      "be of one pipeline",
                      other.read_report.path, run.profile.pipeline_name, pipeline_name));
    }
    for (const models::StageProfile& stage : run.profile.stages) {
      if (!stage.parallel || stage.latency_seconds <= 0) continue;
      for (models::StageMeasurement& measured : measurement.stages) {
        if (measured.name != stage.name) continue;
        measured.scaling_points.push_back(
            {static_cast<double>(stage.parallelism), stage.parallelism / stage.latency_seconds});
      }
    }
  }
  return Status::Ok();
}

StageDiagnosis DiagnoseStage(const models::Profile& profile, const models::Prediction& prediction,
                             size_t index) {
  const models::StageProfile& stage = profile.stages[index];
  const models::StagePrediction& predicted = prediction.stages[index];
  StageDiagnosis d;
  d.name = stage.name;
  d.op = stage.op_name;
  d.fn = stage.fn;
  d.parallelism = stage.parallelism;
  d.elements = stage.elements;
  d.elements_per_second = stage.elements / profile.window_seconds;
  d.visit_ratio = stage.visit_ratio;
  d.cores_used = stage.cpu_seconds / profile.window_seconds;
  d.rate_per_core = stage.cpu_seconds_per_output > 0 ? 1.0 / stage.cpu_seconds_per_output : 0.0;
  d.max_throughput = predicted.max_throughput;
  d.cpu_ms_per_element = stage.cpu_seconds_per_element * 1e3;
  d.latency_ms_per_element = stage.measured_latency_seconds * 1e3;
  d.bytes_per_element = stage.bytes_per_element;
  d.buffer_bytes = stage.mean_buffer_bytes;
  d.busy_fraction = stage.busy_fraction;
  d.wait_input_fraction = stage.wait_input_fraction;
  d.wait_output_fraction = stage.wait_output_fraction;
  // Only a stage that works a noticeable share of its time is limited by
  // anything; for the others the label would be noise.
  if (stage.elements <= 0) {
    d.limited_by = StageLimit::kIdle;
  } else if (stage.busy_fraction < kLightBusyFraction && prediction.bottleneck_stage != index) {
    d.limited_by = StageLimit::kLight;
  } else {
    d.limited_by = stage.latency_bound ? StageLimit::kLatency : StageLimit::kCpu;
  }
  bool shared_threads = !profile.groups.empty();
  if (shared_threads) {
    bool on_consumer = stage.on_consumer_thread || (stage.group && profile.groups[*stage.group].workers == 0);
    d.runs_on = on_consumer ? "consumer" : stage.group ? profile.groups[*stage.group].name : "own thread";
  }
  if (stage.group) {
    const models::WorkerGroup& group = profile.groups[*stage.group];
    d.parallelism = group.workers;
    d.scaling = group.workers > 0
                    ? fmt::format("shares the {} {} with the group's stages", group.workers, group.name)
                    : "on the consumer's thread";
  } else if (stage.on_consumer_thread) {
    d.scaling = "on the consumer's thread";
  } else {
    d.scaling = stage.parallel ? stage.scaling.Describe() : "sequential";
  }
  d.bottleneck = prediction.bottleneck_stage == index;
  return d;
}

// The sampled spans' latency quantiles and drops, per stage the trace has.
std::vector<internal::StageSpans> SpansOf(const CollectedTrace& trace) {
  std::vector<internal::StageSpans> spans;
  for (size_t t = 0; t < trace.stages.size(); ++t) {
    internal::StageSpans& s = spans.emplace_back();
    s.stage = trace.stages[t].def.name;
    s.p50_ms = trace.stages[t].span_latency.Quantile(0.5) * 1e3;
    s.p99_ms = trace.stages[t].span_latency.Quantile(0.99) * 1e3;
    if (!trace.frames.empty()) s.dropped = At(trace.frames.back(), t).spans_dropped;
  }
  return spans;
}

void DescribeMemoryAndGpu(const CollectedTrace& trace, const Window& window, internal::Recording& r) {
  r.peak_rss_bytes = trace.peak_rss_bytes;
  double sum = 0;
  size_t count = 0;
  for (size_t i = window.begin_frame; i <= window.end_frame && i < trace.frames.size(); ++i) {
    if (!trace.frames[i].has_process) continue;
    sum += static_cast<double>(trace.frames[i].rss_bytes);
    ++count;
  }
  r.mean_rss_bytes = count > 0 ? sum / static_cast<double>(count) : 0.0;
  if (trace.gpu_records > 0 || trace.gpu_status) {
    r.gpu = internal::SummarizeGpu(trace, trace.frames[window.begin_frame].time_ns,
                                   trace.frames[window.end_frame].time_ns);
  }
}

void SetNextLimit(Diagnosis& d) {
  if (d.bound != models::BoundKind::kDemand) return;
  for (const StageDiagnosis& stage : d.stages) {
    if (!std::isfinite(stage.max_throughput)) continue;
    if (!d.next_limit || stage.max_throughput < d.next_limit_throughput) {
      d.next_limit = stage.name;
      d.next_limit_throughput = stage.max_throughput;
    }
  }
}

}  // namespace

StatusOr<ProfiledRun> ProfileCollected(const CollectedTrace& trace,
                                       const std::vector<CollectedTrace>& extra) {
  // A config that cannot be used (a traced program's own, malformed, or of
  // other stages) is set aside with a note: the counters alone still make a
  // profile, with every ratio measured.
  std::optional<std::string> config_note;
  StatusOr<std::optional<models::PipelineConfig>> parsed = ConfigOf(trace);
  std::optional<models::PipelineConfig> config;
  if (!parsed.ok()) {
    config_note = "the config in the trace's header was ignored (every ratio is measured): " +
                  parsed.status().message();
  } else {
    config = std::move(*parsed);
  }
  if (config) {
    for (const CollectedStage& stage : trace.stages) {
      if (config->FindStage(stage.def.name)) continue;
      config_note = fmt::format(
          "the config in the trace's header was ignored (every ratio is measured): it has no stage \"{}\", "
          "which the trace has",
          stage.def.name);
      config.reset();
      break;
    }
  }
  const models::PipelineConfig* config_ptr = config ? &*config : nullptr;
  PIPETUNE_ASSIGN_OR_RETURN(Window window, SelectWindow(trace, config_ptr));
  models::WindowMeasurement measurement = MeasureWindow(trace, window, config_ptr);
  std::string name = !measurement.pipeline_name.empty() ? measurement.pipeline_name
                                                        : (config ? config->name : std::string());
  PIPETUNE_RETURN_IF_ERROR(AddScalingPoints(extra, name, measurement));
  StatusOr<models::Profile> profile = models::MakeProfile(measurement, config_ptr);
  if (!profile.ok()) return profile.status().WithContext(trace.read_report.path);
  if (config_note) profile->assumptions.push_back(*config_note);
  // The recorder's notes are said with the assumptions.
  if (config) {
    for (std::string& note : internal::RecordingNotes(config->raw))
      profile->assumptions.push_back(std::move(note));
  }
  ProfiledRun run{std::move(*profile), std::move(config), window};
  return run;
}

StatusOr<Diagnosis> DiagnoseProfile(models::Profile profile, const std::string& trace_name,
                                    const DiagnoseOptions& options) {
  std::vector<WhatIf> what_ifs;
  for (const std::string& text : options.what_ifs) {
    PIPETUNE_ASSIGN_OR_RETURN(WhatIf what_if, ParseWhatIf(text));
    what_ifs.push_back(std::move(what_if));
  }
  Diagnosis d;
  d.profile = std::move(profile);
  const models::Profile& p = d.profile;
  d.prediction = models::Predict(p, models::ObservedConfiguration(p));
  d.trace_name = trace_name;
  d.pipeline_name = p.pipeline_name;
  d.window_begin_seconds = p.window_begin_seconds;
  d.window_end_seconds = p.window_end_seconds;
  d.window_reason = p.window_reason;
  d.measured_throughput = p.measured_throughput;
  d.predicted_throughput = d.prediction.throughput;
  d.prediction_ratio = d.measured_throughput > 0 ? d.predicted_throughput / d.measured_throughput : 0.0;
  // Every kind of run's window (an engine's, a tf.data run's, a
  // DataLoader's loop) is judged by the one rule.
  PredictionJudgement judgement = JudgeWindow(p.window_seconds, p.outputs);
  d.prediction_judged = judgement.judged;
  if (!judgement.judged) d.window_reason += "; " + judgement.why;
  d.bound = d.prediction.binding.kind;
  if (d.prediction.bottleneck_stage) d.bottleneck = p.stages[*d.prediction.bottleneck_stage].name;
  d.stall_fraction = p.consumer_stall_fraction;
  if (p.step_time_seconds && *p.step_time_seconds > 0) d.demand_throughput = 1.0 / *p.step_time_seconds;
  d.cores = p.cores;
  d.cores_used = p.process_cpu_cores;
  d.cpu_contention = p.cpu_contention;
  for (size_t i = 0; i < p.stages.size(); ++i) d.stages.push_back(DiagnoseStage(p, d.prediction, i));
  SetNextLimit(d);
  for (const models::StageProfile& stage : p.stages) d.buffer_bytes += stage.mean_buffer_bytes;
  d.assumptions = p.assumptions;
  d.summary = internal::Explain(p, d.prediction);
  for (const WhatIf& what_if : what_ifs) {
    PIPETUNE_ASSIGN_OR_RETURN(WhatIfOutcome outcome, EvaluateWhatIf(p, what_if));
    d.what_ifs.push_back(std::move(outcome));
  }
  return d;
}

std::vector<std::string> internal::RecordingNotes(const Json& config) {
  std::vector<std::string> notes;
  if (!config.is_object() || !config.contains("recording_notes") || !config["recording_notes"].is_array())
    return notes;
  for (const Json& note : config["recording_notes"]) {
    if (note.is_string()) notes.push_back(note.get<std::string>());
  }
  return notes;
}

StatusOr<Diagnosis> internal::DiagnoseRecording(models::Profile profile, const std::string& trace_name,
                                                const DiagnoseOptions& options, Recording recording) {
  PIPETUNE_ASSIGN_OR_RETURN(Diagnosis d, DiagnoseProfile(std::move(profile), trace_name, options));
  d.trace_seconds = recording.trace_seconds;
  d.timeline = std::move(recording.timeline);
  for (StageDiagnosis& stage : d.stages) {
    for (const StageSpans& spans : recording.spans) {
      if (spans.stage != stage.name) continue;
      stage.span_p50_ms = spans.p50_ms;
      stage.span_p99_ms = spans.p99_ms;
      stage.spans_dropped = spans.dropped;
      break;
    }
    d.spans_dropped += stage.spans_dropped;
  }
  d.peak_rss_bytes = recording.peak_rss_bytes;
  d.mean_rss_bytes = recording.mean_rss_bytes;
  d.gpu = std::move(recording.gpu);
  d.drops = recording.drops;
  d.truncation_warning = std::move(recording.truncation_warning);
  d.ended_cleanly = recording.ended_cleanly;
  for (std::string& assumption : recording.assumptions) d.assumptions.push_back(std::move(assumption));
  return d;
}

StatusOr<Diagnosis> Diagnose(const CollectedTrace& trace, const std::string& trace_name,
                             const DiagnoseOptions& options, const std::vector<CollectedTrace>& extra) {
  // A program that records no pipeline, only GPU activity (profiled through
  // CUDA's injection): the GPU's side is the whole report.
  if (trace.stages.empty() && (trace.gpu_records > 0 || trace.gpu_status)) {
    for (const std::string& text : options.what_ifs) PIPETUNE_RETURN_IF_ERROR(ParseWhatIf(text).status());
    return internal::DiagnoseGpuOnly(trace, trace_name);
  }
  PIPETUNE_ASSIGN_OR_RETURN(ProfiledRun run, ProfileCollected(trace, extra));
  if (options.measure_jpeg && run.config) {
    run.profile.jpeg_entropy = options.measure_jpeg(*run.config, trace.pipeline.config_path);
  }
  internal::Recording recording;
  recording.trace_seconds = trace.DurationSeconds();
  recording.timeline = internal::Timeline(trace);
  recording.spans = SpansOf(trace);
  DescribeMemoryAndGpu(trace, run.window, recording);
  recording.drops = trace.drops;
  if (trace.read_report.truncated()) recording.truncation_warning = trace.read_report.warning;
  recording.ended_cleanly = trace.read_report.ended_cleanly || trace.has_end;
  if (trace.pipeline.config_json.empty()) {
    recording.assumptions.push_back("the trace has no pipeline config: every ratio is measured");
  }
  PIPETUNE_ASSIGN_OR_RETURN(Diagnosis d, internal::DiagnoseRecording(std::move(run.profile), trace_name,
                                                                     options, std::move(recording)));
  if (run.config) {  // a graph change the tuner would propose (models/decode_crop.h)
    if (std::optional<models::DecodeCropPrice> price = models::PriceDecodeCropFusion(*run.config, d.profile))
      d.summary += " " + models::DescribeDecodeCropFusion(*run.config, *price);
  }
  return d;
}

StatusOr<Diagnosis> DiagnoseTraces(const std::vector<std::string>& paths, const DiagnoseOptions& options) {
  PIPETUNE_ASSIGN_OR_RETURN(TraceSet traces, ReadTraceSet(paths));
  return Diagnose(traces.main, traces.main_path, options, traces.extra);
}

}  // namespace pipetune::analyzer

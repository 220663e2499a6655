// WindowMeasurement + config -> Profile: the model's parameters per stage.
#include "pipetune/models/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pipetune/base/numbers.h"

namespace pipetune::models {
namespace {

// Below this many outputs of a filter in the window, its measured ratio is
// too noisy and keep_every's configured `n` is used instead.
constexpr double kMinElementsForMeasuredRatio = 20;

// The process counts as CPU-saturated when it used this share of its cores.
constexpr double kSaturatedShare = 0.9;

// A stage whose off-CPU wall time per element is this many times its CPU time
// per element is latency-bound.
constexpr double kLatencyBoundRatio = 2.0;

// A consumer that spent less than this share of the window in its own steps
// only drains the pipeline (the runtime's consumer without a step spends
// about 0.1% there): its loop overhead is no training step, and 1 / it is
// over 100 times the rate measured, so as a demand it would bind no plan
// yet tell `--objective demand` there was a rate to meet.
constexpr double kMinStepShare = 0.01;

// The stage of the config that a measurement describes.
const StageConfig* FindConfigStage(const PipelineConfig* config, const std::string& name) {
  if (config == nullptr) return nullptr;
  std::optional<size_t> index = config->FindStage(name);
  return index ? &config->stages[*index] : nullptr;
}

std::optional<int64_t> IntArg(const StageConfig* stage, const char* key) {
  if (stage == nullptr) return std::nullopt;
  StatusOr<std::optional<int64_t>> value = ArgInt(*stage, key, 1);
  return value.ok() ? *value : std::nullopt;
}

// r_i: the config where it is exact, the counters where only they know.
void SetLocalRatio(StageProfile& stage, const StageConfig* config_stage) {
  double measured = SafeDiv(stage.consumed, stage.elements);
  bool measurable = stage.elements > 0 && stage.consumed > 0;
  auto use_measured = [&] {
    stage.local_ratio = measured;
    stage.local_ratio_measured = true;
  };
  stage.local_ratio = 1;
  stage.local_ratio_measured = false;
  if (!stage.op) {
    if (measurable) use_measured();
    return;
  }
  switch (*stage.op) {
    case Op::kBatch:
      if (std::optional<int64_t> size = IntArg(config_stage, "size")) {
        stage.local_ratio = static_cast<double>(*size);
      } else if (measurable) {
        use_measured();
      }
      return;
    case Op::kFilter: {
      std::optional<int64_t> keep_every = config_stage != nullptr && config_stage->fn == "keep_every"
                                              ? IntArg(config_stage, "n")
                                              : std::nullopt;
      if (measurable && (stage.elements >= kMinElementsForMeasuredRatio || !keep_every)) {
        use_measured();
      } else if (keep_every) {
        stage.local_ratio = static_cast<double>(*keep_every);
      }
      return;
    }
    default:
      return;  // sources, map, read_file, shuffle, prefetch, cache, repeat, take: 1
  }
}

// How much longer than their CPU time CPU-bound threads took because the
// process had more runnable threads than cores: 1 when it was not saturated.
// The busiest-CPU stage (largest CPU / work share) is taken as purely
// CPU-bound; its share is 1 / contention.
double EstimateContention(const WindowMeasurement& window, double cores, double seconds) {
  if (window.process_cpu_seconds < 0 || cores <= 0) return 1.0;
  if (!CpuSaturated(window.process_cpu_seconds / seconds, cores)) return 1.0;
  double best_share = 0;
  for (const StageMeasurement& stage : window.stages) {
    // Only stages that worked a tenth of the window: light stages' CPU is
    // mostly queue handling outside their work, which says nothing here.
    if (stage.work_seconds < 0.1 * seconds * std::max(1, stage.parallelism)) continue;
    best_share = std::max(best_share, std::min(1.0, stage.cpu_seconds / stage.work_seconds));
  }
  return best_share > 0 ? 1.0 / best_share : 1.0;
}

void SetPerElement(StageProfile& stage, double contention, double seconds) {
  double busy_seconds = std::max(stage.work_seconds, stage.cpu_seconds);
  stage.cpu_seconds_per_element = SafeDiv(stage.cpu_seconds, stage.elements);
  stage.measured_latency_seconds = SafeDiv(busy_seconds, stage.elements);
  stage.bytes_per_element = SafeDiv(stage.bytes, stage.elements);
  if (stage.elements > 0) {
    SetStageLatency(stage, stage.cpu_seconds_per_element, stage.measured_latency_seconds, contention);
  } else {
    stage.latency_seconds = 0;
    stage.latency_bound = false;
  }
  double worker_seconds = seconds * std::max(1, stage.parallelism);
  stage.busy_fraction = std::min(1.0, SafeDiv(stage.work_seconds, worker_seconds));
  stage.wait_input_fraction = std::min(1.0, SafeDiv(stage.wait_input_seconds, worker_seconds));
  stage.wait_output_fraction = std::min(1.0, SafeDiv(stage.wait_output_seconds, worker_seconds));
}

void FitScaling(StageProfile& stage, const StageMeasurement& measured) {
  std::vector<ScalingPoint> points = measured.scaling_points;
  if (stage.latency_seconds > 0) {
    points.push_back({static_cast<double>(stage.parallelism), stage.parallelism / stage.latency_seconds});
  }
  stage.scaling = FitUsl(points);
  if (stage.scaling.kind == ScalingKind::kNone) stage.scaling.kind = ScalingKind::kLinear;
}

StageProfile MakeStage(const StageMeasurement& measured, const StageConfig* config_stage) {
  StageProfile stage;
  stage.name = measured.name;
  stage.op_name = config_stage != nullptr ? OpName(config_stage->op) : measured.op;
  stage.op = config_stage != nullptr ? std::optional<Op>(config_stage->op) : OpFromName(measured.op);
  stage.fn = config_stage != nullptr ? config_stage->fn : "";
  stage.parallel = stage.op && OpIsParallel(*stage.op);
  stage.parallelism = stage.parallel ? std::max(1, measured.parallelism) : 1;
  stage.random = config_stage != nullptr && config_stage->random;
  stage.join_input = config_stage != nullptr && config_stage->raw.is_object() &&
                     config_stage->raw.value("join_input", false);
  stage.elements = measured.elements;
  stage.consumed = measured.consumed;
  stage.bytes = measured.bytes;
  stage.cpu_seconds = measured.cpu_seconds;
  stage.work_seconds = measured.work_seconds;
  stage.wait_input_seconds = measured.wait_input_seconds;
  stage.wait_output_seconds = measured.wait_output_seconds;
  stage.mean_buffer_bytes = measured.mean_buffer_bytes;
  SetLocalRatio(stage, config_stage);
  return stage;
}

// The measurements in config order; a config stage the trace never saw gets
// an empty measurement.
StatusOr<std::vector<StageMeasurement>> AlignWithConfig(const WindowMeasurement& window,
                                                        const PipelineConfig* config) {
  if (config == nullptr) return window.stages;
  std::vector<StageMeasurement> aligned;
  for (const StageConfig& stage : config->stages) {
    auto found = std::find_if(window.stages.begin(), window.stages.end(),
                              [&](const StageMeasurement& m) { return m.name == stage.name; });
    if (found != window.stages.end()) {
      aligned.push_back(*found);
    } else {
      StageMeasurement empty;
      empty.name = stage.name;
      empty.op = OpName(stage.op);
      empty.parallelism = stage.parallelism;
      aligned.push_back(empty);
    }
  }
  for (const StageMeasurement& measured : window.stages) {
    if (!config->FindStage(measured.name)) {
      return InvalidInput(
          fmt::format("the trace has a stage \"{}\" that its pipeline config \"{}\" does not: a trace of "
                      "another pipeline?",
                      measured.name, config->name));
    }
  }
  return aligned;
}

void SetVisitRatios(Profile& profile) {
  double visit = 1;
  for (size_t i = profile.stages.size(); i-- > 0;) {
    StageProfile& stage = profile.stages[i];
    stage.visit_ratio = visit;
    stage.cpu_seconds_per_output = stage.cpu_seconds_per_element * visit;
    visit *= stage.local_ratio;
  }
}

void SetDemandAndBudgets(Profile& profile, const WindowMeasurement& window, const PipelineConfig* config) {
  // The demand is the consumer's own rate as measured: its steps, not the
  // pipeline's outputs, set what a plan can deliver to it (a training loop
  // that pulls from pipetune.Loader states no step in its config, yet its
  // step bounds the rate). The config's step_time_ms stands in when the
  // window measured none.
  double measured_step = SafeDiv(window.consumer_step_seconds, window.outputs);
  double window_seconds = window.end_seconds - window.begin_seconds;
  bool stepped = measured_step > 0 && window.consumer_step_seconds >= kMinStepShare * window_seconds;
  if (stepped) {
    profile.step_time_seconds = measured_step;
  } else if (config != nullptr && config->consumer.step_time_ms) {
    profile.step_time_seconds = measured_step > 0 ? measured_step : *config->consumer.step_time_ms / 1e3;
  }
  if (config != nullptr) {
    profile.storage_bytes_per_second = config->resources.storage_bytes_per_second;
    profile.memory_budget_bytes = config->resources.memory_bytes;
  }
  if (window.storage_bytes_read > 0) {
    profile.storage_bytes_per_output = SafeDiv(window.storage_bytes_read, window.outputs);
  }
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (profile.stages[i].op == Op::kReadFile) {
      profile.storage_stage = i;
      break;
    }
  }
  if (!profile.storage_stage && !profile.stages.empty()) profile.storage_stage = 0;
}

void SetEpoch(Profile& profile, const WindowMeasurement& window, const PipelineConfig* config) {
  profile.source_elements_per_epoch = window.source_elements_per_epoch;
  if (!profile.source_elements_per_epoch && config != nullptr && !config->stages.empty() &&
      config->stages[0].op == Op::kRange) {
    if (std::optional<int64_t> count = IntArg(&config->stages[0], "count")) {
      profile.source_elements_per_epoch = static_cast<double>(*count);
    }
  }
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (profile.stages[i].op == Op::kCache) {
      profile.cache_stage = i;
      break;
    }
  }
  profile.cache_filled = profile.cache_stage.has_value() && window.cache_filled;
  // A loop that starts each epoch anew (consumer.epoch_start_ms) pays that
  // per epoch of outputs: the source's epoch over its elements per output.
  if (config != nullptr && config->consumer.epoch_start_ms && profile.source_elements_per_epoch &&
      !profile.stages.empty() && profile.stages[0].visit_ratio > 0) {
    profile.epoch_start_seconds = *config->consumer.epoch_start_ms / 1e3;
    if (config->consumer.epoch_iterator_ms)
      profile.epoch_iterator_seconds = *config->consumer.epoch_iterator_ms / 1e3;
    profile.outputs_per_epoch = *profile.source_elements_per_epoch / profile.stages[0].visit_ratio;
  }
}

// Stages that worked most of the window on CPU yet got well under a core
// for it while the process left cores unused: they wait on I/O inside their
// work, or other programs held the cores. A trace cannot tell the two apart
// (it has no run-queue delays), so the report says so.
void NoteBusyHost(Profile& profile) {
  if (profile.process_cpu_cores < 0 || CpuSaturated(profile.process_cpu_cores, profile.cores)) return;
  double stage_cpu = 0;
  for (const StageProfile& stage : profile.stages) stage_cpu += stage.cpu_seconds;
  std::vector<std::string> names;
  double least_share = 1;
  for (const StageProfile& stage : profile.stages) {
    double share = SafeDiv(stage.cpu_seconds, stage.work_seconds);
    if (stage.busy_fraction < 0.5 || stage.cpu_seconds < 0.1 * stage_cpu || share < 0.1 || share > 0.8)
      continue;
    names.push_back(stage.name);
    least_share = std::min(least_share, share);
  }
  if (names.empty()) return;
  profile.assumptions.push_back(
      fmt::format("{} got as little as {:.0f}% of a core while working, though the process used {:.2f} of {} "
                  "cores: either "
                  "{} on I/O inside {} work, or other programs held the cores (then predictions with more "
                  "workers or cores "
                  "are optimistic)",
                  fmt::join(names, ", "), 100 * least_share, profile.process_cpu_cores, profile.cores,
                  names.size() == 1 ? "it waits" : "they wait", names.size() == 1 ? "its" : "their"));
}

void NoteAssumptions(Profile& profile) {
  std::vector<std::string> linear;
  for (const StageProfile& stage : profile.stages) {
    if (stage.parallel && stage.elements > 0 && stage.scaling.levels < 2) linear.push_back(stage.name);
  }
  if (!linear.empty()) {
    profile.assumptions.push_back(
        fmt::format("throughput of {} assumed to grow linearly with parallelism (measured at one level only)",
                    fmt::join(linear, ", ")));
  }
  if (profile.cpu_contention > 1.01) {
    profile.assumptions.push_back(
        fmt::format("the cores were oversubscribed: CPU-bound work took {:.2f}x its CPU time; latencies are "
                    "corrected for it",
                    profile.cpu_contention));
  }
  profile.assumptions.push_back("CPU time per element is taken as independent of parallelism");
  NoteBusyHost(profile);
}

}  // namespace

std::optional<size_t> Profile::FindStage(const std::string& stage_name) const {
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].name == stage_name) return i;
  }
  return std::nullopt;
}

bool CpuSaturated(double cpu_cores_used, double cores) { return cpu_cores_used >= kSaturatedShare * cores; }

void SetStageLatency(StageProfile& stage, double cpu_seconds, double wall_seconds, double contention) {
  double off_cpu = std::max(0.0, wall_seconds - cpu_seconds * contention);
  stage.latency_seconds = std::max(cpu_seconds + off_cpu, 1e-12);
  stage.latency_bound = stage.latency_seconds > kLatencyBoundRatio * cpu_seconds;
}

StatusOr<Profile> MakeProfile(const WindowMeasurement& window, const PipelineConfig* config) {
  double seconds = window.end_seconds - window.begin_seconds;
  if (window.stages.empty() && (config == nullptr || config->stages.empty())) {
    return InvalidInput("the trace has no stages: nothing to model");
  }
  if (!(seconds > 0)) {
    return InvalidInput("the trace's steady window is empty: the run was too short to measure");
  }
  PIPETUNE_ASSIGN_OR_RETURN(std::vector<StageMeasurement> measured, AlignWithConfig(window, config));

  Profile profile;
  profile.pipeline_name =
      !window.pipeline_name.empty() || config == nullptr ? window.pipeline_name : config->name;
  profile.window_begin_seconds = window.begin_seconds;
  profile.window_end_seconds = window.end_seconds;
  profile.window_seconds = seconds;
  profile.window_reason = window.window_reason;
  profile.outputs = window.outputs;
  profile.measured_throughput = window.outputs / seconds;
  profile.consumer_stall_fraction = std::min(1.0, window.consumer_wait_seconds / seconds);

  profile.cores = window.host_cores;
  if (profile.cores <= 0 && config != nullptr && config->resources.cores)
    profile.cores = *config->resources.cores;
  if (profile.cores <= 0) {
    profile.cores = 1;
    profile.assumptions.push_back("the host's core count is unknown; 1 core assumed");
  }
  profile.cpu_contention = EstimateContention(window, profile.cores, seconds);

  double stage_cpu = 0;
  for (const StageMeasurement& stage_measured : measured) {
    StageProfile stage = MakeStage(stage_measured, FindConfigStage(config, stage_measured.name));
    SetPerElement(stage, profile.cpu_contention, seconds);
    FitScaling(stage, stage_measured);
    stage_cpu += stage.cpu_seconds;
    profile.stages.push_back(std::move(stage));
  }
  if (window.process_cpu_seconds >= 0) {
    profile.process_cpu_cores = window.process_cpu_seconds / seconds;
    profile.other_cpu_cores = std::max(0.0, window.process_cpu_seconds - stage_cpu) / seconds;
  }
  SetVisitRatios(profile);
  SetDemandAndBudgets(profile, window, config);
  SetEpoch(profile, window, config);
  NoteAssumptions(profile);
  return profile;
}

std::optional<double> ElementsPerEpoch(const Profile& profile, size_t index) {
  if (!profile.source_elements_per_epoch || index >= profile.stages.size()) return std::nullopt;
  double elements = *profile.source_elements_per_epoch;
  for (size_t i = 1; i <= index; ++i) {
    const StageProfile& stage = profile.stages[i];
    if (stage.op == Op::kRepeat || stage.op == Op::kTake) return std::nullopt;
    elements /= std::max(stage.local_ratio, 1e-12);
  }
  return elements;
}

}  // namespace pipetune::models

// The bounds of the rate model and the throughput they allow (rate_model.h).
#include "pipetune/models/rate_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipetune/base/check.h"

namespace pipetune::models {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Whatever else the process does (the consumer, the tracer), the stages keep
// at least this share of the cores; a measurement that says otherwise is
// noise from a run too short to tell.
constexpr double kMinStageCoreShare = 0.05;

bool IsCached(const Profile& profile, const Configuration& config, size_t index) {
  if (!config.cache_after || index > *config.cache_after) return false;
  // The run's own cache, still filling during the window: its upstream ran.
  bool existing = profile.cache_stage && *config.cache_after + 1 == *profile.cache_stage;
  return !existing || profile.cache_filled;
}

// L_i at parallelism p: the measured latency, scaled by the stage's fitted
// slowdown relative to the level it was measured at.
double LatencyAt(const StageProfile& stage, int parallelism) {
  const UslFit& fit = stage.scaling;
  if (fit.kind == ScalingKind::kLinear || fit.kind == ScalingKind::kNone) return stage.latency_seconds;
  return stage.latency_seconds * fit.Slowdown(parallelism) / fit.Slowdown(stage.parallelism);
}

double ConcurrencyBound(const StageProfile& stage, int parallelism) {
  double per_output = stage.visit_ratio * LatencyAt(stage, parallelism);
  return per_output > 0 ? parallelism / per_output : kInfinity;
}

double StageCores(const Profile& profile, const Configuration& config) {
  double floor = kMinStageCoreShare * config.cores;
  return std::max(floor, config.cores - profile.other_cpu_cores);
}

std::optional<size_t> Bottleneck(const Profile& profile, const Prediction& prediction,
                                 const std::vector<bool>& cached) {
  switch (prediction.binding.kind) {
    case BoundKind::kConcurrency:
    case BoundKind::kStorage:
      return prediction.binding.stage;
    case BoundKind::kCpu: {
      std::optional<size_t> heaviest;
      for (size_t i = 0; i < profile.stages.size(); ++i) {
        if (cached[i]) continue;
        if (!heaviest ||
            profile.stages[i].cpu_seconds_per_output > profile.stages[*heaviest].cpu_seconds_per_output) {
          heaviest = i;
        }
      }
      return heaviest;
    }
    case BoundKind::kDemand:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

const char* BoundKindName(BoundKind kind) {
  switch (kind) {
    case BoundKind::kCpu:
      return "cpu";
    case BoundKind::kConcurrency:
      return "concurrency";
    case BoundKind::kStorage:
      return "storage";
    case BoundKind::kDemand:
      return "demand";
  }
  return "unknown";
}

Configuration ObservedConfiguration(const Profile& profile) {
  Configuration config;
  for (const StageProfile& stage : profile.stages) config.parallelism.push_back(stage.parallelism);
  config.cores = profile.cores;
  if (profile.cache_stage && *profile.cache_stage > 0) config.cache_after = *profile.cache_stage - 1;
  config.storage_bytes_per_second = profile.storage_bytes_per_second;
  config.step_time_seconds = profile.step_time_seconds;
  return config;
}

Prediction Predict(const Profile& profile, const Configuration& config) {
  PIPETUNE_CHECK(config.parallelism.size() == profile.stages.size());
  Prediction prediction;
  std::vector<bool> cached(profile.stages.size(), false);
  double cpu_per_output = 0;
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    const StageProfile& stage = profile.stages[i];
    PIPETUNE_CHECK(config.parallelism[i] >= 1);
    int parallelism = stage.parallel ? config.parallelism[i] : 1;
    cached[i] = IsCached(profile, config, i);
    StagePrediction stage_prediction;
    stage_prediction.cached = cached[i];
    stage_prediction.concurrency_throughput = cached[i] ? kInfinity : ConcurrencyBound(stage, parallelism);
    if (!cached[i]) cpu_per_output += stage.cpu_seconds_per_output;
    prediction.stages.push_back(stage_prediction);
    prediction.bounds.push_back({BoundKind::kConcurrency, i, stage_prediction.concurrency_throughput});
  }
  double stage_cores = StageCores(profile, config);
  prediction.bounds.push_back(
      {BoundKind::kCpu, std::nullopt, cpu_per_output > 0 ? stage_cores / cpu_per_output : kInfinity});
  double storage = kInfinity;
  if (config.storage_bytes_per_second && profile.storage_bytes_per_output > 0 && profile.storage_stage &&
      !cached[*profile.storage_stage]) {
    storage = *config.storage_bytes_per_second / profile.storage_bytes_per_output;
  }
  prediction.bounds.push_back({BoundKind::kStorage, profile.storage_stage, storage});
  double demand =
      config.step_time_seconds && *config.step_time_seconds > 0 ? 1.0 / *config.step_time_seconds : kInfinity;
  prediction.bounds.push_back({BoundKind::kDemand, std::nullopt, demand});

  // The smallest bound binds; on a tie the earlier one (a stage before the
  // shared resources) is named, since it is the one a knob can move.
  prediction.binding = prediction.bounds.front();
  for (const Bound& bound : prediction.bounds) {
    if (bound.throughput < prediction.binding.throughput) prediction.binding = bound;
  }
  prediction.throughput = std::isfinite(prediction.binding.throughput) ? prediction.binding.throughput : 0.0;

  prediction.cores_used = profile.other_cpu_cores;
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    StagePrediction& stage_prediction = prediction.stages[i];
    const StageProfile& stage = profile.stages[i];
    double all_cores = !cached[i] && stage.cpu_seconds_per_output > 0
                           ? stage_cores / stage.cpu_seconds_per_output
                           : kInfinity;
    stage_prediction.max_throughput = std::min(stage_prediction.concurrency_throughput, all_cores);
    stage_prediction.cores_used = cached[i] ? 0.0 : prediction.throughput * stage.cpu_seconds_per_output;
    stage_prediction.utilisation = std::isfinite(stage_prediction.concurrency_throughput)
                                       ? prediction.throughput / stage_prediction.concurrency_throughput
                                       : 0.0;
    prediction.cores_used += stage_prediction.cores_used;
  }
  prediction.bottleneck_stage = Bottleneck(profile, prediction, cached);
  return prediction;
}

std::optional<std::string> CacheNotAllowed(const Profile& profile, size_t index) {
  if (index >= profile.stages.size()) return "there is no such stage";
  for (size_t i = 0; i <= index; ++i) {
    const StageProfile& stage = profile.stages[i];
    if (stage.random) {
      return fmt::format(
          "stage \"{}\" is random (its output changes every epoch), so nothing at or after it "
          "may be cached",
          stage.name);
    }
    if (i > 0 && (stage.op == Op::kRepeat || stage.op == Op::kTake)) {
      return fmt::format("stage \"{}\" ({}) comes before it, so an epoch has no fixed content", stage.name,
                         stage.op_name);
    }
  }
  std::optional<double> bytes = CacheBytes(profile, index);
  if (!bytes)
    return std::string("the epoch's size is unknown (an endless source, or the run never finished one)");
  if (profile.memory_budget_bytes && *bytes > static_cast<double>(*profile.memory_budget_bytes)) {
    return fmt::format("it would hold {} of the {} memory budget", FormatBytes(*bytes),
                       FormatBytes(static_cast<double>(*profile.memory_budget_bytes)));
  }
  return std::nullopt;
}

std::optional<double> CacheBytes(const Profile& profile, size_t index) {
  std::optional<double> elements = ElementsPerEpoch(profile, index);
  if (!elements) return std::nullopt;
  return *elements * profile.stages[index].bytes_per_element;
}

int ParallelismForBestThroughput(const Profile& profile, const Configuration& config, size_t index,
                                 int max_parallelism, double tolerance) {
  PIPETUNE_CHECK(index < profile.stages.size());
  int current = config.parallelism[index];
  if (!profile.stages[index].parallel) return current;
  Configuration trial = config;
  std::vector<double> throughput(static_cast<size_t>(max_parallelism) + 1, 0.0);
  double best = 0;
  for (int p = 1; p <= max_parallelism; ++p) {
    trial.parallelism[index] = p;
    throughput[static_cast<size_t>(p)] = Predict(profile, trial).throughput;
    best = std::max(best, throughput[static_cast<size_t>(p)]);
  }
  double current_throughput = current <= max_parallelism ? throughput[static_cast<size_t>(current)] : 0.0;
  if (current_throughput >= best * (1.0 - tolerance)) return current;
  for (int p = 1; p <= max_parallelism; ++p) {
    if (throughput[static_cast<size_t>(p)] >= best * (1.0 - tolerance)) return p;
  }
  return current;
}

}  // namespace pipetune::models

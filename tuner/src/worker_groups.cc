// The exhaustive search over worker-group settings (worker_groups.h).
#include "pipetune/tuner/worker_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "pipetune/base/size.h"

namespace pipetune::tuner {
namespace {

struct Trial {
  models::Configuration config;
  models::Prediction prediction;
  double memory = 0;
};

// Switchable stages the plan may turn off: those that cost time and buy
// nothing the model sees, when the profile says turning them off is safe.
std::vector<size_t> Switchable(const models::Profile& profile) {
  std::vector<size_t> out;
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (profile.stages[i].switchable && profile.stages[i].enabled && profile.stages[i].may_switch_off) {
      out.push_back(i);
    }
  }
  return out;
}

// Every configuration of group 0's settings (the profiles this serves have
// one group; further groups keep their traced settings).
std::vector<models::Configuration> Configurations(const models::Profile& profile, const Resources& resources,
                                                  const WorkerGroupOptions& options) {
  models::Configuration base = models::ObservedConfiguration(profile);
  base.cores = resources.cores;
  if (resources.storage_bytes_per_second) base.storage_bytes_per_second = resources.storage_bytes_per_second;
  const models::WorkerGroup& group = profile.groups[0];
  std::vector<bool> persistence{group.persistent};
  if (!group.persistent_knob.empty()) persistence.push_back(!group.persistent);
  std::vector<size_t> switches = Switchable(profile);
  std::vector<models::Configuration> out;
  for (int workers = group.may_run_on_consumer ? 0 : 1; workers <= options.max_workers; ++workers) {
    for (int buffer = 1; buffer <= (workers > 0 ? kMaxWorkerBuffer : 1); ++buffer) {
      for (bool persistent : persistence) {
        if (workers == 0 && persistent != group.persistent) continue;  // no workers to keep
        for (size_t mask = 0; mask < (size_t{1} << switches.size()); ++mask) {
          models::Configuration c = base;
          c.group_workers[0] = workers;
          c.group_buffer[0] = workers > 0 ? buffer : group.buffer_per_worker;
          c.group_persistent[0] = persistent;
          for (size_t k = 0; k < switches.size(); ++k) c.stage_enabled[switches[k]] = !(mask >> k & 1);
          out.push_back(std::move(c));
        }
      }
    }
  }
  return out;
}

// How far a trial departs from the traced settings, for breaking ties: fewer
// workers first, then a buffer nearer the traced one (never below it unless
// memory forces), then unchanged persistence, then the switches. A stage the
// profile may switch off is preferred off: it only costs time (pin_memory
// without a GPU), so a plan that kept it would contradict the report, which
// says so, even where its time hides behind the bottleneck.
std::tuple<int, int, int, int> Departure(const models::Profile& profile, const models::Configuration& c) {
  const models::WorkerGroup& group = profile.groups[0];
  int buffer = c.group_workers[0] > 0 ? c.group_buffer[0] : group.buffer_per_worker;
  int buffer_cost = buffer >= group.buffer_per_worker ? buffer - group.buffer_per_worker
                                                      : 2 * (group.buffer_per_worker - buffer);
  int switched = 0;
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    const models::StageProfile& stage = profile.stages[i];
    bool preferred = stage.enabled && !(stage.switchable && stage.may_switch_off);
    switched += c.stage_enabled[i] != preferred;
  }
  return {c.group_workers[0], buffer_cost, c.group_persistent[0] != group.persistent ? 1 : 0, switched};
}

const Trial* Pick(const models::Profile& profile, const std::vector<Trial>& trials, Objective objective,
                  std::optional<double> demand, double tolerance) {
  double best = 0;
  for (const Trial& t : trials) best = std::max(best, t.prediction.throughput);
  double target = best * (1 - tolerance);
  if (objective == Objective::kDemand && demand && best >= *demand * (1 - tolerance)) {
    target = std::min(target, *demand * (1 - tolerance));
  }
  const Trial* chosen = nullptr;
  for (const Trial& t : trials) {
    if (t.prediction.throughput < target) continue;
    if (chosen == nullptr || Departure(profile, t.config) < Departure(profile, chosen->config)) chosen = &t;
  }
  return chosen;
}

std::string BoolText(bool b) { return b ? "True" : "False"; }

// One line per named knob, old and new, with the reason.
void AddKnobs(const TuneInput& input, const Trial& chosen, Plan& plan) {
  const models::Profile& profile = input.profile;
  const models::WorkerGroup& group = profile.groups[0];
  const models::Configuration& c = chosen.config;
  auto add = [&](const std::string& name, const std::string& old_value, const std::string& new_value,
                 const std::string& reason) {
    if (name.empty()) return;
    plan.knobs.push_back({name, Knob::kNamed, old_value, new_value, old_value != new_value, reason});
  };
  std::string workers_reason;
  if (c.group_workers[0] == 0) {
    workers_reason = "the consumer's thread keeps up with the input stages: workers would only cost memory";
  } else if (chosen.prediction.binding.kind == models::BoundKind::kCpu) {
    workers_reason = fmt::format("enough workers to keep the {:.4g} cores busy", plan.resources.cores);
  } else {
    workers_reason =
        fmt::format("the fewest workers that reach {:.4g} outputs/s", chosen.prediction.throughput);
  }
  add(group.workers_knob, std::to_string(group.workers), std::to_string(c.group_workers[0]), workers_reason);
  if (c.group_workers[0] > 0) {
    add(group.buffer_knob, group.workers > 0 ? std::to_string(group.buffer_per_worker) : "-",
        std::to_string(c.group_buffer[0]),
        fmt::format("{} outputs in flight ({} of memory)", c.group_workers[0] * c.group_buffer[0],
                    FormatBytes(c.group_workers[0] * c.group_buffer[0] *
                                profile.stages[group.last_stage].bytes_per_element)));
    bool persistent = c.group_persistent[0];
    add(group.persistent_knob, BoolText(group.persistent), BoolText(persistent),
        persistent
            ? fmt::format("workers start once, not every epoch ({:.3f} s for {})",
                          group.startup_seconds_fixed + c.group_workers[0] * group.startup_seconds_per_worker,
                          c.group_workers[0])
            : "one epoch only: start-up is paid once anyway");
  }
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    const models::StageProfile& stage = profile.stages[i];
    if (!stage.switchable) continue;
    add(stage.switch_knob, BoolText(stage.enabled), BoolText(c.stage_enabled[i]),
        c.stage_enabled[i] == stage.enabled ? "kept" : fmt::format("{} only costs time here", stage.name));
  }
}

}  // namespace

StatusOr<Plan> SolveWorkerGroups(const TuneInput& input, const Resources& resources, Objective objective,
                                 const WorkerGroupOptions& options) {
  const models::Profile& profile = input.profile;
  if (profile.groups.empty()) return InvalidInput("the profile has no worker group to tune");
  if (!(resources.cores > 0)) return InvalidInput("the core budget must be > 0");
  if (resources.memory_bytes == 0) return InvalidInput("the memory budget must be > 0");
  const double budget = static_cast<double>(resources.memory_bytes);

  std::vector<Trial> trials;
  double least_memory = -1;
  double best_over_budget = 0;  // the best any setting reaches, memory aside
  for (models::Configuration& c : Configurations(profile, resources, options)) {
    double memory = models::WorkerMemoryBytes(profile, c);
    least_memory = least_memory < 0 ? memory : std::min(least_memory, memory);
    models::Prediction prediction = models::Predict(profile, c);
    if (memory > budget) {
      best_over_budget = std::max(best_over_budget, prediction.throughput);
      continue;
    }
    trials.push_back({std::move(c), std::move(prediction), memory});
  }
  if (trials.empty()) {
    return InvalidInput(fmt::format("no setting fits the {} memory budget: the least needs {}",
                                    FormatBytes(budget), FormatBytes(least_memory)));
  }
  std::optional<double> demand;
  if (profile.step_time_seconds && *profile.step_time_seconds > 0) demand = 1.0 / *profile.step_time_seconds;
  const Trial* chosen = Pick(profile, trials, objective, demand, options.tie_tolerance);

  models::Configuration traced_config = models::ObservedConfiguration(profile);
  traced_config.cores = resources.cores;
  Trial traced{traced_config, models::Predict(profile, traced_config),
               models::WorkerMemoryBytes(profile, traced_config)};

  Plan plan;
  plan.pipeline_name = profile.pipeline_name;
  plan.objective = objective;
  plan.resources = resources;
  plan.measured_throughput = profile.measured_throughput;
  plan.predicted_throughput_before = traced.prediction.throughput;
  plan.predicted_throughput = chosen->prediction.throughput;
  plan.binding = chosen->prediction.binding.kind;
  if (chosen->prediction.bottleneck_stage)
    plan.binding_stage = profile.stages[*chosen->prediction.bottleneck_stage].name;
  plan.demand_throughput = demand;
  plan.demand_met = demand && chosen->prediction.throughput >= *demand * (1 - options.tie_tolerance);
  plan.cores_used = chosen->prediction.cores_used;
  plan.cores_needed = std::max(1, static_cast<int>(std::ceil(plan.cores_used - 1e-9)));
  const models::WorkerGroup& group = profile.groups[0];
  int workers = chosen->config.group_workers[0];
  plan.memory.processes = profile.base_memory_bytes + workers * group.memory_bytes_per_worker;
  plan.memory.prefetch = chosen->memory - plan.memory.processes;
  plan.threads = 1 + workers;
  plan.configuration = chosen->config;
  AddKnobs(input, *chosen, plan);
  plan.binding_reason = fmt::format("{}{}", models::BoundKindName(plan.binding),
                                    plan.binding_stage ? ", stage " + *plan.binding_stage : std::string());
  if (objective == Objective::kMax &&
      best_over_budget > plan.predicted_throughput * (1 + options.tie_tolerance)) {
    plan.binding_reason =
        fmt::format("the memory budget: {} workers fit in {} ({:.4g} outputs/s would need more)", workers,
                    FormatBytes(budget), best_over_budget);
    plan.notes.push_back(
        fmt::format("memory binds: more workers would reach {:.4g} outputs/s but need more than "
                    "the {} budget",
                    best_over_budget, FormatBytes(budget)));
  }
  // The prediction is for epochs as the traced run took them; say from what
  // length on it is the steady rate, since a short profiling run pays its
  // workers' start-up over few outputs.
  if (double steady_from = models::EpochOutputsForSteadyRate(chosen->prediction);
      steady_from > 0 && profile.outputs_per_epoch) {
    plan.notes.push_back(fmt::format(
        "predicted for epochs of {:.0f} outputs as traced: {} workers' start-up ({:.2f} s) and each epoch's "
        "fill "
        "and drain ({:.2f} s) included; the steady {:.4g} outputs/s holds within 5% from epochs of {:.0f} "
        "outputs",
        *profile.outputs_per_epoch, workers, chosen->prediction.startup_seconds_per_epoch,
        chosen->prediction.epoch_end_seconds, chosen->prediction.steady_throughput, steady_from));
  }
  return plan;
}

}  // namespace pipetune::tuner

// A finished candidate -> the plan a user reads (plan_builder.h).
#include "pipetune/tuner/plan_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pipetune::tuner {
namespace {

using models::Op;

std::string OptionalNumber(const std::optional<int64_t>& value) {
  return value ? std::to_string(*value) : "-";
}

std::string LocationText(const std::optional<models::CacheLocation>& location) {
  return location ? location->ConfigValue() : "-";
}

std::string InsertedValue(const PlannedStage& stage) {
  if (stage.op == Op::kPrefetch) return fmt::format("prefetch (buffer {})", stage.buffer.value_or(1));
  if (stage.op == Op::kCache) {
    return fmt::format("cache ({})", stage.location.value_or(models::CacheLocation::Memory()).ConfigValue());
  }
  return stage.op_name;
}

std::string BoolText(bool b) { return b ? "True" : "False"; }

// The worker groups' and switchable stages' knobs, by the names the user
// sets them by (a group without workers has no buffer or persistence to set).
void AddGroupKnobs(const Candidate& candidate, Plan& plan) {
  auto add = [&](const std::string& name, const std::string& old_value, const std::string& new_value) {
    if (name.empty()) return;
    plan.knobs.push_back({name, Knob::kNamed, old_value, new_value, old_value != new_value, ""});
  };
  for (size_t g = 0; g < candidate.groups.size(); ++g) {
    const PlannedGroup& group = candidate.groups[g];
    const models::WorkerGroup& traced = candidate.profile.groups[g];
    add(traced.workers_knob, std::to_string(group.old_workers), std::to_string(group.workers));
    add(traced.fetch_threads_knob, std::to_string(group.old_fetch_threads),
        std::to_string(group.fetch_threads));
    if (group.workers == 0) continue;
    add(traced.buffer_knob, group.old_workers > 0 ? std::to_string(group.old_buffer_per_worker) : "-",
        std::to_string(group.buffer_per_worker));
    add(traced.persistent_knob, BoolText(group.old_persistent), BoolText(group.persistent));
  }
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    if (!candidate.profile.stages[i].switchable) continue;
    const PlannedStage& stage = candidate.stages[i];
    add(candidate.profile.stages[i].switch_knob, BoolText(stage.old_enabled), BoolText(stage.enabled));
  }
}

void AddKnobs(const Candidate& candidate, Plan& plan) {
  for (const std::string& name : candidate.removed_stages) {
    plan.knobs.push_back(
        {name, Knob::kStage, "cache", "-", true, "the cache moves to where the plan puts it"});
  }
  for (const PlannedStage& stage : candidate.stages) {
    if (stage.inserted()) {
      plan.knobs.push_back({stage.name, Knob::kStage, "-", InsertedValue(stage), true, ""});
      continue;
    }
    if (stage.parallel) {
      plan.knobs.push_back({stage.name, Knob::kParallelism, std::to_string(stage.old_parallelism),
                            std::to_string(stage.parallelism), stage.parallelism != stage.old_parallelism,
                            ""});
    }
    if (stage.op == Op::kPrefetch) {
      plan.knobs.push_back({stage.name, Knob::kBuffer, OptionalNumber(stage.old_buffer),
                            OptionalNumber(stage.buffer), stage.buffer != stage.old_buffer, ""});
    }
    if (stage.op == Op::kCache) {
      plan.knobs.push_back({stage.name, Knob::kLocation, LocationText(stage.old_location),
                            LocationText(stage.location), stage.location != stage.old_location, ""});
    }
  }
  AddGroupKnobs(candidate, plan);
  for (KnobChange& knob : plan.knobs) {
    if (knob.reason.empty()) knob.reason = knob.changed ? "set by the plan" : "unchanged";
  }
}

}  // namespace

Plan PlanFromCandidate(const TuneInput& input, const Resources& resources, Objective objective,
                       const Candidate& candidate) {
  Plan plan;
  plan.pipeline_name = input.profile.pipeline_name;
  plan.objective = objective;
  plan.resources = resources;
  plan.stages = candidate.stages;
  plan.removed_stages = candidate.removed_stages;
  plan.cache = candidate.choice;
  plan.cache_stage = candidate.cache_stage;
  AddKnobs(candidate, plan);

  plan.measured_throughput = input.profile.measured_throughput;
  models::Configuration before = models::ObservedConfiguration(input.profile);
  before.cores = resources.cores;
  if (resources.storage_bytes_per_second)
    before.storage_bytes_per_second = resources.storage_bytes_per_second;
  plan.predicted_throughput_before = models::Predict(input.profile, before).throughput;

  models::Prediction after = Evaluate(candidate, resources);
  plan.predicted_throughput = after.throughput;
  plan.binding = after.binding.kind;
  if (after.bottleneck_stage && *after.bottleneck_stage < candidate.stages.size()) {
    plan.binding_stage = candidate.stages[*after.bottleneck_stage].name;
  }
  if (input.profile.step_time_seconds && *input.profile.step_time_seconds > 0) {
    plan.demand_throughput = 1.0 / *input.profile.step_time_seconds;
    plan.demand_met = after.throughput >= *plan.demand_throughput * (1 - 1e-6);
  }
  plan.cores_used = after.cores_used;
  plan.cores_needed = std::max(1, static_cast<int>(std::ceil(after.cores_used - 1e-9)));
  plan.memory = Memory(candidate);
  plan.threads = Threads(candidate);
  plan.notes = candidate.notes;
  if (!candidate.groups.empty()) plan.configuration = CandidateConfiguration(candidate, resources);
  return plan;
}

}  // namespace pipetune::tuner
